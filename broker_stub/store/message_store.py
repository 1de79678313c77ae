"""The message store of the broker stub (RocketMQ 4.9.8 ``DefaultMessageStore``): the CommitLog, ConsumeQueues,
message index, checkpoint, ``abort`` and ``lock`` files and ``config/`` under ``storePathRootDir``, recovered at
start and served to the remoting and HA layers. The layout: docs/protocol.md §1.1; recovery: docs/broker_stub.md
"CommitLog files and recovery".
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker_stub.config import BrokerStubConfig
from broker_stub.store.checkpoint import StoreCheckpoint
from broker_stub.store.commit_log import CommitLog
from broker_stub.store.consume_queue import ConsumeQueueStore
from broker_stub.store.flush import FlushRealTimeService, GroupCommitService
from broker_stub.store.index import IndexService
from broker_stub.store.mapped_file import MappedFileQueue
from broker_stub.store.quarantine import CommitLogRecoveryError
from broker_stub.store.recovery import RecoveryReport, recover_commit_log
from broker_stub.store.reput import ReputMessageService
from broker_stub.store.retention import CleanCommitLogService, disk_partition_used_ratio
from broker_stub.store.stats import StoreStatsService
from connector.errors import HAReplicaError
from connector.protocol.consume_queue import CQ_ENTRY, CQ_STORE_UNIT_SIZE

log = logging.getLogger(__name__)


class BrokerStoreError(HAReplicaError):
    """The store cannot be opened: locked by another broker, wrong file sizes, unreadable folder."""


def human_readable_byte_count(n: int) -> str:
    """MixAll.humanReadableByteCount(bytes, si=false): ``"0 B"``, ``"1.5 KiB"``, ``"252.0 GiB"``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def _total_physical_memory_bytes() -> int:
    """StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE: the machine's RAM, 24 GiB when it cannot be read."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 24 * 1024 ** 3


TOTAL_PHYSICAL_MEMORY_BYTES = _total_physical_memory_bytes()


@dataclass
class GetMessageResult:
    """DefaultMessageStore.getMessage result: status name (GetMessageStatus), raw records, queue offsets."""

    status: str
    next_begin_offset: int
    min_offset: int = 0
    max_offset: int = 0
    messages: list[bytes] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False


@dataclass
class QueryMessageResult:
    """DefaultMessageStore.queryMessage result: raw records and the index's last update (ms, offset)."""

    messages: list[bytes] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class DefaultMessageStore:
    """Owns the CommitLog, its recovery, flushing, checkpoint, abort and lock files.

    Use: ``load()`` (recovers; raises BrokerStoreError), ``await start()``, ..., ``await shutdown()``.
    """

    def __init__(self, config: BrokerStubConfig) -> None:
        self.config = config
        store_cfg = config.store
        self.root = Path(store_cfg.storePathRootDir)
        self.commit_log_dir = store_cfg.commit_log_dir
        self.abort_file = self.root / "abort"
        self.lock_file = self.root / "lock"
        self.config_dir = self.root / "config"
        self.mapped_file_queue = MappedFileQueue(self.commit_log_dir, store_cfg.mappedFileSizeCommitLog)
        self.commit_log = CommitLog(self.mapped_file_queue, max_message_size=store_cfg.maxMessageSize,
                                    max_delay_level=len(store_cfg.delay_levels_ms()),
                                    auto_message_version_on_topic_len=store_cfg.autoMessageVersionOnTopicLen)
        self.stats = StoreStatsService()
        self.commit_log.put_listeners.append(self.stats.on_put)
        self.cq_store = ConsumeQueueStore(self.root / "consumequeue", store_cfg.mappedFileSizeConsumeQueue)
        self.arrival_listeners: list = []  # called with {(topic, queueId)} after ConsumeQueue entries land
        self.index_service = IndexService(self.root / "index", hash_slot_num=store_cfg.maxHashSlotNum,
                                          index_num=store_cfg.maxIndexNum,
                                          max_msgs_num_batch=store_cfg.maxMsgsNumBatch)
        self.reput = ReputMessageService(self.commit_log, self.cq_store, is_slave=config.is_slave,
                                         delay_levels_ms=store_cfg.delay_levels_ms(), on_arrival=self._on_arrival,
                                         index_service=self.index_service if store_cfg.messageIndexEnable else None)
        self.cq_flush_lock = asyncio.Lock()
        self.clean_commit_log_service = CleanCommitLogService(self)
        self.checkpoint: StoreCheckpoint | None = None
        self.flush_service: FlushRealTimeService | GroupCommitService | None = None
        self.recovery: RecoveryReport | None = None
        self._lock_fd = -1
        self._tasks: list[asyncio.Task] = []
        self._started = False

    @property
    def last_exit_ok(self) -> bool:
        return not self.abort_file.exists()

    def load(self) -> RecoveryReport:
        """Lock the store, map the CommitLog files and recover (normal or abnormal, see module doc)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.config_dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise BrokerStoreError(f"cannot open store {self.root}: {exc}") from exc
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise BrokerStoreError(f"store {self.root} is locked by another broker (Lock failed, MQ already started)"
                                   ) from exc
        os.pwrite(self._lock_fd, b"lock", 0)
        abnormal = not self.last_exit_ok
        log.debug("store load root=%s commitlog=%s lastShutdown=%s", self.root, self.commit_log_dir,
                  "abnormal" if abnormal else "normal")
        try:
            self.mapped_file_queue.load()
        except (ValueError, OSError) as exc:
            self.mapped_file_queue.close()
            self._unlock()
            raise BrokerStoreError(str(exc)) from exc
        self.checkpoint = StoreCheckpoint(self.root / "checkpoint")
        self.checkpoint.message_index_safe = self.config.store.messageIndexEnable and self.config.store.messageIndexSafe
        self.index_service.checkpoint = self.checkpoint
        try:
            self.recovery = recover_commit_log(
                self.mapped_file_queue, abnormal=abnormal, check_crc=self.config.store.checkCRCOnRecover,
                checkpoint=self.checkpoint, cut_corrupt=self.config.store.cutCorruptCommitLogOnRecover,
                store_root=self.root)
        except (CommitLogRecoveryError, OSError) as exc:
            self.mapped_file_queue.close()
            self._unlock()
            raise BrokerStoreError(str(exc)) from exc
        last = self.mapped_file_queue.last_mapped_file()
        if last is not None:
            self.commit_log.last_store_timestamp = self.checkpoint.physic_msg_timestamp
        try:
            self.cq_store.load()
        except (ValueError, OSError) as exc:
            self.cq_store.close()
            self.mapped_file_queue.close()
            self._unlock()
            raise BrokerStoreError(f"consume queue: {exc}") from exc
        self.cq_store.recover(self.commit_log.min_offset, self.commit_log.max_offset)
        try:
            self.index_service.load(not abnormal)
        except OSError as exc:
            self.close()
            raise BrokerStoreError(f"index: {exc}") from exc
        abnormal_start = int(self.recovery.start_file) if abnormal and self.recovery.start_file else None
        self.reput.set_start(abnormal_start)
        self.reput.catch_up()  # upstream waits for the dispatch backlog before serving too
        self.commit_log.topic_queue_table = self.cq_store.queue_offset_table()
        log.debug("consume queues ready queues=%d dispatchedRecords=%d reputFromOffset=%d", len(self.cq_store.table),
                 self.reput.dispatched_records, self.reput.reput_from_offset)
        return self.recovery

    async def start(self) -> None:
        """Create the ``abort`` marker and start the flush and statistics tasks."""
        store_cfg = self.config.store
        self.abort_file.touch()
        assert self.checkpoint is not None, "load() first"
        if store_cfg.flushDiskType == "SYNC_FLUSH":
            self.flush_service = GroupCommitService(
                self.commit_log, self.checkpoint, sync_flush_timeout_ms=store_cfg.syncFlushTimeout,
                checkpoint_interval_ms=store_cfg.flushIntervalConsumeQueue)
        else:
            self.flush_service = FlushRealTimeService(
                self.commit_log, self.checkpoint, interval_ms=store_cfg.flushIntervalCommitLog,
                least_pages=store_cfg.flushCommitLogLeastPages,
                thorough_interval_ms=store_cfg.flushCommitLogThoroughInterval)
        self._tasks = [asyncio.create_task(self.flush_service.run(), name=type(self.flush_service).__name__),
                       asyncio.create_task(self.stats.run_sampling(), name="StoreStatsService"),
                       asyncio.create_task(self.reput.run(), name="ReputMessageService"),
                       asyncio.create_task(self._flush_consume_queue_loop(), name="FlushConsumeQueueService"),
                       asyncio.create_task(self.clean_commit_log_service.run(), name="CleanCommitLogService")]
        if self.reput.dispatch_behind_bytes:
            self.reput._wakeup.set()
        self._started = True

    async def shutdown(self) -> None:
        """Stop the tasks, flush everything, write the checkpoint, delete ``abort``, close and unlock."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down regardless
                pass
        self._tasks = []
        clean = True
        if self.flush_service is not None:
            try:
                await self.flush_service.flush_all()
            except OSError as exc:
                clean = False
                log.error("final flush failed, keeping the abort file error=%s", exc)
        try:
            async with self.cq_flush_lock:
                await asyncio.to_thread(self._flush_consume_queues)
        except OSError as exc:
            clean = False
            log.error("final consume queue flush failed, keeping the abort file error=%s", exc)
        try:
            self.index_service.flush_all()
        except OSError as exc:
            log.error("index flush failed error=%s", exc)
        self.index_service.close()
        self.cq_store.close()
        self.mapped_file_queue.close()
        if self._started and clean:
            try:
                self.abort_file.unlink()
            except FileNotFoundError:
                pass
        self._unlock()
        log.info("store shut down clean=%s maxOffset=%d", clean, self.commit_log.max_offset)

    def _on_arrival(self, queues: set[tuple[str, int]]) -> None:
        for listener in self.arrival_listeners:
            listener(queues)

    def _flush_consume_queues(self) -> None:
        for mf, position in self.cq_store.dirty_files():
            mf.flush_to(position)

    async def _flush_consume_queue_loop(self) -> None:
        """FlushConsumeQueueService: flush dirty ConsumeQueue files every ``flushIntervalConsumeQueue`` ms."""
        interval = self.config.store.flushIntervalConsumeQueue / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                async with self.cq_flush_lock:
                    await asyncio.to_thread(self._flush_consume_queues)
            except OSError as exc:
                log.error("consume queue flush failed error=%s", exc)

    def flush_lock(self) -> asyncio.Lock:
        """The CommitLog flush service's lock: held while a flush thread works on the files."""
        if self.flush_service is None:
            return asyncio.Lock()
        return self.flush_service._lock

    # --- reads (DefaultMessageStore.getMessage, docs/protocol.md §5.3) ---------------------------------------------
    def get_message(self, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    tags_filter: Callable[[int], bool] | None = None) -> GetMessageResult:
        """Up to ``max_msg_nums`` raw records of a queue from queue offset ``offset``, as 4.9.8 selects them.

        Status, ``nextBeginOffset`` and the min/max queue offsets follow ``DefaultMessageStore.getMessage``;
        batch limits follow ``isTheBatchFull`` (256 KiB / 32 messages from memory, 64 KiB / 8 from disk,
        where "on disk" means more than ``accessMessageInMemoryMaxRatio`` % of RAM behind the CommitLog
        end); ``suggest_pulling_from_slave`` is set by the same rule. ``tags_filter(tagsCode)`` filters by
        the ConsumeQueue tagsCode. On a SLAVE (``offsetCheckInSlave=false``) error statuses keep the
        requested offset as ``nextBeginOffset``.
        """
        store_cfg = self.config.store
        cl = self.commit_log
        max_offset_py = cl.max_offset
        result = GetMessageResult(status="NO_MESSAGE_IN_QUEUE", next_begin_offset=offset)
        cq = self.cq_store.find(topic, queue_id)
        correct = self._next_offset_correction
        if cq is None:
            result.next_begin_offset = correct(offset, 0)
            return result
        result.min_offset, result.max_offset = cq.min_offset_in_queue, cq.max_offset_in_queue
        if result.max_offset == 0:
            result.next_begin_offset = correct(offset, 0)
        elif offset < result.min_offset:
            result.status, result.next_begin_offset = "OFFSET_TOO_SMALL", correct(offset, result.min_offset)
        elif offset == result.max_offset:
            result.status, result.next_begin_offset = "OFFSET_OVERFLOW_ONE", correct(offset, offset)
        elif offset > result.max_offset:
            result.status, result.next_begin_offset = "OFFSET_OVERFLOW_BADLY", correct(offset, result.max_offset)
        else:
            buf = cq.get_index_buffer(offset)
            if buf is None:
                result.status = "OFFSET_FOUND_NULL"
                result.next_begin_offset = correct(offset, cq.roll_next_file(offset))
                return result
            result.status = "NO_MATCHED_MESSAGE"
            memory = TOTAL_PHYSICAL_MEMORY_BYTES * store_cfg.accessMessageInMemoryMaxRatio // 100
            max_filter = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE)
            next_phy_file_start = None
            max_phy_pulling = 0
            i = 0
            while i < len(buf) and i < max_filter:
                offset_py, size_py, tag = CQ_ENTRY.unpack_from(buf, i)
                max_phy_pulling = offset_py
                if next_phy_file_start is not None and offset_py < next_phy_file_start:
                    i += CQ_STORE_UNIT_SIZE
                    continue
                in_disk = max_offset_py - offset_py > memory
                if self._batch_full(size_py, max_msg_nums, result.buffer_total_size, len(result.messages),
                                    in_disk):
                    break
                if tags_filter is not None and not tags_filter(tag):
                    i += CQ_STORE_UNIT_SIZE
                    continue
                data = cl.get_message(offset_py, size_py)
                if data is None:
                    if not result.messages:
                        result.status = "MESSAGE_WAS_REMOVING"
                    next_phy_file_start = offset_py - offset_py % cl.file_size + cl.file_size
                    i += CQ_STORE_UNIT_SIZE
                    continue
                result.messages.append(data)
                result.buffer_total_size += len(data)
                result.status = "FOUND"
                next_phy_file_start = None
                i += CQ_STORE_UNIT_SIZE
            result.next_begin_offset = offset + i // CQ_STORE_UNIT_SIZE
            result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory
        if result.status == "FOUND":
            self.stats.get_found += 1
        else:
            self.stats.get_miss += 1
        return result

    def _next_offset_correction(self, old: int, new: int) -> int:
        store_cfg = self.config.store
        return new if store_cfg.brokerRole != "SLAVE" or store_cfg.offsetCheckInSlave else old

    def _batch_full(self, size_py: int, max_msg_nums: int, buffer_total: int, message_total: int,
                    in_disk: bool) -> bool:
        cfg = self.config.store
        if buffer_total == 0 or message_total == 0:
            return False
        if max_msg_nums <= message_total:
            return True
        if in_disk:
            return (buffer_total + size_py > cfg.maxTransferBytesOnMessageInDisk
                    or message_total > cfg.maxTransferCountOnMessageInDisk - 1)
        return (buffer_total + size_py > cfg.maxTransferBytesOnMessageInMemory
                or message_total > cfg.maxTransferCountOnMessageInMemory - 1)

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """DefaultMessageStore.queryMessage: the raw records indexed under ``key`` (a KEYS word or a
        UNIQ_KEY) of ``topic``, stored in [begin, end] epoch ms, in CommitLog order.

        Up to three index passes: each looks up offsets (at most ``min(max_num, maxMsgsNumBatch)``),
        reads the records (an offset whose record cannot be read is skipped), and when none could be
        read the next pass searches up to the store time of the first offset found.
        """
        result = QueryMessageResult()
        last_query_time = end
        cl = self.commit_log
        for _ in range(3):
            found = self.index_service.query_offset(topic, key, max_num, begin, last_query_time)
            if not found.phy_offsets:
                break
            found.phy_offsets.sort()
            result.index_last_update_phyoffset = found.index_last_update_phyoffset
            result.index_last_update_timestamp = found.index_last_update_timestamp
            for m, offset in enumerate(found.phy_offsets):
                msg = cl.look_message_by_offset(offset)
                if msg is None:
                    log.error("queryMessage cannot read the message at offset=%d", offset)
                    continue
                if m == 0:
                    last_query_time = msg.store_timestamp
                data = self.select_one_message_by_offset(offset)
                if data is not None:
                    result.messages.append(data)
            if result.messages or last_query_time < begin:
                break
        return result

    def select_one_message_by_offset(self, offset: int) -> bytes | None:
        """selectOneMessageByOffset: the record at ``offset`` (TOTALSIZE read first), None when not readable."""
        head = self.commit_log.get_message(offset, 4)
        if head is None:
            return None
        return self.commit_log.get_message(offset, int.from_bytes(head, "big", signed=True))

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """getOffsetInQueueByTime: the queue offset stored nearest ``timestamp`` (epoch ms; see
        ConsumeQueue.get_offset_in_queue_by_time), 0 for a queue that does not exist."""
        cq = self.cq_store.find(topic, queue_id)
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp, self.commit_log.min_offset, self._pickup_store_timestamp)

    def _pickup_store_timestamp(self, offset: int, _size: int) -> int:
        """CommitLog.pickupStoreTimestamp: the store time of the record at ``offset``, −1 when unreadable."""
        if offset < self.commit_log.min_offset:
            return -1
        record = self.commit_log.look_message_by_offset(offset)
        return record.store_timestamp if record is not None else -1

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """getMaxOffsetInQueue: entries in the ConsumeQueue (0 for a queue that does not exist yet)."""
        cq = self.cq_store.find(topic, queue_id)
        return cq.max_offset_in_queue if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """getMinOffsetInQueue: the first entry still backed by the CommitLog (0 for a new queue: 4.9.8's
        findConsumeQueue creates the queue, so the −1 branch upstream never runs)."""
        cq = self.cq_store.find(topic, queue_id)
        return cq.min_offset_in_queue if cq is not None else 0

    def close(self) -> None:
        """Close the files and release the lock without flushing (a store that was loaded, never started)."""
        self.index_service.close()
        self.cq_store.close()
        self.mapped_file_queue.close()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = -1

    def runtime_info(self) -> dict[str, str]:
        """DefaultMessageStore.getRuntimeInfo: StoreStats plus disk ratios and CommitLog min/max offsets."""
        info = self.stats.runtime_info()
        clpath = str(self.commit_log_dir)
        ratio = disk_partition_used_ratio(self.commit_log_dir)
        info[f"commitLogDiskRatio_{clpath}"] = str(ratio)
        info["commitLogDiskRatio"] = str(ratio)
        info["consumeQueueDiskRatio"] = str(disk_partition_used_ratio(self.root))
        info["commitLogMinOffset"] = str(self.commit_log.min_offset)
        info["commitLogMaxOffset"] = str(self.commit_log.max_offset)
        return info

    def remain_how_many_data_to_flush(self) -> int:
        """Bytes written but not flushed yet."""
        return max(self.commit_log.max_offset - self.mapped_file_queue.flushed_where, 0)

    def dir_capacity(self) -> str:
        """``Total : X, Free : Y.`` of the store root (commitLogDirCapacity)."""
        usage = shutil.disk_usage(self.root)
        return (f"Total : {human_readable_byte_count(usage.total)}, "
                f"Free : {human_readable_byte_count(usage.free)}.")
