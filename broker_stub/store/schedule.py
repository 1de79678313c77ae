"""Delayed delivery (RocketMQ 4.9.8 ``ScheduleMessageService``), run by a master only: walks each level's queue of
``SCHEDULE_TOPIC_XXXX`` and re-puts due messages into their ``REAL_TOPIC``/``REAL_QID``, keeping the per-level
offsets in ``config/delayOffset.json``.

What a re-put record holds, when a level waits, retries, the offsets file and the one deliberate difference:
docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)", "Delayed delivery"; the delay move at put time:
docs/protocol.md §1.5.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import TYPE_CHECKING

from broker_stub.javautil import JavaHashMap
from broker_stub.store.commit_log import MessageExtBrokerInner, PutMessageStatus
from connector.errors import CommitLogFormatError
from connector.protocol.commitlog import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    MessageRecord,
    decode_record,
)
from connector.protocol.config_files import encode_delay_offsets
from connector.protocol.consume_queue import CQ_ENTRY, CQ_STORE_UNIT_SIZE
from connector.protocol.topics import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC

if TYPE_CHECKING:
    from broker_stub.metadata import DelayOffsetStore
    from broker_stub.store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

FIRST_DELAY_MS = 1000
DELAY_FOR_A_WHILE_MS = 100
DELAY_FOR_A_PERIOD_MS = 10000
PERSIST_FIRST_DELAY_MS = 10000
_ENTRY_RE = re.compile(r'"?(\d+)"?\s*:\s*(-?\d+)')


def decode_delay_offsets(text: str) -> dict[int, int]:
    """Parse ``delayOffset.json`` (fastjson's unquoted integer keys or strict JSON's quoted ones).

    Returns level → offset; raises ValueError naming the file's problem when there is no offsetTable.
    """
    start = text.find('"offsetTable"')
    if start < 0:
        raise ValueError("delayOffset.json has no offsetTable")
    body = text[text.find("{", start) + 1:]
    body = body[:body.find("}")]
    return {int(k): int(v) for k, v in _ENTRY_RE.findall(body)}


def time_up_message(rec: MessageRecord) -> MessageExtBrokerInner:
    """The message a due ``SCHEDULE_TOPIC_XXXX`` record is stored as (ScheduleMessageService.messageTimeup).

    Raises KeyError / ValueError when REAL_TOPIC or REAL_QID is missing or not a number.
    """
    props = JavaHashMap.from_properties_string(rec.properties_raw.decode("utf-8"))
    properties_string = props.to_properties_string()  # taken before DELAY is cleared, as upstream
    props.remove(PROPERTY_DELAY_TIME_LEVEL)
    topic = props.get(PROPERTY_REAL_TOPIC)
    if topic is None:
        raise KeyError(f"no {PROPERTY_REAL_TOPIC} property")
    queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID) or "")
    return MessageExtBrokerInner(
        topic=topic, queue_id=queue_id, body=rec.body, flag=rec.flag, properties=props,
        properties_string=properties_string, sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp,
        born_host=rec.born_host, store_host=rec.store_host, reconsume_times=rec.reconsume_times)


class ScheduleMessageService:
    """Delivers due delayed messages of every level (see the module doc). ``start()`` / ``await stop()``.

    Args:
        store: the loaded message store (its CommitLog, ConsumeQueues and ``messageDelayLevel``).
        offset_store: the ``delayOffset.json`` file.
    """

    def __init__(self, store: DefaultMessageStore, offset_store: DelayOffsetStore) -> None:
        self.store = store
        self.offset_store = offset_store
        self.delay_levels_ms = store.config.store.delay_levels_ms()
        self.offset_table: dict[int, int] = {}
        self.delivered = 0
        self._tasks: list[asyncio.Task] = []

    def load(self) -> None:
        """Read the saved offsets; a broken file is logged and delivery starts from offset 0."""
        try:
            self.offset_table = decode_delay_offsets(self.offset_store.encode())
        except ValueError as exc:
            log.error("delay offsets not loaded file=%s error=%s", self.offset_store.path, exc)
            self.offset_table = {}

    def encode(self, pretty: bool = True) -> str:
        """The offsets as ``delayOffset.json`` holds them (pretty) or GET_ALL_DELAY_OFFSET sends them (compact)."""
        return encode_delay_offsets(self.offset_table, pretty)

    def persist(self) -> None:
        """Write ``delayOffset.json`` (atomically); an OSError is logged."""
        try:
            self.offset_store.write_verbatim(self.encode())
        except OSError as exc:
            log.error("delay offsets persist failed file=%s error=%s", self.offset_store.path, exc)

    def start(self) -> None:
        """Start one delivery task per level plus the periodic persist task (on the running loop)."""
        self.load()
        for level in range(1, len(self.delay_levels_ms) + 1):
            self._tasks.append(asyncio.create_task(self._run_level(level), name=f"ScheduleMessage-{level}"))
        self._tasks.append(asyncio.create_task(self._persist_loop(), name="ScheduleMessagePersist"))

    async def stop(self) -> None:
        """Stop delivering and persist the offsets (idempotent)."""
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping regardless
                pass
        if tasks:
            self.persist()

    async def _persist_loop(self) -> None:
        await asyncio.sleep(PERSIST_FIRST_DELAY_MS / 1000)
        while True:
            self.persist()
            await asyncio.sleep(self.store.config.store.flushDelayOffsetInterval / 1000)

    async def _run_level(self, level: int) -> None:
        await asyncio.sleep(FIRST_DELAY_MS / 1000)
        while True:
            try:
                wait_ms = self.deliver_level(level, time.time_ns() // 1_000_000)
            except Exception:  # noqa: BLE001 - a level's task must keep running
                log.exception("delayed delivery failed level=%d", level)
                wait_ms = DELAY_FOR_A_PERIOD_MS
            await asyncio.sleep(wait_ms / 1000)

    def deliver_level(self, level: int, now_ms: int) -> int:
        """Re-put the due entries of ``level`` from its saved offset; returns ms until the next look.

        Updates ``offset_table[level]``. Runs on the event loop (the put lock), never awaits.
        """
        offset = self.offset_table.get(level, 0)
        cq = self.store.cq_store.find(RMQ_SYS_SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return DELAY_FOR_A_WHILE_MS
        buf = cq.get_index_buffer(offset)
        if buf is None:
            if offset < cq.min_offset_in_queue:  # files deleted under the saved offset
                self.offset_table[level] = cq.min_offset_in_queue
            return DELAY_FOR_A_WHILE_MS
        max_ahead = self.delay_levels_ms[level - 1]
        for i in range(0, len(buf) - len(buf) % CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE):
            offset_py, size_py, deliver_ts = CQ_ENTRY.unpack_from(buf, i)
            entry = offset + i // CQ_STORE_UNIT_SIZE
            if deliver_ts > now_ms + max_ahead:  # correctDeliverTimestamp
                deliver_ts = now_ms
            if deliver_ts > now_ms:
                self.offset_table[level] = entry
                return deliver_ts - now_ms
            if not self._deliver_one(level, entry, offset_py, size_py):
                self.offset_table[level] = entry
                return DELAY_FOR_A_PERIOD_MS
        self.offset_table[level] = offset + len(buf) // CQ_STORE_UNIT_SIZE
        return DELAY_FOR_A_WHILE_MS

    def _deliver_one(self, level: int, entry: int, offset_py: int, size_py: int) -> bool:
        """Re-put one record; False only when the put failed (retry later). Unreadable records are skipped."""
        data = self.store.commit_log.get_message(offset_py, size_py)
        if data is None:  # deleted under us: nothing to deliver (upstream skips too)
            return True
        try:
            rec = decode_record(data, 0, base_offset=offset_py)
            if not isinstance(rec, MessageRecord):
                raise CommitLogFormatError("not a message record")
            msg = time_up_message(rec)
        except (CommitLogFormatError, KeyError, ValueError, UnicodeDecodeError) as exc:
            log.error("delayed message skipped level=%d queueOffset=%d commitLogOffset=%d error=%s", level, entry,
                      offset_py, exc)
            return True
        if msg.topic == RMQ_SYS_TRANS_HALF_TOPIC:
            log.error("delayed message with real topic %s discarded commitLogOffset=%d", msg.topic, offset_py)
            return True
        put = self.store.commit_log.put_message(msg)
        if put.status != PutMessageStatus.PUT_OK:
            log.error("delayed message put failed level=%d commitLogOffset=%d status=%s", level, offset_py,
                      put.status.name)
            return False
        self.delivered += 1
        return True

    def running_stats(self) -> dict[int, tuple[int, int]]:
        """level → (delivered offset, entries in its queue) for every level (0 when nothing is saved yet;
        upstream lists only levels with a saved offset)."""
        return {level: (self.offset_table.get(level, 0),
                        self.store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1))
                for level in range(1, len(self.delay_levels_ms) + 1)}
