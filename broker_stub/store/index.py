"""The message index: RocketMQ 4.9.8 ``IndexFile`` and ``IndexService``, files under ``{storePathRootDir}/index/``
built by the dispatcher (:mod:`broker_stub.store.reput`) and read by QUERY_MESSAGE.

File layout, keys and hashing, lookup and crash rules: docs/protocol.md §5.4; what the stub serves with it:
docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)", "Message index". A file is created sparse and
memory-mapped, so only touched pages take memory.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from broker_stub.javautil import java_string_hash
from broker_stub.store.checkpoint import StoreCheckpoint
from connector.protocol.commitlog import TRANSACTION_ROLLBACK_TYPE, DispatchInfo
from connector.protocol.commitlog.properties import PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX

log = logging.getLogger(__name__)

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
INVALID_INDEX = 0
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
_HEADER = struct.Struct(">qqqqii")
_BEGIN_TS, _END_TS, _BEGIN_PHY, _END_PHY = 0, 8, 16, 24  # header positions written on their own
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ENTRY = struct.Struct(">iqii")
_INT_MAX = 2 ** 31 - 1


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """Bytes of one index file: header + slots + entries."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``Math.abs(key.hashCode())``, 0 when that stays negative."""
    h = abs(java_string_hash(key))
    return 0 if h > _INT_MAX else h


def build_key(topic: str, key: str) -> str:
    """``IndexService.buildKey``: ``topic#key``."""
    return f"{topic}#{key}"


