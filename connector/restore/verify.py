"""Checking a RocketMQ store against a bronze table: the first file or record that differs (docs/restore.md "The
command and the library call", "Checking a store").
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass

import numpy as np

from connector.errors import CommitLogFormatError, RestoreError
from connector.protocol.commitlog import BlankRecord, MessageRecord, encode_blank, iter_records
from connector.protocol.commitlog.layout import MESSAGE_MAGIC_CODE_V2, field_positions
from connector.protocol.mapped_files import file_name, is_file_name, is_file_start
from connector.restore.encode import RECORD_COLUMNS, iter_encoded
from connector.restore.plan import FilePlan, RestorePlan, broker_filter, plan_restore
from connector.restore.store import check_store_folder, file_runs

_I32 = struct.Struct(">i")
_CHUNK = 8 << 20  # the most bytes of zeros read at once
_MIN_CHUNK = 1 << 20  # the least, while the read buffer is smaller


@dataclass(frozen=True, slots=True)
class StoreDifference:
    """Where a store first differs from the table: the CommitLog ``offset`` (bytes) of the record, byte or file
    (None for a file whose name is no offset), the ``file``'s name, the record ``field`` (RocketMQ's name; None
    for bytes outside a record and for whole files) and what differs."""

    offset: int | None
    file: str
    field: str | None
    reason: str

    def __str__(self) -> str:
        if self.offset is None:
            return f"{self.reason} (file {self.file})"
        where = f"CommitLog offset {self.offset} (file {self.file}" + (f", field {self.field})" if self.field else ")")
        return f"{self.reason} at {where}"


def field_at(record: bytes, pos: int) -> str:
    """The name of the field of the encoded ``record`` that byte ``pos`` belongs to (docs/protocol.md §1.2)."""
    sys_flag = _I32.unpack_from(record, field_positions(0)["SYSFLAG"])[0]
    at = dict(field_positions(sys_flag))
    body_len = _I32.unpack_from(record, at["BODY"])[0]
    topic = at["BODY"] + 4 + body_len
    v2 = _I32.unpack_from(record, 4)[0] == MESSAGE_MAGIC_CODE_V2
    topic_len = struct.unpack_from(">h" if v2 else ">b", record, topic)[0]
    at["TOPIC"] = topic
    at["PROPERTIES"] = topic + (2 if v2 else 1) + topic_len
    name = "TOTALSIZE"
    for field, start in sorted(at.items(), key=lambda kv: kv[1]):
        if start <= pos:
            name = field
    return name


def _table_records(table_uri: str, broker: str, start: int, end: int) -> dict[int, bytes]:
    from pyarrow import compute as pc

    from connector.delta.reading import read_table

    rows = read_table(table_uri, columns=list(RECORD_COLUMNS), filters=broker_filter(broker)
                      & (pc.field("commitLogOffset") >= start) & (pc.field("commitLogOffset") < end))
    return dict(iter_encoded(rows.sort_by("commitLogOffset"), broker=broker))


def verify_store(table_uri: str, broker: str, store_dir: str | os.PathLike, *, from_offset: int | None = None,
                 from_timestamp: int | None = None, to_offset: int | None = None,
                 to_timestamp: int | None = None) -> StoreDifference | None:
    """Compare the CommitLog of the store at ``STORE_DIR`` with the range of ``broker`` that
    :func:`connector.restore.restore_commitlog` writes from the table with the same range arguments (without them:
    from the first file the table holds whole to its last record or first gap), as a broker reads the store
    (docs/restore.md "Checking a store"):

    - ``STORE_DIR/commitlog`` holds one file per mapped file of the range, from its first to its last, each named
      by its start offset in 20 digits (4.9.8 ``UtilAll.offset2FileName``, a multiple of the table's
      ``mappedFileSizeCommitLog``) and exactly that many bytes long (4.9.8 ``MappedFileQueue.load`` refuses other
      lengths). A missing, extra, misnamed or wrongly sized file is a difference naming it; so is a store that
      starts after or ends before the range. The one file after the range's last that holds only zeros (the next
      file a broker creates ahead of time, 4.9.8 ``AllocateMappedFileService``) is not.
    - Each record of a file is the table's record at its offset, byte for byte; a file the range fills ends with
      the END_FILE blank, the others hold none; every byte after a file's last record (or the blank's 8-byte
      header) is zero; every record of the range is in the store.

    Offsets in bytes, timestamps epoch ms, as :func:`connector.restore.plan.plan_restore`. Returns the first
    difference (file names before contents, then in offset order), or None.

    Raises:
        RestoreError: ``STORE_DIR`` or ``STORE_DIR/commitlog`` is no folder or is absent
            (:func:`connector.restore.store.check_store_folder`, checked before the table is read); what
            :func:`connector.restore.plan.plan_restore` raises (the table lacks the restore columns, holds no row
            of ``broker``, the range is not one a restore writes).
    """
    folder = check_store_folder(store_dir, must_exist=True)
    plan = plan_restore(table_uri, broker, from_offset=from_offset, from_timestamp=from_timestamp,
                        to_offset=to_offset, to_timestamp=to_timestamp)
    size = plan.mapped_file_size
    names = sorted(os.listdir(folder))
    for name in names:
        if not (is_file_name(name) and is_file_start(int(name), size)):
            return StoreDifference(int(name) if is_file_name(name) else None, name, None,
                                   f"{name} is no CommitLog file name (a broker names each file by its start offset "
                                   f"in 20 digits, a multiple of mappedFileSizeCommitLog {size})")
        if not (folder / name).is_file():
            return StoreDifference(int(name), name, None, f"{name} is not a file")
    present = {int(name) for name in names}
    buffer = _ReadBuffer()  # every read of the store's bytes, from the first file to the last
    expected = {file.start: file for file in plan.files}
    last = plan.files[-1].start
    for start in sorted(present | set(expected)):
        name, path = file_name(start), folder / file_name(start)
        file = expected.get(start)
        if file is None:
            if start == last + size and _only_zeros(path, size, buffer):
                continue  # a broker's next file, created ahead of time: it holds nothing
            return StoreDifference(start, name, None, f"the store holds CommitLog file {name}, outside the table's "
                                   f"range [{plan.start}, {plan.end}) of broker {broker}")
        if start not in present:
            return StoreDifference(start, name, None, f"the store lacks CommitLog file {name} (the table's range "
                                   f"[{plan.start}, {plan.end}) of broker {broker} holds it)")
        length = path.stat().st_size
        if length != size:
            return StoreDifference(start, name, None, f"CommitLog file {name} is {length} bytes, not "
                                   f"mappedFileSizeCommitLog {size}")
        if _same_as_restored(table_uri, broker, plan, file, path, buffer):
            continue
        difference = _file_difference(table_uri, broker, plan, file, path.read_bytes())
        if difference is not None:
            return difference
    return None


class _ReadBuffer:
    """The one buffer a check reads the store's bytes into, reused from batch to batch and file to file: grown
    (to an eighth more than the read that outgrows it) only when a read is larger than it, never shrunk, so a
    check allocates it a few times, not once per batch (docs/restore.md "Speed and memory")."""

    __slots__ = ("_bytes",)

    def __init__(self) -> None:
        self._bytes = bytearray()

    def __len__(self) -> int:
        return len(self._bytes)

    def read(self, fd: int, pos: int, n: int) -> memoryview:
        """Up to ``n`` bytes of the file ``fd`` from byte ``pos`` (fewer at its end) in the front of the buffer,
        valid until the next read."""
        if len(self._bytes) < n:
            self._bytes = bytearray()  # the old one is freed before the larger one is allocated
            self._bytes = bytearray(n + n // 8)
        view = memoryview(self._bytes)[:n]
        return view[:os.preadv(fd, [view], pos)]

    def holds(self, fd: int, data: memoryview, pos: int) -> bool:
        """True when the file ``fd`` holds ``data`` at byte ``pos``: the bytes read into the buffer are compared
        with ``data`` by ``bytearray.startswith``, one ``memcmp`` of the buffer's front without a copy (a
        ``memoryview``'s own comparison goes byte by byte, about 30 times slower; a slice of the buffer would
        copy it)."""
        return len(self.read(fd, pos, len(data))) == len(data) and self._bytes.startswith(data)


def _same_as_restored(table_uri: str, broker: str, plan: RestorePlan, file: FilePlan, path,
                      buffer: _ReadBuffer) -> bool:
    """True when the file at ``path`` holds exactly the bytes a restore writes for ``file``: each run of records
    of the table's batches (:func:`connector.restore.store.file_runs`) read from the file into ``buffer`` at its
    position and compared with it, the END_FILE blank's header of a full file, zeros after. Memory: the batch
    being encoded and ``buffer``, the size of the largest batch. False sends the file to the record by record
    comparison that names the difference."""
    try:
        with open(path, "rb", buffering=0) as f:
            fd = f.fileno()
            for offset, data in file_runs(table_uri, broker, file, plan.table_files):
                if not buffer.holds(fd, data, offset - file.start):
                    return False
            pos = file.end - file.start
            if file.full:
                if buffer.read(fd, pos, 8) != encode_blank(file.start + plan.mapped_file_size - file.end):
                    return False
                pos += 8
            return _zeros(fd, pos, plan.mapped_file_size, buffer)
    except RestoreError:
        return False  # the comparison record by record raises it, or names the difference


def _only_zeros(path, size: int, buffer: _ReadBuffer) -> bool:
    """True when ``path`` is ``size`` bytes of zeros (read into ``buffer``)."""
    if path.stat().st_size != size:
        return False
    with open(path, "rb", buffering=0) as f:
        return _zeros(f.fileno(), 0, size, buffer)


def _zeros(fd: int, pos: int, end: int, buffer: _ReadBuffer) -> bool:
    """True when bytes ``[pos, end)`` of the file ``fd`` are zeros: holes of a sparse file are skipped
    (``SEEK_DATA``/``SEEK_HOLE`` where the OS has them), data read into ``buffer`` at most its size (at least
    1 MiB, at most 8 MiB) at a time."""
    chunk = min(_CHUNK, max(len(buffer), _MIN_CHUNK))
    while pos < end:
        stop = end
        if hasattr(os, "SEEK_DATA"):
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
                stop = min(end, os.lseek(fd, pos, os.SEEK_HOLE))
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data after pos: a hole up to the end
                    return True
                stop = end  # the file system does not tell: read it all
        while pos < stop:
            got = buffer.read(fd, pos, min(chunk, stop - pos))
            if not got or np.count_nonzero(np.frombuffer(got, dtype=np.uint8)):
                return False
            pos += len(got)
    return True


def _file_difference(table_uri: str, broker: str, plan: RestorePlan, file: FilePlan,
                     data: bytes) -> StoreDifference | None:
    """The first difference of one CommitLog file's ``data`` (mappedFileSizeCommitLog bytes) from ``file`` of
    ``plan`` (see :func:`verify_store`), or None."""
    start, name = file.start, file.name
    expected = _table_records(table_uri, broker, start, min(start + len(data), plan.end))
    pos, blank = 0, None
    try:
        for rec in iter_records(data, base_offset=start, file=name):
            offset = rec.commit_log_offset
            if isinstance(rec, MessageRecord):
                mine = bytes(data[offset - start:offset - start + rec.store_size])
                theirs = expected.pop(offset, None)
                if theirs is None:
                    where = (f"past the end {plan.end} of the table's range" if offset >= plan.end
                             else "where the table has no record")
                    return StoreDifference(offset, name, None, f"the store has a {rec.store_size}-byte record of "
                                           f"topic {rec.topic} {where}")
                if mine != theirs:
                    i = next((j for j in range(min(len(mine), len(theirs))) if mine[j] != theirs[j]),
                             min(len(mine), len(theirs)))
                    return StoreDifference(offset, name, field_at(theirs, min(i, len(theirs) - 1)),
                                           f"the store's record differs from the table's at its byte {i}")
                pos = offset - start + rec.store_size
            elif isinstance(rec, BlankRecord):
                pos, blank = offset - start + 8, offset
            else:
                pos = offset - start
    except CommitLogFormatError as exc:
        return StoreDifference(exc.offset, name, exc.field, f"the store's bytes are no record: {exc}")
    tail = data[pos:]
    if tail.strip(b"\x00"):
        first = pos + next(j for j, b in enumerate(tail) if b)
        return StoreDifference(start + first, name, None, "a byte after the file's last record is not zero")
    if expected:
        return StoreDifference(min(expected), name, None, "the store lacks the table's record here")
    if file.full and blank != file.end:
        return StoreDifference(file.end, name, None, "the store lacks the END_FILE blank that ends this file")
    if not file.full and blank is not None:
        return StoreDifference(blank, name, None, f"the store has an END_FILE blank here; the table's range ends "
                               f"at {plan.end} without one")
    return None
