"""CommitLog and ConsumeQueue mapped files and their queue (RocketMQ 4.9.8 ``MappedFile`` / ``MappedFileQueue``).

A :class:`MappedFile` is one fixed-size file named by the 20-digit offset of its first byte, memory-mapped for
reading and appended to with ``pwrite`` (disk blocks reserved ahead with ``posix_fallocate``); flushing is
``fdatasync`` and may run in another thread while the event loop appends. Reads hand out ``bytes`` copies, never
views of the mapping, so a file can always be unmapped. Names and sizes: docs/protocol.md §1.1; creating files
under ``.creating`` and the size check at load: docs/broker_stub.md "CommitLog files and recovery".
"""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path

from connector.protocol.mapped_files import file_name, is_file_name, is_file_start

log = logging.getLogger(__name__)

OS_PAGE_SIZE_BYTES = 4096  # MappedFile.OS_PAGE_SIZE
PREALLOCATE_CHUNK_BYTES = 64 * 1024 * 1024
PREALLOCATE_MIN_CHUNK_BYTES = 1024 * 1024
_ZERO_CHUNK_BYTES = 1 << 20
CREATING_SUFFIX = ".creating"  # a file being sized before it is renamed to its store name


class MappedFile:
    """One CommitLog file: ``file_size`` bytes starting at CommitLog offset ``file_from_offset``.

    Raises OSError when the file cannot be created or mapped.
    """

    def __init__(self, path: Path, file_from_offset: int, file_size: int, *, create: bool = False,
                 preallocate: bool = True) -> None:
        self.path = Path(path)
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # store timestamp of the last record appended (checkpoint input)
        # disk blocks reserved (posix_fallocate) up to this position; -1: off or unsupported
        self._allocated_to = 0 if preallocate else -1
        creating = self.path.with_name(self.path.name + CREATING_SUFFIX)
        self._fd = os.open(creating if create else self.path,
                           os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0), 0o644)
        try:
            if create or os.fstat(self._fd).st_size < file_size:
                os.ftruncate(self._fd, file_size)
            if create:
                os.rename(creating, self.path)  # the store name appears only with the full size
            self._mm: mmap.mmap | None = mmap.mmap(self._fd, file_size, mmap.MAP_SHARED,
                                                   mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self._fd)
            if create:
                creating.unlink(missing_ok=True)
            raise

    @property
    def file_name(self) -> str:
        return self.path.name

    @property
    def file_tail_offset(self) -> int:
        """CommitLog offset one past this file's last byte."""
        return self.file_from_offset + self.file_size

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def remaining(self) -> int:
        """Free bytes after the write position (``maxBlank`` of the append callback)."""
        return self.file_size - self.wrote_position

    @property
    def mapping(self) -> mmap.mmap:
        """The mapping (recovery scans it); raises ValueError once the file is closed."""
        if self._mm is None:
            raise ValueError(f"mapped file {self.file_name} is closed")
        return self._mm

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position and advance it; returns the file position written at.

        Raises ValueError when the bytes do not fit (callers check :attr:`remaining` first).
        """
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            raise ValueError(f"{len(data)} bytes do not fit at position {pos} of {self.file_name}")
        self._preallocate(end)
        self._pwrite_all(data, pos)
        self.wrote_position = end
        return pos

    def _preallocate(self, end: int) -> None:
        """Reserve disk blocks ahead of the write position in ``PREALLOCATE_CHUNK_BYTES`` steps.

        Writing into a sparse file makes the file system allocate blocks page by page, which is slow and
        erratic under load; reserving a chunk at a time keeps appends at memory speed. The chunk grows
        with the data (1 MiB, then as much as is written, at most 64 MiB), so a file uses at most about
        twice its data, plus 64 MiB, on disk. Not supported → silently skipped.
        """
        if end <= self._allocated_to or self._allocated_to < 0:
            return
        start = max(self._allocated_to, self.wrote_position)
        chunk = min(max(end, PREALLOCATE_MIN_CHUNK_BYTES), PREALLOCATE_CHUNK_BYTES)  # grows with the data
        upto = min(max(end, start + chunk), self.file_size)
        try:
            os.posix_fallocate(self._fd, start, upto - start)
            self._allocated_to = upto
        except OSError as exc:
            log.info("preallocation not available, appending to a sparse file file=%s error=%s", self.file_name, exc)
            self._allocated_to = -1

    def append_many(self, parts: list) -> int:
        """Append several buffers back to back with one ``pwritev``; returns the position written at.

        Raises ValueError when they do not fit (nothing is written then).
        """
        pos = self.wrote_position
        total = sum(len(p) for p in parts)
        if pos + total > self.file_size:
            raise ValueError(f"{total} bytes do not fit at position {pos} of {self.file_name}")
        self._preallocate(pos + total)
        done = os.pwritev(self._fd, parts, pos)
        if done < total:  # a short vectored write: finish byte by byte through the joined rest
            self._pwrite_all(b"".join(bytes(p) for p in parts)[done:], pos + done)
        self.wrote_position = pos + total
        return pos

    def _pwrite_all(self, data: bytes | bytearray | memoryview, pos: int) -> None:
        view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        done = os.pwrite(self._fd, view, pos)
        while done < len(view):  # short writes are rare (signals); finish them
            done += os.pwrite(self._fd, view[done:], pos + done)

    def write_at(self, pos: int, data: bytes) -> None:
        """Write bytes at a position without moving the write position (the END_FILE blank header)."""
        self._pwrite_all(data, pos)

    def read(self, pos: int, size: int) -> bytes:
        """A copy of ``size`` bytes from file position ``pos`` (clipped to the write position)."""
        end = min(pos + size, self.wrote_position)
        if pos >= end:
            return b""
        return self.mapping[pos:end]

    def dirty_pages(self) -> int:
        """Pages written but not flushed, counted as MappedFile.isAbleToFlush does."""
        return self.wrote_position // OS_PAGE_SIZE_BYTES - self.flushed_position // OS_PAGE_SIZE_BYTES

    def is_able_to_flush(self, least_pages: int) -> bool:
        """MappedFile.isAbleToFlush: full files always; else ≥ ``least_pages`` dirty pages (0: any byte)."""
        if self.is_full and self.flushed_position < self.file_size:
            return True
        if least_pages > 0:
            return self.dirty_pages() >= least_pages
        return self.wrote_position > self.flushed_position

    def flush_to(self, position: int) -> None:
        """Make the bytes up to ``position`` durable (fdatasync; blocking — call from a worker thread)."""
        if position <= self.flushed_position:
            return
        os.fdatasync(self._fd)
        self.flushed_position = max(self.flushed_position, position)

    def reset_tail(self, position: int) -> None:
        """Recovery truncation: set every position to ``position`` and zero the bytes after it.

        The tail becomes a sparse hole again (truncate + re-extend) so a torn or garbage tail can never
        be mistaken for records later; the mapping is re-created around it.
        """
        self.close_mapping()
        os.ftruncate(self._fd, position)
        os.ftruncate(self._fd, self.file_size)
        os.fsync(self._fd)
        self._mm = mmap.mmap(self._fd, self.file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.wrote_position = position
        self.flushed_position = position
        if self._allocated_to > position:
            self._allocated_to = position

    def close_mapping(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def close(self) -> None:
        """Unmap and close the file (no flush: call :meth:`flush_to` first)."""
        self.close_mapping()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        log.info("mapped file deleted file=%s", self.file_name)

    def __repr__(self) -> str:
        return (f"MappedFile({self.file_name}, wrote={self.wrote_position}, flushed={self.flushed_position}, "
                f"size={self.file_size})")


class MappedFileQueue:
    """The ordered files of one folder (MappedFileQueue, docs/protocol.md §1.1): the CommitLog, or one
    ConsumeQueue (``kind="ConsumeQueue"``, sized by ``mappedFileSizeConsumeQueue``).

    ``min_offset`` is the first file's start (−1 with no file); ``max_offset`` the last file's start plus
    its write position (0 with no file).
    """

    def __init__(self, store_path: Path, mapped_file_size: int, *, preallocate: bool = True,
                 kind: str = "CommitLog") -> None:
        self.store_path = Path(store_path)
        self.mapped_file_size = mapped_file_size
        self.preallocate = preallocate
        self.kind = kind
        self.size_property = f"mappedFileSize{kind}"
        self.files: list[MappedFile] = []

    def load(self) -> None:
        """Map every 20-digit file of the folder, in name order, all positions set to the file size.

        A ``<name>.creating`` file left by a crash during :meth:`create_next_file` holds no data and is removed.
        Raises ValueError (the store turns it into BrokerStoreError) when a file's length differs from
        ``mappedFileSizeCommitLog`` (``mappedFileSizeConsumeQueue``) or a name is not its offset — upstream
        refuses to start then too.
        """
        self.store_path.mkdir(parents=True, exist_ok=True)
        for p in self.store_path.glob("*" + CREATING_SUFFIX):
            log.warning("%s file left half-created by a crash removed file=%s", self.kind, p)
            p.unlink(missing_ok=True)
        names = sorted(p for p in self.store_path.iterdir() if p.is_file() and is_file_name(p.name))
        kind, prop = self.kind, self.size_property
        for p in names:
            size = p.stat().st_size
            if size != self.mapped_file_size:
                raise ValueError(
                    f"{kind} file {p} is {size} bytes but {prop} is {self.mapped_file_size}; "
                    f"set {prop} to the size the store was written with")
            start = int(p.name)
            if not is_file_start(start, self.mapped_file_size):
                raise ValueError(f"{kind} file {p}: name is not a multiple of {prop} {self.mapped_file_size}")
            if self.files and start != self.files[-1].file_tail_offset:
                raise ValueError(f"{kind} file {p} does not follow {self.files[-1].file_name} (gap in the folder)")
            mf = MappedFile(p, start, self.mapped_file_size, preallocate=self.preallocate)
            mf.wrote_position = mf.flushed_position = self.mapped_file_size
            self.files.append(mf)
            log.info("mapped file loaded file=%s", p.name)

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else -1

    @property
    def max_offset(self) -> int:
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    @property
    def flushed_where(self) -> int:
        """CommitLog offset up to which everything is flushed."""
        for mf in self.files:
            if mf.flushed_position < mf.wrote_position or not mf.is_full:
                return mf.file_from_offset + mf.flushed_position
        return self.max_offset

    def last_mapped_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def create_next_file(self, first_file_offset: int = 0) -> MappedFile:
        """Create the file after the last one (or, in an empty folder, the file at ``first_file_offset``).

        ``first_file_offset`` must be a multiple of the file size (a slave's first file starts where the
        master's replication started, docs/protocol.md §2.6). Raises OSError when the file cannot be created and
        ValueError for a misaligned ``first_file_offset``.
        """
        if not self.files and not is_file_start(first_file_offset, self.mapped_file_size):
            raise ValueError(f"first CommitLog file offset {first_file_offset} is not a multiple of "
                             f"mappedFileSizeCommitLog {self.mapped_file_size}")
        start = self.files[-1].file_tail_offset if self.files else first_file_offset
        if not self.files:
            self.store_path.mkdir(parents=True, exist_ok=True)
        path = self.store_path / file_name(start)
        mf = MappedFile(path, start, self.mapped_file_size, create=True, preallocate=self.preallocate)
        self.files.append(mf)
        log.info("mapped file created file=%s", path.name)
        return mf

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        """The file holding CommitLog ``offset``, or None when no file does (deleted or not yet written)."""
        if not self.files:
            return None
        first = self.files[0].file_from_offset
        index = (offset - first) // self.mapped_file_size
        if offset < first or index >= len(self.files):
            return None
        return self.files[index]

    def truncate_dirty_files(self, offset: int) -> None:
        """Recovery: make ``offset`` the end of data (MappedFileQueue.truncateDirtyFiles).

        The file containing ``offset`` keeps its bytes before it and gets a zeroed tail; later files are
        deleted. CommitLog recovery calls it only once nothing after ``offset`` holds data, or that data
        was moved or copied to ``quarantine/`` (:mod:`broker_stub.store.quarantine`).
        """
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_tail_offset <= offset:
                keep.append(mf)
            elif offset >= mf.file_from_offset:
                pos = offset - mf.file_from_offset
                if pos < mf.file_size:
                    log.warning("CommitLog tail truncated file=%s position=%d offset=%d", mf.file_name, pos, offset)
                mf.reset_tail(pos)
                keep.append(mf)
            else:
                log.warning("CommitLog file past the recovered end deleted file=%s offset=%d", mf.file_name, offset)
                mf.destroy()
        self.files = keep

    def close(self) -> None:
        for mf in self.files:
            mf.close()
