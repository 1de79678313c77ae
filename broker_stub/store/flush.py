"""ASYNC_FLUSH of the CommitLog (RocketMQ 4.9.8 ``FlushRealTimeService``, spec §6).

Every ``flushIntervalCommitLog`` ms (``flushCommitLogTimed=true``: a plain sleep, appends do not wake it)
the service flushes files holding at least ``flushCommitLogLeastPages`` dirty 4 KiB pages — every dirty
byte once ``flushCommitLogThoroughInterval`` ms have passed since the last thorough flush — and then
writes the checkpoint's ``physicMsgTimestamp``. The blocking ``fdatasync`` calls run in a worker thread,
never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker_stub.store.checkpoint import StoreCheckpoint
from broker_stub.store.commit_log import CommitLog

log = logging.getLogger(__name__)


class FlushRealTimeService:
    """Periodic CommitLog flusher. ``run()`` is the task body; ``flush_all()`` is the shutdown flush."""

    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint, *, interval_ms: int,
                 least_pages: int, thorough_interval_ms: int) -> None:
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.interval_ms = interval_ms
        self.least_pages = least_pages
        self.thorough_interval_ms = thorough_interval_ms
        self._last_thorough = time.monotonic()
        self._lock = asyncio.Lock()
        self.flush_rounds = 0

    async def run(self) -> None:
        """Flush forever (until cancelled)."""
        log.info("flush service started flushIntervalCommitLog=%d flushCommitLogLeastPages=%d "
                 "flushCommitLogThoroughInterval=%d", self.interval_ms, self.least_pages, self.thorough_interval_ms)
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            least = self.least_pages
            now = time.monotonic()
            if (now - self._last_thorough) * 1000 >= self.thorough_interval_ms:
                self._last_thorough = now
                least = 0
            try:
                await self.flush(least)
            except OSError as exc:
                log.error("CommitLog flush failed error=%s", exc)

    async def flush(self, least_pages: int) -> None:
        """One flush round in a worker thread (files snapshotted on the loop first)."""
        async with self._lock:
            work = [(mf, mf.wrote_position) for mf in self.commit_log.mapped_file_queue.files
                    if mf.is_able_to_flush(least_pages)]
            if not work:
                return
            store_ts = self.commit_log.last_store_timestamp
            job = asyncio.ensure_future(asyncio.to_thread(self._flush_sync, work, store_ts))
            try:
                await asyncio.shield(job)
            except asyncio.CancelledError:
                await job  # never leave an fdatasync running on files that are about to be closed
                raise
            self.flush_rounds += 1

    async def flush_all(self) -> None:
        """Flush every dirty byte and the checkpoint (shutdown)."""
        await self.flush(0)
        async with self._lock:
            await asyncio.to_thread(self._write_checkpoint, self.commit_log.last_store_timestamp)

    def _flush_sync(self, work, store_ts: int) -> None:
        for mf, position in work:
            mf.flush_to(position)
        self._write_checkpoint(store_ts)

    def _write_checkpoint(self, store_ts: int) -> None:
        if store_ts:
            self.checkpoint.physic_msg_timestamp = store_ts
        self.checkpoint.flush()
