"""Which CommitLog files a restore writes: the table's offsets for one broker, the range asked, the blanks and the
first gap (docs/restore.md "Ranges and gaps").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from connector.arrow_numpy import to_numpy
from connector.decode.schema import RESTORE_COLUMNS
from connector.delta.reading import read_table
from connector.errors import RestoreError
from connector.protocol.commitlog import END_FILE_MIN_BLANK_LENGTH_BYTES
from connector.protocol.mapped_files import file_name, file_start

#: The columns of the restore columns a table must have (docs/restore.md "The columns bronze keeps").
RESTORE_COLUMN_NAMES = tuple(name for name, _, _ in RESTORE_COLUMNS)
_INDEX_COLUMNS = ("commitLogOffset", "storeSize", "storeTimestamp", "recordFormat", "mappedFileSizeCommitLog")


@dataclass(frozen=True, slots=True)
class FilePlan:
    """One CommitLog file of a restore: ``start`` (its name's offset), the records ``[start, end)`` it holds and,
    when ``full``, the END_FILE blank from ``end`` to the file's end (docs/protocol.md §1.9). Offsets in bytes."""

    start: int
    end: int
    full: bool
    records: int

    @property
    def name(self) -> str:
        """The file's name: its start offset in 20 digits."""
        return file_name(self.start)


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What :func:`plan_restore` found: the broker's ``mapped_file_size`` (bytes), the range ``[start, end)`` the
    files hold, the files, and the first ``missing`` range ``(from, to)`` the table lacks (None when whole);
    ``skipped``: ``(from, to)`` of records before ``start`` left out because their file's first records are not in
    the table (only when no ``--from-*`` was given)."""

    broker: str
    mapped_file_size: int
    start: int
    end: int
    files: tuple[FilePlan, ...]
    missing: tuple[int, int] | None = None
    skipped: tuple[int, int] | None = None
    records: int = field(default=0)


def _values(column: pa.ChunkedArray) -> np.ndarray:
    return to_numpy(column.combine_chunks())


def broker_filter(broker: str) -> ds.Expression:
    """The rows of ``broker``."""
    return pc.field("broker") == broker


def check_restore_columns(table_uri: str) -> None:
    """Raise RestoreError when the table at ``table_uri`` lacks a restore column (landed before they existed)."""
    from connector.delta.location import open_delta_table

    table = open_delta_table(table_uri)
    if table is None:
        raise RestoreError(f"{table_uri} holds no Delta table")
    have = {f.name for f in table.schema().fields}
    missing = [name for name in RESTORE_COLUMN_NAMES if name not in have]
    if missing:
        raise RestoreError(f"table {table_uri} lacks the restore column(s) {', '.join(missing)}: it was landed by a "
                           "bronze that did not keep them, so its records cannot be given back byte for byte "
                           "(start this version's bronze on it to add them; rows landed from then on restore)")


def _index(table_uri: str, broker: str) -> pa.Table:
    index = read_table(table_uri, columns=list(_INDEX_COLUMNS), filters=broker_filter(broker))
    if index.num_rows == 0:
        brokers = read_table(table_uri, columns=["broker"]).column("broker").unique().to_pylist()
        raise RestoreError(f"table {table_uri} has no rows of broker {broker} (its brokers: "
                           f"{', '.join(sorted(map(str, brokers))) or 'none'})")
    return index.sort_by("commitLogOffset")


def _mapped_file_size(index: pa.Table, broker: str) -> int:
    sizes = index.column("mappedFileSizeCommitLog")
    if sizes.null_count:
        first = index.filter(pc.is_null(sizes)).column("commitLogOffset")[0].as_py()
        raise RestoreError(f"broker {broker}: the row at CommitLog offset {first} has no mappedFileSizeCommitLog "
                           "(landed before bronze kept the restore columns); restore a range after such rows")
    values = sizes.unique().to_pylist()
    if len(values) != 1:
        raise RestoreError(f"broker {broker}: the rows name {len(values)} mapped file sizes "
                           f"({', '.join(map(str, sorted(values)))}); restore one range of one size at a time")
    return int(values[0])


def _is_blank(end: int, nxt: int, last_start: int, size: int) -> bool:
    """True when the bytes from ``end`` (the end of a record starting at ``last_start``) to the next record at
    ``nxt`` are an END_FILE blank: ``nxt`` starts the next file and the blank has its 8 bytes (docs/protocol.md
    §1.9)."""
    here = file_start(last_start, size)
    return (nxt == here + size and here + size - end >= END_FILE_MIN_BLANK_LENGTH_BYTES)


def plan_restore(table_uri: str, broker: str, *, from_offset: int | None = None, from_timestamp: int | None = None,
                 to_offset: int | None = None, to_timestamp: int | None = None) -> RestorePlan:
    """Plan the files of ``broker``'s CommitLog range from the bronze table at ``table_uri``.

    The range starts at the mapped file holding ``from_offset`` (a record start) or the first record stored at or
    after ``from_timestamp`` (epoch ms), else at the table's first file it holds from the first byte; it ends
    before ``to_offset`` (a record boundary) or the first record stored after ``to_timestamp``, else after the
    table's last record. It stops at the first gap, named in :attr:`RestorePlan.missing`.

    Raises:
        RestoreError: the table lacks the restore columns, holds no row of ``broker``, the range starts or ends
            inside a record, the start file's first records are not in the table, the rows name several mapped
            file sizes or rows in the range have null restore columns.
    """
    check_restore_columns(table_uri)
    index = _index(table_uri, broker)
    size = _mapped_file_size(index, broker)
    offsets = _values(index.column("commitLogOffset")).astype(np.int64)
    sizes = _values(index.column("storeSize")).astype(np.int64)
    keep = np.ones(len(offsets), dtype=bool)
    keep[1:] = offsets[1:] != offsets[:-1]
    if not keep.all():
        dup = np.flatnonzero(~keep)
        bad = dup[sizes[dup] != sizes[dup - 1]]
        if len(bad):
            raise RestoreError(f"broker {broker}: two rows at CommitLog offset {int(offsets[bad[0]])} differ in "
                               "storeSize")
        index = index.filter(pa.array(keep))
        offsets, sizes = offsets[keep], sizes[keep]
    ends = offsets + sizes
    stamps = _values(index.column("storeTimestamp").cast(pa.int64())) // 1000
    skipped = None
    if from_offset is not None or from_timestamp is not None:
        if from_offset is not None:
            i = int(np.searchsorted(offsets, from_offset))
            if i >= len(offsets) or offsets[i] != from_offset:
                if from_offset % size != 0:
                    raise RestoreError(f"broker {broker}: --from-offset {from_offset} is not the start of a record "
                                       f"the table holds (a range cannot start inside a record)")
            first = from_offset
        else:
            hits = np.flatnonzero(stamps >= from_timestamp)
            if not len(hits):
                raise RestoreError(f"broker {broker}: no record stored at or after timestamp {from_timestamp}")
            first = int(offsets[hits[0]])
        start = file_start(first, size)
        i = int(np.searchsorted(offsets, start))
        if i >= len(offsets) or offsets[i] != start:
            there = int(offsets[i]) if i < len(offsets) else None
            raise RestoreError(f"broker {broker}: the table lacks the first records of CommitLog file "
                               f"{file_name(start)} (a broker reads a mapped file from its first byte): its first "
                               f"record there is at offset {there}" if there is not None and there < start + size
                               else f"broker {broker}: the table holds no record of CommitLog file {file_name(start)}")
    else:
        at_file_start = np.flatnonzero(offsets % size == 0)
        if not len(at_file_start):
            raise RestoreError(f"broker {broker}: the table holds no CommitLog file from its first byte (its first "
                               f"record is at offset {int(offsets[0])}, inside file "
                               f"{file_name(file_start(int(offsets[0]), size))})")
        i = int(at_file_start[0])
        start = int(offsets[i])
        if i:
            skipped = (int(offsets[0]), start)
    if to_offset is not None:
        if to_offset <= start:
            raise RestoreError(f"broker {broker}: --to-offset {to_offset} is not after the range's start {start}")
        j = int(np.searchsorted(offsets, to_offset))
        boundary = (j < len(offsets) and offsets[j] == to_offset) or (j > 0 and ends[j - 1] == to_offset)
        if not boundary and not (j > 0 and ends[j - 1] < to_offset):
            raise RestoreError(f"broker {broker}: --to-offset {to_offset} is inside a record (a range ends at a "
                               "record boundary)")
        stop = j
    elif to_timestamp is not None:
        later = np.flatnonzero((stamps > to_timestamp) & (offsets >= start))
        stop = int(later[0]) if len(later) else len(offsets)
    else:
        stop = len(offsets)
    o, e = offsets[i:stop], ends[i:stop]
    if not len(o):
        raise RestoreError(f"broker {broker}: no record in the range asked (from offset {start})")
    nulls = index.slice(i, stop - i).column("recordFormat")
    if nulls.null_count:
        first = int(o[np.flatnonzero(_values(pc.is_null(nulls).cast(pa.int8())))[0]])
        raise RestoreError(f"broker {broker}: the row at CommitLog offset {first} has no recordFormat (landed "
                           "before bronze kept the restore columns); restore a range after it")
    missing = None
    breaks = np.flatnonzero(o[1:] != e[:-1])
    last = len(o)
    files: list[FilePlan] = []
    fs, count = start, 0
    cut = None
    for b in breaks.tolist():
        nxt, end = int(o[b + 1]), int(e[b])
        if not _is_blank(end, nxt, int(o[b]), size):
            missing, cut = (end, nxt), b + 1
            break
    if cut is not None:
        last = cut
        o, e = o[:last], e[:last]
        breaks = breaks[breaks < last - 1]
    blank_ends = {int(e[b]) for b in breaks.tolist()}
    end = int(e[-1])
    if cut is None and stop < len(offsets) and _is_blank(end, int(offsets[stop]), int(o[-1]), size):
        blank_ends.add(end)  # the range stops at a file's end: its blank is written too
    reach = file_start(end, size) + size if end in blank_ends else end
    if to_offset is not None and missing is None and to_offset > reach:
        missing = (reach, to_offset)
    file_of = o // size * size
    for fs in np.unique(file_of).tolist():
        in_file = file_of == fs
        count = int(in_file.sum())
        file_end = int(e[in_file][-1])
        files.append(FilePlan(int(fs), file_end, file_end in blank_ends, count))
    return RestorePlan(broker, size, start, end, tuple(files), missing, skipped, int(len(o)))
