"""CommitLog byte range → ``pyarrow.RecordBatch`` (the executor half of the source, DESIGN §3).

Bytes arrive in chunks (HA frames are 32 KiB byte ranges that split records, spec §2.3). The
:class:`CommitLogArrowDecoder` keeps only what it must: the records walked but not yet emitted (at most
one batch), the bytes not walked yet (at most ~1 MiB) and the partial record at the end.

**Walking record starts without a Python step per record.** Record sizes chain (each TOTALSIZE gives
the next start), so a pure numpy scan cannot find the starts in general. The walker instead finds every
*candidate* start at once: every position followed by the 4 MAGICCODE bytes of a message (``DA A3 20
A7`` at +4, one vectorised byte comparison over the buffer). From the known first record it follows
the chain with numpy: candidate ``i`` continues to candidate ``i+1`` whenever ``start + TOTALSIZE``
equals the next candidate, which holds for every record unless a body happens to contain the magic
bytes; only those rare false candidates (and END_FILE blanks, errors, the range end) cost a Python
step. The first record is verified the slow way, so every start on the chain is a real record start.

**Columns.** With IPv4 hosts (the common case), the 88 fixed header bytes of all records are gathered
in one copy through a view with a one-byte stride and read as a numpy structured array; IPv6 records use
per-field big-endian gathers. Variable-width values (topic, body, properties, property names and
values) are cut out of the batch's bytes by Arrow ``take`` over a binary array whose offsets
alternate value / gap, i.e. one C++ memcpy per value. Properties follow RocketMQ's parsing rules
(spec §1.5) vectorised; bodies stored compressed are decompressed per record (zlib through zlib-ng when
it is installed, LZ4, ZSTD), checked against BODYCRC and bounded (:mod:`connector.arrow_bodies`, which
also builds ``decodeError``). Topic filtering
(:class:`connector.topic_filter.TopicFilter`) runs on the topic column before any other variable-width
column is built.

**Native kernel.** When ``connector/_decode_kernel.c`` was built at install (it needs a C compiler and
zlib's headers), three of those loops run in C instead, with the same results: the record walk follows
TOTALSIZE directly (no candidates), properties are split in one pass, and bodies are copied or inflated
(libdeflate when the system has it, else zlib) straight into each batch's body buffer. The NumPy path
above is the fallback; the tests run every decode test through both.

Row = one stored message; columns follow RocketMQ's MessageExt names (DESIGN §3), see
:data:`ARROW_SCHEMA` and :func:`spark_schema`. Timestamps are epoch milliseconds as stored, typed as
Spark's TimestampType (UTC, microsecond unit, millisecond values).
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import sliding_window_view

from connector.arrow_bodies import (  # noqa: F401 - BodyPolicy and the mode names are part of this module's API
    BAD_RECORD_MODES,
    BODY_BYTES_PER_ARROW_ARRAY,
    MAX_MAX_INFLATED_BODY_BYTES,
    MODE_FAILFAST,
    MODE_PERMISSIVE,
    BodyPolicy,
    body_groups,
    decode_errors,
    slices,
)
from connector.protocol.commitlog import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    DEFAULT_MAX_INFLATED_BODY_BYTES,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE_BYTES,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOSTADDRESS_V6_FLAG,
    HostAddress,
    file_name,
    offset_msg_id,
    parse_properties,
)
from connector.protocol.errors import CommitLogFormatError
from connector.topic_filter import TopicFilter

try:  # optional accelerator of the NumPy path: inflates zlib bodies 3-6x faster than the standard library
    from zlib_ng import zlib_ng as _fast_zlib
except ImportError:  # pragma: no cover - depends on the environment
    _fast_zlib = None

log = logging.getLogger(__name__)

try:  # the native kernel (connector/_decode_kernel.c, built at install): record walk, body gather + inflate
    from connector import _decode_kernel as _native
except ImportError:  # pragma: no cover - depends on the build
    _native = None
    log.warning("connector._decode_kernel is not built (no C compiler or zlib headers at install time): "
                "decoding CommitLog bytes with the slower NumPy path")


def native_kernel_available() -> bool:
    """True when the native decode kernel is in use (else the NumPy path, same results)."""
    return _native is not None

DEFAULT_MAX_RECORDS_PER_BATCH = 10000
DEFAULT_MAX_BYTES_PER_BATCH = 8 * 1024 * 1024
WALK_MIN_BYTES = 1024 * 1024  # unwalked bytes gathered before a walk (fewer, larger numpy passes)

_TIMESTAMP = pa.timestamp("us", tz="UTC")

#: (name, arrow type, nullable) in column order; the Spark schema is derived from the same list.
COLUMNS: tuple[tuple[str, pa.DataType, bool], ...] = (
    ("topic", pa.string(), False),
    ("queueId", pa.int32(), False),
    ("queueOffset", pa.int64(), False),
    ("commitLogOffset", pa.int64(), False),
    ("storeSize", pa.int32(), False),
    ("bodyCRC", pa.int32(), False),
    ("flag", pa.int32(), False),
    ("sysFlag", pa.int32(), False),
    ("bornTimestamp", _TIMESTAMP, False),
    ("bornHost", pa.string(), False),
    ("storeTimestamp", _TIMESTAMP, False),
    ("storeHost", pa.string(), False),
    ("reconsumeTimes", pa.int32(), False),
    ("preparedTransactionOffset", pa.int64(), False),
    ("msgId", pa.string(), False),
    ("uniqKey", pa.string(), True),
    ("tags", pa.string(), True),
    ("keys", pa.string(), True),
    ("properties", pa.map_(pa.string(), pa.string()), False),
    ("body", pa.binary(), False),
    ("broker", pa.string(), False),
    ("decodeError", pa.string(), True),
)

#: The schema of every RecordBatch the source yields (equal to Spark's ``to_arrow_schema(spark_schema())``).
ARROW_SCHEMA = pa.schema([pa.field(name, typ, nullable=nullable) for name, typ, nullable in COLUMNS])


def spark_schema():
    """The source's Spark ``StructType`` (same names, order and nullability as :data:`ARROW_SCHEMA`)."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    spark_types = {
        pa.string(): StringType(), pa.int32(): IntegerType(), pa.int64(): LongType(), _TIMESTAMP: TimestampType(),
        pa.binary(): BinaryType(), pa.map_(pa.string(), pa.string()): MapType(StringType(), StringType(), True),
    }
    return StructType([StructField(name, spark_types[typ], nullable) for name, typ, nullable in COLUMNS])



