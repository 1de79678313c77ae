"""RocketMQ 4.9.8 remoting frames (RemotingCommand), JSON and ROCKETMQ headers (docs/protocol.md §4).

Frame: ``[length int32 = 4 + headerLength + bodyLength][serializeType<<24 | headerLength][header][body]``.
Responses use the serialize type of their request. Pure codec: parse from a buffer, never a socket.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
from dataclasses import dataclass, field

from connector.errors import RemotingProtocolError
from connector.protocol.fastjson import Bean, encode
from connector.protocol.java_hash_map import hash_map_order, java_string_hash

FRAME_MAX_LENGTH_BYTES = 16 * 1024 * 1024  # NettyDecoder default (com.rocketmq.remoting.frameMaxLength)
SERIALIZE_TYPE_JSON = 0
SERIALIZE_TYPE_ROCKETMQ = 1
RPC_TYPE_RESPONSE_FLAG = 1  # 1 << RPC_TYPE
RPC_ONEWAY_FLAG = 2  # 1 << RPC_ONEWAY
LANGUAGE_CODES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
                  "OMS", "RUST")
MQ_VERSION_V4_9_8 = 409  # MQVersion.Version.V4_9_8.ordinal()


class RequestCode:
    """Request codes (RequestCode.java, docs/protocol.md §4.3)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39  # broker → producer, one-way
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    GET_KV_CONFIG = 101
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    DELETE_EXPIRED_COMMITLOG = 329  # AdminBrokerProcessor.deleteExpiredCommitLog (4.9.8 and 5.x)
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325


