"""What a recovery cut would lose, and moving it aside instead of deleting it: :func:`plan_cut` measures what
follows the end of valid data, :func:`save_torn_tail` and :func:`quarantine_cut` copy or move it into
``quarantine/``.

The rules (zeros, a torn tail, data in later files, ``cutCorruptCommitLogOnRecover``) and the folder's layout:
docs/broker_stub.md "CommitLog files and recovery".
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker_stub.store.mapped_file import MappedFile, MappedFileQueue
from connector.errors import HAReplicaError

log = logging.getLogger(__name__)

_SCAN_CHUNK_BYTES = 1 << 20
_ZEROS = bytes(_SCAN_CHUNK_BYTES)


class CommitLogRecoveryError(HAReplicaError):
    """Recovery stopped at an invalid record with data after it; nothing was changed on disk.

    Attributes: ``offset`` (CommitLog offset of the invalid record, bytes), ``file`` (its file name).
    """

    def __init__(self, message: str, *, offset: int, file: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.file = file


@dataclass
class CutPlan:
    """What lies after ``offset``, the end of valid data.

    ``cut_file`` holds ``offset`` (None when ``offset`` is the end of the last file); ``tail_end`` is one
    past the last non-zero byte of ``cut_file`` after ``offset`` (file position; equal to the cut position
    when the tail is all zeros); ``data_files`` are later files holding a non-zero byte, ``empty_files``
    later files of zeros only.
    """

    offset: int
    cut_file: MappedFile | None
    tail_end: int = 0
    data_files: list[MappedFile] = field(default_factory=list)
    empty_files: list[MappedFile] = field(default_factory=list)

    @property
    def cut_position(self) -> int:
        return self.offset - self.cut_file.file_from_offset if self.cut_file else 0

    @property
    def tail_bytes(self) -> int:
        """Bytes of the cut file between ``offset`` and its last non-zero byte."""
        return max(self.tail_end - self.cut_position, 0) if self.cut_file else 0

    @property
    def loses_later_files(self) -> bool:
        return bool(self.data_files)

    def describe_following(self) -> str:
        """``"12,345 bytes after it in 00..65536 and 6 later files holding data (00..131072 .. 00..458752, 393,216
        bytes)"``."""
        parts = []
        if self.cut_file is not None and self.tail_bytes:
            parts.append(f"{self.tail_bytes:,} bytes of data after it in {self.cut_file.file_name}")
        if self.data_files:
            total = sum(mf.file_size for mf in self.data_files)
            names = self.data_files[0].file_name
            if len(self.data_files) > 1:
                names += f" .. {self.data_files[-1].file_name}"
            parts.append(f"{len(self.data_files)} later file(s) holding data ({names}, {total:,} bytes)")
        return " and ".join(parts) or "nothing after it"


def _data_segments(fd: int, start: int, end: int):
    """``(from, to)`` file ranges in ``[start, end)`` that may hold data: holes of a sparse file skipped
    with SEEK_DATA/SEEK_HOLE (never read, so never pulled into the page cache); the whole range when the
    file system cannot tell."""
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos
                return
            yield pos, end  # SEEK_DATA not supported: scan everything
            return
        if data >= end:
            return
        yield data, min(hole, end)
        pos = hole


def _data_end(mf: MappedFile, start: int) -> int:
    """One past the last non-zero byte of ``mf`` at or after file position ``start`` (``start`` if none).

    Reads only the file's data segments, 1 MiB at a time with ``pread`` (a 1 GiB file that is mostly a
    hole costs almost nothing).
    """
    last = start
    fd = os.open(mf.path, os.O_RDONLY)
    try:
        for lo, hi in _data_segments(fd, start, mf.file_size):
            for pos in range(lo, hi, _SCAN_CHUNK_BYTES):
                chunk = os.pread(fd, min(_SCAN_CHUNK_BYTES, hi - pos), pos)
                if chunk != _ZEROS[:len(chunk)]:
                    last = pos + len(chunk.rstrip(b"\0"))
    finally:
        os.close(fd)
    return last


def plan_cut(queue: MappedFileQueue, offset: int) -> CutPlan:
    """Measure what a cut at CommitLog ``offset`` would remove from ``queue`` (reads only)."""
    plan = CutPlan(offset, None)
    for mf in queue.files:
        if mf.file_tail_offset <= offset:
            continue
        if mf.file_from_offset <= offset:
            plan.cut_file = mf
            plan.tail_end = _data_end(mf, offset - mf.file_from_offset)
        elif _data_end(mf, 0) > 0:
            plan.data_files.append(mf)
        else:
            plan.empty_files.append(mf)
    return plan


def refusal(plan: CutPlan, reason: str | None, root: Path) -> CommitLogRecoveryError:
    """The one-line start-up error for a cut that would lose later files (see module doc)."""
    name = plan.cut_file.file_name if plan.cut_file else "?"
    return CommitLogRecoveryError(
        f"CommitLog recovery stopped: invalid record at offset {plan.offset} (file {name}, position "
        f"{plan.cut_position}): {reason or 'no record starts there'}; followed by {plan.describe_following()}, "
        f"which a cut would remove; nothing was changed. Repair or restore the file, or start once with "
        f"cutCorruptCommitLogOnRecover=true to end the CommitLog there and move what follows to {root}/quarantine/",
        offset=plan.offset, file=name)


def _new_folder(root: Path, offset: int) -> Path:
    folder = root / "quarantine" / f"commitlog-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{offset}"
    n = 1
    while folder.exists():
        folder = folder.with_name(f"{folder.name.split('.')[0]}.{n}")
        n += 1
    folder.mkdir(parents=True)
    return folder


def _copy_tail(plan: CutPlan, folder: Path) -> Path | None:
    if plan.cut_file is None or plan.tail_bytes <= 0:
        return None
    target = folder / f"{plan.cut_file.file_name}.tail-at-{plan.cut_position}"
    buf = plan.cut_file.mapping
    with open(target, "wb") as out:
        for lo in range(plan.cut_position, plan.tail_end, _SCAN_CHUNK_BYTES):
            out.write(buf[lo:min(lo + _SCAN_CHUNK_BYTES, plan.tail_end)])
        out.flush()
    return target


def save_torn_tail(plan: CutPlan, root: Path) -> Path | None:
    """Copy the non-zero bytes after ``plan.offset`` in the cut file into a new quarantine folder.

    Returns the copy's path (None when the tail is all zeros). Raises OSError when it cannot be written
    (recovery then stops: the tail is not zeroed without a copy).
    """
    if plan.tail_bytes <= 0:
        return None
    return _copy_tail(plan, _new_folder(root, plan.offset))


def quarantine_cut(queue: MappedFileQueue, plan: CutPlan, root: Path) -> Path:
    """Copy the cut file's tail and MOVE every later file into a new quarantine folder; returns the folder.

    The moved files leave ``queue.files``; the cut file itself stays (recovery then zeroes its tail).
    Raises OSError when a copy or move fails (files already moved stay in the folder, named in the log).
    """
    folder = _new_folder(root, plan.offset)
    _copy_tail(plan, folder)
    moved = set()
    for mf in plan.data_files + plan.empty_files:
        mf.close()
        shutil.move(str(mf.path), folder / mf.file_name)
        moved.add(id(mf))
        log.warning("CommitLog file moved to quarantine file=%s folder=%s", mf.file_name, folder)
    queue.files = [mf for mf in queue.files if id(mf) not in moved]
    return folder
