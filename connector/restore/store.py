"""Writing a RocketMQ store's CommitLog from a bronze table (docs/restore.md).

A restored store is ``STORE_DIR/commitlog/`` with one file per mapped file of the range, named by its start offset,
``mappedFileSizeCommitLog`` bytes long: the records re-encoded (:mod:`connector.restore.encode`), the END_FILE blank
of a full file, zeros after. A RocketMQ broker started on it recovers the CommitLog and, having no ConsumeQueue,
dispatches every record again (4.9.8 ``DefaultMessageStore.start``: the reput starts at the CommitLog's min offset),
which rebuilds its ConsumeQueues and index.

The table is read and encoded an Arrow batch at a time, and each batch's records are written at their positions
in one write, so memory holds a few batches, not a file or the table.
"""

from __future__ import annotations

import dataclasses
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from connector.errors import RestoreError
from connector.protocol.commitlog import encode_blank
from connector.protocol.mapped_files import is_file_name
from connector.restore.config import write_delay_offsets
from connector.restore.encode import RECORD_COLUMNS, encoded_runs
from connector.restore.metadata import write_metadata
from connector.restore.plan import FilePlan, RestorePlan, TableFiles, plan_restore, row_batches

COMMITLOG_DIR = "commitlog"
_WRITES_IN_FLIGHT = 2  # batches written while the next is read and encoded (the memory: a few batches)


def commitlog_dir(store_dir: str | os.PathLike) -> Path:
    """``STORE_DIR/commitlog``: where a broker with ``storePathRootDir=STORE_DIR`` keeps its CommitLog."""
    return Path(store_dir) / COMMITLOG_DIR


def file_runs(table_uri: str, broker: str, file: FilePlan, table_files: TableFiles | None = None
              ) -> Iterator[tuple[int, memoryview]]:
    """``(CommitLog offset, bytes)`` runs of the records of ``[file.start, file.end)``, read from the table an
    Arrow batch at a time (:func:`connector.restore.plan.row_batches`) and encoded a batch at a time
    (:func:`connector.restore.encode.encoded_runs`), in the table's row order; after the last, a check that the
    runs covered the file's range (a row landed twice gives the same bytes twice). ``table_files``: the table's
    files as the plan read them (:attr:`connector.restore.plan.RestorePlan.table_files`; None: the Delta log's
    current version, read again).

    Raises RestoreError as :func:`connector.restore.encode.encode_batch`, or when the runs leave a hole or end
    elsewhere than the plan's end (the table changed since the plan).
    """
    covered: list[tuple[int, int]] = []
    for batch in row_batches(table_uri, broker, RECORD_COLUMNS, file.start, file.end, files=table_files):
        for offset, data in encoded_runs(batch, broker=broker):
            yield offset, data
            if covered and covered[-1][1] == offset:
                covered[-1] = (covered[-1][0], offset + len(data))
            else:
                covered.append((offset, offset + len(data)))
    expected = file.start
    for lo, hi in sorted(covered):
        if lo > expected:
            break
        expected = max(expected, hi)
    if expected < file.end:
        raise RestoreError(f"broker {broker}: the table has no record at CommitLog offset {expected} of "
                           f"file {file.name} any more (it changed while being restored)")
    if expected != file.end:
        raise RestoreError(f"broker {broker}: file {file.name} ends at offset {expected}, the plan said {file.end} "
                           "(the table changed while being restored)")


def _pwrite(fd: int, data: memoryview, position: int) -> None:
    while data:
        done = os.pwrite(fd, data, position)
        data, position = data[done:], position + done


def write_file(table_uri: str, broker: str, plan: RestorePlan, file: FilePlan, folder: Path) -> Path:
    """Write ``file`` into ``folder`` (a CommitLog folder) at its full mapped file size and return its path: each
    run of :func:`file_runs` at its position (offset - ``file.start``) in one write, by a writer thread while the
    next batch is read and encoded, then, for a full file, the END_FILE blank's 8-byte header at ``file.end``
    (docs/protocol.md §1.9); the rest is zeros (a sparse tail where the file system allows). Memory: a few Arrow
    batches. Raises RestoreError as :func:`file_runs`; OSError."""
    path = folder / file.name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="restore-write") as writer:
            pending: deque = deque()  # the writes in flight: the next batch is read and encoded meanwhile
            for offset, data in file_runs(table_uri, broker, file, plan.table_files):
                pending.append(writer.submit(_pwrite, fd, data, offset - file.start))
                while len(pending) > _WRITES_IN_FLIGHT:
                    pending.popleft().result()
            for write in pending:
                write.result()
        if file.full:
            _pwrite(fd, memoryview(encode_blank(file.start + plan.mapped_file_size - file.end)),
                    file.end - file.start)
        os.ftruncate(fd, plan.mapped_file_size)
    finally:
        os.close(fd)
    return path