_HEAD8 = struct.Struct(">ii")
_HEX_PAIRS = np.frombuffer(b"".join(f"{b:02X}".encode() for b in range(256)), dtype="<u2")  # byte -> 2 hex digits
_MAGIC_BYTES = np.frombuffer(struct.pack(">i", MESSAGE_MAGIC_CODE), dtype=np.uint8)
V4_HEADER_BYTES = 88  # TOTALSIZE .. BODY length with IPv4 born and store hosts (spec §1.2)

#: The fixed header of a record with IPv4 born and store hosts, as a numpy structured type (spec §1.2).
V4_HEADER = np.dtype({
    "names": ["total", "magic", "crc", "queueId", "flag", "queueOffset", "physical", "sysFlag", "bornTs",
              "bornHost", "storeTs", "storeHost", "recon", "prepared", "bodyLen"],
    "formats": [">i4", ">i4", ">i4", ">i4", ">i4", ">i8", ">i8", ">i4", ">i8", ">u8", ">i8", ">u8", ">i4", ">i8",
                ">i4"],
    "offsets": [0, 4, 8, 12, 16, 20, 28, 36, 40, 48, 56, 64, 72, 76, 84],
    "itemsize": V4_HEADER_BYTES,
})


def _be_view(u8: np.ndarray, dtype: str | np.dtype) -> np.ndarray:
    """A view of ``u8`` as overlapping big-endian values of ``dtype``, one starting at every byte (no copy)."""
    width = np.dtype(dtype).itemsize
    return np.ndarray((max(len(u8) - width + 1, 0),), dtype=dtype, buffer=u8, strides=(1,))