class ResponseCode:
    """Response codes (RemotingSysResponseCode + ResponseCode, docs/protocol.md §4.4)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    CONSUMER_NOT_ONLINE = 206


# SendMessageRequestHeaderV2 short field names → SendMessageRequestHeader names (docs/protocol.md §4.5).
SEND_MESSAGE_V2_FIELD_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
    "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "bname",
}
SEND_MESSAGE_V1_TO_V2_FIELD_NAMES = {v: k for k, v in SEND_MESSAGE_V2_FIELD_NAMES.items()}

_opaque_counter = itertools.count(1)
_FRAME_HEAD = struct.Struct(">ii")


def next_opaque() -> int:
    """A per-process request id, as RemotingCommand.requestId (wraps within int32)."""
    return next(_opaque_counter) & 0x7FFFFFFF


@dataclass
class RemotingCommand:
    """One remoting request or response (RemotingCommand, docs/protocol.md §4.2).

    ``ext_fields`` carries the custom header as strings; ``body`` is opaque bytes.
    """

    code: int
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    language: str = "JAVA"
    version: int = MQ_VERSION_V4_9_8
    serialize_type: int = SERIALIZE_TYPE_JSON

    @classmethod
    def request(cls, code: int, ext_fields: dict | None = None, body: bytes = b"", *, oneway: bool = False,
                serialize_type: int = SERIALIZE_TYPE_JSON) -> RemotingCommand:
        """A request with a fresh opaque; header values are stringified as Java's toString does."""
        fields = {k: _java_str(v) for k, v in (ext_fields or {}).items() if v is not None}
        return cls(code=code, ext_fields=fields, body=body, opaque=next_opaque(),
                   flag=RPC_ONEWAY_FLAG if oneway else 0, serialize_type=serialize_type)

    def response(self, code: int, ext_fields: dict | None = None, body: bytes = b"",
                 remark: str | None = None) -> RemotingCommand:
        """The response to this request: same opaque and serialize type, response flag set."""
        fields = {k: _java_str(v) for k, v in (ext_fields or {}).items() if v is not None}
        return RemotingCommand(code=code, ext_fields=fields, body=body, opaque=self.opaque,
                               flag=RPC_TYPE_RESPONSE_FLAG, remark=remark, language="JAVA",
                               version=self.version, serialize_type=self.serialize_type)

    @property
    def is_response(self) -> bool:
        """The RPC_TYPE flag bit: a response, not a request."""
        return bool(self.flag & RPC_TYPE_RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        """The RPC_ONEWAY flag bit: a request that expects no response."""
        return bool(self.flag & RPC_ONEWAY_FLAG)

    def encode(self) -> bytes:
        """The whole frame, length prefix included."""
        if self.serialize_type == SERIALIZE_TYPE_ROCKETMQ:
            header = _encode_rocketmq_header(self)
        else:
            obj = {"code": self.code, "extFields": self.ext_fields or None, "flag": self.flag,
                   "language": self.language, "opaque": self.opaque, "remark": self.remark,
                   "serializeTypeCurrentRPC": "JSON", "version": self.version}
            header = json.dumps({k: v for k, v in obj.items() if v is not None},
                                ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        length = 4 + len(header) + len(self.body)
        return _FRAME_HEAD.pack(length, (self.serialize_type << 24) | len(header)) + header + self.body


def _java_str(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    remark = (cmd.remark or "").encode("utf-8")
    ext = bytearray()
    for k, v in (cmd.ext_fields or {}).items():
        kb, vb = k.encode("utf-8"), v.encode("utf-8")
        ext += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    lang = LANGUAGE_CODES.index(cmd.language) if cmd.language in LANGUAGE_CODES else LANGUAGE_CODES.index("OTHER")
    return (struct.pack(">hbhii", cmd.code, lang, cmd.version, cmd.opaque, cmd.flag)
            + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext)) + bytes(ext))


def _decode_rocketmq_header(h: bytes) -> RemotingCommand:
    try:
        code, lang, version, opaque, flag = struct.unpack_from(">hbhii", h, 0)
        p = 13
        (rlen,) = struct.unpack_from(">i", h, p)
        p += 4
        if rlen < 0 or p + rlen > len(h):
            raise RemotingProtocolError(f"ROCKETMQ header remark length {rlen} runs past the header")
        remark = h[p:p + rlen].decode("utf-8") if rlen else None
        p += rlen
        (elen,) = struct.unpack_from(">i", h, p)
        p += 4
        end = p + elen
        if elen < 0 or end > len(h):
            raise RemotingProtocolError(f"ROCKETMQ header extFields length {elen} runs past the header")
        ext: dict[str, str] = {}
        while p < end:
            (kl,) = struct.unpack_from(">h", h, p)
            k = h[p + 2:p + 2 + kl].decode("utf-8")
            p += 2 + kl
            (vl,) = struct.unpack_from(">i", h, p)
            ext[k] = h[p + 4:p + 4 + vl].decode("utf-8")
            p += 4 + vl
            if kl < 0 or vl < 0 or p > end:
                raise RemotingProtocolError("ROCKETMQ header extFields entry runs past its table")
    except (struct.error, UnicodeDecodeError) as exc:
        raise RemotingProtocolError(f"malformed ROCKETMQ header: {exc}") from exc
    language = LANGUAGE_CODES[lang] if 0 <= lang < len(LANGUAGE_CODES) else "OTHER"
    return RemotingCommand(code=code, ext_fields=ext, opaque=opaque, flag=flag, remark=remark,
                           language=language, version=version, serialize_type=SERIALIZE_TYPE_ROCKETMQ)


_INT32_MIN, _INT32_MAX = -2**31, 2**31 - 1
_JSON_MAX_NUMBER_DIGITS = 40  # far beyond any int32/int64 header value; bounds int() work on hostile input


def _parse_json_float(text: str) -> float:
    """JSON reals and NaN/Infinity as floats (``1e400`` → inf); the field checks then name the field."""
    if len(text) > _JSON_MAX_NUMBER_DIGITS:
        raise RemotingProtocolError(f"JSON header holds a {len(text)}-character number")
    return float(text)


def _parse_json_int(text: str) -> int:
    if len(text) > _JSON_MAX_NUMBER_DIGITS:
        raise RemotingProtocolError(f"JSON header holds a {len(text)}-digit integer")
    return int(text)


def _header_int(obj: dict, name: str, default: int) -> int:
    """A RemotingCommand ``int`` field (code, opaque, flag, version): a JSON integer within int32."""
    value = obj.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RemotingProtocolError(f"JSON header field '{name}' is {str(value)[:64]}, not an integer")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise RemotingProtocolError(f"JSON header field '{name}' is {value}, outside int32")
    return value


def _header_ext_fields(obj: dict) -> dict[str, str]:
    """``extFields`` (a ``HashMap<String, String>``): scalar values as Java strings, nulls dropped."""
    ext = obj.get("extFields") or {}
    if not isinstance(ext, dict):
        raise RemotingProtocolError("JSON header field 'extFields' is not an object")
    out: dict[str, str] = {}
    for k, v in ext.items():
        if v is None:
            continue
        if isinstance(v, (dict, list)) or (isinstance(v, float) and not math.isfinite(v)):
            raise RemotingProtocolError(f"JSON header field 'extFields' entry {k[:64]!r} is {str(v)[:64]}, "
                                        "not a string or finite number")
        out[k] = _java_str(v)
    return out


def _decode_json_header(h: bytes) -> RemotingCommand:
    """A JSON RemotingCommand header (docs/protocol.md §4.2) → command, or a RemotingProtocolError naming the field.

    Hostile input stays a RemotingProtocolError: NaN/Infinity and numbers that overflow a double
    (``1e400``), integers outside int32 or longer than 40 digits, non-scalar ``extFields`` values, and
    nesting deeper than the interpreter's recursion limit (``[[[...``).
    """
    try:
        obj = json.loads(h.decode("utf-8"), parse_constant=_parse_json_float, parse_float=_parse_json_float,
                         parse_int=_parse_json_int)
    except RecursionError:
        raise RemotingProtocolError("JSON header is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise RemotingProtocolError(f"JSON header is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict) or "code" not in obj:
        raise RemotingProtocolError("JSON header has no integer 'code' field")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemotingProtocolError("JSON header field 'remark' is not a string")
    language = obj.get("language", "JAVA")
    if not isinstance(language, str):
        raise RemotingProtocolError("JSON header field 'language' is not a string")
    return RemotingCommand(
        code=_header_int(obj, "code", 0), ext_fields=_header_ext_fields(obj),
        opaque=_header_int(obj, "opaque", 0), flag=_header_int(obj, "flag", 0), remark=remark,
        language=language, version=_header_int(obj, "version", 0), serialize_type=SERIALIZE_TYPE_JSON)


def decode_frame(buf: bytes | bytearray | memoryview, max_frame_bytes: int = FRAME_MAX_LENGTH_BYTES
                 ) -> tuple[RemotingCommand, int] | None:
    """Decode the frame at the start of ``buf``.

    Returns ``(command, bytes consumed)``, or None when the frame is not complete yet (the caller keeps
    the bytes). Raises RemotingProtocolError for a length outside ``[4, max_frame_bytes]``, a header
    length past the frame, an unknown serialize type, or a malformed header.
    """
    if len(buf) < 4:
        return None
    (length,) = struct.unpack_from(">i", buf, 0)
    if length < 4 or length > max_frame_bytes:
        raise RemotingProtocolError(f"remoting frame length {length} outside 4..{max_frame_bytes}")
    if len(buf) < 4 + length:
        return None
    (ori,) = struct.unpack_from(">i", buf, 4)
    header_len = ori & 0xFFFFFF
    stype = (ori >> 24) & 0xFF
    if header_len > length - 4:
        raise RemotingProtocolError(f"remoting header length {header_len} exceeds frame length {length}")
    header = bytes(buf[8:8 + header_len])
    if stype == SERIALIZE_TYPE_JSON:
        cmd = _decode_json_header(header)
    elif stype == SERIALIZE_TYPE_ROCKETMQ:
        cmd = _decode_rocketmq_header(header)
    else:
        raise RemotingProtocolError(f"unknown remoting serialize type {stype}")
    cmd.body = bytes(buf[8 + header_len:4 + length])
    return cmd, 4 + length


class FrameDecoder:
    """Incremental remoting frame decoder: ``feed`` bytes, iterate complete commands."""

    def __init__(self, max_frame_bytes: int = FRAME_MAX_LENGTH_BYTES):
        self._buf = bytearray()
        self.max_frame_bytes = max_frame_bytes

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Add bytes; return every command now complete. Raises RemotingProtocolError on bad frames."""
        self._buf += data
        out = []
        while True:
            res = decode_frame(self._buf, self.max_frame_bytes)
            if res is None:
                return out
            cmd, used = res
            del self._buf[:used]
            out.append(cmd)


KV_TABLE_RUNTIME_INFO_CAPACITY = 64  # StoreStatsService.getRuntimeInfo: new HashMap<String, String>(64)


def encode_kv_table(table: dict[str, str], initial_capacity: int = KV_TABLE_RUNTIME_INFO_CAPACITY) -> bytes:
    """A KVTable body (GET_BROKER_RUNTIME_INFO): ``{"table":{...}}`` with string values, the bytes 4.9.8 writes
    for a ``HashMap(initial_capacity)`` filled in ``table``'s order (docs/protocol.md §4.7)."""
    keys = hash_map_order(list(table), java_string_hash, initial_capacity)
    return encode(Bean(table={k: str(table[k]) for k in keys}))


def decode_kv_table(body: bytes) -> dict[str, str]:
    """Inverse of :func:`encode_kv_table`. Raises RemotingProtocolError on anything else."""
    try:
        obj = json.loads(body.decode("utf-8"))
        table = obj["table"]
        if not isinstance(table, dict):
            raise TypeError("table is not an object")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise RemotingProtocolError(f"KVTable body is malformed: {exc}") from exc
    return {str(k): str(v) for k, v in table.items()}


def encode_properties_body(props: dict[str, str]) -> bytes:
    """A java.util.Properties text body (GET_BROKER_CONFIG): ``key=value`` lines."""
    return "".join(f"{k}={v}\n" for k, v in props.items()).encode("utf-8")


def decode_properties_body(body: bytes) -> dict[str, str]:
    """Parse a GET_BROKER_CONFIG body (UTF-8) as the 4.9.8 client does (``MixAll.string2Properties``:
    ``java.util.Properties.load``), through the ``javaproperties`` library. Raises RemotingProtocolError
    for a malformed ``\\uXXXX`` escape."""
    import javaproperties  # here, not at the top: it imports urllib, http and xml, which no task needs

    try:
        return dict(javaproperties.loads(body.decode("utf-8", "replace")))
    except javaproperties.InvalidUEscapeError as exc:
        raise RemotingProtocolError(f"GET_BROKER_CONFIG body is malformed: {exc}") from exc
