"""CommitLog byte range → ``pyarrow.RecordBatch`` (the executor half of the source, DESIGN §3).

Bytes arrive in chunks (HA frames are 32 KiB byte ranges that split records, spec §2.3). The
:class:`CommitLogArrowDecoder` keeps only what it must: the records walked but not yet emitted (at most
one batch) and the partial record at the end of the last chunk. It walks record starts with one small
read per record (TOTALSIZE and MAGICCODE), skips END_FILE blanks to the next mapped file (spec §1.9),
stops exactly at the range end, and builds every column of a batch at once with numpy over the
record start positions: fixed-width fields are big-endian gathers, variable-width fields (body, topic)
are masked copies out of the batch's bytes, msgId is hex-encoded in one pass. Properties (and the
tags / keys / uniqKey derived from them) are parsed per record with RocketMQ's own rules
(``connector.protocol.commitlog.parse_properties``); compressed bodies are inflated per record.

Row = one stored message; columns follow RocketMQ's MessageExt names (DESIGN §3), see
:data:`ARROW_SCHEMA` and :func:`spark_schema`. Timestamps are epoch milliseconds as stored, typed as
Spark's TimestampType (UTC, microsecond unit, millisecond values).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.protocol.commitlog import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE_BYTES,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOSTADDRESS_V6_FLAG,
    HostAddress,
    decompress_body,
    file_name,
    offset_msg_id,
    parse_properties,
)
from connector.protocol.errors import CommitLogFormatError

log = logging.getLogger(__name__)

DEFAULT_MAX_RECORDS_PER_BATCH = 10000
DEFAULT_MAX_BYTES_PER_BATCH = 16 * 1024 * 1024
BODY_BYTES_PER_ARROW_ARRAY = 512 * 1024 * 1024  # keeps int32 binary offsets far from overflow

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
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def _gather_be(u8: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian integers of ``width`` bytes at every position of ``pos`` (vectorised)."""
    if len(pos) == 0:
        return np.zeros(0, dtype=np.dtype(dtype).newbyteorder("="))
    rows = u8[pos[:, None] + np.arange(width)]
    return rows.view(dtype).reshape(len(pos)).astype(np.dtype(dtype).newbyteorder("="))