def check_store_folder(store_dir: str | os.PathLike, *, must_exist: bool = False) -> Path:
    """``STORE_DIR/commitlog`` after checking that it and ``STORE_DIR`` are folders where they exist (and, when
    ``must_exist``, that the CommitLog folder exists). Creates nothing.

    Raises:
        RestoreError: a path that exists but is not a folder (a plain file), or a missing CommitLog folder when
            ``must_exist``; the message names the path.
    """
    folder = commitlog_dir(store_dir)
    for path in (Path(store_dir), folder):
        if path.exists() and not path.is_dir():
            raise RestoreError(f"{path} is not a folder (a store's CommitLog is the folder "
                               f"STORE_DIR/{COMMITLOG_DIR} of its mapped files)")
    if must_exist and not folder.is_dir():
        raise RestoreError(f"{folder} does not exist: STORE_DIR must be a store, with its CommitLog files in "
                           f"STORE_DIR/{COMMITLOG_DIR}")
    return folder


def check_empty_store(store_dir: str | os.PathLike) -> Path:
    """``STORE_DIR/commitlog`` after checking that a restore can write it: a folder (or absent) that holds no file
    at all. A broker loads every file of its CommitLog folder as a mapped file named by its start offset, so a file
    left there would stop it or become part of its log (4.9.8 ``MappedFileQueue.load``). Creates nothing.

    Raises:
        RestoreError: as :func:`check_store_folder`; the folder holds a file that is no CommitLog file (named),
            or CommitLog files (the first named, with their count).
    """
    folder = check_store_folder(store_dir)
    held = sorted(os.listdir(folder)) if folder.is_dir() else []
    stray = [name for name in held if not is_file_name(name)]
    if stray:
        raise RestoreError(f"{folder / stray[0]} is no CommitLog file: restore into an empty or absent "
                           "commitlog folder (a broker loads every file there as a mapped file)")
    if held:
        raise RestoreError(f"{folder} already holds CommitLog files ({held[0]}, {len(held)} in all): restore "
                           "into an empty store folder")
    return folder


def make_store_folder(store_dir: str | os.PathLike) -> Path:
    """Create ``STORE_DIR/commitlog`` (checked by :func:`check_empty_store` first) and return it.

    Raises:
        RestoreError: as :func:`check_empty_store`, or the folder cannot be created (the OS's reason given).
    """
    folder = check_empty_store(store_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RestoreError(f"{folder}: cannot create it ({exc.strerror or exc})") from exc
    return folder


def restore_commitlog(table_uri: str, broker: str, store_dir: str | os.PathLike, *, from_offset: int | None = None,
                      from_timestamp: int | None = None, to_offset: int | None = None,
                      to_timestamp: int | None = None, metadata: bool = True) -> RestorePlan:
    """Write ``broker``'s CommitLog range from the bronze table at ``table_uri`` into ``STORE_DIR/commitlog``.

    The range and its rules: :func:`connector.restore.plan.plan_restore` (offsets in bytes, timestamps epoch ms).
    Returns the plan it wrote; its ``missing`` names the first gap the files stop before. Also writes
    ``STORE_DIR/config/delayOffset.json`` (:func:`connector.restore.config.write_delay_offsets`) and, with
    ``metadata``, the topics, subscription groups and consumer offsets of the metadata tables beside the table
    (:func:`connector.restore.metadata.write_metadata`; the plan's ``metadata`` says what was written).

    Raises:
        RestoreError: ``STORE_DIR`` or its ``commitlog`` is no folder, or that folder holds a file
            (:func:`check_empty_store`, checked before the table is read); what :func:`plan_restore` raises; a row
            that does not re-encode to its storeSize.
    """
    check_empty_store(store_dir)  # bad input is refused before the table is read
    plan = plan_restore(table_uri, broker, from_offset=from_offset, from_timestamp=from_timestamp,
                        to_offset=to_offset, to_timestamp=to_timestamp)
    folder = make_store_folder(store_dir)
    for file in plan.files:
        write_file(table_uri, broker, plan, file, folder)
    write_delay_offsets(table_uri, plan, store_dir)
    if metadata:
        plan = dataclasses.replace(plan, metadata=write_metadata(table_uri, plan, store_dir))
    return plan
