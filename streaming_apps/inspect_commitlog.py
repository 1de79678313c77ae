"""`hareplica inspect-commitlog DIR`: print every record of a RocketMQ CommitLog folder, offline.

Files are the 20-digit mapped files of one CommitLog (docs/protocol.md §1.1); each is walked record by record with
connector.protocol.commitlog, END_FILE blanks skipped, stopping at the end of written data. A folder
with a missing middle file (a gap between neighbouring files) is refused before anything is printed.

A record whose body does not match its BODYCRC, or whose compressed body does not decompress, is still
listed (its stored body; in jsonl a ``"bodyError"`` key, in the table the ``check`` column), its offset and
file are named on stderr, and the walk goes on: an offline inspector shows all the damage. The exit code is
2 at the end when any record was bad (``stop_at_first``: at the first one, the former behaviour). A header
that breaks the record chain (MAGICCODE, TOTALSIZE...) stops the walk: nothing after it can be found.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import mmap
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from connector.errors import CommitLogFormatError
from connector.protocol.commitlog import (
    BlankRecord,
    EndOfData,
    MessageRecord,
    body_crc,
    iter_records,
    record_to_json,
)
from connector.protocol.commitlog.layout import COMPRESSED_FLAG
from connector.protocol.mapped_files import is_file_name

log = logging.getLogger(__name__)

TABLE_PAGE_ROWS = 1000


def commitlog_files(directory: Path) -> list[tuple[int, Path]]:
    """The mapped files of a CommitLog folder as (start offset, path), in offset order.

    A CommitLog is a run of equally sized files (``mappedFileSizeCommitLog`` bytes each), each named by the
    20-digit offset of its first byte, so every file starts where the one before it ends (docs/broker_stub.md
    "CommitLog files and recovery"). Raises FileNotFoundError for a missing folder and CommitLogFormatError for a file
    whose name is not a 20-digit offset, a file (other than the last) whose size differs from the first
    file's, and a gap or overlap between neighbouring files (a missing middle file), naming the offsets.
    Retention deleting the oldest files is not a gap: the first file may start anywhere.
    """
    if not directory.is_dir():
        raise FileNotFoundError(f"CommitLog folder {directory} does not exist")
    files = []
    for p in directory.iterdir():
        if not is_file_name(p.name):
            raise CommitLogFormatError("file name is not a 20-digit CommitLog offset", offset=-1, field="file name",
                                       file=str(p))
        files.append((int(p.name), p))
    files.sort()
    _check_contiguous(files)
    return files


def _check_contiguous(files: list[tuple[int, Path]]) -> None:
    """Raise CommitLogFormatError unless every file starts where the one before it ends (see above)."""
    if len(files) < 2:
        return
    size = files[0][1].stat().st_size
    for (start, path), (next_start, next_path) in zip(files, files[1:], strict=False):
        length = path.stat().st_size
        if length != size:
            raise CommitLogFormatError(
                f"file is {length} bytes but the CommitLog's first file {files[0][1].name} is {size} bytes "
                "(every file but the last must be mappedFileSizeCommitLog long)",
                offset=start, field="file size", file=path.name)
        end = start + length
        if next_start > end:
            raise CommitLogFormatError(
                f"gap in the CommitLog: offsets {end}..{next_start - 1} ({next_start - end} bytes) are missing "
                f"between file {path.name} and file {next_path.name}", offset=end, field="file name", file=path.name)
        if next_start < end:
            raise CommitLogFormatError(
                f"file {next_path.name} starts at {next_start}, inside file {path.name} (ends at {end})",
                offset=next_start, field="file name", file=next_path.name)


def iter_commitlog_dir(directory: Path, from_offset: int = 0, *, check_crc: bool = True
                       ) -> Iterator[tuple[str, MessageRecord]]:
    """Yield (file name, record) for every message whose offset is >= ``from_offset``.

    Files are memory-mapped, so a 1 GiB file is not read into memory. A file is walked from its start
    (records are only found by walking), but files wholly before ``from_offset`` are skipped.
    Raises CommitLogFormatError (offset, file, field) at the first invalid record; records before it
    have already been yielded.
    """
    files = commitlog_files(directory)
    for i, (start, path) in enumerate(files):
        size = path.stat().st_size
        if start + size <= from_offset:
            continue
        if size == 0:
            continue
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            for rec in iter_records(mm, base_offset=start, check_crc=check_crc, file=path.name, file_end=size):
                if isinstance(rec, MessageRecord):
                    if rec.commit_log_offset >= from_offset:
                        yield path.name, rec
                elif isinstance(rec, EndOfData):
                    if i + 1 < len(files):
                        log.warning("file %s ends its data at offset %d but later files exist",
                                    path.name, rec.commit_log_offset)
                    return
                elif isinstance(rec, BlankRecord):
                    break


def body_error(rec: MessageRecord) -> str | None:
    """Why ``rec``'s body is bad — ``BODYCRC mismatch: stored S, computed C`` (docs/protocol.md §1.6), or
    ``BODY: ...`` when a compressed body does not decompress — else None."""
    computed = body_crc(rec.body)
    if computed != rec.body_crc:
        return f"BODYCRC mismatch: stored {rec.body_crc}, computed {computed}"
    try:
        rec.decompressed_body()
    except (CommitLogFormatError, ValueError) as exc:
        return f"BODY: {exc}"
    return None


def iter_checked_records(directory: Path, from_offset: int = 0) -> Iterator[tuple[str, MessageRecord, str | None]]:
    """(file name, record, :func:`body_error`) for every message at or after ``from_offset``: the walk of
    :func:`iter_commitlog_dir` without stopping at a bad body. Raises CommitLogFormatError for a header that
    breaks the record chain."""
    for name, rec in iter_commitlog_dir(directory, from_offset, check_crc=False):
        yield name, rec, body_error(rec)


def _json_line(name: str, rec: MessageRecord, error: str | None) -> str:
    """One jsonl line: messages.jsonl's fields; a bad record has its stored body only and ``bodyError``."""
    if error is None:
        doc = record_to_json(rec, file=name, file_start=int(name))
    else:
        doc = record_to_json(dataclasses.replace(rec, sys_flag=rec.sys_flag & ~COMPRESSED_FLAG), file=name,
                             file_start=int(name))
        doc["sysFlag"] = rec.sys_flag
        doc["bodyDecompressedBase64"] = None
        doc["bodyError"] = error
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"


