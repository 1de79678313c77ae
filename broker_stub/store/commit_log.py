"""The CommitLog append path (RocketMQ 4.9.8 ``CommitLog.asyncPutMessage(s)``, ``DefaultAppendMessageCallback``).

It turns a put into a record byte for byte as 4.9.8 writes it (:func:`connector.protocol.commitlog.encode_record`):
layout, store time and BODYCRC, queue offsets, the delay move, END_FILE blanks and size limits are docs/protocol.md
§1.2–§1.9; long topics and ``autoMessageVersionOnTopicLen`` are §8; where the stub differs, docs/broker_stub.md
"What it does (RocketMQ 4.9.8 behaviour)". The event loop is the put lock: :meth:`CommitLog.put_message` never
awaits, so appends are atomic and ordered.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_stub.javautil import JavaHashMap
from broker_stub.store.mapped_file import MappedFile, MappedFileQueue
from connector.errors import CommitLogFormatError, HAReplicaError
from connector.protocol.commitlog import (
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH_BYTES,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTIES_MAX_LENGTH_BYTES,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SEPARATOR,
    STOREHOSTADDRESS_V6_FLAG,
    TOPIC_MAX_LENGTH_BYTES,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    HostAddress,
    MessageRecord,
    calc_msg_length,
    decode_batch_body,
    decode_record,
    encode_blank,
    encode_record,
    offset_msg_id,
)
from connector.protocol.mapped_files import is_file_start
from connector.protocol.topics import RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_SCHEDULE_TOPIC

log = logging.getLogger(__name__)

MAX_MESSAGE_SIZE_HEADROOM_BYTES = 64 * 1024  # MessageExtEncoder reserves 64 KiB beyond the body limit
RETRY_TOPIC_MAX_LENGTH_BYTES = 255  # 5.x HookUtils.MAX_TOPIC_LENGTH: the longest %RETRY% topic it stores


class PutMessageStatus(enum.Enum):
    """Store result of a put (PutMessageStatus, docs/protocol.md §2.10)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class PutMessageException(HAReplicaError):
    """A put the 4.9.8 encoder rejects by throwing (batch body or batch properties too large, bad batch).

    The send processor answers SYSTEM_ERROR with this message as remark, as NettyRemotingAbstract does.
    """


class CommitLogAppendError(HAReplicaError):
    """Replicated bytes that cannot be appended (wrong offset, crossing a file end); names offset and file."""


@dataclass
class MessageExtBrokerInner:
    """A single message on its way into the CommitLog (MessageExtBrokerInner).

    ``properties`` is the broker's HashMap (order matters, see :class:`JavaHashMap`); ``properties_string``
    is what gets stored. Timestamps are epoch ms.
    """

    topic: str
    queue_id: int
    body: bytes
    flag: int
    properties: JavaHashMap
    properties_string: str
    sys_flag: int
    born_timestamp: int
    born_host: HostAddress
    store_host: HostAddress
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp: int = 0

    @property
    def delay_time_level(self) -> int:
        """``Message.getDelayTimeLevel``: the ``DELAY`` property as int, 0 when absent.

        Raises ValueError for a non-numeric value (upstream throws NumberFormatException too).
        """
        value = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return int(value) if value is not None else 0

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_TYPE_MASK


@dataclass
class MessageExtBatch:
    """A SEND_BATCH_MESSAGE request: the client batch body plus the batch-level header values."""

    topic: str
    queue_id: int
    body: bytes
    flag: int
    properties: JavaHashMap
    sys_flag: int
    born_timestamp: int
    born_host: HostAddress
    store_host: HostAddress
    reconsume_times: int = 0
    store_timestamp: int = 0

    @property
    def delay_time_level(self) -> int:
        value = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return int(value) if value is not None else 0


@dataclass
class AppendMessageResult:
    """Where a put landed (AppendMessageResult): first record offset, bytes, ids, queue offset of the first."""

    wrote_offset: int
    wrote_bytes: int
    msg_id: str
    store_timestamp: int
    logics_offset: int
    msg_num: int = 1
    phy_offsets: list[int] = field(default_factory=list)

    @property
    def next_offset(self) -> int:
        """``wroteOffset + wroteBytes``: what a replica must have acked for this put (docs/protocol.md §2.8)."""
        return self.wrote_offset + self.wrote_bytes


