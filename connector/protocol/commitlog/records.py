"""RocketMQ 4.9.8 CommitLog records: pure functions from bytes to values and back (layout: :mod:`.layout`).

Nothing here touches sockets or files: callers hand in a buffer (``bytes``, ``bytearray``, ``mmap`` or
``memoryview``) and an absolute CommitLog offset for its first byte.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from connector.errors import CommitLogFormatError
from connector.protocol.commitlog.bodies import Buffer, body_crc, decompress_body
from connector.protocol.commitlog.hosts import HostAddress, offset_msg_id
from connector.protocol.commitlog.layout import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    DEFAULT_MAX_INFLATED_BODY_BYTES,
    END_FILE_MIN_BLANK_LENGTH_BYTES,
    MAGICCODE_POSITION,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PHY_POS_POSITION,
    PROPERTIES_MAX_LENGTH_BYTES,
    QUEUE_OFFSET_POSITION,
    QUEUEID_POSITION,
    RECORD_FIELDS,
    STOREHOSTADDRESS_V6_FLAG,
    SYSFLAG_POSITION,
    TOPIC_MAX_LENGTH_BYTES,
    TOTALSIZE_POSITION,
    TRANSACTION_TYPE_MASK,
    calc_msg_length,
    field_positions,
    host_width,
    min_record_size,
)
from connector.protocol.commitlog.properties import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    encode_properties,
    parse_properties,
)

_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}
#: TOTALSIZE..BORNTIMESTAMP (the fields before the first host), from the layout table.
_HEAD = struct.Struct(">" + "".join(_INT_FORMATS[f.width] for f in RECORD_FIELDS[:RECORD_FIELDS.index(
    next(f for f in RECORD_FIELDS if f.v6_flag))]))
#: TOTALSIZE and MAGICCODE, the first two fields.
_HEAD_PEEK = struct.Struct(">ii")
#: bytes :func:`read_size_and_magic` reads (TOTALSIZE and MAGICCODE)
SIZE_AND_MAGIC_BYTES = TOTALSIZE_POSITION + _HEAD_PEEK.size
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_PORT = struct.Struct(">i")


@dataclass(slots=True)
class MessageRecord:
    """One stored message (RocketMQ MessageExt as read from the CommitLog, docs/protocol.md §1.2).

    ``body`` is the body as stored (compressed when ``sys_flag & COMPRESSED_FLAG``);
    ``properties_raw`` the stored properties bytes (UTF-8). Timestamps are epoch milliseconds.
    """

    commit_log_offset: int
    store_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: HostAddress
    store_timestamp: int
    store_host: HostAddress
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: bytes
    magic: int = MESSAGE_MAGIC_CODE
    physical_offset: int | None = None  # the PHYSICALOFFSET field as stored (normally == commit_log_offset)
    _properties: dict[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def properties(self) -> dict[str, str]:
        """Properties decoded as RocketMQ does (:func:`parse_properties`)."""
        if self._properties is None:
            self._properties = parse_properties(self.properties_raw.decode("utf-8", "replace"))
        return self._properties

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_TYPE_MASK

    def decompressed_body(self, max_bytes: int | None = DEFAULT_MAX_INFLATED_BODY_BYTES) -> bytes:
        """The body as the producer sent it (:func:`decompress_body`, at most ``max_bytes`` bytes)."""
        return decompress_body(self.body, self.sys_flag, offset=self.commit_log_offset, max_bytes=max_bytes)


@dataclass(frozen=True, slots=True)
class BlankRecord:
    """An END_FILE blank: ``size`` bytes from ``commit_log_offset`` to the end of its file (docs/protocol.md §1.9)."""

    commit_log_offset: int
    size: int


@dataclass(frozen=True, slots=True)
class EndOfData:
    """TOTALSIZE 0 and MAGICCODE 0: nothing has been written at this offset yet."""

    commit_log_offset: int


Record = MessageRecord | BlankRecord | EndOfData


def check_available(buf: Buffer, pos: int, size: int, what: str, offset: int, file: str | None) -> None:
    """Raise CommitLogFormatError (field ``what``, ``offset`` and ``file`` named) unless ``buf`` holds ``size``
    bytes from ``pos``."""
    if pos + size > len(buf):
        raise CommitLogFormatError(
            f"truncated record: {what} needs {size} bytes, {max(len(buf) - pos, 0)} left",
            offset=offset, field=what, file=file)


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where the fields of one validated record lie in its buffer (positions are buffer indexes)."""

    total_size: int
    sys_flag: int
    at: Mapping[str, int]  # field positions relative to the record start (layout.field_positions)
    body_pos: int
    body_len: int
    topic: str
    props_pos: int
    props_len: int
    v2: bool = False  # MESSAGE_MAGIC_CODE_V2: 2-byte TOPIC length prefix


