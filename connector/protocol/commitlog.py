"""RocketMQ 4.9.8 CommitLog record codec: pure functions from bytes to values and back.

Layout (spec §1.2; all integers big-endian), IPv4 hosts shown, each IPv6 host adds 12 bytes::

    0  TOTALSIZE int        28 PHYSICALOFFSET long   56 STORETIMESTAMP long   84 BODY int+N
    4  MAGICCODE int        36 SYSFLAG int           64 STOREHOSTADDRESS 8/20 .. TOPIC byte+T
    8  BODYCRC int          40 BORNTIMESTAMP long    72 RECONSUMETIMES int    .. PROPERTIES short+P
    12 QUEUEID int          48 BORNHOST 8/20         76 PREPARED TX OFFSET long
    16 FLAG int
    20 QUEUEOFFSET long

An END_FILE blank (spec §1.9) is ``TOTALSIZE = bytes to the end of the file`` followed by
``BLANK_MAGIC_CODE``; the rest of the blank is not meaningful. A ``TOTALSIZE`` of 0 with a magic of 0
marks the end of written data in a preallocated file.

Nothing here touches sockets or files: callers hand in a buffer (``bytes``, ``bytearray``, ``mmap`` or
``memoryview``) and an absolute CommitLog offset for its first byte.
"""

from __future__ import annotations

import base64
import ipaddress
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from connector.protocol.errors import CommitLogFormatError

# --- magic codes (spec §1.3) -----------------------------------------------------------------------
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH_BYTES = 8

# --- SYSFLAG bits (spec §1.4, MessageSysFlag) ------------------------------------------------------
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_LZ4_TYPE = 0x100
COMPRESSION_ZSTD_TYPE = 0x200
COMPRESSION_ZLIB_TYPE = 0x300
COMPRESSION_TYPE_COMPARATOR = 0x700

# --- properties (spec §1.5) ------------------------------------------------------------------------
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
KEY_SEPARATOR = " "

# --- fixed positions and sizes (spec §1.2) ---------------------------------------------------------
TOTALSIZE_POSITION = 0
MAGICCODE_POSITION = 4
BODYCRC_POSITION = 8
QUEUEID_POSITION = 12
FLAG_POSITION = 16
QUEUE_OFFSET_POSITION = 20
PHY_POS_POSITION = 28
SYSFLAG_POSITION = 36
BORNTIMESTAMP_POSITION = 40
BORNHOST_POSITION = 48
MIN_RECORD_SIZE_BYTES = 91  # IPv4/IPv4, empty body, empty topic, no properties
HOST_V6_EXTRA_BYTES = 12
TOPIC_MAX_LENGTH_BYTES = 127  # signed byte length field
PROPERTIES_MAX_LENGTH_BYTES = 32767  # signed short length field
#: Default bound of a decompressed body (``maxInflatedBodyBytes``): 16x RocketMQ's 4 MiB maxMessageSize, so
#: any body a producer could send (text compresses ~10x) fits, while a zip bomb stops far below a
#: process's memory (docs/source.md, "Bad records").
DEFAULT_MAX_INFLATED_BODY_BYTES = 64 * 1024 * 1024

_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE..BORNTIMESTAMP, 48 bytes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_PORT = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


def body_crc(body: Buffer) -> int:
    """BODYCRC of a stored body: CRC-32 (zlib/IEEE) masked with 0x7FFFFFFF (spec §1.6, UtilAll.crc32)."""
    return zlib.crc32(body) & 0x7FFFFFFF


def calc_msg_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int) -> int:
    """TOTALSIZE of a record in bytes: ``91 + body + topic + properties`` plus 12 per IPv6 host.

    Source: CommitLog.calMsgLength, RocketMQ 4.9.8 (spec §1.2).
    """
    size = MIN_RECORD_SIZE_BYTES + body_length + topic_length + properties_length
    if sys_flag & BORNHOST_V6_FLAG:
        size += HOST_V6_EXTRA_BYTES
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        size += HOST_V6_EXTRA_BYTES
    return size


