"""The message store of the broker stub (RocketMQ 4.9.8 ``DefaultMessageStore``, master side of issue 2).

Layout under ``storePathRootDir`` (StorePathConfigHelper): ``commitlog/`` (or ``storePathCommitLog``),
``checkpoint``, ``abort`` (exists while the store runs: found at start-up it means the last run did not
shut down cleanly, so recovery is abnormal and CRC-checked), ``lock`` (an exclusive ``flock`` so two
brokers never share a store) and ``config/``.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
from pathlib import Path

from broker_stub.config import BrokerStubConfig
from broker_stub.store.checkpoint import StoreCheckpoint
from broker_stub.store.commit_log import CommitLog
from broker_stub.store.flush import FlushRealTimeService
from broker_stub.store.mapped_file import MappedFileQueue
from broker_stub.store.recovery import RecoveryReport, rebuild_topic_queue_table, recover_commit_log
from broker_stub.store.stats import StoreStatsService
from connector.protocol.errors import HAReplicaError

log = logging.getLogger(__name__)


class BrokerStoreError(HAReplicaError):
    """The store cannot be opened: locked by another broker, wrong file sizes, unreadable folder."""


def disk_partition_used_ratio(path: Path) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent: used / (used + usable), rounded up to 0.01; −1 if missing."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    entire = used + usable
    if entire <= 0:
        return -1.0
    result = used * 100 // entire + (1 if used * 100 % entire else 0)
    return result / 100.0


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
                                    max_delay_level=len(store_cfg.delay_levels_ms()))
        self.stats = StoreStatsService()
        self.commit_log.put_listeners.append(self.stats.on_put)
        self.checkpoint: StoreCheckpoint | None = None
        self.flush_service: FlushRealTimeService | None = None
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
        log.info("store load root=%s commitlog=%s lastShutdown=%s", self.root, self.commit_log_dir,
                 "abnormal" if abnormal else "normal")
        try:
            self.mapped_file_queue.load()
        except (ValueError, OSError) as exc:
            self.mapped_file_queue.close()
            self._unlock()
            raise BrokerStoreError(str(exc)) from exc
        self.checkpoint = StoreCheckpoint(self.root / "checkpoint")
        self.recovery = recover_commit_log(self.mapped_file_queue, abnormal=abnormal,
                                           check_crc=self.config.store.checkCRCOnRecover, checkpoint=self.checkpoint)
        self.commit_log.topic_queue_table = rebuild_topic_queue_table(self.mapped_file_queue)
        last = self.mapped_file_queue.last_mapped_file()
        if last is not None:
            self.commit_log.last_store_timestamp = self.checkpoint.physic_msg_timestamp
        return self.recovery

    async def start(self) -> None:
        """Create the ``abort`` marker and start the flush and statistics tasks."""
        store_cfg = self.config.store
        self.abort_file.touch()
        assert self.checkpoint is not None, "load() first"
        self.flush_service = FlushRealTimeService(
            self.commit_log, self.checkpoint, interval_ms=store_cfg.flushIntervalCommitLog,
            least_pages=store_cfg.flushCommitLogLeastPages,
            thorough_interval_ms=store_cfg.flushCommitLogThoroughInterval)
        self._tasks = [asyncio.create_task(self.flush_service.run(), name="FlushRealTimeService"),
                       asyncio.create_task(self.stats.run_sampling(), name="StoreStatsService")]
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
        self.mapped_file_queue.close()
        if self._started and clean:
            try:
                self.abort_file.unlink()
            except FileNotFoundError:
                pass
        self._unlock()
        log.info("store shut down clean=%s maxOffset=%d", clean, self.commit_log.max_offset)

    def close(self) -> None:
        """Close the files and release the lock without flushing (a store that was loaded, never started)."""
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