def time_millis_to_human_string(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in local time."""
    return datetime.fromtimestamp(ms // 1000).strftime("%Y%m%d%H%M%S") + f"{ms % 1000:03d}"


def _file_name_ms(name: str) -> int:
    """The epoch ms a file name stands for (-1 when it is no timestamp)."""
    try:
        return int(datetime.strptime(name[:14], "%Y%m%d%H%M%S").timestamp()) * 1000 + int(name[14:17])
    except ValueError:
        return -1


class IndexFile:
    """One memory-mapped index file (see module doc). Raises OSError when the file cannot be mapped.

    Args:
        path: the file; created (sparse) or extended to the full size when shorter.
        hash_slot_num / index_num: ``maxHashSlotNum`` / ``maxIndexNum``.
        end_phy_offset / end_timestamp: the previous file's end (a new file starts there; 0 = none).
        load: read the header from the file (an existing file) instead of starting an empty one.
    """

    def __init__(self, path: Path, hash_slot_num: int, index_num: int, end_phy_offset: int = 0,
                 end_timestamp: int = 0, *, load: bool = False) -> None:
        self.path = Path(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = index_file_size(hash_slot_num, index_num)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            self.mapping = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        # the header lives in these fields; like 4.9.8's IndexHeader, a new file's indexCount of 1 reaches the
        # disk with its first entry (or a flush), the inherited begin/end values at once
        if load:
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
             self.hash_slot_count, self.index_count) = _HEADER.unpack_from(self.mapping, 0)
            self.index_count = max(self.index_count, 1)
        else:
            self.begin_timestamp = self.end_timestamp = self.begin_phy_offset = self.end_phy_offset = 0
            self.hash_slot_count, self.index_count = 0, 1
            if end_phy_offset > 0:
                self.begin_phy_offset = self.end_phy_offset = end_phy_offset
                _I64.pack_into(self.mapping, _BEGIN_PHY, end_phy_offset)
                _I64.pack_into(self.mapping, _END_PHY, end_phy_offset)
            if end_timestamp > 0:
                self.begin_timestamp = self.end_timestamp = end_timestamp
                _I64.pack_into(self.mapping, _BEGIN_TS, end_timestamp)
                _I64.pack_into(self.mapping, _END_TS, end_timestamp)

    def _write_header(self) -> None:
        """``IndexHeader.updateByteBuffer``: all six header fields to the mapping."""
        _HEADER.pack_into(self.mapping, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                          self.end_phy_offset, self.hash_slot_count, self.index_count)

    @property
    def file_name(self) -> str:
        """The file's name (its creation time, ``yyyyMMddHHmmssSSS``)."""
        return self.path.name

    def is_write_full(self) -> bool:
        """``isWriteFull``: indexCount reached ``maxIndexNum``."""
        return self.index_count >= self.index_num

    def _slot_pos(self, key_hash: int) -> int:
        return INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE

    def _entry_pos(self, number: int) -> int:
        return INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + number * INDEX_ENTRY_SIZE

    # --- writes and reads ---------------------------------------------------------------------------
    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """``putKey``: add an entry for ``key`` (a ``topic#key`` string); False when the file is full.

        The new entry links to the slot's previous entry and becomes the slot's head; its time is whole
        seconds after beginTimestamp (0 while the file has no beginTimestamp, clamped to 0..2^31-1).
        """
        count = self.index_count
        if count >= self.index_num:
            log.warning("index file full indexCount=%d maxIndexNum=%d", count, self.index_num)
            return False
        key_hash = index_key_hash(key)
        slot_pos = self._slot_pos(key_hash)
        slot_value = _I32.unpack_from(self.mapping, slot_pos)[0]
        if slot_value <= INVALID_INDEX or slot_value > count:
            slot_value = INVALID_INDEX
        begin = self.begin_timestamp
        time_diff = (store_timestamp - begin) // 1000  # a negative difference ends as 0 either way
        if begin <= 0 or time_diff < 0:
            time_diff = 0
        time_diff = min(time_diff, _INT_MAX)
        _ENTRY.pack_into(self.mapping, self._entry_pos(count), key_hash, phy_offset, time_diff, slot_value)
        _I32.pack_into(self.mapping, slot_pos, count)
        if count <= 1:
            self.begin_phy_offset, self.begin_timestamp = phy_offset, store_timestamp
        if slot_value == INVALID_INDEX:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset, self.end_timestamp = phy_offset, store_timestamp
        self._write_header()  # 4.9.8 writes each changed field; after an entry all six are written
        return True

    def is_time_matched(self, begin: int, end: int) -> bool:
        """``isTimeMatched``: [begin, end] (epoch ms) overlaps the file's [beginTimestamp, endTimestamp]."""
        fb, fe = self.begin_timestamp, self.end_timestamp
        return (begin < fb and end > fe) or fb <= begin <= fe or fb <= end <= fe

    def select_phy_offsets(self, phy_offsets: list[int], key: str, max_num: int, begin: int, end: int) -> None:
        """``selectPhyOffset``: append to ``phy_offsets`` the CommitLog offsets of ``key``'s entries stored
        in [begin, end] ms, newest first, walking the slot's chain until ``max_num`` offsets, the chain's
        end, a broken link, or an entry older than ``begin``. Entries of other keys in the slot are skipped.
        """
        count = self.index_count
        key_hash = index_key_hash(key)
        number = _I32.unpack_from(self.mapping, self._slot_pos(key_hash))[0]
        if number <= INVALID_INDEX or number > count or count <= 1:
            return
        file_begin = self.begin_timestamp
        while len(phy_offsets) < max_num:
            hash_read, phy_read, time_diff, prev = _ENTRY.unpack_from(self.mapping, self._entry_pos(number))
            if time_diff < 0:
                break
            time_read = file_begin + time_diff * 1000
            if hash_read == key_hash and begin <= time_read <= end:
                phy_offsets.append(phy_read)
            if prev <= INVALID_INDEX or prev > count or prev == number or time_read < begin:
                break
            number = prev

    def flush(self) -> None:
        """``IndexFile.flush``: the header fields to the mapping, then the mapped pages to disk."""
        self._write_header()
        self.mapping.flush()

    def close(self) -> None:
        """Unmap the file (no flush: the pages stay in the OS page cache, as with 4.9.8)."""
        self.mapping.close()

    def destroy(self) -> None:
        """Unmap and delete the file."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


@dataclass
class QueryOffsetResult:
    """``QueryOffsetResult``: CommitLog offsets found, and the last file's endTimestamp / endPhyOffset."""

    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class IndexService:
    """The index files of a store (see module doc). Not thread-safe: used from the event loop only.

    Args:
        store_path: ``{storePathRootDir}/index``.
        hash_slot_num / index_num: ``maxHashSlotNum`` / ``maxIndexNum``.
        max_msgs_num_batch: ``maxMsgsNumBatch``, the most offsets one query returns.
        checkpoint: gets ``indexMsgTimestamp`` when a file fills up (may be set after construction).
    """

    def __init__(self, store_path: Path, *, hash_slot_num: int, index_num: int, max_msgs_num_batch: int,
                 checkpoint: StoreCheckpoint | None = None) -> None:
        self.store_path = Path(store_path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.max_msgs_num_batch = max_msgs_num_batch
        self.checkpoint = checkpoint
        self.files: list[IndexFile] = []

    def load(self, last_exit_ok: bool) -> None:
        """Map the existing files in name order; after an abnormal exit drop those whose endTimestamp is
        later than the checkpoint's ``indexMsgTimestamp``. Raises OSError when a file cannot be mapped."""
        if not self.store_path.is_dir():
            return
        safe_ts = self.checkpoint.index_msg_timestamp if self.checkpoint is not None else 0
        for path in sorted(p for p in self.store_path.iterdir() if p.is_file()):
            f = IndexFile(path, self.hash_slot_num, self.index_num, load=True)
            if not last_exit_ok and f.end_timestamp > safe_ts:
                log.info("index file dropped after abnormal exit file=%s endTimestamp=%d indexMsgTimestamp=%d",
                         f.file_name, f.end_timestamp, safe_ts)
                f.destroy()
                continue
            self.files.append(f)
        log.info("index files loaded count=%d", len(self.files))

    def get_and_create_last_index_file(self) -> IndexFile:
        """The last file when not full, else a new file that starts where the last one ended (the full
        file is flushed and its endTimestamp checkpointed as ``indexMsgTimestamp``). The new file is named
        by the current time, or 1 ms after the last file's name when that is not later."""
        prev = self.files[-1] if self.files else None
        if prev is not None and not prev.is_write_full():
            return prev
        self.store_path.mkdir(parents=True, exist_ok=True)
        now_ms = int(time.time() * 1000)
        if prev is not None:  # two files within one ms (only with tiny test files): the next ms names it
            now_ms = max(now_ms, _file_name_ms(prev.file_name) + 1)
        name = time_millis_to_human_string(now_ms)
        f = IndexFile(self.store_path / name, self.hash_slot_num, self.index_num,
                      prev.end_phy_offset if prev else 0, prev.end_timestamp if prev else 0)
        self.files.append(f)
        log.info("index file created file=%s", name)
        if prev is not None:
            self.flush(prev)
        return f

    def flush(self, f: IndexFile) -> None:
        """``IndexService.flush``: flush ``f``; a full file's endTimestamp goes to the checkpoint."""
        f.flush()
        if f.is_write_full() and f.end_timestamp > 0 and self.checkpoint is not None:
            self.checkpoint.index_msg_timestamp = f.end_timestamp
            self.checkpoint.flush()

    def build_index(self, info: DispatchInfo, props: dict[str, str]) -> None:
        """``buildIndex`` for one dispatched record (see module doc); ``props`` its parsed properties."""
        f = self.get_and_create_last_index_file()
        if info.commit_log_offset < f.end_phy_offset or info.transaction_type == TRANSACTION_ROLLBACK_TYPE:
            return
        uniq_key = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        keys = props.get(PROPERTY_KEYS)
        if uniq_key is not None:
            f = self._put_key(f, info, build_key(info.topic, uniq_key))
        if keys:
            for key in keys.split(KEY_SEPARATOR):
                if key:
                    f = self._put_key(f, info, build_key(info.topic, key))

    def _put_key(self, f: IndexFile, info: DispatchInfo, key: str) -> IndexFile:
        while not f.put_key(key, info.commit_log_offset, info.store_timestamp):
            f = self.get_and_create_last_index_file()
        return f

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """``queryOffset``: offsets of ``topic#key`` stored in [begin, end] ms, newest files first, at most
        ``min(max_num, maxMsgsNumBatch)``; stops at a file that begins before ``begin``."""
        result = QueryOffsetResult()
        max_num = min(max_num, self.max_msgs_num_batch)
        idx_key = build_key(topic, key)
        for i in range(len(self.files) - 1, -1, -1):
            f = self.files[i]
            if i == len(self.files) - 1:
                result.index_last_update_timestamp = f.end_timestamp
                result.index_last_update_phyoffset = f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(result.phy_offsets, idx_key, max_num, begin, end)
            if f.begin_timestamp < begin or len(result.phy_offsets) >= max_num:
                break
        return result

    def delete_expired_files(self, min_phy_offset: int) -> int:
        """``deleteExpiredFile``: delete leading files (never the last) that end below ``min_phy_offset``."""
        removed = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < min_phy_offset:
            self.files.pop(0).destroy()
            removed += 1
        return removed

    def flush_all(self) -> None:
        """Flush every file (shutdown)."""
        for f in self.files:
            f.flush()

    def close(self) -> None:
        """Unmap every file and forget them."""
        for f in self.files:
            f.close()
        self.files = []


__all__ = ["INDEX_ENTRY_SIZE", "INDEX_HEADER_SIZE", "IndexFile", "IndexService", "QueryOffsetResult", "build_key",
           "index_file_size", "index_key_hash"]