# --- hosts -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class HostAddress:
    """A socket address as stored in BORNHOST / STOREHOSTADDRESS: raw IP bytes (4 or 16) and port."""

    ip: bytes
    port: int

    @classmethod
    def parse(cls, text: str) -> HostAddress:
        """Parse ``"1.2.3.4:10911"`` or ``"[::1]:10911"``. Raises ValueError on anything else."""
        if text.startswith("["):
            host, _, port = text[1:].partition("]:")
        else:
            host, _, port = text.rpartition(":")
        return cls(ipaddress.ip_address(host).packed, int(port))

    @property
    def is_v6(self) -> bool:
        return len(self.ip) == 16

    def ip_text(self) -> str:
        """The IP as Java's ``InetAddress.getHostAddress()`` prints it (IPv6: 8 groups, uncompressed)."""
        if len(self.ip) == 4:
            return ".".join(str(b) for b in self.ip)
        return ":".join(f"{int.from_bytes(self.ip[i:i + 2], 'big'):x}" for i in range(0, 16, 2))

    def __str__(self) -> str:
        return f"{self.ip_text()}:{self.port}"


# --- properties ------------------------------------------------------------------------------------
def iter_properties(text: str) -> Iterator[tuple[str, str]]:
    """The (name, value) pairs of a properties string in stored order, by RocketMQ 4.9.8's rules.

    Pairs are ``name\x01value`` joined by ``\x02``; a trailing ``\x02`` (4.9.0) is accepted; segments
    shorter than 3 characters, or whose separator is first or last, are skipped
    (MessageDecoder.string2messageProperties, spec §1.5). Duplicates are all yielded.
    """
    length = len(text)
    index = 0
    while index < length:
        end = text.find(PROPERTY_SEPARATOR, index)
        if end < 0:
            end = length
        if end - index >= 3:
            kv = text.find(NAME_VALUE_SEPARATOR, index)
            if index < kv < end - 1:
                yield text[index:kv], text[kv + 1:end]
        index = end + 1


def parse_properties(text: str) -> dict[str, str]:
    """Decode a properties string as RocketMQ 4.9.8 ``string2messageProperties`` does: a later duplicate
    name wins (see :func:`iter_properties` for the rules)."""
    return dict(iter_properties(text))


def encode_properties(props: Mapping[str, str | None]) -> str:
    """Encode properties as RocketMQ 4.9.1+ ``messageProperties2String`` does (no trailing separator).

    Entries whose value is None are skipped (spec §1.5).
    """
    return PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None
    )