def _gather_ranges(u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ``u8[starts[i]:starts[i]+lengths[i]]`` for all i; return (bytes, int32 offsets).

    Long ranges (bodies) are joined slice by slice at memcpy speed; short ones (topics, property
    names) are gathered with one index array.
    """
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.zeros(0, dtype=np.uint8), offsets.astype(np.int32)
    if total >= 64 * len(starts):
        mv = memoryview(u8)
        joined = b"".join([mv[a:b] for a, b in zip(starts.tolist(), (starts + lengths).tolist(), strict=True)])
        return np.frombuffer(joined, dtype=np.uint8), offsets.astype(np.int32)
    index = np.arange(total, dtype=np.int64) + np.repeat(starts - offsets[:-1], lengths)
    return u8[index], offsets.astype(np.int32)


def _hosts(u8: np.ndarray, pos: np.ndarray, is_v6: np.ndarray) -> pa.Array:
    """``ip:port`` strings of the hosts stored at ``pos`` (4- or 16-byte IP, then an int port)."""
    n = len(pos)
    out = np.empty(n, dtype=object)
    v4 = ~is_v6
    if v4.any():
        p = pos[v4]
        ip = _gather_be(u8, p, 4, ">u4").astype(np.uint64)
        port = _gather_be(u8, p + 4, 4, ">u4").astype(np.uint64)
        uniq, inverse = np.unique((ip << np.uint64(32)) | port, return_inverse=True)
        texts = np.array([f"{int(k) >> 56}.{(int(k) >> 48) & 255}.{(int(k) >> 40) & 255}.{(int(k) >> 32) & 255}:"
                          f"{_java_int(int(k) & 0xFFFFFFFF)}" for k in uniq], dtype=object)
        out[v4] = texts[inverse.reshape(-1)]
    for i in np.flatnonzero(is_v6):
        p = int(pos[i])
        raw = u8[p:p + 20].tobytes()
        out[i] = str(HostAddress(raw[:16], _java_int(int.from_bytes(raw[16:20], "big"))))
    return pa.array(out, type=pa.string())


def _java_int(u32: int) -> int:
    return u32 - (1 << 32) if u32 & 0x80000000 else u32


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
    raw = np.empty((n, 16), dtype=np.uint8)
    raw[:, :8] = u8[store_host_pos[:, None] + np.arange(8)]
    raw[:, 8:] = offsets.astype(">i8").view(np.uint8).reshape(n, 8)
    hexed = np.empty((n, 32), dtype=np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 15]
    value_offsets = (np.arange(n + 1, dtype=np.int32) * 32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(value_offsets), pa.py_buffer(hexed.tobytes()))


def _fail(msg: str, offset: int, field: str, mapped_file_size: int) -> CommitLogFormatError:
    return CommitLogFormatError(msg, offset=offset, field=field, file=file_name(offset - offset % mapped_file_size))


def build_record_batches(data: bytes, starts: np.ndarray, base_offset: int, *, broker: str,
                         mapped_file_size: int, decompress: bool = True) -> list[pa.RecordBatch]:
    """Columns of the complete MESSAGE records that begin at ``starts`` (positions in ``data``).

    Args:
        data: bytes holding the records; ``data[0]`` is at CommitLog offset ``base_offset``.
        starts: int64 positions of record starts, ascending; each record's TOTALSIZE and MAGICCODE
            were already checked and the whole record lies inside ``data``.
        broker: value of the ``broker`` column.
        mapped_file_size: mappedFileSizeCommitLog (bytes), to name files in errors.
        decompress: inflate COMPRESSED bodies (``decompressBody``).

    Returns one RecordBatch of :data:`ARROW_SCHEMA`, or several when the bodies would pass
    :data:`BODY_BYTES_PER_ARROW_ARRAY`.

    Raises CommitLogFormatError naming offset and field when a length field disagrees with TOTALSIZE,
    PHYSICALOFFSET is not the record's offset, the topic is not UTF-8 or a body does not inflate.
    """
    n = len(starts)
    u8 = np.frombuffer(data, dtype=np.uint8)
    s = starts.astype(np.int64)
    offsets = base_offset + s
    total = _gather_be(u8, s, 4, ">i4").astype(np.int64)
    rec_end = s + total
    crc = _gather_be(u8, s + 8, 4, ">i4")
    queue_id = _gather_be(u8, s + 12, 4, ">i4")
    flag = _gather_be(u8, s + 16, 4, ">i4")
    queue_offset = _gather_be(u8, s + 20, 8, ">i8")
    physical = _gather_be(u8, s + 28, 8, ">i8")
    sys_flag = _gather_be(u8, s + 36, 4, ">i4")
    born_ts = _gather_be(u8, s + 40, 8, ">i8")
    born_v6 = (sys_flag & BORNHOST_V6_FLAG) != 0
    store_v6 = (sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0
    born_host_pos = s + 48
    store_ts_pos = born_host_pos + np.where(born_v6, 20, 8)
    store_host_pos = store_ts_pos + 8
    recon_pos = store_host_pos + np.where(store_v6, 20, 8)
    body_len_pos = recon_pos + 12

    def check(bad: np.ndarray, field: str, what: str) -> None:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _fail(what.format(i=i), int(offsets[i]), field, mapped_file_size)

    check(body_len_pos + 4 + 3 > rec_end, "TOTALSIZE", "TOTALSIZE is too small for the record's hosts")
    check(physical != offsets, "PHYSICALOFFSET", "PHYSICALOFFSET field does not equal the record's offset")
    store_ts = _gather_be(u8, store_ts_pos, 8, ">i8")
    recon = _gather_be(u8, recon_pos, 4, ">i4")
    prepared = _gather_be(u8, recon_pos + 4, 8, ">i8")
    body_len = _gather_be(u8, body_len_pos, 4, ">i4").astype(np.int64)
    body_pos = body_len_pos + 4
    topic_len_pos = body_pos + body_len
    check((body_len < 0) | (topic_len_pos + 3 > rec_end), "BODY", "BODY length does not fit in TOTALSIZE")
    topic_len = u8[topic_len_pos].view(np.int8).astype(np.int64)
    topic_pos = topic_len_pos + 1
    props_len_pos = topic_pos + topic_len
    check((topic_len < 0) | (props_len_pos + 2 > rec_end), "TOPIC", "TOPIC length does not fit in TOTALSIZE")
    props_len = _gather_be(u8, props_len_pos, 2, ">i2").astype(np.int64)
    props_pos = props_len_pos + 2
    check((props_len < 0) | (props_pos + props_len != rec_end), "PROPERTIES",
          "PROPERTIES length disagrees with TOTALSIZE")

    topic_bytes, topic_offsets = _gather_ranges(u8, topic_pos, topic_len)
    topics = pa.StringArray.from_buffers(n, pa.py_buffer(topic_offsets), pa.py_buffer(topic_bytes))
    try:
        topics.validate(full=True)
    except pa.ArrowInvalid:
        for i in range(n):
            try:
                u8[topic_pos[i]:topic_pos[i] + topic_len[i]].tobytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _fail(f"TOPIC is not UTF-8 ({exc})", int(offsets[i]), "TOPIC", mapped_file_size) from exc
        raise

    # properties, and the tags / keys / uniqKey they carry
    mv = memoryview(data)
    props_cols = _properties_vectorised(u8, props_pos, props_len)
    if props_cols is None:  # invalid UTF-8 somewhere: RocketMQ's own parser, record by record
        props_cols = _properties_scalar(mv, props_pos, props_len)
    properties, tags, keys, uniq = props_cols

    bodies = _bodies(u8, mv, body_pos, body_len, sys_flag, offsets, decompress, mapped_file_size)

    fixed = {
        "topic": topics,
        "queueId": pa.array(queue_id, type=pa.int32()),
        "queueOffset": pa.array(queue_offset, type=pa.int64()),
        "commitLogOffset": pa.array(offsets, type=pa.int64()),
        "storeSize": pa.array(total.astype(np.int32), type=pa.int32()),
        "bodyCRC": pa.array(crc, type=pa.int32()),
        "flag": pa.array(flag, type=pa.int32()),
        "sysFlag": pa.array(sys_flag, type=pa.int32()),
        "bornTimestamp": pa.array(born_ts * 1000, type=_TIMESTAMP),
        "bornHost": _hosts(u8, born_host_pos, born_v6),
        "storeTimestamp": pa.array(store_ts * 1000, type=_TIMESTAMP),
        "storeHost": _hosts(u8, store_host_pos, store_v6),
        "reconsumeTimes": pa.array(recon, type=pa.int32()),
        "preparedTransactionOffset": pa.array(prepared, type=pa.int64()),
        "msgId": _msg_ids(u8, store_host_pos, store_v6, offsets),
        "uniqKey": uniq,
        "tags": tags,
        "keys": keys,
        "properties": properties,
        "broker": pa.repeat(pa.scalar(broker, type=pa.string()), n),
    }
    out = []
    row = 0
    for body_array in bodies:
        rows = len(body_array)
        cols = [body_array if name == "body" else fixed[name].slice(row, rows) for name, _, _ in COLUMNS]
        out.append(pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA))
        row += rows
    return out


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


def _properties_vectorised(u8: np.ndarray, props_pos: np.ndarray, props_len: np.ndarray
                           ) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array] | None:
    """The same columns as :func:`_properties_scalar`, computed with numpy over all records at once.

    RocketMQ's rule (spec §1.5, ``string2messageProperties``): split a record's properties at
    ``\x02``; a segment is ``name\x01value`` split at its first ``\x01``, which must be neither its
    first nor its last character (so shorter segments drop out too); a later duplicate name wins.
    Both separators are ASCII, so byte positions give the same segments as characters.
    Returns None when some name or value is not valid UTF-8 (the caller then uses the scalar parser).
    """
    n = len(props_pos)
    data, rec_offsets = _gather_ranges(u8, props_pos, props_len)
    rec_offsets = rec_offsets.astype(np.int64)
    sep2 = np.flatnonzero(data == 2)
    sep1 = np.flatnonzero(data == 1)
    # segments never overlap and are ordered, so sorted starts pair with sorted ends
    seg_start = np.sort(np.concatenate([rec_offsets[:-1], sep2 + 1]))
    seg_end = np.sort(np.concatenate([rec_offsets[1:], sep2]))
    k = np.searchsorted(sep1, seg_start)
    kv = np.where(k < len(sep1), sep1[np.minimum(k, max(len(sep1) - 1, 0))] if len(sep1) else -1, -1)
    valid = (kv > seg_start) & (kv < seg_end - 1)
    seg_start, seg_end, kv = seg_start[valid], seg_end[valid], kv[valid]
    rec = np.searchsorted(rec_offsets, seg_start, side="right") - 1
    m = len(seg_start)
    names_data, names_off = _gather_ranges(data, seg_start, kv - seg_start)
    values_data, values_off = _gather_ranges(data, kv + 1, seg_end - kv - 1)
    names = pa.StringArray.from_buffers(m, pa.py_buffer(names_off), pa.py_buffer(names_data))
    values = pa.StringArray.from_buffers(m, pa.py_buffer(values_off), pa.py_buffer(values_data))
    try:
        names.validate(full=True)
        values.validate(full=True)
    except pa.ArrowInvalid:
        return None
    if m:
        # a later duplicate name within one record wins: keep the last entry of every (record, name)
        table = pa.table({"rec": pa.array(rec), "name": names, "seq": pa.array(np.arange(m))})
        last = table.group_by(["rec", "name"], use_threads=False).aggregate([("seq", "max")])
        if last.num_rows != m:
            keep = np.sort(last.column("seq_max").to_numpy())
            rec = rec[keep]
            names = names.take(pa.array(keep))
            values = values.take(pa.array(keep))
            m = len(keep)
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rec, minlength=n), out=map_offsets[1:])
    properties = pa.MapArray.from_arrays(pa.array(map_offsets), names, values)
    special = []
    for key in _SPECIAL_KEYS:
        hit = np.flatnonzero(pc.equal(names, key).to_numpy(zero_copy_only=False)) if m else np.zeros(0, np.int64)
        index = np.full(n, -1, dtype=np.int64)
        index[rec[hit]] = hit
        special.append(values.take(pa.array(index, mask=index < 0)))
    return (properties, *special)


def _bodies(u8: np.ndarray, mv: memoryview, body_pos: np.ndarray, body_len: np.ndarray, sys_flag: np.ndarray,
            offsets: np.ndarray, decompress: bool, mapped_file_size: int) -> list[pa.Array]:
    """Body arrays (stored bytes, or inflated when ``decompress``), split so none passes
    BODY_BYTES_PER_ARROW_ARRAY bytes."""
    n = len(body_pos)
    compressed = (sys_flag & COMPRESSED_FLAG) != 0 if decompress else np.zeros(n, dtype=bool)
    if not compressed.any() and int(body_len.sum()) <= BODY_BYTES_PER_ARROW_ARRAY:
        data, value_offsets = _gather_ranges(u8, body_pos, body_len)
        return [pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(value_offsets), pa.py_buffer(data)])]
    values: list = []
    for i in range(n):
        raw = mv[int(body_pos[i]):int(body_pos[i] + body_len[i])]
        if compressed[i]:
            off = int(offsets[i])
            values.append(decompress_body(raw, int(sys_flag[i]), offset=off,
                                          file=file_name(off - off % mapped_file_size)))
        else:
            values.append(raw)
    arrays = []
    first = 0
    size = 0
    for i, value in enumerate(values):
        if size and size + len(value) > BODY_BYTES_PER_ARROW_ARRAY:
            arrays.append(pa.array(values[first:i], type=pa.binary()))
            first, size = i, 0
        size += len(value)
    arrays.append(pa.array(values[first:], type=pa.binary()))
    return arrays


class CommitLogArrowDecoder:
    """Incremental decoder of the CommitLog range ``[start, end)`` of one broker into RecordBatches.

    Args:
        start: CommitLog offset (bytes) of the first record of the range; a record boundary.
        end: offset where the range ends: a record boundary, a mapped-file start or commitLogMaxOffset.
        mapped_file_size: mappedFileSizeCommitLog (bytes); a record never spans two files.
        broker: the ``broker`` column's value.
        decompress_body: inflate bodies stored compressed.
        max_records_per_batch / max_bytes_per_batch: a batch is emitted when either is reached
            (bytes = stored record bytes; soft by at most one record).

    Feed chunks with :meth:`feed` (each must start where the previous one ended; it returns the
    batches completed by the chunk) and call :meth:`finish` once the fetcher is done. Every record
    whose first byte lies in ``[start, end)`` is emitted exactly once, in CommitLog order; END_FILE
    blanks are skipped to the next file.

    Memory: one batch of walked records plus the partial record at the chunk end, whatever the range.

    Raises CommitLogFormatError naming offset, file and field for bad MAGICCODE/TOTALSIZE, a record
    crossing its file or the range end, zeros where a record must be, or a range that ends inside a
    record; ValueError for chunks that do not continue the stream.
    """

    def __init__(self, start: int, end: int, mapped_file_size: int, *, broker: str, decompress_body: bool = True,
                 max_records_per_batch: int = DEFAULT_MAX_RECORDS_PER_BATCH,
                 max_bytes_per_batch: int = DEFAULT_MAX_BYTES_PER_BATCH):
        if not 0 <= start <= end:
            raise ValueError(f"bad CommitLog range [{start}, {end})")
        if mapped_file_size <= 0:
            raise ValueError(f"mappedFileSizeCommitLog must be positive, got {mapped_file_size}")
        self.start = start
        self.end = end
        self.mapped_file_size = mapped_file_size
        self.broker = broker
        self.decompress_body = decompress_body
        self.max_records = max_records_per_batch
        self.max_bytes = max_bytes_per_batch
        self._buf = bytearray()
        self._buf_offset = start  # CommitLog offset of _buf[0]
        self._pos = 0  # next record start in _buf
        self._starts: list[int] = []  # walked, not yet emitted records (positions in _buf)
        self._pending_bytes = 0
        self._stream_offset = start  # next byte the stream must deliver
        self._skip_to = start  # bytes below this offset are blank tails (or already handled)
        self._done = start == end
        self.records_emitted = 0
        self.blanks_skipped = 0

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
        """Bytes held right now: walked records not yet emitted plus the partial record (memory bound)."""
        return len(self._buf)

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
        if not self._buf and not self._starts:
            self._buf_offset = lo
            self._pos = 0
        self._buf += memoryview(data)[lo - offset:hi - offset]
        return list(self._walk())

    def jump(self, offset: int, reason: str) -> list[pa.RecordBatch]:
        """Continue the range at record boundary ``offset`` >= the stream offset (bytes between are gone).

        Used when ``failOnDataLoss=false`` and the broker no longer holds part of the range: the
        records already walked are emitted (yielded), a partial record is dropped, and ``reason`` is
        logged with the skipped range.
        """
        if offset < self._stream_offset:
            raise ValueError(f"cannot jump back from CommitLog offset {self._stream_offset} to {offset}")
        out = list(self._emit()) if self._starts else []
        log.warning("broker %s: skipping CommitLog bytes [%d, %d) (%s); %d bytes of a partial record dropped",
                    self.broker, self._stream_offset, offset, reason, len(self._buf) - self._pos)
        self._buf.clear()
        self._pos = 0
        self._stream_offset = offset
        self._buf_offset = offset
        self._skip_to = max(self._skip_to, offset)
        if offset >= self.end:
            self._done = True
        return out

    def finish(self) -> list[pa.RecordBatch]:
        """Return the last batch(es). Raises CommitLogFormatError if the range was not covered to its end."""
        out = list(self._emit()) if self._starts else []
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
        buf = self._buf
        fsize = self.mapped_file_size
        while True:
            at = self._buf_offset + self._pos
            if at >= self.end:
                self._done = True
                if self._starts:
                    yield from self._emit()
                return
            avail = len(buf) - self._pos
            if avail < 8:
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
                    return
                self._starts.append(self._pos)
                self._pos += total
                self._pending_bytes += total
                if len(self._starts) >= self.max_records or self._pending_bytes >= self.max_bytes:
                    yield from self._emit()
                    buf = self._buf
            elif magic == BLANK_MAGIC_CODE:
                if total != file_end - at:
                    raise _fail(f"END_FILE blank TOTALSIZE {total} does not reach the end of its mapped file "
                                f"({file_end - at} bytes left)", at, "TOTALSIZE", fsize)
                self.blanks_skipped += 1
                if self._starts:
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

    def _emit(self) -> Iterator[pa.RecordBatch]:
        first = self._starts[0]
        data = bytes(self._buf[first:self._pos])
        starts = np.asarray(self._starts, dtype=np.int64) - first
        base = self._buf_offset + first
        batches = build_record_batches(data, starts, base, broker=self.broker, mapped_file_size=self.mapped_file_size,
                                       decompress=self.decompress_body)
        del self._buf[:self._pos]
        self._buf_offset += self._pos
        self._pos = 0
        self.records_emitted += len(self._starts)
        self._starts = []
        self._pending_bytes = 0
        yield from batches


def decode_commitlog_range(chunks: Iterable[tuple[int, bytes]], start: int, end: int, mapped_file_size: int, *,
                           broker: str, **kwargs) -> Iterator[pa.RecordBatch]:
    """Decode ``[start, end)`` from ``(offset, bytes)`` chunks; see :class:`CommitLogArrowDecoder`."""
    return CommitLogArrowDecoder(start, end, mapped_file_size, broker=broker, **kwargs).decode_all(chunks)