def _check_head(buf: Buffer, pos: int, offset: int, file: str | None, file_end: int | None
                ) -> BlankRecord | EndOfData | int:
    """Validate TOTALSIZE and MAGICCODE; return the blank/end marker, or TOTALSIZE of a message."""
    end_limit = len(buf) if file_end is None else file_end
    check_available(buf, pos, 8, "TOTALSIZE", offset, file)
    total_size = _I32.unpack_from(buf, pos + TOTALSIZE_POSITION)[0]
    magic = _I32.unpack_from(buf, pos + MAGICCODE_POSITION)[0]
    if magic == BLANK_MAGIC_CODE:
        if total_size < END_FILE_MIN_BLANK_LENGTH_BYTES or pos + total_size > end_limit:
            raise CommitLogFormatError(
                f"END_FILE blank TOTALSIZE {total_size} does not reach the end of the file "
                f"({end_limit - pos} bytes left)", offset=offset, field="TOTALSIZE", file=file)
        return BlankRecord(offset, total_size)
    if magic != MESSAGE_MAGIC_CODE and magic != MESSAGE_MAGIC_CODE_V2:
        if total_size == 0 and magic == 0:
            return EndOfData(offset)
        raise CommitLogFormatError(f"bad MAGICCODE 0x{magic & 0xFFFFFFFF:08X}", offset=offset, field="MAGICCODE",
                                   file=file)
    if total_size < min_record_size(magic):
        raise CommitLogFormatError(f"TOTALSIZE {total_size} is below the minimum {min_record_size(magic)}",
                                   offset=offset, field="TOTALSIZE", file=file)
    if file_end is not None and pos + total_size > file_end:
        raise CommitLogFormatError(
            f"TOTALSIZE {total_size} reaches past the end of the file ({file_end - pos} bytes left)",
            offset=offset, field="TOTALSIZE", file=file)
    check_available(buf, pos, total_size, "TOTALSIZE", offset, file)
    return total_size


_MIN_VARIABLE_BYTES = sum(f.width for f in RECORD_FIELDS if f.variable)  # the three length prefixes


