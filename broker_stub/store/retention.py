"""Retention of old CommitLog and ConsumeQueue files (RocketMQ 4.9.8 ``CleanCommitLogService`` and
``CleanConsumeQueueService``), including the rounds DELETE_EXPIRED_COMMITLOG arms.

The rules and defaults: docs/protocol.md §6 "Other store defaults" (retention ignores slaves and readers: §7.5);
what the stub does and ``delete-expired``: docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)",
"Retention". Deletions hold the flush locks, so no flush thread touches a file being deleted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

from broker_stub.config import BrokerStubConfig
from broker_stub.store.commit_log import CommitLog
from broker_stub.store.consume_queue import ConsumeQueueStore
from broker_stub.store.index import IndexService
from broker_stub.store.mapped_file import MappedFileQueue

log = logging.getLogger(__name__)

MAX_MANUAL_DELETE_FILE_TIMES = 20
DELETE_FILES_BATCH_MAX = 10  # MappedFileQueue.DELETE_FILES_BATCH_MAX
DISK_SPACE_WARNING_LEVEL_RATIO = 0.90  # -Drocketmq.broker.diskSpaceWarningLevelRatio default
DISK_SPACE_CLEAN_FORCIBLY_RATIO = 0.85  # -Drocketmq.broker.diskSpaceCleanForciblyRatio default


def is_it_time_to_do(when: str, hour: int | None = None) -> bool:
    """UtilAll.isItTimeToDo: ``when`` lists hours separated by ``;``; True when the current hour is one.

    Entries that are not numbers are ignored (upstream throws NumberFormatException in its thread).
    """
    now_hour = time.localtime().tm_hour if hour is None else hour
    for item in when.split(";"):
        try:
            if int(item.strip()) == now_hour:
                return True
        except ValueError:
            continue
    return False


class RetainedStore(Protocol):
    """What retention needs of the message store (``broker_stub.store.message_store.DefaultMessageStore``)."""

    config: BrokerStubConfig
    commit_log_dir: Path
    mapped_file_queue: MappedFileQueue  # the CommitLog's files
    commit_log: CommitLog
    cq_store: ConsumeQueueStore
    index_service: IndexService
    cq_flush_lock: AbstractAsyncContextManager

    def flush_lock(self) -> AbstractAsyncContextManager: ...


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


class CleanCommitLogService:
    """Deletes expired CommitLog files and the ConsumeQueue files they leave dangling (see module doc).

    ``disk_used_ratio(path) -> float`` measures the CommitLog disk (default :func:`disk_partition_used_ratio`).
    """

    def __init__(self, store: RetainedStore,
                 disk_used_ratio: Callable[[Path], float] = disk_partition_used_ratio) -> None:
        self.store = store
        self.manual_delete_file_several_times = 0
        self.deleted_files_total = 0
        self._disk_used_ratio = disk_used_ratio

    async def run(self) -> None:
        """A round every ``cleanResourceInterval`` ms (until cancelled)."""
        interval = self.store.config.store.cleanResourceInterval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_once()
            except OSError as exc:
                log.error("clean commit log round failed error=%s", exc)

    async def execute_delete_files_manually(self) -> int:
        """DELETE_EXPIRED_COMMITLOG: arm 20 manual rounds and run one now; returns files deleted now."""
        self.manual_delete_file_several_times = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("executeDeleteFilesManually was invoked")
        return await self.run_once()

    def _space_to_delete(self) -> tuple[bool, bool]:
        """isSpaceToDelete: (disk over diskMaxUsedSpaceRatio, clean immediately because over 85 %)."""
        cfg = self.store.config.store
        ratio = cfg.diskMaxUsedSpaceRatio / 100.0
        physic = self._disk_used_ratio(self.store.commit_log_dir)
        clean_immediately = physic > DISK_SPACE_CLEAN_FORCIBLY_RATIO
        if physic > DISK_SPACE_WARNING_LEVEL_RATIO:
            log.error("physic disk maybe full soon ratio=%.2f, so mark disk full path=%s", physic,
                      self.store.commit_log_dir)
        if physic < 0 or physic > ratio:
            log.info("physic disk maybe full soon ratio=%.2f diskMaxUsedSpaceRatio=%d", physic,
                     cfg.diskMaxUsedSpaceRatio)
            return True, clean_immediately
        return False, clean_immediately

    async def run_once(self) -> int:
        """One deleteExpiredFiles round; returns the number of CommitLog files deleted."""
        cfg = self.store.config.store
        timeup = is_it_time_to_do(cfg.deleteWhen)
        spacefull, clean_immediately = self._space_to_delete()
        manual = self.manual_delete_file_several_times > 0
        if not (timeup or spacefull or manual):
            return 0
        if manual:
            self.manual_delete_file_several_times -= 1
        clean_at_once = cfg.cleanFileForciblyEnable and clean_immediately
        log.info("begin to delete before %d hours file. timeup: %s spacefull: %s manualDeleteFileSeveralTimes: %d "
                 "cleanAtOnce: %s", cfg.fileReservedTime, timeup, spacefull, self.manual_delete_file_several_times,
                 clean_at_once)
        async with self.store.flush_lock(), self.store.cq_flush_lock:
            deleted = self._delete_expired_files(cfg.fileReservedTime * 3600 * 1000, clean_at_once)
            if deleted:
                self._clean_consume_queues()
        if not deleted and spacefull:
            log.warning("disk space will be full soon, but delete file failed.")
        return deleted

    def _delete_expired_files(self, expired_ms: int, clean_immediately: bool) -> int:
        """MappedFileQueue.deleteExpiredFileByTime over the CommitLog (all files but the last)."""
        queue = self.store.mapped_file_queue
        now_ms = time.time() * 1000
        deleted = 0
        while len(queue.files) > 1 and deleted < DELETE_FILES_BATCH_MAX:
            mf = queue.files[0]
            try:
                mtime_ms = os.stat(mf.path).st_mtime * 1000
            except OSError:
                mtime_ms = 0
            if not (now_ms >= mtime_ms + expired_ms or clean_immediately):
                break
            queue.files.pop(0)
            mf.destroy()
            deleted += 1
            log.info("CommitLog file deleted (retention) file=%s commitLogMinOffset=%d", mf.file_name,
                     queue.min_offset)
        self.deleted_files_total += deleted
        return deleted

    def _clean_consume_queues(self) -> None:
        """CleanConsumeQueueService.deleteExpiredFiles: drop ConsumeQueue and index files below the CommitLog
        min offset."""
        min_offset = self.store.commit_log.min_offset
        removed = sum(cq.delete_expired_files(min_offset) for cq in self.store.cq_store.table.values())
        removed += self.store.index_service.delete_expired_files(min_offset)
        log.info("consume queue files deleted count=%d commitLogMinOffset=%d", removed, min_offset)