# --- message ids -----------------------------------------------------------------------------------
def offset_msg_id(store_host: HostAddress, commit_log_offset: int) -> str:
    """Offset msgId: upper-case hex of store IP + int port + long offset (spec §1.8), 32 or 56 chars."""
    return (store_host.ip + _PORT.pack(store_host.port) + _I64.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[HostAddress, int]:
    """Inverse of :func:`offset_msg_id` (MessageDecoder.decodeMessageId): 32 chars means IPv4.

    Raises ValueError for text that is not hex of the right length.
    """
    raw = bytes.fromhex(msg_id)
    ip_len = 4 if len(msg_id) == 32 else 16
    if len(raw) != ip_len + 12:
        raise ValueError(f"msgId {msg_id!r} has {len(msg_id)} hex characters, expected 32 or 56")
    port = _PORT.unpack_from(raw, ip_len)[0]
    offset = _I64.unpack_from(raw, ip_len + 4)[0]
    return HostAddress(raw[:ip_len], port), offset


# --- records ---------------------------------------------------------------------------------------
def compression_type_name(sys_flag: int) -> str:
    """Name of the body compression of a COMPRESSED record: ZLIB (types 0 and 3), LZ4 or ZSTD (spec §1.4).

    Types 4..7 are ``UNKNOWN(n)``: the 4.9.8 client's CompressionType has no such value.
    """
    value = (sys_flag & COMPRESSION_TYPE_COMPARATOR) >> 8
    return _COMPRESSION_NAMES[value]


_COMPRESSION_NAMES = ("ZLIB", "LZ4", "ZSTD", "ZLIB", "UNKNOWN(4)", "UNKNOWN(5)", "UNKNOWN(6)", "UNKNOWN(7)")


class BodyDecodeError(ValueError):
    """A stored body that cannot be given back as the producer sent it (docs/source.md, "Bad records").

    Attributes:
        field: the record field at fault, ``BODY`` (does not decompress, unknown compression type, too
            large once decompressed) or ``BODYCRC`` (the stored bytes do not match their CRC).
        reason: what is wrong, one line without the field name.
    """

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def check_body_crc(body: Buffer, stored_crc: int) -> None:
    """Raise BodyDecodeError (field BODYCRC) unless ``stored_crc`` is the BODYCRC of the stored ``body``.

    BODYCRC is the CRC-32 (zlib/IEEE) of the body bytes as stored, i.e. after the client compressed
    them, masked to 31 bits (docs/source.md, "BODYCRC"); ``stored_crc`` is the field as a signed int32.
    """
    computed = body_crc(body)
    if computed != stored_crc:
        raise BodyDecodeError("BODYCRC", f"mismatch: stored 0x{stored_crc & 0xFFFFFFFF:08X}, computed "
                              f"0x{computed:08X} over the {len(body)} stored body bytes")


def body_too_large(kind: str, max_bytes: int) -> BodyDecodeError:
    """The BodyDecodeError (field BODY) of a ``kind`` (ZLIB, LZ4, ZSTD) body decompressing past ``max_bytes``."""
    return BodyDecodeError("BODY", f"{kind} body decompresses to more than maxInflatedBodyBytes ({max_bytes} bytes)")


def _inflate_zlib(body: Buffer, max_bytes: int | None, zlib_module=zlib) -> bytes:
    if max_bytes is None:
        try:
            return zlib_module.decompress(body)
        except zlib_module.error as exc:
            raise BodyDecodeError("BODY", f"ZLIB body does not inflate ({exc})") from None
    inflater = zlib_module.decompressobj()
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib_module.error as exc:
        raise BodyDecodeError("BODY", f"ZLIB body does not inflate ({exc})") from None
    if len(out) > max_bytes:
        raise body_too_large("ZLIB", max_bytes)
    if not inflater.eof:
        raise BodyDecodeError("BODY", "ZLIB body does not inflate (incomplete or truncated stream)")
    return out


def _decompress_lz4(body: Buffer, max_bytes: int | None) -> bytes:
    import lz4.frame

    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        out = decompressor.decompress(bytes(body), max_length=-1 if max_bytes is None else max_bytes + 1)
    except RuntimeError as exc:
        raise BodyDecodeError("BODY", f"LZ4 body is not an LZ4 frame ({exc})") from None
    if max_bytes is not None and len(out) > max_bytes:
        raise body_too_large("LZ4", max_bytes)
    if not decompressor.eof:
        raise BodyDecodeError("BODY", "LZ4 body is not an LZ4 frame (incomplete or truncated frame)")
    return out


def _decompress_zstd(body: Buffer, max_bytes: int | None) -> bytes:
    import zstandard

    data = bytes(body)
    dctx = zstandard.ZstdDecompressor()
    try:
        if max_bytes is not None:  # bounded first: a reader never holds more than it was asked for
            with dctx.stream_reader(data, read_across_frames=False) as reader:
                if len(reader.read(max_bytes + 1)) > max_bytes:
                    raise body_too_large("ZSTD", max_bytes)
        decompressor = dctx.decompressobj()
        out = decompressor.decompress(data)
    except zstandard.ZstdError as exc:
        raise BodyDecodeError("BODY", f"ZSTD body is not a zstd frame ({exc})") from None
    if not decompressor.eof:
        raise BodyDecodeError("BODY", "ZSTD body is not a zstd frame (incomplete or truncated frame)")
    return out


def inflate_body(body: Buffer, sys_flag: int, *, max_bytes: int | None = None, zlib_module=zlib) -> bytes:
    """The body as the producer sent it: decompressed when ``sys_flag & COMPRESSED_FLAG`` is set.

    The compression type is SYSFLAG bits 8..10 (docs/source.md, "Compressed bodies"): ZLIB (0 from
    producers before 4.9.4, or 3) is a zlib stream; LZ4 (1) one LZ4 frame; ZSTD (2) one zstd frame.
    Bytes after the end of the stream or frame are ignored.

    Args:
        body: the stored body bytes.
        sys_flag: the record's SYSFLAG.
        max_bytes: refuse bodies decompressing to more than this many bytes (None: no bound); the
            decompressor never produces more than ``max_bytes + 1`` bytes, so a zip bomb cannot grow memory.
        zlib_module: the zlib implementation (``zlib`` or the faster ``zlib_ng.zlib_ng``, same API).

    Raises BodyDecodeError (field BODY) for a body that does not decompress, an unknown compression
    type, or one past ``max_bytes``.
    """
    if not sys_flag & COMPRESSED_FLAG:
        return bytes(body)
    kind = _COMPRESSION_NAMES[(sys_flag & COMPRESSION_TYPE_COMPARATOR) >> 8]
    if kind == "ZLIB":
        return _inflate_zlib(body, max_bytes, zlib_module)
    if kind == "LZ4":
        return _decompress_lz4(body, max_bytes)
    if kind == "ZSTD":
        return _decompress_zstd(body, max_bytes)
    raise BodyDecodeError("BODY", f"unknown compression type {kind} (sysFlag 0x{sys_flag & 0xFFFFFFFF:X})")


def compress_body(body: bytes, compression: str = "ZLIB", level: int = 5) -> tuple[bytes, int]:
    """``(stored bytes, SYSFLAG bits)`` of ``body`` compressed as the 4.9.8 client does (docs/source.md,
    "Compressed bodies"): COMPRESSED_FLAG plus the type bits; ZLIB a zlib stream at ``level``, LZ4 one
    LZ4 frame (4 MiB blocks, independent, no checksums, no content size), ZSTD one zstd frame at
    ``level`` (no content size, no checksum). Raises ValueError for another ``compression``."""
    kind = compression.upper()
    if kind == "ZLIB":
        return zlib.compress(body, level), COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE
    if kind == "LZ4":
        import lz4.frame

        # the streaming compressor keeps the 4 MiB block size in the header (one-shot compress() shrinks it)
        compressor = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                                                  content_checksum=False, auto_flush=False)
        return (compressor.begin() + compressor.compress(body) + compressor.flush(),
                COMPRESSED_FLAG | COMPRESSION_LZ4_TYPE)
    if kind == "ZSTD":
        import zstandard

        compressor = zstandard.ZstdCompressor(level=level, write_content_size=False).compressobj()
        return compressor.compress(body) + compressor.flush(), COMPRESSED_FLAG | COMPRESSION_ZSTD_TYPE
    raise ValueError(f"compression {compression!r} is not ZLIB, LZ4 or ZSTD")


