"""Flushing the CommitLog: ASYNC_FLUSH (:class:`FlushRealTimeService`) and SYNC_FLUSH's group commit
(:class:`GroupCommitService`), RocketMQ 4.9.8's services of the same names.

The blocking ``fdatasync`` calls run in a worker thread, never on the event loop. The rules and defaults:
docs/protocol.md §6; the keys and where the stub differs: docs/broker_stub.md "Configuration keys" and "What it
does (RocketMQ 4.9.8 behaviour)".
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker_stub.store.checkpoint import StoreCheckpoint
from broker_stub.store.commit_log import CommitLog, PutMessageStatus

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
        self._lock = asyncio.Lock()  # held while a worker thread flushes (retention waits for it)
        self.flush_rounds = 0

    async def run(self) -> None:
        """Flush forever (until cancelled)."""
        log.debug("flush service started flushIntervalCommitLog=%d flushCommitLogLeastPages=%d "
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


class GroupCommitService:
    """SYNC_FLUSH group commit (see module doc). ``run()`` is the task body; :meth:`wait_flush` is per put.

    Args:
        sync_flush_timeout_ms: ``syncFlushTimeout``, the longest a put waits for its flush.
        checkpoint_interval_ms: how often the checkpoint page is written (``flushIntervalConsumeQueue``).
    """

    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint, *, sync_flush_timeout_ms: int,
                 checkpoint_interval_ms: int = 1000) -> None:
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.sync_flush_timeout_ms = sync_flush_timeout_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._requests: list[tuple[int, asyncio.Future]] = []
        self._wakeup = asyncio.Event()
        self._lock = asyncio.Lock()
        self._last_checkpoint = 0.0
        self.flush_rounds = 0
        commit_log.append_listeners.append(self._on_append)

    def _on_append(self, _max_offset: int) -> None:
        self._wakeup.set()

    @property
    def flushed_where(self) -> int:
        """CommitLog offset up to which every byte is on disk."""
        return self.commit_log.mapped_file_queue.flushed_where

    async def run(self) -> None:
        """Flush whenever appends happened (until cancelled)."""
        log.info("group commit service started syncFlushTimeout=%d", self.sync_flush_timeout_ms)
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.flush()
            except OSError as exc:
                log.error("CommitLog group commit flush failed error=%s", exc)

    async def flush(self) -> None:
        """Flush every dirty byte in a worker thread, then complete the requests it covered."""
        async with self._lock:
            work = [(mf, mf.wrote_position) for mf in self.commit_log.mapped_file_queue.files
                    if mf.wrote_position > mf.flushed_position]
            now = time.monotonic()
            write_checkpoint = (now - self._last_checkpoint) * 1000 >= self.checkpoint_interval_ms
            if work or write_checkpoint:
                if write_checkpoint:
                    self._last_checkpoint = now
                store_ts = self.commit_log.last_store_timestamp
                job = asyncio.ensure_future(asyncio.to_thread(self._flush_sync, work, store_ts, write_checkpoint))
                try:
                    await asyncio.shield(job)
                except asyncio.CancelledError:
                    await job
                    raise
                self.flush_rounds += 1
            self._complete(self.flushed_where)

    def _complete(self, flushed: int) -> None:
        if not self._requests:
            return
        still = []
        for next_offset, fut in self._requests:
            if fut.done():
                continue
            if next_offset <= flushed:
                fut.set_result(PutMessageStatus.PUT_OK)
            else:
                still.append((next_offset, fut))
        self._requests = still

    def _flush_sync(self, work, store_ts: int, write_checkpoint: bool) -> None:
        for mf, position in work:
            mf.flush_to(position)
        if store_ts:
            self.checkpoint.physic_msg_timestamp = store_ts
        if write_checkpoint:
            self.checkpoint.flush()

    async def wait_flush(self, next_offset: int) -> PutMessageStatus:
        """PUT_OK once the CommitLog is flushed to ``next_offset``; FLUSH_DISK_TIMEOUT after syncFlushTimeout."""
        if self.flushed_where >= next_offset:
            return PutMessageStatus.PUT_OK
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._requests.append((next_offset, fut))
        self._wakeup.set()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout=self.sync_flush_timeout_ms / 1000)
        except TimeoutError:
            log.warning("flush disk timeout nextOffset=%d flushedWhere=%d syncFlushTimeout=%d", next_offset,
                        self.flushed_where, self.sync_flush_timeout_ms)
            return PutMessageStatus.FLUSH_DISK_TIMEOUT
        finally:
            self._requests = [(o, f) for o, f in self._requests if f is not fut]

    async def flush_all(self) -> None:
        """Flush every dirty byte and the checkpoint (shutdown)."""
        self._last_checkpoint = 0.0
        await self.flush()
        for _, fut in self._requests:  # not covered by the final flush (it failed): answer now
            if not fut.done():
                fut.set_result(PutMessageStatus.FLUSH_DISK_TIMEOUT)
        self._requests = []