def _layout(buf: Buffer, pos: int, total_size: int, offset: int, file: str | None) -> _Layout:
    """Walk the length fields of a message whose TOTALSIZE and MAGICCODE are valid; each must fit in
    TOTALSIZE. A V2 record (MESSAGE_MAGIC_CODE_V2) has a 2-byte TOPIC length prefix (docs/protocol.md §8)."""
    v2 = _I32.unpack_from(buf, pos + MAGICCODE_POSITION)[0] == MESSAGE_MAGIC_CODE_V2
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    at = field_positions(sys_flag)
    p = pos + at["BODY"]
    end = pos + total_size
    if p + _MIN_VARIABLE_BYTES + v2 > end:  # IPv6 hosts (sysFlag bits) need 12 more bytes each
        raise CommitLogFormatError(
            f"TOTALSIZE {total_size} is too small for the fixed fields of sysFlag 0x{sys_flag & 0xFFFFFFFF:X} "
            f"({p + _MIN_VARIABLE_BYTES + v2 - pos} bytes)", offset=offset, field="TOTALSIZE", file=file)
    body_len = _I32.unpack_from(buf, p)[0]
    p += 4
    if body_len < 0 or p + body_len + 3 + v2 > end:
        raise CommitLogFormatError(f"BODY length {body_len} does not fit in TOTALSIZE {total_size}",
                                   offset=offset, field="BODY", file=file)
    body_pos = p
    p += body_len
    topic_len = (_I16 if v2 else _I8).unpack_from(buf, p)[0]
    p += 2 if v2 else 1
    if topic_len < 0 or p + topic_len + 2 > end:
        raise CommitLogFormatError(f"TOPIC length {topic_len} does not fit in TOTALSIZE {total_size}",
                                   offset=offset, field="TOPIC", file=file)
    try:
        topic = bytes(buf[p:p + topic_len]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommitLogFormatError(f"TOPIC is not UTF-8 ({exc})", offset=offset, field="TOPIC", file=file) from exc
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        raise CommitLogFormatError(
            f"PROPERTIES length {props_len} disagrees with TOTALSIZE {total_size} "
            f"(expected {end - p})", offset=offset, field="PROPERTIES", file=file)
    return _Layout(total_size, sys_flag, at, body_pos, body_len, topic, p, props_len, v2)


def _host(buf: Buffer, p: int, v6: bool) -> HostAddress:
    ip_len = host_width(v6) - _PORT.size
    return HostAddress(bytes(buf[p:p + ip_len]), _PORT.unpack_from(buf, p + ip_len)[0])


def decode_record(buf: Buffer, pos: int = 0, *, base_offset: int = 0, check_crc: bool = False,
                  file: str | None = None, file_end: int | None = None) -> Record:
    """Decode the record that starts at ``buf[pos]``.

    Args:
        buf: bytes holding the record; ``buf[0]`` is at CommitLog offset ``base_offset``.
        pos: position of the record in ``buf``.
        check_crc: verify BODYCRC (as recovery does with ``checkCRCOnRecover``).
        file: CommitLog file name, used in error messages only.
        file_end: position in ``buf`` where the mapped file ends; a TOTALSIZE reaching past it is an
            error (a record never spans files). Defaults to ``len(buf)``.

    Returns a MessageRecord, a BlankRecord, or EndOfData (TOTALSIZE = MAGICCODE = 0).

    Raises CommitLogFormatError naming the offset and field: bad MAGICCODE, TOTALSIZE too small or past
    the end of the file, a length field that disagrees with TOTALSIZE, truncated bytes, BODYCRC mismatch.
    """
    offset = base_offset + pos
    head = _check_head(buf, pos, offset, file, file_end)
    if not isinstance(head, int):
        return head
    lay = _layout(buf, pos, head, offset, file)
    (_, _, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts) = _HEAD.unpack_from(buf, pos)
    at = lay.at
    body = bytes(buf[lay.body_pos:lay.body_pos + lay.body_len])
    if check_crc and body_crc(body) != crc:
        raise CommitLogFormatError(f"BODYCRC mismatch: stored {crc}, computed {body_crc(body)}",
                                   offset=offset, field="BODYCRC", file=file)
    return MessageRecord(
        commit_log_offset=offset, store_size=lay.total_size, body_crc=crc, queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, sys_flag=sys_flag, born_timestamp=born_ts,
        born_host=_host(buf, pos + at["BORNHOST"], bool(sys_flag & BORNHOST_V6_FLAG)),
        store_timestamp=_I64.unpack_from(buf, pos + at["STORETIMESTAMP"])[0],
        store_host=_host(buf, pos + at["STOREHOSTADDRESS"], bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)),
        reconsume_times=_I32.unpack_from(buf, pos + at["RECONSUMETIMES"])[0],
        prepared_transaction_offset=_I64.unpack_from(buf, pos + at["PREPAREDTRANSACTIONOFFSET"])[0],
        body=body, topic=lay.topic, properties_raw=bytes(buf[lay.props_pos:lay.props_pos + lay.props_len]),
        physical_offset=physical_offset, magic=MESSAGE_MAGIC_CODE_V2 if lay.v2 else MESSAGE_MAGIC_CODE)


@dataclass(frozen=True, slots=True)
class DispatchInfo:
    """The fields a ConsumeQueue dispatcher needs from one record, read without copying the body.

    RocketMQ 4.9.8 ``CommitLog.checkMessageAndReturnSize(readBody=false)`` → ``DispatchRequest``
    (docs/protocol.md §5.2).
    Offsets in bytes, ``store_timestamp`` in epoch ms, ``properties_raw`` the stored UTF-8 bytes.
    """

    commit_log_offset: int
    store_size: int
    topic: str
    queue_id: int
    queue_offset: int
    sys_flag: int
    store_timestamp: int
    properties_raw: bytes

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_TYPE_MASK


def decode_dispatch_info(buf: Buffer, pos: int = 0, *, base_offset: int = 0, file: str | None = None,
                         file_end: int | None = None) -> DispatchInfo | BlankRecord | EndOfData:
    """Decode the record at ``buf[pos]`` like :func:`decode_record` but without the body (no CRC check).

    Returns DispatchInfo, BlankRecord or EndOfData. Raises CommitLogFormatError (offset and field named)
    exactly where :func:`decode_record` would, apart from BODYCRC.
    """
    offset = base_offset + pos
    head = _check_head(buf, pos, offset, file, file_end)
    if not isinstance(head, int):
        return head
    lay = _layout(buf, pos, head, offset, file)
    queue_id = _I32.unpack_from(buf, pos + QUEUEID_POSITION)[0]
    queue_offset = _I64.unpack_from(buf, pos + QUEUE_OFFSET_POSITION)[0]
    props_raw = bytes(buf[lay.props_pos:lay.props_pos + lay.props_len])
    return DispatchInfo(offset, lay.total_size, lay.topic, queue_id, queue_offset, lay.sys_flag,
                        _I64.unpack_from(buf, pos + lay.at["STORETIMESTAMP"])[0], props_raw)