def decompress_body(body: Buffer, sys_flag: int, *, offset: int = -1, file: str | None = None,
                    max_bytes: int | None = None) -> bytes:
    """:func:`inflate_body`, raising CommitLogFormatError (field BODY, offset and file named) instead."""
    try:
        return inflate_body(body, sys_flag, max_bytes=max_bytes)
    except BodyDecodeError as exc:
        raise CommitLogFormatError(exc.reason, offset=offset, field=exc.field, file=file) from None


@dataclass(slots=True)
class MessageRecord:
    """One stored message (RocketMQ MessageExt as read from the CommitLog, spec §1.2).

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
    """An END_FILE blank: ``size`` bytes from ``commit_log_offset`` to the end of its file (spec §1.9)."""

    commit_log_offset: int
    size: int


@dataclass(frozen=True, slots=True)
class EndOfData:
    """TOTALSIZE 0 and MAGICCODE 0: nothing has been written at this offset yet."""

    commit_log_offset: int


Record = MessageRecord | BlankRecord | EndOfData


def _need(buf: Buffer, pos: int, size: int, what: str, offset: int, file: str | None) -> None:
    if pos + size > len(buf):
        raise CommitLogFormatError(
            f"truncated record: {what} needs {size} bytes, {max(len(buf) - pos, 0)} left",
            offset=offset, field=what, file=file)


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where the variable parts of one validated record lie in its buffer (positions are buffer indexes)."""

    total_size: int
    sys_flag: int
    born_host_pos: int
    store_ts_pos: int
    body_pos: int
    body_len: int
    topic: str
    props_pos: int
    props_len: int


def _check_head(buf: Buffer, pos: int, offset: int, file: str | None, file_end: int | None
                ) -> BlankRecord | EndOfData | int:
    """Validate TOTALSIZE and MAGICCODE; return the blank/end marker, or TOTALSIZE of a message."""
    end_limit = len(buf) if file_end is None else file_end
    _need(buf, pos, 8, "TOTALSIZE", offset, file)
    total_size = _I32.unpack_from(buf, pos)[0]
    magic = _I32.unpack_from(buf, pos + 4)[0]
    if magic == BLANK_MAGIC_CODE:
        if total_size < END_FILE_MIN_BLANK_LENGTH_BYTES or pos + total_size > end_limit:
            raise CommitLogFormatError(
                f"END_FILE blank TOTALSIZE {total_size} does not reach the end of the file "
                f"({end_limit - pos} bytes left)", offset=offset, field="TOTALSIZE", file=file)
        return BlankRecord(offset, total_size)
    if magic != MESSAGE_MAGIC_CODE:
        if total_size == 0 and magic == 0:
            return EndOfData(offset)
        raise CommitLogFormatError(f"bad MAGICCODE 0x{magic & 0xFFFFFFFF:08X}", offset=offset, field="MAGICCODE",
                                   file=file)
    if total_size < MIN_RECORD_SIZE_BYTES:
        raise CommitLogFormatError(f"TOTALSIZE {total_size} is below the minimum {MIN_RECORD_SIZE_BYTES}",
                                   offset=offset, field="TOTALSIZE", file=file)
    if file_end is not None and pos + total_size > file_end:
        raise CommitLogFormatError(
            f"TOTALSIZE {total_size} reaches past the end of the file ({file_end - pos} bytes left)",
            offset=offset, field="TOTALSIZE", file=file)
    _need(buf, pos, total_size, "TOTALSIZE", offset, file)
    return total_size