@dataclass
class PutMessageResult:
    """Status plus, for stored messages, the append result."""

    status: PutMessageStatus
    result: AppendMessageResult | None = None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class CommitLog:
    """Appends records to the mapped files of ``store_path`` and answers offset/data queries.

    Args:
        mapped_file_queue: the (loaded, recovered) files.
        max_message_size: ``maxMessageSize`` in bytes (body limit, docs/protocol.md §1.7).
        max_delay_level: number of ``messageDelayLevel`` entries (18 by default).
        auto_message_version_on_topic_len: ``autoMessageVersionOnTopicLen`` — store a long ``%RETRY%``
            topic as a 5.x MessageVersion V2 record instead of refusing it (module doc).
    """

    def __init__(self, mapped_file_queue: MappedFileQueue, *, max_message_size: int, max_delay_level: int,
                 auto_message_version_on_topic_len: bool = False) -> None:
        self.mapped_file_queue = mapped_file_queue
        self.max_message_size = max_message_size
        self.max_delay_level = max_delay_level
        self.auto_message_version_on_topic_len = auto_message_version_on_topic_len
        self.topic_queue_table: dict[str, int] = {}
        self.append_listeners: list[Callable[[int], None]] = []
        self.put_listeners: list[Callable[[str, int, int, int], None]] = []  # topic, msgs, bytes, elapsed ms
        self.last_store_timestamp = 0

    # --- offsets -------------------------------------------------------------------------------------
    @property
    def file_size(self) -> int:
        return self.mapped_file_queue.mapped_file_size

    @property
    def min_offset(self) -> int:
        """commitLogMinOffset: first file start, −1 with no file (docs/protocol.md §1.1)."""
        return self.mapped_file_queue.min_offset

    @property
    def max_offset(self) -> int:
        """commitLogMaxOffset: last file start + write position (whole records only), 0 with no file."""
        return self.mapped_file_queue.max_offset

    def get_data(self, offset: int, max_bytes: int) -> bytes | None:
        """``getCommitLogData``: bytes from ``offset`` to the read position of the file holding it, capped.

        Returns None when no file holds ``offset`` (below the min offset, or not written yet) or nothing
        is readable there yet. The result never crosses a file boundary (docs/protocol.md §2.3).
        """
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos >= mf.wrote_position:
            return None
        return mf.read(pos, min(max_bytes, mf.wrote_position - pos))

    def get_message(self, offset: int, size: int) -> bytes | None:
        """CommitLog.getMessage: exactly ``size`` bytes at ``offset``, or None when they are not all there
        (the file was deleted, or ``size`` reaches past its written data)."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if size <= 0 or pos + size > mf.wrote_position:
            return None
        return mf.read(pos, size)

    def look_message_by_offset(self, offset: int) -> MessageRecord | None:
        """DefaultMessageStore.lookMessageByOffset: the message stored at ``offset`` (its TOTALSIZE read
        first), None when nothing readable is there or the bytes there are not a message record."""
        head = self.get_message(offset, 4)
        if head is None:
            return None
        data = self.get_message(offset, int.from_bytes(head, "big", signed=True))
        if data is None:
            return None
        try:
            rec = decode_record(data, 0, base_offset=offset)
        except CommitLogFormatError:
            return None
        return rec if isinstance(rec, MessageRecord) else None

    # --- single messages -----------------------------------------------------------------------------
    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Store one message (CommitLog.asyncPutMessage up to the flush/replica waits)."""
        begin = time.monotonic()
        msg.store_timestamp = _now_ms()
        if self.message_version(msg.topic) is None:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        tran_type = msg.transaction_type
        if tran_type in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            level = msg.delay_time_level
            if level > 0:
                if level > self.max_delay_level:
                    level = self.max_delay_level
                    msg.properties.put(PROPERTY_DELAY_TIME_LEVEL, str(level))
                msg.properties.put(PROPERTY_REAL_TOPIC, msg.topic)
                msg.properties.put(PROPERTY_REAL_QUEUE_ID, str(msg.queue_id))
                msg.properties_string = msg.properties.to_properties_string()
                msg.topic = RMQ_SYS_SCHEDULE_TOPIC
                msg.queue_id = level - 1
        msg.sys_flag = _with_v6_flags(msg.sys_flag, msg.born_host, msg.store_host)

        props_b = msg.properties_string.encode("utf-8")
        if len(props_b) > PROPERTIES_MAX_LENGTH_BYTES:
            log.warning("put refused: properties too long topic=%s length=%d", msg.topic, len(props_b))
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        topic_b = msg.topic.encode("utf-8")
        magic = self.message_version(msg.topic)  # the delay move may have changed the topic
        if magic is None:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        msg_len = calc_msg_length(msg.sys_flag, len(msg.body), len(topic_b), len(props_b), magic=magic)
        if len(msg.body) > self.max_message_size or msg_len > self.max_message_size + MAX_MESSAGE_SIZE_HEADROOM_BYTES:
            log.warning("put refused: message size exceeded topic=%s body=%d total=%d maxMessageSize=%d",
                        msg.topic, len(msg.body), msg_len, self.max_message_size)
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        refused = self._refuse_unfittable(msg_len, "record", msg.topic)
        if refused is not None:
            return refused

        # --- in the put lock -------------------------------------------------------------------------
        msg.store_timestamp = _now_ms()
        mf = self._writable_file(msg_len)
        if mf is None:
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        key = f"{msg.topic}-{msg.queue_id}"
        queue_offset = self.topic_queue_table.setdefault(key, 0)
        if tran_type in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
            queue_offset = 0
        wrote_offset = mf.file_from_offset + mf.wrote_position
        record = encode_record(
            commit_log_offset=wrote_offset, topic=msg.topic, body=msg.body, queue_id=msg.queue_id, flag=msg.flag,
            queue_offset=queue_offset, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
            born_host=msg.born_host, store_timestamp=msg.store_timestamp, store_host=msg.store_host,
            reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
            properties=props_b, magic=magic)
        mf.append(record)
        mf.store_timestamp = msg.store_timestamp
        self.last_store_timestamp = msg.store_timestamp
        if tran_type in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            self.topic_queue_table[key] = queue_offset + 1
        result = AppendMessageResult(
            wrote_offset=wrote_offset, wrote_bytes=msg_len, msg_id=offset_msg_id(msg.store_host, wrote_offset),
            store_timestamp=msg.store_timestamp, logics_offset=queue_offset, phy_offsets=[wrote_offset])
        self._appended(msg.topic, 1, msg_len, begin)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    # --- batches -------------------------------------------------------------------------------------
    def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """Store a client batch: one record per inner message, consecutive queue offsets (docs/protocol.md §1.10).

        Raises PutMessageException where 4.9.8's batch encoder throws (body over ``maxMessageSize``,
        batch properties over 32767 bytes, a malformed batch body).
        """
        begin = time.monotonic()
        batch.store_timestamp = _now_ms()
        if batch.sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_NOT_TYPE:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if batch.delay_time_level > 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        batch.sys_flag = _with_v6_flags(batch.sys_flag, batch.born_host, batch.store_host)
        if len(batch.body) > self.max_message_size:
            raise PutMessageException(f"message body size exceeded: batch body {len(batch.body)} bytes, "
                                      f"maxMessageSize {self.max_message_size}")
        batch_props = batch.properties.to_properties_string().encode("utf-8")
        if len(batch_props) > PROPERTIES_MAX_LENGTH_BYTES:
            raise PutMessageException("Properties size of messageExtBatch exceeded!")
        try:
            entries = decode_batch_body(batch.body)
        except CommitLogFormatError as exc:
            raise PutMessageException(f"malformed batch body: {exc}") from exc
        if not entries:
            raise PutMessageException("empty batch body")
        topic_b = batch.topic.encode("utf-8")
        if len(topic_b) > TOPIC_MAX_LENGTH_BYTES:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        encoded: list[tuple[bytes, int, bytes]] = []  # (body, flag, properties) per inner message
        total_len = 0
        for index, entry in enumerate(entries):
            props = entry.properties.encode("utf-8")
            if props and batch_props:
                if props[-1:] != PROPERTY_SEPARATOR.encode():
                    props += PROPERTY_SEPARATOR.encode()
                props += batch_props
            elif batch_props:
                props = batch_props
            if len(props) > PROPERTIES_MAX_LENGTH_BYTES:
                raise PutMessageException(f"properties of batch message {index} are {len(props)} bytes "
                                          f"(limit {PROPERTIES_MAX_LENGTH_BYTES})")
            encoded.append((entry.body, entry.flag, props))
            total_len += calc_msg_length(batch.sys_flag, len(entry.body), len(topic_b), len(props))
        refused = self._refuse_unfittable(total_len, "batch", batch.topic)
        if refused is not None:
            return refused

        # --- in the put lock -------------------------------------------------------------------------
        batch.store_timestamp = _now_ms()
        mf = self._writable_file(total_len)
        if mf is None:
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        key = f"{batch.topic}-{batch.queue_id}"
        begin_queue_offset = self.topic_queue_table.setdefault(key, 0)
        wrote_offset = mf.file_from_offset + mf.wrote_position
        offset = wrote_offset
        parts = []
        phy_offsets = []
        for i, (body, flag, props) in enumerate(encoded):
            rec = encode_record(
                commit_log_offset=offset, topic=batch.topic, body=body, queue_id=batch.queue_id, flag=flag,
                queue_offset=begin_queue_offset + i, sys_flag=batch.sys_flag, born_timestamp=batch.born_timestamp,
                born_host=batch.born_host, store_timestamp=batch.store_timestamp, store_host=batch.store_host,
                reconsume_times=batch.reconsume_times, prepared_transaction_offset=0, properties=props)
            parts.append(rec)
            phy_offsets.append(offset)
            offset += len(rec)
        mf.append(b"".join(parts))
        mf.store_timestamp = batch.store_timestamp
        self.last_store_timestamp = batch.store_timestamp
        self.topic_queue_table[key] = begin_queue_offset + len(encoded)
        msg_id = ",".join(offset_msg_id(batch.store_host, o) for o in phy_offsets)
        result = AppendMessageResult(
            wrote_offset=wrote_offset, wrote_bytes=total_len, msg_id=msg_id, store_timestamp=batch.store_timestamp,
            logics_offset=begin_queue_offset, msg_num=len(encoded), phy_offsets=phy_offsets)
        self._appended(batch.topic, len(encoded), total_len, begin)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    # --- slave: replicated bytes ----------------------------------------------------------------------
    def append_data(self, start_offset: int, data: bytes | bytearray | memoryview) -> None:
        """Append raw replicated CommitLog bytes at ``start_offset`` (4.9.8 ``CommitLog.appendData``, docs/protocol.md
        §2.6).

        ``start_offset`` must equal :attr:`max_offset` (or, for an empty store, be a file boundary: the first
        file is created there, as ``getLastMappedFile(startOffset)`` does). A full last file makes the next
        file. Empty ``data`` (a heartbeat) only creates the first file. The bytes may end inside a record:
        a slave's max offset is wherever replication stopped. Append listeners are told the new max offset.

        Raises CommitLogAppendError when the offset does not continue the log, the bytes cross a file
        boundary, or the file cannot be created.
        """
        self.append_data_batch([(start_offset, data)])

    def append_data_batch(self, frames: list[tuple[int, bytes | bytearray | memoryview]]) -> None:
        """:meth:`append_data` for consecutive frames ``(offset, bytes)``, one ``pwritev`` per run in one file.

        The listeners are told once, after the last frame. Raises CommitLogAppendError as ``append_data``.
        """
        i, n = 0, len(frames)
        appended = False
        try:
            while i < n:
                offset, data = frames[i]
                mf = self._replica_target_file(offset, len(data))
                if mf is None:  # a heartbeat at the end of a full file, or the first file just created
                    i += 1
                    continue
                if not data:
                    i += 1
                    continue
                parts, total, expected = [], 0, offset
                while i < n and frames[i][0] == expected and frames[i][1] and len(parts) < 512:
                    size = len(frames[i][1])
                    if total + size > mf.remaining:
                        break
                    parts.append(frames[i][1])
                    total += size
                    expected += size
                    i += 1
                if total == 0:
                    raise CommitLogAppendError(
                        f"{len(data)} replicated bytes at offset {offset} cross the end of file {mf.file_name}")
                mf.append_many(parts)
                appended = True
        finally:
            if appended:
                new_max = self.max_offset
                for listener in self.append_listeners:
                    listener(new_max)

    def _replica_target_file(self, start_offset: int, size: int) -> MappedFile | None:
        """The file replicated bytes at ``start_offset`` go to (created when needed), or None for nothing to
        write (an empty frame). Raises CommitLogAppendError when the offset does not continue the log."""
        queue = self.mapped_file_queue
        try:
            mf = queue.last_mapped_file()
            if mf is None:
                if not is_file_start(start_offset, self.file_size):
                    raise CommitLogAppendError(
                        f"empty CommitLog cannot start at offset {start_offset}: not a multiple of "
                        f"mappedFileSizeCommitLog {self.file_size}")
                mf = queue.create_next_file(start_offset)
            elif mf.is_full:
                if start_offset != mf.file_tail_offset:
                    raise CommitLogAppendError(
                        f"replicated bytes at offset {start_offset} do not continue the CommitLog at "
                        f"{mf.file_tail_offset} (file {mf.file_name} is full)")
                if not size:
                    return None
                mf = queue.create_next_file()
        except OSError as exc:
            raise CommitLogAppendError(f"cannot create CommitLog file for offset {start_offset}: {exc}") from exc
        expected = mf.file_from_offset + mf.wrote_position
        if start_offset != expected:
            raise CommitLogAppendError(
                f"replicated bytes at offset {start_offset} do not continue the CommitLog at {expected} "
                f"(file {mf.file_name})")
        return mf if size else None

    # --- internals -----------------------------------------------------------------------------------
    def message_version(self, topic: str) -> int | None:
        """The MAGICCODE a single message to ``topic`` is stored with, None when it is refused (docs/protocol.md §8).

        MESSAGE_MAGIC_CODE up to 127 characters (Java ``String.length``, as both 4.9.8 and 5.x count) and
        127 UTF-8 bytes. Longer: MESSAGE_MAGIC_CODE_V2 with ``autoMessageVersionOnTopicLen`` for a ``%RETRY%``
        topic of at most 255 UTF-8 bytes (5.x ``CommitLog.asyncPutMessage`` + ``HookUtils``), else None
        (logged on one WARNING line).
        """
        topic_b = topic.encode("utf-8")
        if _java_length(topic) <= TOPIC_MAX_LENGTH_BYTES and len(topic_b) <= TOPIC_MAX_LENGTH_BYTES:
            return MESSAGE_MAGIC_CODE
        if (self.auto_message_version_on_topic_len and topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                and len(topic_b) <= RETRY_TOPIC_MAX_LENGTH_BYTES):
            return MESSAGE_MAGIC_CODE_V2
        if self.auto_message_version_on_topic_len:
            why = (f"only a {RETRY_GROUP_TOPIC_PREFIX} topic of at most {RETRY_TOPIC_MAX_LENGTH_BYTES} bytes "
                   f"is stored as a V2 record (as RocketMQ 5.x)")
        else:
            why = ("RocketMQ 4.9.8 stores at most 127; autoMessageVersionOnTopicLen=true stores a long "
                   f"{RETRY_GROUP_TOPIC_PREFIX} topic as a 5.x V2 record")
        log.warning("put refused (MESSAGE_ILLEGAL): topic of %d bytes %.64r...: %s", len(topic_b), topic, why)
        return None

    def _refuse_unfittable(self, length: int, what: str, topic: str) -> PutMessageResult | None:
        """MESSAGE_ILLEGAL (logged) when ``length`` bytes plus the minimum END_FILE blank exceed one file."""
        if length + END_FILE_MIN_BLANK_LENGTH_BYTES <= self.file_size:
            return None
        log.warning("put refused: %s of %d bytes cannot fit a %d-byte CommitLog file topic=%s",
                    what, length, self.file_size, topic)
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)

    def _writable_file(self, needed: int) -> MappedFile | None:
        """The file the next ``needed`` bytes go to, closing the current one with an END_FILE blank first."""
        queue = self.mapped_file_queue
        try:
            mf = queue.last_mapped_file()
            if mf is None or mf.is_full:
                mf = queue.create_next_file()
            max_blank = mf.remaining
            if needed + END_FILE_MIN_BLANK_LENGTH_BYTES > max_blank:
                mf.write_at(mf.wrote_position, encode_blank(max_blank))
                mf.wrote_position = mf.file_size
                log.info("END_FILE blank written file=%s offset=%d size=%d", mf.file_name,
                         mf.file_tail_offset - max_blank, max_blank)
                mf = queue.create_next_file()
        except OSError as exc:
            log.error("create mapped file failed dir=%s error=%s", queue.store_path, exc)
            return None
        return mf

    def _appended(self, topic: str, msgs: int, size: int, begin: float) -> None:
        elapsed_ms = int((time.monotonic() - begin) * 1000)
        for listener in self.put_listeners:
            listener(topic, msgs, size, elapsed_ms)
        new_max = self.max_offset
        for listener in self.append_listeners:
            listener(new_max)


def _java_length(text: str) -> int:
    """Java ``String.length()``: UTF-16 code units (a character outside the BMP counts 2)."""
    return len(text.encode("utf-16-be")) // 2


def _with_v6_flags(sys_flag: int, born_host: HostAddress, store_host: HostAddress) -> int:
    """Set BORNHOST_V6_FLAG / STOREHOSTADDRESS_V6_FLAG from the address families (asyncPutMessage)."""
    if born_host.is_v6:
        sys_flag |= BORNHOST_V6_FLAG
    if store_host.is_v6:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    return sys_flag