def _gather_be(u8: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian integers of ``width`` bytes at every position of ``pos`` (one vectorised gather)."""
    native = np.dtype(dtype).newbyteorder("=")
    if len(pos) == 0:
        return np.zeros(0, dtype=native)
    return _be_view(u8, dtype)[pos].astype(native)


def _slices(buf: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
    """:func:`connector.arrow_bodies.slices` with this module's kernel."""
    return slices(buf, starts, lengths, _native)


def _as_string(values: pa.BinaryArray) -> pa.StringArray | None:
    """The same values typed as UTF-8 strings, or None when some value is not valid UTF-8."""
    strings = values.view(pa.string())
    try:
        strings.validate(full=True)
    except pa.ArrowInvalid:
        return None
    return strings


def _java_int(u32: int) -> int:
    return u32 - (1 << 32) if u32 & 0x80000000 else u32


def _ipv4_hosts(packed: np.ndarray) -> pa.Array:
    """``ip:port`` strings from uint64 values ``ip << 32 | port`` (each distinct host formatted once)."""
    encoded = pa.array(packed, type=pa.uint64()).dictionary_encode()
    texts = [f"{k >> 56}.{(k >> 48) & 255}.{(k >> 40) & 255}.{(k >> 32) & 255}:{_java_int(k & 0xFFFFFFFF)}"
             for k in encoded.dictionary.to_pylist()]
    return pa.array(texts, type=pa.string()).take(encoded.indices)


def _hosts(u8: np.ndarray, pos: np.ndarray, is_v6: np.ndarray) -> pa.Array:
    """``ip:port`` strings of the hosts stored at ``pos`` (4- or 16-byte IP, then an int port)."""
    n = len(pos)
    if not is_v6.any():
        return _ipv4_hosts(_gather_be(u8, pos, 8, ">u8"))
    out = np.empty(n, dtype=object)
    v4 = ~is_v6
    if v4.any():
        out[v4] = np.array(_ipv4_hosts(_gather_be(u8, pos[v4], 8, ">u8")).to_pylist(), dtype=object)
    for i in np.flatnonzero(is_v6):
        p = int(pos[i])
        raw = u8[p:p + 20].tobytes()
        out[i] = str(HostAddress(raw[:16], _java_int(int.from_bytes(raw[16:20], "big"))))
    return pa.array(out, type=pa.string())


def _msg_ids(u8: np.ndarray, store_host_pos: np.ndarray, store_v6: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Offset msgIds: upper-case hex of store IP + port + CommitLog offset (spec §1.8)."""
    n = len(offsets)
    if store_v6.any():
        ids = []
        for i in range(n):
            p = int(store_host_pos[i])
            ip_len = 16 if store_v6[i] else 4
            raw = u8[p:p + ip_len + 4].tobytes()
            host = HostAddress(raw[:ip_len], _java_int(int.from_bytes(raw[ip_len:], "big")))
            ids.append(offset_msg_id(host, int(offsets[i])))
        return pa.array(ids, type=pa.string())
    raw = np.empty((n, 2), dtype=">u8")
    raw[:, 0] = _gather_be(u8, store_host_pos, 8, ">u8")
    raw[:, 1] = offsets
    hexed = _HEX_PAIRS[raw.view(np.uint8)]  # (n, 16) uint16: two ASCII hex digits per byte
    value_offsets = np.arange(n + 1, dtype=np.int32) * 32
    return pa.StringArray.from_buffers(n, pa.py_buffer(value_offsets), pa.py_buffer(hexed.tobytes()))


def _fail(msg: str, offset: int, field: str, mapped_file_size: int) -> CommitLogFormatError:
    return CommitLogFormatError(msg, offset=offset, field=field, file=file_name(offset - offset % mapped_file_size))


class _Located:
    """Per-record fields and positions of a batch (numpy arrays, one entry per record)."""

    __slots__ = ("s", "offsets", "total", "crc", "queue_id", "flag", "queue_offset", "sys_flag", "born_ts",
                 "store_ts", "recon", "prepared", "born_host_pos", "store_host_pos", "born_v6", "store_v6",
                 "body_pos", "body_len", "topic_pos", "topic_len", "props_pos", "props_len", "born_packed",
                 "store_packed")

    def take(self, index: np.ndarray) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value[index])


def _locate(u8: np.ndarray, starts: np.ndarray, base_offset: int, mapped_file_size: int) -> _Located:
    """Read every fixed field and find every variable-width field of the records at ``starts``.

    Raises CommitLogFormatError (offset and field named) when a length field disagrees with
    TOTALSIZE or PHYSICALOFFSET is not the record's offset.
    """
    loc = _Located()
    s = starts.astype(np.int64)
    n = len(s)
    loc.s = s
    loc.offsets = offsets = base_offset + s
    sys_flag = _gather_be(u8, s + 36, 4, ">i4")
    loc.born_v6 = (sys_flag & BORNHOST_V6_FLAG) != 0
    loc.store_v6 = (sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0
    if n and not loc.born_v6.any() and not loc.store_v6.any():
        head = sliding_window_view(u8, V4_HEADER_BYTES)[s].view(V4_HEADER).reshape(n)
        loc.total = head["total"].astype(np.int64)
        loc.crc = head["crc"].astype(np.int32)
        loc.queue_id = head["queueId"].astype(np.int32)
        loc.flag = head["flag"].astype(np.int32)
        loc.queue_offset = head["queueOffset"].astype(np.int64)
        physical = head["physical"].astype(np.int64)
        loc.born_ts = head["bornTs"].astype(np.int64)
        loc.store_ts = head["storeTs"].astype(np.int64)
        loc.recon = head["recon"].astype(np.int32)
        loc.prepared = head["prepared"].astype(np.int64)
        body_len = head["bodyLen"].astype(np.int64)
        loc.born_packed = head["bornHost"].astype(np.uint64)
        loc.store_packed = head["storeHost"].astype(np.uint64)
        loc.born_host_pos = s + 48
        loc.store_host_pos = s + 64
        body_len_pos = s + 84
    else:
        loc.total = _gather_be(u8, s, 4, ">i4").astype(np.int64)
        loc.crc = _gather_be(u8, s + 8, 4, ">i4")
        loc.queue_id = _gather_be(u8, s + 12, 4, ">i4")
        loc.flag = _gather_be(u8, s + 16, 4, ">i4")
        loc.queue_offset = _gather_be(u8, s + 20, 8, ">i8")
        physical = _gather_be(u8, s + 28, 8, ">i8")
        loc.born_ts = _gather_be(u8, s + 40, 8, ">i8")
        loc.born_host_pos = s + 48
        store_ts_pos = loc.born_host_pos + np.where(loc.born_v6, 20, 8)
        loc.store_host_pos = store_ts_pos + 8
        recon_pos = loc.store_host_pos + np.where(loc.store_v6, 20, 8)
        body_len_pos = recon_pos + 12
        loc.born_packed = loc.store_packed = None
        _check(body_len_pos + 4 + 3 > s + loc.total, offsets, "TOTALSIZE", "TOTALSIZE is too small for the record's "
               "hosts", mapped_file_size)
        loc.store_ts = _gather_be(u8, store_ts_pos, 8, ">i8")
        loc.recon = _gather_be(u8, recon_pos, 4, ">i4")
        loc.prepared = _gather_be(u8, recon_pos + 4, 8, ">i8")
        body_len = _gather_be(u8, body_len_pos, 4, ">i4").astype(np.int64)
    loc.sys_flag = sys_flag
    rec_end = s + loc.total
    _check(physical != offsets, offsets, "PHYSICALOFFSET", "PHYSICALOFFSET field does not equal the record's offset",
           mapped_file_size)
    loc.body_pos = body_len_pos + 4
    loc.body_len = body_len
    topic_len_pos = loc.body_pos + body_len
    _check((body_len < 0) | (topic_len_pos + 3 > rec_end), offsets, "BODY", "BODY length does not fit in TOTALSIZE",
           mapped_file_size)
    loc.topic_len = u8[topic_len_pos].view(np.int8).astype(np.int64)
    loc.topic_pos = topic_len_pos + 1
    props_len_pos = loc.topic_pos + loc.topic_len
    _check((loc.topic_len < 0) | (props_len_pos + 2 > rec_end), offsets, "TOPIC",
           "TOPIC length does not fit in TOTALSIZE", mapped_file_size)
    loc.props_len = ((u8[props_len_pos].astype(np.int64) << 8) | u8[props_len_pos + 1]).astype(np.int16).astype(
        np.int64)
    loc.props_pos = props_len_pos + 2
    _check((loc.props_len < 0) | (loc.props_pos + loc.props_len != rec_end), offsets, "PROPERTIES",
           "PROPERTIES length disagrees with TOTALSIZE", mapped_file_size)
    return loc


def _check(bad: np.ndarray, offsets: np.ndarray, field: str, what: str, mapped_file_size: int) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(what, int(offsets[i]), field, mapped_file_size)


def iter_record_batches(data: bytes, starts: np.ndarray, base_offset: int, *, broker: str, mapped_file_size: int,
                        decompress: bool = True, topic_filter: TopicFilter | None = None,
                        max_body_bytes: int = BODY_BYTES_PER_ARROW_ARRAY,
                        policy: BodyPolicy | None = None) -> Iterator[pa.RecordBatch]:
    """Columns of the complete MESSAGE records that begin at ``starts`` (positions in ``data``).

    Args:
        data: bytes holding the records; ``data[0]`` is at CommitLog offset ``base_offset``.
        starts: int64 positions of record starts, ascending; each record's TOTALSIZE and MAGICCODE
            were already checked and the whole record lies inside ``data``.
        broker: value of the ``broker`` column.
        mapped_file_size: mappedFileSizeCommitLog (bytes), to name files in errors.
        decompress: inflate COMPRESSED bodies (``decompressBody``); ignored when ``policy`` is given.
        topic_filter: records whose topic it does not keep are dropped before their other columns are
            built (None keeps all).
        max_body_bytes: a RecordBatch is cut before a row whose *inflated* body would take its bodies
            past this many bytes, so compressed bodies cannot blow memory up (soft: one row; the native
            kernel applies the same cut to stored bodies too).
        policy: BODYCRC check, decompression bound and bad-record mode (default: :class:`BodyPolicy`
            with ``decompress``). In PERMISSIVE mode a bad body (BODYCRC mismatch, does not decompress,
            unknown compression type, past ``max_inflated``) is kept as stored with ``decodeError`` set.

    Yields RecordBatches of :data:`ARROW_SCHEMA` lazily (one is built while the previous one is in use),
    nothing when every record is filtered out.

    Raises CommitLogFormatError naming offset and field when a length field disagrees with TOTALSIZE,
    PHYSICALOFFSET is not the record's offset or the topic is not UTF-8; in FAILFAST mode also for the
    first bad body (broker, offset, file and field BODY or BODYCRC named).
    """
    if policy is None:
        policy = BodyPolicy(decompress=decompress)
    u8 = np.frombuffer(data, dtype=np.uint8)
    loc = _locate(u8, np.asarray(starts), base_offset, mapped_file_size)
    buf = pa.py_buffer(data)
    topics = _as_string(_slices(buf, loc.topic_pos, loc.topic_len))
    if topics is None:
        for i in range(len(loc.s)):
            raw = u8[loc.topic_pos[i]:loc.topic_pos[i] + loc.topic_len[i]].tobytes()
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _fail(f"TOPIC is not UTF-8 ({exc})", int(loc.offsets[i]), "TOPIC", mapped_file_size) from exc
        raise AssertionError("topic validation failed without an invalid topic")  # pragma: no cover
    if topic_filter is not None:
        keep = topic_filter.mask(topics)
        if keep is not None:
            index = np.flatnonzero(keep)
            if not len(index):
                return
            loc.take(index)
            topics = topics.take(pa.array(index))
    n = len(loc.s)
    properties, tags, keys, uniq = _properties(buf, u8, loc.props_pos, loc.props_len)
    if loc.born_packed is not None:
        born_hosts, store_hosts = _ipv4_hosts(loc.born_packed), _ipv4_hosts(loc.store_packed)
    else:
        born_hosts = _hosts(u8, loc.born_host_pos, loc.born_v6)
        store_hosts = _hosts(u8, loc.store_host_pos, loc.store_v6)
    fixed = {
        "topic": topics,
        "queueId": pa.array(loc.queue_id, type=pa.int32()),
        "queueOffset": pa.array(loc.queue_offset, type=pa.int64()),
        "commitLogOffset": pa.array(loc.offsets, type=pa.int64()),
        "storeSize": pa.array(loc.total.astype(np.int32), type=pa.int32()),
        "bodyCRC": pa.array(loc.crc, type=pa.int32()),
        "flag": pa.array(loc.flag, type=pa.int32()),
        "sysFlag": pa.array(loc.sys_flag, type=pa.int32()),
        "bornTimestamp": pa.array(loc.born_ts * 1000, type=_TIMESTAMP),
        "bornHost": born_hosts,
        "storeTimestamp": pa.array(loc.store_ts * 1000, type=_TIMESTAMP),
        "storeHost": store_hosts,
        "reconsumeTimes": pa.array(loc.recon, type=pa.int32()),
        "preparedTransactionOffset": pa.array(loc.prepared, type=pa.int64()),
        "msgId": _msg_ids(u8, loc.store_host_pos, loc.store_v6, loc.offsets),
        "uniqKey": uniq,
        "tags": tags,
        "keys": keys,
        "properties": properties,
        "broker": pa.repeat(pa.scalar(broker, type=pa.string()), n),
    }
    for lo, hi, body_array, bad in body_groups(buf, loc, policy, min(max_body_bytes, BODY_BYTES_PER_ARROW_ARRAY),
                                               mapped_file_size, kernel=_native,
                                               zlib_module=_fast_zlib if _fast_zlib is not None else zlib):
        if bad and policy.fail_fast:
            row = min(bad)
            field, reason = bad[row]
            off = int(loc.offsets[row])
            raise _fail(f"broker {broker}: {reason} (mode=FAILFAST; the default mode=PERMISSIVE keeps such a record "
                        "with its stored body and a decodeError)", off, field, mapped_file_size)
        fixed["body"] = body_array
        fixed["decodeError"] = decode_errors(bad, lo, hi)
        cols = [fixed[name] if name in ("body", "decodeError") else fixed[name].slice(lo, hi - lo)
                for name, _, _ in COLUMNS]
        yield pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA)


def build_record_batches(data: bytes, starts: np.ndarray, base_offset: int, *, broker: str,
                         mapped_file_size: int, decompress: bool = True, topic_filter: TopicFilter | None = None,
                         max_body_bytes: int = BODY_BYTES_PER_ARROW_ARRAY,
                         policy: BodyPolicy | None = None) -> list[pa.RecordBatch]:
    """:func:`iter_record_batches` as a list (one RecordBatch unless bodies pass ``max_body_bytes``)."""
    return list(iter_record_batches(data, starts, base_offset, broker=broker, mapped_file_size=mapped_file_size,
                                    decompress=decompress, topic_filter=topic_filter, max_body_bytes=max_body_bytes,
                                    policy=policy))


_SPECIAL_KEYS = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


def _properties_scalar(mv: memoryview, props_pos: np.ndarray, props_len: np.ndarray
                       ) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """Properties map plus TAGS / KEYS / UNIQ_KEY columns, parsed record by record with
    :func:`connector.protocol.commitlog.parse_properties` (invalid UTF-8 becomes U+FFFD)."""
    n = len(props_pos)
    keys_list: list[str] = []
    values_list: list[str] = []
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    special: list[list[str | None]] = [[None] * n for _ in _SPECIAL_KEYS]
    pp = props_pos.tolist()
    pl = props_len.tolist()
    count = 0
    for i in range(n):
        props = parse_properties(str(mv[pp[i]:pp[i] + pl[i]], "utf-8", "replace")) if pl[i] else {}
        if props:
            keys_list.extend(props.keys())
            values_list.extend(props.values())
            count += len(props)
            for column, key in zip(special, _SPECIAL_KEYS, strict=True):
                column[i] = props.get(key)
        map_offsets[i + 1] = count
    properties = pa.MapArray.from_arrays(pa.array(map_offsets), pa.array(keys_list, type=pa.string()),
                                         pa.array(values_list, type=pa.string()))
    return (properties, *(pa.array(column, type=pa.string()) for column in special))


def _properties(buf: pa.Buffer, u8: np.ndarray, props_pos: np.ndarray, props_len: np.ndarray
                ) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """Properties map plus the TAGS / KEYS / UNIQ_KEY columns of every record.

    Vectorised with numpy over all records at once, by RocketMQ's rule (spec §1.5,
    ``string2messageProperties``): split a record's properties at ``\\x02``; a segment is
    ``name\\x01value`` split at its first ``\\x01``, which must be neither its first nor its last
    character (so shorter segments drop out too); a later duplicate name wins. Both separators are
    ASCII, so byte positions give the same segments as characters. When some name or value is not
    valid UTF-8, the record-by-record parser (which replaces bad bytes with U+FFFD) is used instead.
    """
    if _native is not None and int(props_len.sum()) < 2 ** 31 - 1:  # int32 Arrow offsets
        return _properties_native(buf, u8, props_pos, props_len)
    n = len(props_pos)
    packed = _slices(buf, props_pos, props_len)
    total = int(props_len.sum()) if n else 0
    if total == 0:
        data = np.zeros(0, dtype=np.uint8)
        data_buf = pa.py_buffer(b"")
    else:
        data_buf = packed.buffers()[2]
        data = np.frombuffer(data_buf, dtype=np.uint8, count=total)
    rec_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(props_len, out=rec_offsets[1:])
    low = np.flatnonzero(data <= 2)  # both separators in one pass, then split
    low_bytes = data[low]
    sep2 = low[low_bytes == 2]
    sep1 = low[low_bytes == 1]
    # segments never overlap and are ordered, so sorted starts pair with sorted ends
    seg_start = np.sort(np.concatenate([rec_offsets[:-1], sep2 + 1]), kind="stable")
    seg_end = np.sort(np.concatenate([rec_offsets[1:], sep2]), kind="stable")
    if len(sep1) == len(seg_start) and ((sep1 >= seg_start) & (sep1 < seg_end)).all():
        kv = sep1  # the usual shape: exactly one name/value separator in every segment
    elif len(sep1):
        k = np.searchsorted(sep1, seg_start)
        kv = np.where(k < len(sep1), sep1[np.minimum(k, len(sep1) - 1)], -1)
    else:
        kv = np.full(len(seg_start), -1, dtype=np.int64)
    valid = (kv > seg_start) & (kv < seg_end - 1)
    if not valid.all():
        seg_start, seg_end, kv = seg_start[valid], seg_end[valid], kv[valid]
    m = len(seg_start)
    counts = np.diff(np.searchsorted(seg_start, rec_offsets))  # segments per record
    rec = np.repeat(np.arange(n), counts)
    names = _as_string(_slices(data_buf, seg_start, kv - seg_start))
    values = _as_string(_slices(data_buf, kv + 1, seg_end - kv - 1))
    if names is None or values is None:
        return _properties_scalar(memoryview(u8), props_pos, props_len)
    name_len = kv - seg_start
    head = _name_heads(data, seg_start, name_len)
    if m and counts.max() > 1 and _may_repeat_names(rec, name_len, head, counts):
        # a later duplicate name within one record wins: keep the last entry of every (record, name)
        table = pa.table({"rec": pa.array(rec), "name": names, "seq": pa.array(np.arange(m))})
        last = table.group_by(["rec", "name"], use_threads=False).aggregate([("seq", "max")])
        if last.num_rows != m:
            keep = np.sort(last.column("seq_max").to_numpy())
            rec, name_len, head = rec[keep], name_len[keep], head[keep]
            names = names.take(pa.array(keep))
            values = values.take(pa.array(keep))
            m = len(keep)
            counts = np.bincount(rec, minlength=n)
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=map_offsets[1:])
    properties = pa.MapArray.from_arrays(pa.array(map_offsets), names, values)
    special = []
    for key in _SPECIAL_KEYS:
        hit = np.flatnonzero((name_len == len(key)) & (head == _SPECIAL_HEADS[key]))
        index = np.full(n, -1, dtype=np.int64)
        index[rec[hit]] = hit
        special.append(values.take(pa.array(index, mask=index < 0)))
    return (properties, *special)


_SPECIAL_NAMES = tuple(key.encode() for key in _SPECIAL_KEYS)


def _properties_native(buf: pa.Buffer, u8: np.ndarray, props_pos: np.ndarray, props_len: np.ndarray
                       ) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """:func:`_properties` through the native kernel: one pass over the properties bytes splits them,
    drops earlier duplicates and finds TAGS / KEYS / UNIQ_KEY (same rules, same results)."""
    n = len(props_pos)
    map_offsets, name_offsets, names, value_offsets, values, hits = _native.split_properties(
        buf, np.ascontiguousarray(props_pos, dtype=np.int64), np.ascontiguousarray(props_len, dtype=np.int64),
        _SPECIAL_NAMES)
    m = len(name_offsets) // 4 - 1
    names = _as_string(pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(name_offsets), pa.py_buffer(names)]))
    values = _as_string(pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(value_offsets),
                                                                pa.py_buffer(values)]))
    if names is None or values is None:
        return _properties_scalar(memoryview(u8), props_pos, props_len)
    properties = pa.MapArray.from_arrays(pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(map_offsets)]),
                                         names, values)
    index = np.frombuffer(hits, dtype=np.int64).reshape(len(_SPECIAL_NAMES), n)
    return (properties, *(values.take(pa.array(row, mask=row < 0)) for row in index))


def _name_heads(data: np.ndarray, seg_start: np.ndarray, name_len: np.ndarray) -> np.ndarray:
    """The first 8 bytes of every property name as a big-endian uint64, bytes past the name zeroed.

    Exact for names of up to 8 bytes (TAGS, KEYS, UNIQ_KEY), a fingerprint for longer ones.
    """
    if not len(seg_start):
        return np.zeros(0, dtype=np.uint64)
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    head = _gather_be(padded, seg_start, 8, ">u8")
    shift = ((8 - np.minimum(name_len, 8)) * 8).astype(np.uint64)
    return head & ~((np.uint64(1) << shift) - np.uint64(1))


_SPECIAL_HEADS = {key: np.uint64(int.from_bytes(key.encode()[:8].ljust(8, b"\x00"), "big")) for key in _SPECIAL_KEYS}
MAX_NAMES_COMPARED_PER_RECORD = 32


def _may_repeat_names(rec: np.ndarray, name_len: np.ndarray, head: np.ndarray, counts: np.ndarray) -> bool:
    """False when no record has the same property name twice (cheap test; True may be a false alarm).

    Names of one record are compared pairwise by (length, first 8 bytes), by shifting the segment
    array. Real properties come from a Java Map and never repeat a name, so the exact (and slower)
    de-duplication rarely runs.
    """
    most = int(counts.max())
    if most > MAX_NAMES_COMPARED_PER_RECORD:
        return True
    key = head ^ (name_len.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    for d in range(1, most):
        if ((key[d:] == key[:-d]) & (rec[d:] == rec[:-d])).any():
            return True
    return False


class CommitLogArrowDecoder:
    """Incremental decoder of the CommitLog range ``[start, end)`` of one broker into RecordBatches.

    Args:
        start: CommitLog offset (bytes) of the first record of the range; a record boundary.
        end: offset where the range ends: a record boundary, a mapped-file start or commitLogMaxOffset.
        mapped_file_size: mappedFileSizeCommitLog (bytes); a record never spans two files.
        broker: the ``broker`` column's value.
        decompress_body: inflate bodies stored compressed.
        mode: ``PERMISSIVE`` (a bad body becomes a row with its stored bytes and ``decodeError``) or
            ``FAILFAST`` (CommitLogFormatError naming broker, offset, file and field); case-insensitive.
        verify_body_crc: check every body against its BODYCRC.
        max_inflated_body_bytes: bytes a compressed body may decompress to (a larger one is bad).
        max_records_per_batch / max_bytes_per_batch: a batch is emitted when either is reached
            (bytes = stored record bytes, and inflated body bytes; soft by at most one record).
        topic_filter: drop records of other topics before their columns are built (None keeps all).

    Feed chunks with :meth:`feed` (each must start where the previous one ended; it returns the
    batches completed so far) and call :meth:`finish` once the fetcher is done. Every record whose
    first byte lies in ``[start, end)`` and whose topic the filter keeps is emitted exactly once, in
    CommitLog order; END_FILE blanks are skipped to the next file.

    Memory: one batch of walked records, at most ``min(max_bytes_per_batch, 1 MiB)`` bytes not walked
    yet (which may include an END_FILE blank's tail, less than one record) and the partial record at
    the end, whatever the range (see :attr:`buffered_bytes`).

    Raises CommitLogFormatError naming offset, file and field for bad MAGICCODE/TOTALSIZE, a record
    crossing its file or the range end, zeros where a record must be, or a range that ends inside a
    record; ValueError for chunks that do not continue the stream. Bad bodies raise (FAILFAST) or become
    rows (PERMISSIVE) as :func:`iter_record_batches` says.
    """

    def __init__(self, start: int, end: int, mapped_file_size: int, *, broker: str, decompress_body: bool = True,
                 max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH,
                 max_bytes_per_batch: int = DEFAULT_MAX_BYTES_PER_BATCH, topic_filter: TopicFilter | None = None,
                 mode: str = MODE_PERMISSIVE, verify_body_crc: bool = True,
                 max_inflated_body_bytes: int = DEFAULT_MAX_INFLATED_BODY_BYTES):
        if mode.upper() not in BAD_RECORD_MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(BAD_RECORD_MODES)}")
        if not 0 <= start <= end:
            raise ValueError(f"bad CommitLog range [{start}, {end})")
        if mapped_file_size <= 0:
            raise ValueError(f"mappedFileSizeCommitLog must be positive, got {mapped_file_size}")
        self.start = start
        self.end = end
        self.mapped_file_size = mapped_file_size
        self.broker = broker
        self.decompress_body = decompress_body
        self.policy = BodyPolicy(decompress=decompress_body, verify_crc=verify_body_crc,
                                 max_inflated=max_inflated_body_bytes, fail_fast=mode.upper() == MODE_FAILFAST)
        self.max_records = max_records_per_batch
        self.max_bytes = max_bytes_per_batch
        self.topic_filter = None if topic_filter is None or topic_filter.keeps_everything else topic_filter
        self._walk_bytes = min(WALK_MIN_BYTES, max_bytes_per_batch)
        self._buf = bytearray()
        self._buf_offset = start  # CommitLog offset of _buf[0]
        self._pos = 0  # next record start in _buf
        self._wait_for = 0  # no walk can progress before _buf holds this many bytes
        self._runs: list[np.ndarray] = []  # walked, not yet emitted records (CommitLog offsets)
        self._pending_records = 0
        self._pending_bytes = 0
        self._stream_offset = start  # next byte the stream must deliver
        self._skip_to = start  # bytes below this offset are blank tails (or already handled)
        self._done = start == end
        self.records_walked = 0
        self.records_emitted = 0
        self.blanks_skipped = 0
        self.false_magic_candidates = 0

    @property
    def stream_offset(self) -> int:
        """The CommitLog offset the next chunk must start at."""
        return self._stream_offset

    @property
    def next_record_offset(self) -> int:
        """Offset of the next record boundary not yet walked (== end once done)."""
        return self.end if self._done else self._buf_offset + self._pos

    @property
    def buffered_bytes(self) -> int:
        """Bytes held right now: walked records not yet emitted plus bytes not walked yet (memory bound)."""
        return len(self._buf)

    @property
    def records_filtered(self) -> int:
        """Records walked and emitted-or-dropped whose topic the filter dropped."""
        return self.records_walked - self._pending_records - self.records_emitted

    @property
    def done(self) -> bool:
        """True once every record of the range was walked (batches may still be pending)."""
        return self._done

    def feed(self, offset: int, data: bytes | bytearray | memoryview) -> list[pa.RecordBatch]:
        """Add the chunk of CommitLog bytes starting at ``offset``; return every batch now complete."""
        if offset != self._stream_offset:
            raise ValueError(f"chunk at CommitLog offset {offset} does not continue the stream at "
                             f"{self._stream_offset}")
        size = len(data)
        self._stream_offset += size
        if self._done:
            return []
        lo = max(offset, self._skip_to)
        hi = min(offset + size, self.end)
        if hi <= lo:
            return []
        if not self._buf:
            self._buf_offset = lo
            self._pos = 0
        self._buf += memoryview(data)[lo - offset:hi - offset]
        buf_end = self._buf_offset + len(self._buf)
        if len(self._buf) < self._wait_for and buf_end < self.end:
            return []
        if len(self._buf) - self._pos < self._walk_bytes and buf_end < self.end:
            return []
        return list(self._walk())

    def jump(self, offset: int, reason: str) -> list[pa.RecordBatch]:
        """Continue the range at record boundary ``offset`` >= the stream offset (bytes between are gone).

        Used when ``failOnDataLoss=false`` and the broker no longer holds part of the range: the
        complete records already received are emitted, a partial record is dropped, and ``reason`` is
        logged with the skipped range.
        """
        if offset < self._stream_offset:
            raise ValueError(f"cannot jump back from CommitLog offset {self._stream_offset} to {offset}")
        out = list(self._walk()) if not self._done else []
        out += list(self._emit()) if self._runs else []
        log.warning("broker %s: skipping CommitLog bytes [%d, %d) (%s); %d bytes of a partial record dropped",
                    self.broker, self._stream_offset, offset, reason, len(self._buf) - self._pos)
        self._buf.clear()
        self._pos = 0
        self._wait_for = 0
        self._stream_offset = offset
        self._buf_offset = offset
        self._skip_to = max(self._skip_to, offset)
        if offset >= self.end:
            self._done = True
        return out

    def finish(self) -> list[pa.RecordBatch]:
        """Return the last batch(es). Raises CommitLogFormatError if the range was not covered to its end."""
        out = list(self._walk()) if not self._done else []
        out += list(self._emit()) if self._runs else []
        if not self._done:
            at = self._buf_offset + self._pos
            raise _fail(f"CommitLog range [{self.start}, {self.end}) ended after {self._stream_offset - at} bytes "
                        f"of an incomplete record (stream stopped at {self._stream_offset})", at, "TOTALSIZE",
                        self.mapped_file_size)
        return out

    def decode_all(self, chunks: Iterable[tuple[int, bytes]]) -> Iterator[pa.RecordBatch]:
        """Feed every ``(offset, bytes)`` chunk, then :meth:`finish`."""
        for offset, data in chunks:
            yield from self.feed(offset, data)
        yield from self.finish()

    # --- internals ---------------------------------------------------------------------------------
    def _walk(self) -> Iterator[pa.RecordBatch]:
        """Walk every record start the buffer holds (slow path per record only for the irregular ones)."""
        fsize = self.mapped_file_size
        while True:
            buf = self._buf
            at = self._buf_offset + self._pos
            if at >= self.end:
                self._done = True
                if self._runs:
                    yield from self._emit()
                self._buf.clear()
                self._buf_offset, self._pos = self.end, 0
                return
            avail = len(buf) - self._pos
            if avail < 8:
                self._wait_for = self._pos + 8
                return
            total, magic = _HEAD8.unpack_from(buf, self._pos)
            file_end = at - at % fsize + fsize
            if magic == MESSAGE_MAGIC_CODE:
                if total < MIN_RECORD_SIZE_BYTES:
                    raise _fail(f"TOTALSIZE {total} is below the minimum {MIN_RECORD_SIZE_BYTES}", at, "TOTALSIZE",
                                fsize)
                if at + total > file_end:
                    raise _fail(f"TOTALSIZE {total} reaches past the end of its mapped file at {file_end}", at,
                                "TOTALSIZE", fsize)
                if at + total > self.end:
                    raise _fail(f"record of TOTALSIZE {total} crosses the range end {self.end}, which is therefore "
                                "not a record boundary", at, "TOTALSIZE", fsize)
                if avail < total:
                    self._wait_for = self._pos + total
                    return
                yield from self._walk_run(min(file_end, self.end))
            elif magic == BLANK_MAGIC_CODE:
                if total != file_end - at:
                    raise _fail(f"END_FILE blank TOTALSIZE {total} does not reach the end of its mapped file "
                                f"({file_end - at} bytes left)", at, "TOTALSIZE", fsize)
                self.blanks_skipped += 1
                if self._runs:
                    yield from self._emit()
                    buf = self._buf
                # drop the blank and its tail; continue at the next file
                self._skip_to = file_end
                if file_end >= self.end:
                    self._done = True
                    buf.clear()
                    self._buf_offset, self._pos = self.end, 0
                    return
                if self._buf_offset + len(buf) > file_end:
                    del buf[:file_end - self._buf_offset]
                else:
                    buf.clear()
                self._buf_offset, self._pos = file_end, 0
            elif total == 0 and magic == 0:
                raise _fail(f"no record at this offset (TOTALSIZE 0, MAGICCODE 0: unwritten bytes) although the "
                            f"range ends at {self.end}", at, "MAGICCODE", fsize)
            else:
                raise _fail(f"bad MAGICCODE 0x{magic & 0xFFFFFFFF:08X}", at, "MAGICCODE", fsize)

    def _walk_run(self, limit_offset: int) -> Iterator[pa.RecordBatch]:
        """Walk the chain of complete MESSAGE records from ``_pos`` (a checked, complete record) up to
        ``limit_offset`` (the file end or range end) with numpy; emit batches as limits are reached."""
        region_offset = self._buf_offset + self._pos
        limit = min(len(self._buf), limit_offset - self._buf_offset)
        with memoryview(self._buf) as view:  # no copy; every array returned is fresh, so the view is released
            starts, totals, false_hits = chain_record_starts(view[self._pos:limit])
        self.false_magic_candidates += false_hits
        starts += region_offset
        while len(starts):
            room = self.max_records - self._pending_records
            cum = np.cumsum(totals)
            take = min(room, int(np.searchsorted(cum, self.max_bytes - self._pending_bytes, side="left")) + 1,
                       len(starts))
            self._runs.append(starts[:take])
            self._pending_records += take
            self._pending_bytes += int(cum[take - 1])
            self.records_walked += take
            self._pos = int(starts[take - 1] + totals[take - 1]) - self._buf_offset
            starts, totals = starts[take:], totals[take:]
            if self._pending_records >= self.max_records or self._pending_bytes >= self.max_bytes:
                yield from self._emit()

    def _emit(self) -> Iterator[pa.RecordBatch]:
        offsets = np.concatenate(self._runs) if len(self._runs) > 1 else self._runs[0]
        # hand the buffer to the batch builder and keep a copy of what follows the walked records
        data, base = self._buf, self._buf_offset
        self._buf = data[self._pos:]
        self._buf_offset += self._pos
        self._pos = 0
        self._wait_for = 0
        self._runs = []
        self._pending_records = 0
        self._pending_bytes = 0
        for batch in iter_record_batches(data, offsets - base, base, broker=self.broker,
                                         mapped_file_size=self.mapped_file_size, topic_filter=self.topic_filter,
                                         max_body_bytes=self.max_bytes, policy=self.policy):
            self.records_emitted += batch.num_rows
            yield batch


def chain_record_starts(region: bytes | bytearray | memoryview) -> tuple[np.ndarray, np.ndarray, int]:
    """Starts and TOTALSIZEs of the chain of complete MESSAGE records at the start of ``region``.

    ``region[0:]`` must begin with a complete, checked MESSAGE record. Follows TOTALSIZE from record to
    record over the *candidates* (positions with the message MAGICCODE at +4) without a Python step
    per record; stops before the first record that is incomplete, not a message (blank, bad magic,
    zeros) or smaller than 91 bytes (the caller's per-record path reports those). Returns
    ``(starts, totals, false_candidates)``: int64 positions in ``region``, their TOTALSIZE (bytes), and
    how many candidates were bytes inside bodies that happen to equal the magic.
    """
    if _native is not None:
        return _chain_native(region)
    u8 = np.frombuffer(region, dtype=np.uint8)
    size = len(u8)
    hits = np.flatnonzero(u8[4:size - 3] == _MAGIC_BYTES[0]) if size >= 8 else np.zeros(0, dtype=np.int64)
    if len(hits):
        hits = hits[(u8[hits + 5] == _MAGIC_BYTES[1]) & (u8[hits + 6] == _MAGIC_BYTES[2])
                    & (u8[hits + 7] == _MAGIC_BYTES[3])]
    if not len(hits) or hits[0] != 0:
        raise ValueError("region does not start with a MESSAGE record")
    totals = _gather_be(u8, hits, 4, ">i4").astype(np.int64)
    following = hits + totals
    breaks = np.flatnonzero(following[:-1] != hits[1:])
    runs = []
    i = 0
    false_hits = 0
    while True:
        k = int(np.searchsorted(breaks, i))
        last = int(breaks[k]) if k < len(breaks) else len(hits) - 1
        runs.append((i, last + 1))
        target = int(following[last])
        if totals[last] < MIN_RECORD_SIZE_BYTES or target >= size:
            break
        j = int(np.searchsorted(hits, target))
        if j >= len(hits) or hits[j] != target:
            break
        false_hits += j - last - 1
        i = j
    index = np.concatenate([np.arange(a, b) for a, b in runs]) if len(runs) > 1 else np.arange(*runs[0])
    starts, totals = hits[index], totals[index]
    ok = (totals >= MIN_RECORD_SIZE_BYTES) & (starts + totals <= size)
    if not ok.all():
        cut = int(np.argmin(ok))
        starts, totals = starts[:cut], totals[:cut]
    return starts, totals, false_hits


def _chain_native(region: bytes | bytearray | memoryview) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`chain_record_starts` through the native kernel (a C loop over TOTALSIZE; no candidates)."""
    size = len(region)
    if size < 8 or _HEAD8.unpack_from(region, 0)[1] != MESSAGE_MAGIC_CODE:
        raise ValueError("region does not start with a MESSAGE record")
    capacity = size // MIN_RECORD_SIZE_BYTES + 1
    starts = np.empty(capacity, dtype=np.int64)
    totals = np.empty(capacity, dtype=np.int64)
    count, _ = _native.walk_records(region, starts, totals)
    return starts[:count], totals[:count], 0


def decode_commitlog_range(chunks: Iterable[tuple[int, bytes]], start: int, end: int, mapped_file_size: int, *,
                           broker: str, **kwargs) -> Iterator[pa.RecordBatch]:
    """Decode ``[start, end)`` from ``(offset, bytes)`` chunks; see :class:`CommitLogArrowDecoder`."""
    return CommitLogArrowDecoder(start, end, mapped_file_size, broker=broker, **kwargs).decode_all(chunks)