def _layout(buf: Buffer, pos: int, total_size: int, offset: int, file: str | None) -> _Layout:
    """Walk the length fields of a message whose TOTALSIZE is valid; each must fit in TOTALSIZE."""
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    born_host_pos = pos + BORNHOST_POSITION
    store_ts_pos = born_host_pos + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
    p = store_ts_pos + 8 + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8) + 12
    end = pos + total_size
    if p + 4 + 1 + 2 > end:  # IPv6 hosts (sysFlag bits) need 12 more bytes each
        raise CommitLogFormatError(
            f"TOTALSIZE {total_size} is too small for the fixed fields of sysFlag 0x{sys_flag & 0xFFFFFFFF:X} "
            f"({p + 7 - pos} bytes)", offset=offset, field="TOTALSIZE", file=file)
    body_len = _I32.unpack_from(buf, p)[0]
    p += 4
    if body_len < 0 or p + body_len + 3 > end:
        raise CommitLogFormatError(f"BODY length {body_len} does not fit in TOTALSIZE {total_size}",
                                   offset=offset, field="BODY", file=file)
    body_pos = p
    p += body_len
    topic_len = _I8.unpack_from(buf, p)[0]
    p += 1
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
    return _Layout(total_size, sys_flag, born_host_pos, store_ts_pos, body_pos, body_len, topic, p, props_len)


def _host(buf: Buffer, p: int, v6: bool) -> HostAddress:
    ip_len = 16 if v6 else 4
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
    store_host_pos = lay.store_ts_pos + 8
    p = store_host_pos + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8)
    body = bytes(buf[lay.body_pos:lay.body_pos + lay.body_len])
    if check_crc and body_crc(body) != crc:
        raise CommitLogFormatError(f"BODYCRC mismatch: stored {crc}, computed {body_crc(body)}",
                                   offset=offset, field="BODYCRC", file=file)
    return MessageRecord(
        commit_log_offset=offset, store_size=lay.total_size, body_crc=crc, queue_id=queue_id, flag=flag,
        queue_offset=queue_offset, sys_flag=sys_flag, born_timestamp=born_ts,
        born_host=_host(buf, lay.born_host_pos, bool(sys_flag & BORNHOST_V6_FLAG)),
        store_timestamp=_I64.unpack_from(buf, lay.store_ts_pos)[0],
        store_host=_host(buf, store_host_pos, bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)),
        reconsume_times=_I32.unpack_from(buf, p)[0], prepared_transaction_offset=_I64.unpack_from(buf, p + 4)[0],
        body=body, topic=lay.topic, properties_raw=bytes(buf[lay.props_pos:lay.props_pos + lay.props_len]),
        physical_offset=physical_offset)