def run(directory: str, from_offset: int = 0, fmt: str = "jsonl", out=None, *, stop_at_first: bool = False) -> int:
    """Print every record; returns the process exit code (0 ok, 2 invalid data, 1 bad folder).

    Each bad body is named on stderr (``error: CommitLog offset N, file F: BODYCRC mismatch ...``) as it is
    met; a summary line ends the run. ``stop_at_first``: exit 2 at the first bad record instead.
    """
    out = out or sys.stdout
    bad = total = 0

    def checked() -> Iterator[tuple[str, MessageRecord, str | None]]:
        nonlocal bad, total
        for name, rec, error in iter_checked_records(Path(directory), from_offset):
            total += 1
            if error is not None:
                bad += 1
                out.flush()
                print(f"error: CommitLog offset {rec.commit_log_offset}, file {name}: {error}", file=sys.stderr)
                if stop_at_first:
                    raise _StopAtFirst
            yield name, rec, error

    try:
        if fmt == "jsonl":
            for name, rec, error in checked():
                out.write(_json_line(name, rec, error))
        else:
            _print_table(checked(), out)
    except _StopAtFirst:
        out.flush()
        return 2
    except CommitLogFormatError as exc:
        out.flush()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. piped into `head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if bad:
        out.flush()
        print(f"error: {bad} of {total} records have a bad body (listed above with offset and file)", file=sys.stderr)
        return 2
    return 0


class _StopAtFirst(Exception):
    """Internal: ``stop_at_first`` met a bad record."""


#: the table's columns: (name, width in characters, right-aligned); the widths are fixed, so rows stream with no
#: look-ahead. A longer topic, tags or keys value is cut with "…" (``--format jsonl`` prints it whole); the last
#: column (``check``: ok, or what is wrong with the body) is not padded.
TABLE_COLUMNS = (("commitLogOffset", 19, True), ("storeSize", 9, True), ("topic", 32, False), ("queueId", 7, True),
                 ("queueOffset", 11, True), ("sysFlag", 7, True), ("storeTimestamp", 24, False), ("tags", 16, False),
                 ("keys", 24, False), ("bodyLength", 10, True), ("check", 0, False))


def _cell(value: str, width: int, right: bool) -> str:
    if width and len(value) > width:
        value = value[:width - 1] + "…"
    return value.rjust(width) if right else value.ljust(width)


def _table_line(values: tuple[str, ...]) -> str:
    return "  ".join(_cell(v, w, r) for v, (_, w, r) in zip(values, TABLE_COLUMNS, strict=True)).rstrip() + "\n"


def iso_ms(ts: int) -> str:
    """A storeTimestamp (ms since the epoch) as ISO 8601 in UTC with milliseconds: ``2026-09-21T14:14:00.000Z``."""
    return datetime.fromtimestamp(ts / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _print_table(records: Iterator[tuple[str, MessageRecord, str | None]], out) -> None:
    """The records as a table of fixed-width columns (:data:`TABLE_COLUMNS`), a header line first, written in pages
    of :data:`TABLE_PAGE_ROWS` rows (memory stays bounded on 1 GiB files)."""
    out.write(_table_line(tuple(name for name, _, _ in TABLE_COLUMNS)))
    page: list[str] = []
    for _, rec, error in records:
        page.append(_table_line((
            str(rec.commit_log_offset), str(rec.store_size), rec.topic, str(rec.queue_id), str(rec.queue_offset),
            f"0x{rec.sys_flag:X}", iso_ms(rec.store_timestamp), rec.tags or "", rec.keys or "", str(len(rec.body)),
            "ok" if error is None else error.split(":")[0])))
        if len(page) == TABLE_PAGE_ROWS:
            out.write("".join(page))
            page.clear()
    out.write("".join(page))
