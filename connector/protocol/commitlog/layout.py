"""RocketMQ 4.9.8 CommitLog record layout: magic codes, SYSFLAG bits and :data:`RECORD_FIELDS`, the one table of
record fields every position, width and size in the project derives from (the scalar codec
:mod:`connector.protocol.commitlog.records`, the vectorised decoder :mod:`connector.decode.locate` and, checked by
a test, the native kernel's constants). The layout, with its source in ``CommitLog.DefaultAppendMessageCallback``:
docs/protocol.md §1.2–§1.4; END_FILE blanks and the zeros that end written data: §1.9.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

# --- magic codes (docs/protocol.md §1.3) -----------------------------------------------------------------------
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
#: RocketMQ 5.x MessageVersion V2 (docs/protocol.md §8): the same record with a 2-byte TOPIC length prefix.
#: A 5.x broker writes it for a topic of more than 127 characters (autoMessageVersionOnTopicLen).
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH_BYTES = 8

# --- SYSFLAG bits (docs/protocol.md §1.4, MessageSysFlag) ------------------------------------------------------
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

BODYCRC_MASK = 0x7FFFFFFF  # BODYCRC keeps the low 31 bits of the CRC-32 (docs/protocol.md §1.6, UtilAll.crc32)


class RecordField(NamedTuple):
    """One field of a stored record, in stored order.

    name: RocketMQ's name of the field; width: bytes of the field with an IPv4 host, or of the length
    prefix of a variable-length field (its value follows the prefix); v6_flag: the SYSFLAG bit that
    makes this host field 16 + 4 bytes instead of 4 + 4 (0 for other fields); variable: the field is a
    signed length prefix followed by that many bytes.
    """

    name: str
    width: int
    v6_flag: int = 0
    variable: bool = False


HOST_V4_BYTES = 4 + 4  # IPv4 address + int port
HOST_V6_BYTES = 16 + 4  # IPv6 address + int port
HOST_V6_EXTRA_BYTES = HOST_V6_BYTES - HOST_V4_BYTES

#: The fields of a MESSAGE record in stored order (docs/protocol.md §1.2).
RECORD_FIELDS: tuple[RecordField, ...] = (
    RecordField("TOTALSIZE", 4),
    RecordField("MAGICCODE", 4),
    RecordField("BODYCRC", 4),
    RecordField("QUEUEID", 4),
    RecordField("FLAG", 4),
    RecordField("QUEUEOFFSET", 8),
    RecordField("PHYSICALOFFSET", 8),
    RecordField("SYSFLAG", 4),
    RecordField("BORNTIMESTAMP", 8),
    RecordField("BORNHOST", HOST_V4_BYTES, v6_flag=BORNHOST_V6_FLAG),
    RecordField("STORETIMESTAMP", 8),
    RecordField("STOREHOSTADDRESS", HOST_V4_BYTES, v6_flag=STOREHOSTADDRESS_V6_FLAG),
    RecordField("RECONSUMETIMES", 4),
    RecordField("PREPAREDTRANSACTIONOFFSET", 8),
    RecordField("BODY", 4, variable=True),
    RecordField("TOPIC", 1, variable=True),
    RecordField("PROPERTIES", 2, variable=True),
)

FIELDS_BY_NAME = {f.name: f for f in RECORD_FIELDS}


def host_width(v6: bool) -> int:
    """Bytes of a BORNHOST / STOREHOSTADDRESS field: IP then int port."""
    return HOST_V6_BYTES if v6 else HOST_V4_BYTES


def _positions(sys_flag: int) -> MappingProxyType:
    positions = {}
    at = 0
    for f in RECORD_FIELDS:
        positions[f.name] = at
        at += host_width(True) if f.v6_flag & sys_flag else f.width
    return MappingProxyType(positions)


_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_POSITIONS = {flags: _positions(flags) for flags in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, _HOST_FLAGS)}


def field_positions(sys_flag: int = 0) -> Mapping[str, int]:
    """Position (bytes from the record start) of every field of a record with ``sys_flag``'s host widths.

    Only the two host bits of ``sys_flag`` matter (BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG). For BODY,
    TOPIC and PROPERTIES the position is that of the length prefix with empty values before it; BODY's
    prefix is the last position that does not depend on the variable-length values.
    """
    return _POSITIONS[sys_flag & _HOST_FLAGS]


#: Field positions with IPv4 born and store hosts (the common case).
V4_POSITIONS = field_positions(0)

# --- fixed positions and sizes (docs/protocol.md §1.2) ---------------------------------------------------------
TOTALSIZE_POSITION = V4_POSITIONS["TOTALSIZE"]
MAGICCODE_POSITION = V4_POSITIONS["MAGICCODE"]
BODYCRC_POSITION = V4_POSITIONS["BODYCRC"]
QUEUEID_POSITION = V4_POSITIONS["QUEUEID"]
FLAG_POSITION = V4_POSITIONS["FLAG"]
QUEUE_OFFSET_POSITION = V4_POSITIONS["QUEUEOFFSET"]
PHY_POS_POSITION = V4_POSITIONS["PHYSICALOFFSET"]
SYSFLAG_POSITION = V4_POSITIONS["SYSFLAG"]
BORNTIMESTAMP_POSITION = V4_POSITIONS["BORNTIMESTAMP"]
BORNHOST_POSITION = V4_POSITIONS["BORNHOST"]
#: Bytes from TOTALSIZE to the end of BODY's length prefix with IPv4 hosts (88): the fixed header.
V4_HEADER_BYTES = V4_POSITIONS["BODY"] + FIELDS_BY_NAME["BODY"].width
#: TOTALSIZE of the smallest record (91): IPv4 hosts, empty body, empty topic, no properties.
MIN_RECORD_SIZE_BYTES = sum(f.width for f in RECORD_FIELDS)
TOPIC_MAX_LENGTH_BYTES = 127  # signed byte length field
PROPERTIES_MAX_LENGTH_BYTES = 32767  # signed short length field
#: Default bound of a decompressed body (the declared default too, connector.options): 16x RocketMQ's
#: 4 MiB maxMessageSize, so any body a producer could send (text compresses ~10x) fits, while a zip bomb stops
#: far below a process's memory (docs/source.md, "Bad records").
DEFAULT_MAX_INFLATED_BODY_BYTES = 64 * 1024 * 1024


#: TOTALSIZE of the smallest V2 record (92): its TOPIC length prefix is a short.
MIN_RECORD_SIZE_V2_BYTES = MIN_RECORD_SIZE_BYTES + 1


def topic_length_prefix_bytes(magic: int) -> int:
    """Bytes of the TOPIC length prefix of a MESSAGE record with MAGICCODE ``magic``: 1 (a signed byte) for
    MESSAGE_MAGIC_CODE, 2 (a signed short) for MESSAGE_MAGIC_CODE_V2 (MessageVersion, docs/protocol.md §8).
    Raises ValueError for any other magic."""
    if magic == MESSAGE_MAGIC_CODE:
        return 1
    if magic == MESSAGE_MAGIC_CODE_V2:
        return 2
    raise ValueError(f"not a MESSAGE magic code: 0x{magic & 0xFFFFFFFF:08X}")


def min_record_size(magic: int) -> int:
    """TOTALSIZE of the smallest record with MESSAGE magic ``magic`` (91 for V1, 92 for V2)."""
    return MIN_RECORD_SIZE_BYTES - 1 + topic_length_prefix_bytes(magic)


def calc_msg_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int, *,
                    magic: int = MESSAGE_MAGIC_CODE) -> int:
    """TOTALSIZE of a record in bytes: ``91 + body + topic + properties`` plus 12 per IPv6 host, plus 1
    for a V2 record (``magic`` MESSAGE_MAGIC_CODE_V2: 2-byte TOPIC length prefix).

    Source: CommitLog.calMsgLength, RocketMQ 4.9.8 (docs/protocol.md §1.2); 5.x's MessageVersion (§8).
    """
    size = min_record_size(magic) + body_length + topic_length + properties_length
    if sys_flag & BORNHOST_V6_FLAG:
        size += HOST_V6_EXTRA_BYTES
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        size += HOST_V6_EXTRA_BYTES
    return size