class RecordHead(NamedTuple):
    """The fixed-position header fields of whatever starts at a CommitLog position (:func:`read_record_head`).

    ``physical_offset`` (PHYSICALOFFSET) and ``store_timestamp`` (STORETIMESTAMP, epoch ms) are None when the
    buffer ends before them or ``magic`` is not a MESSAGE magic code (docs/protocol.md §1.2, §1.3).
    """

    total_size: int
    magic: int
    physical_offset: int | None
    store_timestamp: int | None

    @property
    def is_message(self) -> bool:
        """True when ``magic`` is MESSAGE_MAGIC_CODE or MESSAGE_MAGIC_CODE_V2."""
        return self.magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)


def read_size_and_magic(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """TOTALSIZE (bytes) and MAGICCODE of whatever starts at ``buf[pos]`` (docs/protocol.md §1.2), unchecked: the
    cheapest peek, for a walk that decides itself what the values mean. Needs :data:`SIZE_AND_MAGIC_BYTES` bytes
    from ``pos``, else raises struct.error."""
    return _HEAD_PEEK.unpack_from(buf, pos + TOTALSIZE_POSITION)


def read_record_head(buf: Buffer, pos: int = 0, *, end: int | None = None) -> RecordHead | None:
    """TOTALSIZE, MAGICCODE and, for a message, PHYSICALOFFSET and STORETIMESTAMP of the record at ``buf[pos]``,
    read at the positions of docs/protocol.md §1.2 without validating anything (a peek: callers decide what
    a bad value means). Bytes at or past ``end`` (default ``len(buf)``, e.g. a file's write position) are not
    read. None when fewer than 8 bytes are left. Never raises for short or foreign bytes."""
    left = (len(buf) if end is None else end) - pos
    if left < _HEAD_PEEK.size:
        return None
    total_size, magic = _HEAD_PEEK.unpack_from(buf, pos + TOTALSIZE_POSITION)
    physical_offset = store_timestamp = None
    if magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        if left >= PHY_POS_POSITION + _I64.size:
            physical_offset = _I64.unpack_from(buf, pos + PHY_POS_POSITION)[0]
        if left >= SYSFLAG_POSITION + _I32.size:
            at = field_positions(_I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0])["STORETIMESTAMP"]
            if left >= at + _I64.size:
                store_timestamp = _I64.unpack_from(buf, pos + at)[0]
    return RecordHead(total_size, magic, physical_offset, store_timestamp)


def iter_records(buf: Buffer, *, base_offset: int, check_crc: bool = False, file: str | None = None,
                 file_end: int | None = None) -> Iterator[Record]:
    """Walk the records of one mapped file's bytes (``buf[0]`` at ``base_offset``).

    Yields MessageRecord and BlankRecord items in order; stops after a blank (the rest of the file is
    the blank's tail), at EndOfData (which it yields), or exactly at the end of ``buf``.
    Raises CommitLogFormatError as :func:`decode_record` does.
    """
    pos = 0
    n = len(buf)
    while pos < n:
        if n - pos < 8:
            if not any(buf[pos:n]):
                yield EndOfData(base_offset + pos)
                return
            check_available(buf, pos, 8, "TOTALSIZE", base_offset + pos, file)
        rec = decode_record(buf, pos, base_offset=base_offset, check_crc=check_crc, file=file, file_end=file_end)
        yield rec
        if isinstance(rec, EndOfData):
            return
        if isinstance(rec, BlankRecord):
            return
        pos += rec.store_size


