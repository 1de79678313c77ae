"""ReputMessageService (RocketMQ 4.9.8 ``DefaultMessageStore.ReputMessageService``): builds the ConsumeQueues and
the message index from the CommitLog on a master and a slave alike, and hands the (topic, queueId) pairs that got
messages to ``on_arrival`` (the pull long-polling wake-up).

It works in steps of at most ``REPUT_STEP_BYTES`` and yields to the event loop between them. The rules:
docs/protocol.md §5.2; where the stub differs (woken by appends, slaves wake held pulls, malformed records):
docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)" and "Better than 4.9.8, same wire".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from broker_stub.javautil import java_string_hash
from broker_stub.store.commit_log import CommitLog
from broker_stub.store.consume_queue import ConsumeQueueStore
from broker_stub.store.index import IndexService
from connector.errors import CommitLogFormatError
from connector.protocol.commitlog import (
    MIN_RECORD_SIZE_BYTES,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TAGS,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    BlankRecord,
    DispatchInfo,
    EndOfData,
    decode_dispatch_info,
    parse_properties,
    read_record_head,
)
from connector.protocol.topics import RMQ_SYS_SCHEDULE_TOPIC

log = logging.getLogger(__name__)

REPUT_STEP_BYTES = 1024 * 1024
REPUT_BUSY_PAUSE_MAX_S = 0.02  # longest pause of a slave's reput between steps while a burst arrives
_DISPATCHED_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


def tags_code(info: DispatchInfo, delay_levels_ms: list[int], props: dict[str, str] | None = None) -> int:
    """The ConsumeQueue tagsCode of a record (``checkMessageAndReturnSize``, docs/protocol.md §5.1).

    ``TAGS.hashCode()`` (0 without tags); for SCHEDULE_TOPIC_XXXX the delivery time in ms (store time +
    the ``DELAY`` level's delay, level clamped to the table; store time + 1000 for an unknown level).
    ``props``: the record's parsed properties when the caller has them already.
    """
    if props is None:
        props = record_properties(info)
    tags = props.get(PROPERTY_TAGS)
    code = java_string_hash(tags) if tags else 0
    if info.topic == RMQ_SYS_SCHEDULE_TOPIC:
        level_text = props.get(PROPERTY_DELAY_TIME_LEVEL)
        if level_text is not None:
            try:
                level = min(int(level_text), len(delay_levels_ms))
            except ValueError:
                level = 0
            if level > 0:
                code = info.store_timestamp + delay_levels_ms[level - 1]
    return code


def record_properties(info: DispatchInfo) -> dict[str, str]:
    """The properties of a dispatched record, parsed (empty without any)."""
    return parse_properties(info.properties_raw.decode("utf-8", "replace")) if info.properties_raw else {}


class ReputMessageService:
    """Dispatches CommitLog records into ConsumeQueues (see module doc).

    Args:
        is_slave: brokerRole is SLAVE (a malformed record stops instead of being skipped).
        delay_levels_ms: ``messageDelayLevel`` in ms (level n at index n − 1).
        on_arrival: called with the set of ``(topic, queueId)`` that got entries in a step.
        index_service: builds the message index from every record (``messageIndexEnable``), or None.
    """

    def __init__(self, commit_log: CommitLog, cq_store: ConsumeQueueStore, *, is_slave: bool,
                 delay_levels_ms: list[int], on_arrival: Callable[[set[tuple[str, int]]], None] | None = None,
                 index_service: IndexService | None = None) -> None:
        self.commit_log = commit_log
        self.cq_store = cq_store
        self.is_slave = is_slave
        self.delay_levels_ms = delay_levels_ms
        self.on_arrival = on_arrival
        self.index_service = index_service
        self.reput_from_offset = 0
        self.dispatched_records = 0
        self._wakeup = asyncio.Event()
        self._bad_offset_logged = -1
        commit_log.append_listeners.append(self._on_append)

    def _on_append(self, _max_offset: int) -> None:
        self._wakeup.set()

    def set_start(self, abnormal_start_offset: int | None = None) -> None:
        """Choose ``reputFromOffset`` (see module doc)."""
        start = max(self.cq_store.max_physic_offset, self.commit_log.min_offset, 0)
        if abnormal_start_offset is not None:
            start = max(min(start, abnormal_start_offset), self.commit_log.min_offset, 0)
        self.reput_from_offset = start
        log.debug("reput from offset=%d commitLogMaxOffset=%d", start, self.commit_log.max_offset)

    @property
    def dispatch_behind_bytes(self) -> int:
        """``dispatchBehindBytes``: CommitLog bytes not yet dispatched."""
        return max(self.commit_log.max_offset - self.reput_from_offset, 0)

    async def run(self) -> None:
        """Dispatch whenever appends happened (until cancelled).

        On a slave that is receiving a burst (the CommitLog grew since the previous step), each step is
        followed by a pause as long as the step took (at most ``REPUT_BUSY_PAUSE_MAX_S``), so the HA client
        keeps at least half of the event loop while reput still progresses at half speed; the
        ConsumeQueues catch up right after the burst (``dispatchBehindBytes`` shows the backlog).
        """
        cl = self.commit_log
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            seen = cl.max_offset
            while True:
                began = time.perf_counter()
                if not self.do_reput(REPUT_STEP_BYTES):
                    break
                busy = self.is_slave and cl.max_offset != seen
                seen = cl.max_offset
                # while a burst arrives, sleep as long as the step took: at most half the loop goes to reput
                await asyncio.sleep(min(time.perf_counter() - began, REPUT_BUSY_PAUSE_MAX_S) if busy else 0)

    def catch_up(self) -> None:
        """Dispatch everything there is now, synchronously (start-up, before serving requests)."""
        while self.do_reput(1 << 62):
            pass

    def do_reput(self, budget_bytes: int) -> bool:
        """One step of at most ``budget_bytes``; True when it stopped on the budget (more to do)."""
        cl = self.commit_log
        arrivals: set[tuple[str, int]] = set()
        done = 0
        more = False
        try:
            if 0 <= cl.min_offset and self.reput_from_offset < cl.min_offset:
                log.warning("reput offset %d below commitLogMinOffset %d, jumping", self.reput_from_offset,
                            cl.min_offset)
                self.reput_from_offset = cl.min_offset
            while self.reput_from_offset < cl.max_offset:
                if done >= budget_bytes:
                    more = True
                    break
                advanced = self._reput_file(arrivals, budget_bytes - done)
                if advanced <= 0:
                    break
                done += advanced
        finally:
            if arrivals and self.on_arrival is not None:
                self.on_arrival(arrivals)
        return more

    def _reput_file(self, arrivals: set[tuple[str, int]], budget: int) -> int:
        """Dispatch from ``reputFromOffset`` within its file; returns the bytes advanced (0: must wait)."""
        cl = self.commit_log
        mf = cl.mapped_file_queue.find_mapped_file_by_offset(self.reput_from_offset)
        if mf is None:
            return 0
        start = self.reput_from_offset
        base = mf.file_from_offset
        pos = start - base
        end = mf.wrote_position
        buf = mf.mapping
        file_size = mf.file_size
        cq_store = self.cq_store
        while pos < end and pos - (start - base) < budget:
            head = read_record_head(buf, pos, end=end)
            if head is None:
                break  # a slave's partial header
            total = head.total_size
            if head.is_message and MIN_RECORD_SIZE_BYTES <= total <= file_size - pos and pos + total > end:
                break  # a record cut short at a slave's tail: wait for the rest
            try:
                info = decode_dispatch_info(buf, pos, base_offset=base, file=mf.file_name, file_end=file_size)
            except CommitLogFormatError as exc:
                if self.is_slave:
                    if self._bad_offset_logged != base + pos:
                        self._bad_offset_logged = base + pos
                        log.error("reput stopped at a malformed record (slave waits) error=%s", exc)
                    break
                log.error("reput skips the rest of file data after a malformed record error=%s", exc)
                pos = end
                break
            if isinstance(info, BlankRecord):
                pos = file_size
                break
            if isinstance(info, EndOfData):
                if self._bad_offset_logged != base + pos:
                    self._bad_offset_logged = base + pos
                    log.error("reput found no record inside written data file=%s position=%d", mf.file_name, pos)
                if not self.is_slave:
                    pos = end
                break
            props = record_properties(info)
            if info.transaction_type in _DISPATCHED_TYPES:
                cq = cq_store.find_or_create(info.topic, info.queue_id)
                cq.put_message_position_info(info.commit_log_offset, info.store_size,
                                             tags_code(info, self.delay_levels_ms, props), info.queue_offset)
                arrivals.add((info.topic, info.queue_id))
            if self.index_service is not None:
                self.index_service.build_index(info, props)
            if self.is_slave and info.store_timestamp > cl.last_store_timestamp:
                cl.last_store_timestamp = info.store_timestamp  # checkpoint input on a slave
            self.dispatched_records += 1
            pos += info.store_size
        self.reput_from_offset = base + pos
        return self.reput_from_offset - start
