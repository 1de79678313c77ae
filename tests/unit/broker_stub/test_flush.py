"""GroupCommitService (SYNC_FLUSH) on a real CommitLog in a temporary folder."""

from __future__ import annotations

import asyncio

from broker_stub.store.checkpoint import StoreCheckpoint
from broker_stub.store.commit_log import CommitLog, PutMessageStatus
from broker_stub.store.flush import GroupCommitService
from broker_stub.store.mapped_file import MappedFileQueue

FILE = 65536


def _store(tmp_path):
    queue = MappedFileQueue(tmp_path / "commitlog", FILE)
    queue.load()
    return queue, CommitLog(queue, max_message_size=4 << 20, max_delay_level=18)


def test_group_commit_completes_requests_covered_by_a_flush(tmp_path):
    queue, commit_log = _store(tmp_path)

    async def scenario():
        service = GroupCommitService(commit_log, StoreCheckpoint(tmp_path / "checkpoint"),
                                     sync_flush_timeout_ms=5000)
        task = asyncio.create_task(service.run())
        try:
            commit_log.append_data(0, b"a" * 1000)
            commit_log.append_data(1000, b"b" * 3000)
            statuses = await asyncio.gather(service.wait_flush(1000), service.wait_flush(4000))
            assert statuses == [PutMessageStatus.PUT_OK, PutMessageStatus.PUT_OK]
            assert queue.flushed_where == 4000
            assert service.flush_rounds >= 1
            # already flushed: answered without waiting
            assert await service.wait_flush(4000) is PutMessageStatus.PUT_OK
        finally:
            task.cancel()

    asyncio.run(scenario())
    queue.close()


def test_flush_that_cannot_finish_in_time_is_flush_disk_timeout(tmp_path):
    queue, commit_log = _store(tmp_path)

    async def scenario():
        # the service task is not running: nothing flushes, so the deadline passes
        service = GroupCommitService(commit_log, StoreCheckpoint(tmp_path / "checkpoint"), sync_flush_timeout_ms=50)
        commit_log.append_data(0, b"x" * 500)
        assert await service.wait_flush(500) is PutMessageStatus.FLUSH_DISK_TIMEOUT
        await service.flush_all()
        assert queue.flushed_where == 500
        assert await service.wait_flush(500) is PutMessageStatus.PUT_OK

    asyncio.run(scenario())
    queue.close()