def encode_record(*, commit_log_offset: int, topic: str, body: bytes, queue_id: int = 0, flag: int = 0,
                  queue_offset: int = 0, sys_flag: int = 0, born_timestamp: int = 0,
                  born_host: HostAddress = HostAddress(b"\x7f\x00\x00\x01", 0),
                  store_timestamp: int = 0, store_host: HostAddress = HostAddress(b"\x7f\x00\x00\x01", 10911),
                  reconsume_times: int = 0, prepared_transaction_offset: int = 0,
                  properties: Mapping[str, str | None] | str | bytes = b"",
                  body_crc_value: int | None = None, magic: int = MESSAGE_MAGIC_CODE) -> bytes:
    """Encode one record byte for byte as CommitLog.DefaultAppendMessageCallback writes it (docs/protocol.md §1.2).

    The V6 bits of ``sys_flag`` are set from the host address lengths, as the broker does.
    ``properties`` may be a mapping (encoded without trailing separator), a str, or raw bytes.
    ``magic`` MESSAGE_MAGIC_CODE_V2 writes 5.x's MessageVersion V2 record: a 2-byte TOPIC length prefix
    (docs/protocol.md §8).

    Raises ValueError when the topic exceeds 127 bytes (V1) or 32767 bytes (V2), or the properties 32767 bytes.
    """
    if born_host.is_v6:
        sys_flag |= BORNHOST_V6_FLAG
    else:
        sys_flag &= ~BORNHOST_V6_FLAG
    if store_host.is_v6:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    else:
        sys_flag &= ~STOREHOSTADDRESS_V6_FLAG
    topic_b = topic.encode("utf-8")
    v2 = magic == MESSAGE_MAGIC_CODE_V2
    if len(topic_b) > (PROPERTIES_MAX_LENGTH_BYTES if v2 else TOPIC_MAX_LENGTH_BYTES):
        raise ValueError(f"topic is {len(topic_b)} bytes, too long for a "
                         f"{'V2' if v2 else f'V1 record (RocketMQ 4.9 allows {TOPIC_MAX_LENGTH_BYTES})'}")
    if isinstance(properties, bytes):
        props_b = properties
    elif isinstance(properties, str):
        props_b = properties.encode("utf-8")
    else:
        props_b = encode_properties(properties).encode("utf-8")
    if len(props_b) > PROPERTIES_MAX_LENGTH_BYTES:
        raise ValueError(f"properties are {len(props_b)} bytes, RocketMQ allows {PROPERTIES_MAX_LENGTH_BYTES}")
    total = calc_msg_length(sys_flag, len(body), len(topic_b), len(props_b), magic=magic)
    crc = body_crc(body) if body_crc_value is None else body_crc_value
    parts = [
        _HEAD.pack(total, magic, crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
                   born_timestamp),
        born_host.ip, _PORT.pack(born_host.port),
        _I64.pack(store_timestamp),
        store_host.ip, _PORT.pack(store_host.port),
        _I32.pack(reconsume_times), _I64.pack(prepared_transaction_offset),
        _I32.pack(len(body)), body,
        (_I16 if v2 else _I8).pack(len(topic_b)), topic_b,
        _I16.pack(len(props_b)), props_b,
    ]
    out = b"".join(parts)
    assert len(out) == total
    return out


def encode_blank(size: int) -> bytes:
    """The 8-byte END_FILE header of a blank covering ``size`` bytes (docs/protocol.md §1.9); the tail is not
    written."""
    if size < END_FILE_MIN_BLANK_LENGTH_BYTES:
        raise ValueError(f"a blank needs at least {END_FILE_MIN_BLANK_LENGTH_BYTES} bytes, got {size}")
    return _I32.pack(size) + _I32.pack(BLANK_MAGIC_CODE)


def record_to_json(rec: MessageRecord, *, file: str | None = None, file_start: int | None = None) -> dict:
    """The record as one line of the fixtures' ``messages.jsonl``, in the same key order.

    camelCase MessageExt names, timestamps as epoch ms, hosts as ``ip:port``, properties sorted by key,
    bodies base64 (as stored and decompressed). ``file_start`` is the CommitLog offset of the file's first
    byte (``filePosition`` = offset - file_start; None when unknown).

    Raises CommitLogFormatError when a compressed body does not decompress or decompresses past
    DEFAULT_MAX_INFLATED_BODY_BYTES.
    """
    props = rec.properties
    return {
        "file": file,
        "filePosition": None if file_start is None else rec.commit_log_offset - file_start,
        "commitLogOffset": rec.commit_log_offset,
        "storeSize": rec.store_size,
        "magic": rec.magic,
        "bodyCRC": rec.body_crc,
        "queueId": rec.queue_id,
        "flag": rec.flag,
        "queueOffset": rec.queue_offset,
        "sysFlag": rec.sys_flag,
        "bornTimestamp": rec.born_timestamp,
        "bornHost": str(rec.born_host),
        "storeTimestamp": rec.store_timestamp,
        "storeHost": str(rec.store_host),
        "reconsumeTimes": rec.reconsume_times,
        "preparedTransactionOffset": rec.prepared_transaction_offset,
        "topic": rec.topic,
        "properties": dict(sorted(props.items())),
        "propertiesRawBase64": base64.b64encode(rec.properties_raw).decode("ascii"),
        "tags": props.get(PROPERTY_TAGS),
        "keys": props.get(PROPERTY_KEYS),
        "msgId": rec.msg_id,
        "uniqKey": props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        "bodyLength": len(rec.body),
        "bodyBase64": base64.b64encode(rec.body).decode("ascii"),
        "bodyDecompressedBase64": base64.b64encode(rec.decompressed_body()).decode("ascii"),
    }
