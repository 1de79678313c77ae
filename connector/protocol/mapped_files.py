"""Where a CommitLog offset lies among the mapped files (docs/protocol.md §1.1, §1.9).

A CommitLog is a run of equally sized files (``mappedFileSizeCommitLog`` bytes, 1 GiB by default),
each named by the CommitLog offset of its first byte written as 20 zero-padded decimal digits. File
starts are multiples of the file size, and a record never spans two files (the writer pads the rest of
a file with an END_FILE blank), so every file start is a record boundary. A ConsumeQueue's files follow
the same naming and arithmetic over its own offsets (``mappedFileSizeConsumeQueue``).

Pure integer arithmetic, shared by the broker stub's store, the source's planner and decoder, and the
offline tools. Offsets and sizes in bytes; ``size`` must be > 0.
"""

from __future__ import annotations

FILE_NAME_DIGITS = 20
DEFAULT_MAPPED_FILE_SIZE_COMMITLOG = 1024 * 1024 * 1024  # MessageStoreConfig.mappedFileSizeCommitLog (bytes)


def file_name(offset: int) -> str:
    """The name of the file starting at ``offset``: 20-digit zero-padded decimal (``00000000001073741824``)."""
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def is_file_name(name: str) -> bool:
    """True when ``name`` has the form of a mapped file's name (exactly 20 decimal digits)."""
    return len(name) == FILE_NAME_DIGITS and name.isdigit()


def file_start(offset: int, size: int) -> int:
    """The start of the file holding ``offset`` (the largest multiple of ``size`` <= ``offset``)."""
    return offset - offset % size


def next_file_start(offset: int, size: int) -> int:
    """The start of the file after the one holding ``offset`` (one past that file's last byte)."""
    return file_start(offset, size) + size


def ceil_file_start(offset: int, size: int) -> int:
    """The first file start at or after ``offset`` (``offset`` itself when it starts a file)."""
    return -(-offset // size) * size


def is_file_start(offset: int, size: int) -> bool:
    """True when ``offset`` is the first byte of a file (a multiple of ``size``)."""
    return offset % size == 0


def file_name_of(offset: int, size: int) -> str:
    """The name of the file holding ``offset``."""
    return file_name(file_start(offset, size))
