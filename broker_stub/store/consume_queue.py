"""ConsumeQueues (RocketMQ 4.9.8 ``ConsumeQueue``): one index file queue per (topic, queueId), its entries, queue
offsets, placeholders for a queue first seen mid-stream, and recovery of its tail (scanned with numpy over the
mapped bytes).

Entry and file layout, repeated dispatches and recovery: docs/protocol.md §5.1; the stub's store:
docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from broker_stub.store.mapped_file import MappedFile, MappedFileQueue
from connector.protocol.consume_queue import (
    CQ_ENTRY,
    CQ_ENTRY_FIELDS,
    CQ_STORE_UNIT_SIZE,
    PLACEHOLDER_ENTRY,
    PLACEHOLDER_SIZE,
)
from connector.protocol.mapped_files import file_start

log = logging.getLogger(__name__)

_DTYPE = np.dtype([(name, ">" + code) for name, code in CQ_ENTRY_FIELDS])


def consume_queue_file_size(configured: int) -> int:
    """MessageStoreConfig.getMappedFileSizeConsumeQueue: ``mappedFileSizeConsumeQueue`` rounded up to 20 bytes."""
    return -(-configured // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE


def _find(mf: MappedFile, upto: int | None, cond, *, last: bool = False) -> int | None:
    """Index of the first (or last) entry of ``mf`` below ``upto`` bytes for which ``cond(entries)`` holds.

    The numpy view of the mapping lives only inside this call, so the file can be unmapped afterwards.
    """
    end = mf.file_size if upto is None else upto
    entries = np.frombuffer(mf.mapping, dtype=_DTYPE, count=end // CQ_STORE_UNIT_SIZE)
    hits = np.flatnonzero(cond(entries))
    del entries
    if not len(hits):
        return None
    return int(hits[-1] if last else hits[0])


def _bad(e):
    return (e["offset"] < 0) | (e["size"] <= 0)


def _real(e):
    return e["size"] != PLACEHOLDER_SIZE


class ConsumeQueue:
    """The index of one (topic, queueId). Raises OSError on file failures, ValueError for foreign files."""

    def __init__(self, topic: str, queue_id: int, root: Path, mapped_file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.dir = Path(root) / topic / str(queue_id)
        self.mapped_file_size = mapped_file_size
        self.files = MappedFileQueue(self.dir, mapped_file_size, preallocate=False,
                                     kind="ConsumeQueue")  # sparse, as upstream
        self.min_logic_offset = 0  # bytes
        self.max_physic_offset = -1  # end (offset + size) of the last dispatched record
        self.first_created_in_queue = False

    # --- load / recover ------------------------------------------------------------------------------
    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Find the end of valid entries (see module doc) and set positions and ``maxPhysicOffset``."""
        files = self.files.files
        if not files:
            return
        index = max(len(files) - 3, 0)
        end_offset = files[index].file_from_offset
        while index < len(files):
            mf = files[index]
            bad = _find(mf, None, _bad)
            if bad is not None:
                end_offset = mf.file_from_offset + bad * CQ_STORE_UNIT_SIZE
                break
            end_offset = mf.file_tail_offset
            index += 1
        self.files.truncate_dirty_files(end_offset)
        for mf in self.files.files:
            if mf.file_tail_offset <= end_offset:
                mf.wrote_position = mf.flushed_position = mf.file_size
        last = self._last_real_entry()
        self.max_physic_offset = last[0] + last[1] if last else -1

    def _last_real_entry(self) -> tuple[int, int, int] | None:
        for mf in reversed(self.files.files):
            if mf.wrote_position == 0:
                continue
            real = _find(mf, mf.wrote_position, _real, last=True)
            if real is not None:
                return CQ_ENTRY.unpack_from(mf.read(real * CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE), 0)
        return None

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """ConsumeQueue.correctMinOffset: ``minLogicOffset`` = the first entry whose record the CommitLog still has."""
        for mf in self.files.files:
            if mf.wrote_position == 0:
                continue
            ok = _find(mf, mf.wrote_position, lambda e: (e["offset"] >= commit_log_min_offset) & _real(e))
            if ok is not None:
                self.min_logic_offset = mf.file_from_offset + ok * CQ_STORE_UNIT_SIZE
                return
        self.min_logic_offset = self.max_logic_byte_offset

    def truncate_dirty(self, commit_log_max_offset: int) -> None:
        """truncateDirtyLogicFiles: drop entries whose record starts at or past ``commit_log_max_offset``."""
        cut = None
        for mf in self.files.files:
            if mf.wrote_position == 0:
                continue
            dirty = _find(mf, mf.wrote_position, lambda e: (e["offset"] >= commit_log_max_offset) & _real(e))
            if dirty is not None:
                cut = mf.file_from_offset + dirty * CQ_STORE_UNIT_SIZE
                break
        if cut is None:
            return
        log.warning("consume queue truncated topic=%s queueId=%d logicOffset=%d commitLogMaxOffset=%d",
                    self.topic, self.queue_id, cut // CQ_STORE_UNIT_SIZE, commit_log_max_offset)
        self.files.truncate_dirty_files(cut)
        last = self._last_real_entry()
        self.max_physic_offset = last[0] + last[1] if last else -1

    # --- offsets -------------------------------------------------------------------------------------
    @property
    def max_logic_byte_offset(self) -> int:
        return self.files.max_offset

    @property
    def min_offset_in_queue(self) -> int:
        """getMinOffsetInQueue: the first entry still backed by the CommitLog (an entry count)."""
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    @property
    def max_offset_in_queue(self) -> int:
        """getMaxOffsetInQueue: the entry count (= next queue offset)."""
        return self.files.max_offset // CQ_STORE_UNIT_SIZE

    # --- write ---------------------------------------------------------------------------------------
    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Append the entry of queue offset ``cq_offset`` (ConsumeQueue.putMessagePositionInfo).

        Returns True when written or recognised as a repeat; raises OSError when a file cannot be created.
        """
        if offset + size <= self.max_physic_offset:
            return True  # "Maybe try to build consume queue repeatedly"
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        queue = self.files
        mf = queue.last_mapped_file()
        if mf is None:
            first = file_start(expect, self.mapped_file_size)
            mf = queue.create_next_file(first)
            self.first_created_in_queue = True
            if expect:
                self.min_logic_offset = expect
                self._fill_placeholders(mf, expect)
            else:
                self.min_logic_offset = 0
        current = queue.max_offset
        if expect < current:
            log.warning("Build consume queue repeatedly, expectLogicOffset: %d currentLogicOffset: %d Topic: %s "
                        "QID: %d", expect, current, self.topic, self.queue_id)
            return True
        if expect > current:
            log.error("[BUG]logic queue order maybe wrong, expectLogicOffset: %d currentLogicOffset: %d Topic: %s "
                      "QID: %d; filling the gap with placeholder entries", expect, current, self.topic, self.queue_id)
            while queue.max_offset < expect:
                mf = self._writable_file()
                mf.append(PLACEHOLDER_ENTRY)
        mf = self._writable_file()
        mf.append(CQ_ENTRY.pack(offset, size, tags_code))
        self.max_physic_offset = offset + size
        return True

    def _writable_file(self) -> MappedFile:
        mf = self.files.last_mapped_file()
        if mf is None or mf.is_full:
            mf = self.files.create_next_file()
        return mf

    @staticmethod
    def _fill_placeholders(mf: MappedFile, until_logic_offset: int) -> None:
        count = (until_logic_offset - mf.file_from_offset) // CQ_STORE_UNIT_SIZE
        if count > 0:
            mf.append(PLACEHOLDER_ENTRY * count)

    # --- read ----------------------------------------------------------------------------------------
    def get_index_buffer(self, queue_offset: int) -> bytes | None:
        """getIndexBuffer: the entries from ``queue_offset`` to the end of the written part of its file."""
        byte_offset = queue_offset * CQ_STORE_UNIT_SIZE
        if byte_offset < self.min_logic_offset:
            return None
        mf = self.files.find_mapped_file_by_offset(byte_offset)
        if mf is None:
            return None
        pos = byte_offset - mf.file_from_offset
        if pos >= mf.wrote_position:
            return None
        return mf.read(pos, mf.wrote_position - pos)

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        """``(CommitLog offset, size, tagsCode)`` of one entry, or None when it does not exist."""
        buf = self.get_index_buffer(queue_offset)
        if not buf:
            return None
        return CQ_ENTRY.unpack_from(buf, 0)

    def get_offset_in_queue_by_time(self, timestamp: int, min_physic_offset: int,
                                    store_time: Callable[[int, int], int]) -> int:
        """ConsumeQueue.getOffsetInQueueByTime: the queue offset whose record's store time is ``timestamp``
        (epoch ms) or, failing that, the nearer of its two neighbours found by the binary search.

        Searches one file: the first whose last modification is at or after ``timestamp``, else the last.
        Entries pointing below ``min_physic_offset`` count as older. ``store_time(offset, size)`` is
        ``CommitLog.pickupStoreTimestamp`` (negative when unreadable: the answer is then 0). 0 without files.
        """
        files = self.files.files
        if not files:
            return 0
        mf = next((f for f in files if os.stat(f.path).st_mtime * 1000 >= timestamp), files[-1])
        low = max(self.min_logic_offset - mf.file_from_offset, 0)
        high = mf.wrote_position - CQ_STORE_UNIT_SIZE
        buf = mf.mapping
        target = left = right = -1
        left_time = right_time = -1
        while high >= low:
            mid = (low + high) // (2 * CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
            phy, size, _ = CQ_ENTRY.unpack_from(buf, mid)
            if phy < min_physic_offset:
                low, left = mid + CQ_STORE_UNIT_SIZE, mid
                continue
            stored = store_time(phy, size)
            if stored < 0:
                return 0
            if stored == timestamp:
                target = mid
                break
            if stored > timestamp:
                high, right, right_time = mid - CQ_STORE_UNIT_SIZE, mid, stored
            else:
                low, left, left_time = mid + CQ_STORE_UNIT_SIZE, mid, stored
        if target != -1:
            offset = target
        elif left_time == -1:
            offset = right
        elif right_time == -1:
            offset = left
        else:
            offset = right if abs(timestamp - left_time) > abs(timestamp - right_time) else left
        total = mf.file_from_offset + offset
        return -(-total // CQ_STORE_UNIT_SIZE) if total < 0 else total // CQ_STORE_UNIT_SIZE  # Java division

    def roll_next_file(self, queue_offset: int) -> int:
        """ConsumeQueue.rollNextFile: the first queue offset of the file after the one holding ``queue_offset``."""
        per_file = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return queue_offset + per_file - queue_offset % per_file

    # --- retention -----------------------------------------------------------------------------------
    def delete_expired_files(self, commit_log_min_offset: int) -> int:
        """deleteExpiredFile: delete whole files whose last entry points below ``commit_log_min_offset``.

        The last file is always kept. Returns the number of files deleted; fixes ``minLogicOffset``.
        """
        deleted = 0
        files = self.files.files
        while len(files) > 1:
            mf = files[0]
            if mf.wrote_position < CQ_STORE_UNIT_SIZE:
                break
            last_offset = CQ_ENTRY.unpack_from(mf.read(mf.wrote_position - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE))[0]
            if last_offset >= commit_log_min_offset:
                break
            mf.destroy()
            files.pop(0)
            deleted += 1
        self.correct_min_offset(commit_log_min_offset)
        return deleted

    def dirty_files(self) -> Iterator[tuple[MappedFile, int]]:
        for mf in self.files.files:
            if mf.wrote_position > mf.flushed_position:
                yield mf, mf.wrote_position

    def close(self) -> None:
        self.files.close()


class ConsumeQueueStore:
    """Every ConsumeQueue of a store (``consumeQueueTable``): load, find/create, flush, close.

    Args:
        root: the ``consumequeue`` folder.
        mapped_file_size: ``mappedFileSizeConsumeQueue`` (rounded up to 20 bytes).
    """

    def __init__(self, root: Path, mapped_file_size: int) -> None:
        self.root = Path(root)
        self.mapped_file_size = consume_queue_file_size(mapped_file_size)
        self.table: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        """Map every ``topic/queueId`` folder under the root (DefaultMessageStore.loadConsumeQueue)."""
        self.root.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
                try:
                    queue_id = int(qdir.name)
                except ValueError:
                    log.warning("consume queue folder ignored (not a queue id) path=%s", qdir)
                    continue
                cq = ConsumeQueue(topic_dir.name, queue_id, self.root, self.mapped_file_size)
                cq.load()
                self.table[(topic_dir.name, queue_id)] = cq
        log.debug("consume queues loaded count=%d", len(self.table))

    def recover(self, commit_log_min_offset: int, commit_log_max_offset: int) -> None:
        """Recover every queue, cut entries past the CommitLog end, fix min offsets."""
        for cq in self.table.values():
            cq.recover()
            cq.truncate_dirty(commit_log_max_offset)
            cq.correct_min_offset(max(commit_log_min_offset, 0))

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.table.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.table.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(topic, queue_id, self.root, self.mapped_file_size)
            self.table[(topic, queue_id)] = cq
        return cq

    @property
    def max_physic_offset(self) -> int:
        """The end of the last record dispatched into any queue (−1 when none)."""
        return max((cq.max_physic_offset for cq in self.table.values()), default=-1)

    def queue_offset_table(self) -> dict[str, int]:
        """``{"topic-queueId": max offset in queue}``: the CommitLog's topicQueueTable (recoverTopicQueueTable)."""
        return {f"{t}-{q}": cq.max_offset_in_queue for (t, q), cq in self.table.items()}

    def dirty_files(self) -> list[tuple[MappedFile, int]]:
        return [item for cq in self.table.values() for item in cq.dirty_files()]

    def close(self) -> None:
        for cq in self.table.values():
            cq.close()