@dataclass(frozen=True, slots=True)
class DispatchInfo:
    """The fields a ConsumeQueue dispatcher needs from one record, read without copying the body.

    RocketMQ 4.9.8 ``CommitLog.checkMessageAndReturnSize(readBody=false)`` → ``DispatchRequest`` (spec §5.2).
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
                        _I64.unpack_from(buf, lay.store_ts_pos)[0], props_raw)


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
            _need(buf, pos, 8, "TOTALSIZE", base_offset + pos, file)
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
                  body_crc_value: int | None = None) -> bytes:
    """Encode one record byte for byte as CommitLog.DefaultAppendMessageCallback writes it (spec §1.2).

    The V6 bits of ``sys_flag`` are set from the host address lengths, as the broker does.
    ``properties`` may be a mapping (encoded without trailing separator), a str, or raw bytes.

    Raises ValueError when the topic exceeds 127 bytes or the properties 32767 bytes.
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
    if len(topic_b) > TOPIC_MAX_LENGTH_BYTES:
        raise ValueError(f"topic is {len(topic_b)} bytes, RocketMQ 4.9 allows {TOPIC_MAX_LENGTH_BYTES}")
    if isinstance(properties, bytes):
        props_b = properties
    elif isinstance(properties, str):
        props_b = properties.encode("utf-8")
    else:
        props_b = encode_properties(properties).encode("utf-8")
    if len(props_b) > PROPERTIES_MAX_LENGTH_BYTES:
        raise ValueError(f"properties are {len(props_b)} bytes, RocketMQ allows {PROPERTIES_MAX_LENGTH_BYTES}")
    total = calc_msg_length(sys_flag, len(body), len(topic_b), len(props_b))
    crc = body_crc(body) if body_crc_value is None else body_crc_value
    parts = [
        _HEAD.pack(total, MESSAGE_MAGIC_CODE, crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
                   born_timestamp),
        born_host.ip, _PORT.pack(born_host.port),
        _I64.pack(store_timestamp),
        store_host.ip, _PORT.pack(store_host.port),
        _I32.pack(reconsume_times), _I64.pack(prepared_transaction_offset),
        _I32.pack(len(body)), body,
        _I8.pack(len(topic_b)), topic_b,
        _I16.pack(len(props_b)), props_b,
    ]
    out = b"".join(parts)
    assert len(out) == total
    return out


def encode_blank(size: int) -> bytes:
    """The 8-byte END_FILE header of a blank covering ``size`` bytes (spec §1.9). The tail is not written."""
    if size < END_FILE_MIN_BLANK_LENGTH_BYTES:
        raise ValueError(f"a blank needs at least {END_FILE_MIN_BLANK_LENGTH_BYTES} bytes, got {size}")
    return _I32.pack(size) + _I32.pack(BLANK_MAGIC_CODE)


def file_name(offset: int) -> str:
    """CommitLog/ConsumeQueue file name for a start offset: 20-digit zero-padded decimal (spec §1.1)."""
    return f"{offset:020d}"


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


# --- client batch body (SEND_BATCH_MESSAGE, spec §1.10) --------------------------------------------
_BATCH_HEAD = struct.Struct(">iiii")  # TOTALSIZE, MAGICCODE (0), BODYCRC (0), FLAG


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One inner message of a client batch body: flag, body and properties string."""

    flag: int
    body: bytes
    properties: str


def encode_batch_body(entries: list[BatchEntry]) -> bytes:
    """Encode a batch as the 4.9.8 client's ``MessageDecoder.encodeMessages`` (spec §1.10)."""
    out = []
    for e in entries:
        props = e.properties.encode("utf-8")
        size = 4 + 4 + 4 + 4 + 4 + len(e.body) + 2 + len(props)
        out += [_BATCH_HEAD.pack(size, 0, 0, e.flag), _I32.pack(len(e.body)), e.body, _I16.pack(len(props)), props]
    return b"".join(out)


def decode_batch_body(body: Buffer) -> list[BatchEntry]:
    """Decode a client batch body into its inner messages.

    Raises CommitLogFormatError (offset = position in the body, field named) on truncated or
    inconsistent entries.
    """
    entries: list[BatchEntry] = []
    pos = 0
    n = len(body)
    while pos < n:
        _need(body, pos, 20, "TOTALSIZE", pos, "batch body")
        size, _magic, _crc, flag = _BATCH_HEAD.unpack_from(body, pos)
        body_len = _I32.unpack_from(body, pos + 16)[0]
        if body_len < 0 or pos + 20 + body_len + 2 > n:
            raise CommitLogFormatError(f"batch BODY length {body_len} runs past the batch", offset=pos, field="BODY",
                                       file="batch body")
        b = bytes(body[pos + 20:pos + 20 + body_len])
        p = pos + 20 + body_len
        props_len = _I16.unpack_from(body, p)[0]
        if props_len < 0 or p + 2 + props_len > n or size != 22 + body_len + props_len:
            raise CommitLogFormatError(f"batch PROPERTIES length {props_len} inconsistent with TOTALSIZE {size}",
                                       offset=pos, field="PROPERTIES", file="batch body")
        props = bytes(body[p + 2:p + 2 + props_len]).decode("utf-8")
        entries.append(BatchEntry(flag, b, props))
        pos = p + 2 + props_len
    return entries
