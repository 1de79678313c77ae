"""CommitLog recovery at start-up (RocketMQ 4.9.8 ``recoverNormally`` / ``recoverAbnormally``): find the end of
valid data, then hand what follows to :mod:`broker_stub.store.quarantine` instead of deleting it.

:func:`rebuild_topic_queue_table` derives ``topicQueueTable`` by walking every record header (the next queue
offset of ``topic-queueId`` is 1 + its highest stored QUEUEOFFSET, NOT/COMMIT types only); the store takes the
table from the ConsumeQueues, so this is a cross-check for tests. The rules: docs/protocol.md §1.11; where the
stub differs: docs/broker_stub.md "CommitLog files and recovery".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from broker_stub.store.checkpoint import StoreCheckpoint
from broker_stub.store.mapped_file import MappedFile, MappedFileQueue
from broker_stub.store.quarantine import plan_cut, quarantine_cut, refusal, save_torn_tail
from connector.errors import CommitLogFormatError
from connector.protocol.commitlog import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BlankRecord,
    DispatchInfo,
    MessageRecord,
    decode_dispatch_info,
    decode_record,
    read_record_head,
)

log = logging.getLogger(__name__)

_SKIP_TYPES = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


@dataclass
class RecoveryReport:
    """What recovery found: the recovered end offset, how it scanned, and what it cut."""

    abnormal: bool
    start_file: str | None
    max_offset: int
    records_checked: int
    stop_reason: str | None = None  # why the scan stopped before the end of the files (None: clean end)
    quarantine: str | None = None  # folder the cut bytes/files went to (None: nothing was cut)


def recover_commit_log(queue: MappedFileQueue, *, abnormal: bool, check_crc: bool,
                       checkpoint: StoreCheckpoint | None, cut_corrupt: bool = False,
                       store_root: Path | None = None) -> RecoveryReport:
    """Find the last valid record, cut after it (see module doc), and set the write/flush positions.

    ``cut_corrupt`` is ``cutCorruptCommitLogOnRecover``; ``store_root`` holds ``quarantine/`` (default:
    the CommitLog folder's parent). Returns a RecoveryReport. Raises CommitLogRecoveryError (nothing
    changed) when an invalid record is followed by data in later files and ``cut_corrupt`` is off;
    OSError from copying, moving or truncating files propagates.
    """
    files = queue.files
    if not files:
        log.debug("recovery: no CommitLog files dir=%s", queue.store_path)
        return RecoveryReport(abnormal, None, 0, 0)
    if abnormal:
        index = _abnormal_start_index(files, checkpoint)
    else:
        index = max(len(files) - 3, 0)
    start_file = files[index].file_name
    log.info("recovery start mode=%s file=%s checkCRCOnRecover=%s", "abnormal" if abnormal else "normal",
             start_file, check_crc)
    process_offset = files[index].file_from_offset
    checked = 0
    reason = None
    while index < len(files):
        mf = files[index]
        pos, n, reason, ended_by_blank = _scan_file(mf, check_crc)
        checked += n
        if ended_by_blank:
            process_offset = mf.file_tail_offset
            index += 1
            if index < len(files):
                continue
            break
        process_offset = mf.file_from_offset + pos
        break
    folder = _cut_safely(queue, process_offset, reason, cut_corrupt, store_root or queue.store_path.parent)
    queue.truncate_dirty_files(process_offset)
    for mf in queue.files:
        if mf.file_tail_offset <= process_offset:
            mf.wrote_position = mf.flushed_position = mf.file_size
    log.info("recovery done maxOffset=%d recordsChecked=%d stop=%s", queue.max_offset, checked, reason or "end")
    return RecoveryReport(abnormal, start_file, queue.max_offset, checked, reason, folder)


def _cut_safely(queue: MappedFileQueue, offset: int, reason: str | None, cut_corrupt: bool,
                root: Path) -> str | None:
    """Before truncating at ``offset``: refuse, quarantine or save the torn tail; returns the folder used."""
    plan = plan_cut(queue, offset)
    if plan.loses_later_files:
        if not cut_corrupt:
            raise refusal(plan, reason, root)
        folder = quarantine_cut(queue, plan, root)
        log.warning("CommitLog cut at offset %d by cutCorruptCommitLogOnRecover reason=%s moved=%s quarantine=%s",
                    offset, reason, plan.describe_following().replace(" ", "_"), folder)
        return str(folder)
    saved = save_torn_tail(plan, root)
    if saved is not None:
        log.warning("CommitLog torn tail truncated file=%s position=%d bytes=%d reason=%s savedTo=%s",
                    plan.cut_file.file_name, plan.cut_position, plan.tail_bytes, reason, saved)
        return str(saved.parent)
    return None


def _scan_file(mf: MappedFile, check_crc: bool) -> tuple[int, int, str | None, bool]:
    """Validate records from the start of ``mf``: (end position, records, stop reason, ended by a blank)."""
    buf = mf.mapping
    pos = 0
    count = 0
    size = mf.file_size
    while pos < size:
        try:
            rec = decode_record(buf, pos, base_offset=mf.file_from_offset, check_crc=check_crc,
                                file=mf.file_name, file_end=size)
        except CommitLogFormatError as exc:
            if _is_zero(buf, pos):
                return pos, count, None, False
            return pos, count, str(exc), False
        if isinstance(rec, BlankRecord):
            return pos, count, None, True
        if not isinstance(rec, MessageRecord):  # EndOfData
            return pos, count, None, False
        if rec.physical_offset != rec.commit_log_offset:
            return pos, count, (f"PHYSICALOFFSET {rec.physical_offset} != position {rec.commit_log_offset} "
                                f"in {mf.file_name}"), False
        pos += rec.store_size
        count += 1
    return pos, count, None, False


def _is_zero(buf, pos: int) -> bool:
    return not any(buf[pos:pos + 8])


def _abnormal_start_index(files: list[MappedFile], checkpoint: StoreCheckpoint | None) -> int:
    """isMappedFileMatchedRecover: the last file whose first record's store time ≤ the checkpoint time."""
    min_ts = checkpoint.min_timestamp_for_recovery() if checkpoint else 0
    for index in range(len(files) - 1, -1, -1):
        head = read_record_head(files[index].mapping)
        store_ts = head.store_timestamp if head is not None else None
        if store_ts and store_ts <= min_ts:
            return index
    return 0


def rebuild_topic_queue_table(queue: MappedFileQueue) -> dict[str, int]:
    """``topicQueueTable`` from the record headers of every file: ``{"topic-queueId": next queue offset}``.

    Walks headers only (no CRC); a file whose headers stop making sense is skipped with a warning.
    """
    table: dict[str, int] = {}
    records = 0
    for mf in queue.files:
        buf = mf.mapping
        end = mf.wrote_position
        pos = 0
        while pos < end:
            try:
                rec = decode_dispatch_info(buf, pos, base_offset=mf.file_from_offset, file=mf.file_name, file_end=end)
            except CommitLogFormatError as exc:
                log.warning("topicQueueTable rebuild: unreadable header file=%s position=%d (%s)", mf.file_name,
                            pos, exc)
                break
            if not isinstance(rec, DispatchInfo):  # the END_FILE blank, or the end of written data
                break
            if rec.transaction_type not in _SKIP_TYPES:
                key = f"{rec.topic}-{rec.queue_id}"
                if rec.queue_offset + 1 > table.get(key, 0):
                    table[key] = rec.queue_offset + 1
            records += 1
            pos += rec.store_size
    log.info("topicQueueTable rebuilt queues=%d records=%d", len(table), records)
    return table
