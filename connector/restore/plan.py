"""Which CommitLog files a restore writes: the table's offsets for one broker, the range asked, the blanks and the
first gap (docs/restore.md "Ranges and gaps"); and the table's rows of a range, read a batch at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.arrow_numpy import from_numpy, repeat_string, to_numpy
from connector.decode.schema import RESTORE_COLUMNS
from connector.delta.reading import arrow_filesystem, read_table
from connector.errors import RestoreError
from connector.protocol.commitlog import END_FILE_MIN_BLANK_LENGTH_BYTES
from connector.protocol.mapped_files import file_name, file_start

#: The columns of the restore columns a table must have (docs/restore.md "The columns bronze keeps").
RESTORE_COLUMN_NAMES = tuple(name for name, _, _ in RESTORE_COLUMNS)
#: Rows per Arrow batch a restore reads from the table (with 1 KiB messages, about 4 MiB a batch).
BATCH_ROWS = 4096


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
    the table (only when no ``--from-*`` was given); ``metadata``: what the restore wrote of the broker's metadata
    (a :class:`connector.restore.metadata.RestoredMetadata`; None when not asked); ``table_files``: the table's
    files the plan read (:class:`TableFiles`), which the restore reads the rows of each file from."""

    broker: str
    mapped_file_size: int
    start: int
    end: int
    files: tuple[FilePlan, ...]
    missing: tuple[int, int] | None = None
    skipped: tuple[int, int] | None = None
    records: int = field(default=0)
    metadata: object | None = None
    table_files: TableFiles | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class TableFiles:
    """The data files of one version of a table that may hold a broker's rows, read once from its Delta log so
    that reading a mapped file's rows does not open the log again: ``types`` (column name → Arrow type of the
    table's schema) and ``files``, each ``(path under the table, partition values, rows or None, min and max
    commitLogOffset or None)`` (bytes; None where the log has no statistics)."""

    types: dict[str, pa.DataType]
    files: tuple[tuple[str, dict, int | None, int | None, int | None], ...]


def broker_filter(broker: str) -> pc.Expression:
    """The rows of ``broker``."""
    return pc.field("broker") == broker


def _overlaps(low, high, lo: int | str | None, hi: int | str | None) -> bool:
    """False when statistics ``[low, high]`` (None: unknown) exclude every value of ``[lo, hi)`` (None: open)."""
    if low is None or high is None:
        return True
    return (lo is None or high >= lo) and (hi is None or low < hi)


def table_files(table_uri: str, broker: str) -> TableFiles:
    """The current version's data files of the table at ``table_uri`` whose ``broker`` partition value may hold
    rows of ``broker``, with their Delta statistics (:class:`TableFiles`), by their smallest commitLogOffset.
    Raises RestoreError when no Delta table is there; what deltalake raises for an unreadable one."""
    from urllib.parse import unquote

    from connector.delta.location import open_delta_table

    table = open_delta_table(table_uri)
    if table is None:
        raise RestoreError(f"{table_uri} holds no Delta table")
    types = {f.name: f.type for f in pa.schema(table.schema().to_arrow())}
    partitions = table.metadata().partition_columns
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    wanted = ["path", "num_records", "min.commitLogOffset", "max.commitLogOffset",
              *(f"partition.{name}" for name in partitions)]
    actions = actions.select([name for name in wanted if name in actions.column_names]).to_pylist()
    files = []
    for action in actions:
        values = {name: action.get(f"partition.{name}") for name in partitions}
        if "broker" in values and values["broker"] != broker:
            continue
        files.append((unquote(action["path"]), values, action.get("num_records"), action.get("min.commitLogOffset"),
                      action.get("max.commitLogOffset")))
    # in offset order (files without statistics last): the rows then come sorted, and the plan needs no argsort,
    # which held 32 bytes a row at once
    files.sort(key=lambda f: (f[3] is None, f[3] or 0))
    return TableFiles(types, tuple(files))


def row_batches(table_uri: str, broker: str, columns: Sequence[str], start: int | None = None,
                end: int | None = None, *, files: TableFiles | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of ``broker`` with ``start <= commitLogOffset < end`` (bytes; either bound may be None) of the
    Delta table at ``table_uri``, only ``columns`` (typed as the table's schema), as Arrow batches of at most
    :data:`BATCH_ROWS` rows, file by file by their smallest commitLogOffset (the rows are not sorted across files
    whose ranges overlap).

    The table's file list and statistics come from its Delta log (deltalake), or from ``files`` (a version's,
    read once by :func:`table_files`); files and row groups whose
    partition values or statistics exclude the rows are not read; the others are read a batch at a time through a
    buffered stream (``pyarrow.parquet.ParquetFile.iter_batches``), so memory holds about one batch whatever the
    size of the table or of a row group. A column a file lacks is its partition value, else null (a file landed
    before the column existed). Raises what deltalake raises for a path that holds no readable table.
    """
    files = files if files is not None else table_files(table_uri, broker)
    schema = pa.schema([pa.field(name, files.types[name]) for name in columns])
    filesystem = arrow_filesystem(table_uri)
    for path, partition, _, low, high in files.files:
        if _overlaps(low, high, start, end):
            yield from _file_batches(filesystem, path, partition, schema, broker, start, end)


def _file_batches(filesystem, path: str, partition: dict, schema: pa.Schema, broker: str, start: int | None,
                  end: int | None) -> Iterator[pa.RecordBatch]:
    """The rows of the range in one data file, as ``schema`` (see :func:`row_batches`)."""
    import pyarrow.parquet as pq

    with filesystem.open_input_file(path) as source:
        parquet = pq.ParquetFile(source, buffer_size=1 << 20, pre_buffer=False)
        have = set(parquet.schema_arrow.names)
        read = [n for n in dict.fromkeys([*schema.names, "broker", "commitLogOffset"]) if n in have]
        groups = [i for i in range(parquet.metadata.num_row_groups)
                  if _row_group_overlaps(parquet, i, start, end)]
        if not groups:
            return
        bounds = [(pc.greater_equal, start), (pc.less, end)]
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=groups, columns=read, use_threads=False):
            keep = pc.equal(batch.column("broker"), repeat_string(broker, 1)[0]) if "broker" in have else None
            for compare, bound in bounds:
                if bound is not None:
                    limit = from_numpy(np.array([bound]), pa.int64())[0]
                    keep = _and(keep, compare(batch.column("commitLogOffset"), limit))
            if keep is not None and keep.true_count != batch.num_rows:
                batch = batch.filter(keep)
            n = batch.num_rows
            if n:
                yield pa.RecordBatch.from_arrays([_column(batch, f, have, partition, n) for f in schema], schema=schema)


def _column(batch: pa.RecordBatch, field_: pa.Field, have: set[str], partition: dict, n: int) -> pa.Array:
    """Column ``field_`` of ``batch`` as its type; a column the file lacks is its partition value, else null."""
    if field_.name in have:
        column = batch.column(field_.name)
        return column if column.type == field_.type else column.cast(field_.type)
    if partition.get(field_.name) is not None:
        return repeat_string(str(partition[field_.name]), n).cast(field_.type)
    return pa.nulls(n, field_.type)


def _and(a, b):
    """``a & b``, ``b`` when ``a`` is None."""
    return b if a is None else pc.and_(a, b)


def _row_group_overlaps(parquet, i: int, start: int | None, end: int | None) -> bool:
    """False when row group ``i``'s statistics exclude every row of the range."""
    group = parquet.metadata.row_group(i)
    for j in range(group.num_columns):
        column = group.column(j)
        if column.path_in_schema != "commitLogOffset" or column.statistics is None:
            continue
        stats = column.statistics
        return not stats.has_min_max or _overlaps(stats.min, stats.max, start, end)
    return True


def check_restore_columns(table_uri: str) -> None:
    """Raise RestoreError when the table at ``table_uri`` lacks a restore column (landed before they existed)."""
    from connector.delta.location import open_delta_table

    table = open_delta_table(table_uri)
    if table is None:
        raise RestoreError(f"{table_uri} holds no Delta table")
    _check_columns(table_uri, {f.name for f in table.schema().fields})


def _check_columns(table_uri: str, have: set[str]) -> None:
    """Raise RestoreError when ``have`` (a table's column names) lacks a restore column."""
    missing = [name for name in RESTORE_COLUMN_NAMES if name not in have]
    if missing:
        raise RestoreError(f"table {table_uri} lacks the restore column(s) {', '.join(missing)}: it was landed by a "
                           "bronze that did not keep them, so its records cannot be given back byte for byte "
                           "(start this version's bronze on it to add them; rows landed from then on restore)")


@dataclass(slots=True)
class _Index:
    """The offsets of ``broker``'s rows, sorted: ``offsets``, ``sizes`` (storeSize) and, when asked, ``stamps``
    (storeTimestamp, epoch ms), int64 arrays; the one ``mapped_file_size``; the offsets of rows whose recordFormat
    is null (sorted)."""

    offsets: np.ndarray
    sizes: np.ndarray
    stamps: np.ndarray | None
    mapped_file_size: int
    null_formats: np.ndarray


def _index(table_uri: str, broker: str, files: TableFiles, *, stamps: bool) -> _Index:
    """Read ``broker``'s offsets a batch at a time into arrays sized from the Delta log's row counts (untouched
    pages cost no memory): 12 bytes a row (20 with ``stamps``), sorted."""
    counts = [n for _, _, n, _, _ in files.files]
    rows = sum(counts) if all(n is not None for n in counts) else None
    capacity = rows if rows is not None else 1 << 16
    offsets, sizes = np.empty(capacity, np.int64), np.empty(capacity, np.int32)
    times = np.empty(capacity if stamps else 0, np.int64)
    columns = ["commitLogOffset", "storeSize", "recordFormat", "mappedFileSizeCommitLog"]
    columns += ["storeTimestamp"] if stamps else []
    count, null_formats, null_sizes, file_sizes = 0, [], [], set()
    for batch in row_batches(table_uri, broker, columns, files=files):
        n = batch.num_rows
        if count + n > len(offsets):  # the log gave no row counts: grow
            grow = max(2 * len(offsets), count + n)
            offsets, sizes = np.resize(offsets, grow), np.resize(sizes, grow)
            times = np.resize(times, grow) if stamps else times
        at = to_numpy(batch.column("commitLogOffset"))
        offsets[count:count + n] = at
        sizes[count:count + n] = to_numpy(batch.column("storeSize"))
        if stamps:
            times[count:count + n] = to_numpy(batch.column("storeTimestamp")) // 1000
        count += n
        for name, into in (("recordFormat", null_formats), ("mappedFileSizeCommitLog", null_sizes)):
            if batch.column(name).null_count:
                into.append(at[to_numpy(pc.is_null(batch.column(name)).cast(pa.int8())).astype(bool)])
        file_sizes.update(pc.unique(batch.column("mappedFileSizeCommitLog").drop_null()).to_pylist())
    if not count:
        brokers = read_table(table_uri, columns=["broker"]).column("broker").unique().to_pylist()
        raise RestoreError(f"table {table_uri} has no rows of broker {broker} (its brokers: "
                           f"{', '.join(sorted(map(str, brokers))) or 'none'})")
    if null_sizes:
        raise RestoreError(f"broker {broker}: the row at CommitLog offset {int(np.concatenate(null_sizes).min())} "
                           "has no mappedFileSizeCommitLog (landed before bronze kept the restore columns); restore "
                           "a range after such rows")
    if len(file_sizes) != 1:
        raise RestoreError(f"broker {broker}: the rows name {len(file_sizes)} mapped file sizes "
                           f"({', '.join(map(str, sorted(file_sizes)))}); restore one range of one size at a time")
    nulls = np.sort(np.concatenate(null_formats)) if null_formats else np.zeros(0, np.int64)
    index = _Index(offsets[:count], sizes[:count], times[:count] if stamps else None, int(file_sizes.pop()), nulls)
    if count > 1 and not (index.offsets[1:] >= index.offsets[:-1]).all():
        order = np.argsort(index.offsets, kind="stable")
        index.offsets, index.sizes = index.offsets[order], index.sizes[order]
        index.stamps = index.stamps[order] if stamps else None
    return index


def _breaks(o: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Indexes ``b`` where record ``b + 1`` does not start where record ``b`` ends (``o[b] + s[b]``), computed a
    million rows at a time (no table-sized temporary)."""
    parts = [np.zeros(0, np.int64)]
    step = 1 << 20
    for a in range(0, len(o) - 1, step):
        b = min(a + step, len(o) - 1)
        parts.append(np.flatnonzero(o[a + 1:b + 1] != o[a:b] + s[a:b]) + a)
    return np.concatenate(parts)


def _first_file_start(offsets: np.ndarray, size: int) -> int | None:
    """The index of the first offset that starts a mapped file (a multiple of ``size``), or None."""
    k = -(-int(offsets[0]) // size)
    while k * size <= int(offsets[-1]):
        j = int(np.searchsorted(offsets, k * size))
        if offsets[j] == k * size:
            return j
        k = int(offsets[j]) // size + (1 if int(offsets[j]) % size else 0)
    return None


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
    files = table_files(table_uri, broker)
    _check_columns(table_uri, set(files.types))
    index = _index(table_uri, broker, files, stamps=from_timestamp is not None or to_timestamp is not None)
    size, offsets, sizes, stamps = index.mapped_file_size, index.offsets, index.sizes, index.stamps
    keep = np.ones(len(offsets), dtype=bool)
    keep[1:] = offsets[1:] != offsets[:-1]
    if not keep.all():
        dup = np.flatnonzero(~keep)
        bad = dup[sizes[dup] != sizes[dup - 1]]
        if len(bad):
            raise RestoreError(f"broker {broker}: two rows at CommitLog offset {int(offsets[bad[0]])} differ in "
                               "storeSize")
        offsets, sizes = offsets[keep], sizes[keep]
        stamps = stamps[keep] if stamps is not None else None
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
        at_file_start = _first_file_start(offsets, size)
        if at_file_start is None:
            raise RestoreError(f"broker {broker}: the table holds no CommitLog file from its first byte (its first "
                               f"record is at offset {int(offsets[0])}, inside file "
                               f"{file_name(file_start(int(offsets[0]), size))})")
        i = at_file_start
        start = int(offsets[i])
        if i:
            skipped = (int(offsets[0]), start)
    if to_offset is not None:
        if to_offset <= start:
            raise RestoreError(f"broker {broker}: --to-offset {to_offset} is not after the range's start {start}")
        j = int(np.searchsorted(offsets, to_offset))
        before = int(offsets[j - 1]) + int(sizes[j - 1]) if j > 0 else None
        boundary = (j < len(offsets) and offsets[j] == to_offset) or before == to_offset
        if not boundary and not (before is not None and before < to_offset):
            raise RestoreError(f"broker {broker}: --to-offset {to_offset} is inside a record (a range ends at a "
                               "record boundary)")
        stop = j
    elif to_timestamp is not None:
        later = np.flatnonzero((stamps > to_timestamp) & (offsets >= start))
        stop = int(later[0]) if len(later) else len(offsets)
    else:
        stop = len(offsets)
    o, s = offsets[i:stop], sizes[i:stop]
    if not len(o):
        raise RestoreError(f"broker {broker}: no record in the range asked (from offset {start})")
    nulls = index.null_formats[(index.null_formats >= o[0]) & (index.null_formats <= o[-1])]
    if len(nulls):
        first = int(nulls[0])
        raise RestoreError(f"broker {broker}: the row at CommitLog offset {first} has no recordFormat (landed "
                           "before bronze kept the restore columns); restore a range after it")
    missing = None
    breaks = _breaks(o, s)
    last = len(o)
    plans: list[FilePlan] = []
    cut = None
    for b in breaks.tolist():
        nxt, end = int(o[b + 1]), int(o[b]) + int(s[b])
        if not _is_blank(end, nxt, int(o[b]), size):
            missing, cut = (end, nxt), b + 1
            break
    if cut is not None:
        last = cut
        o, s = o[:last], s[:last]
        breaks = breaks[breaks < last - 1]
    blank_ends = {int(o[b]) + int(s[b]) for b in breaks.tolist()}
    end = int(o[-1]) + int(s[-1])
    if cut is None and stop < len(offsets) and _is_blank(end, int(offsets[stop]), int(o[-1]), size):
        blank_ends.add(end)  # the range stops at a file's end: its blank is written too
    reach = file_start(end, size) + size if end in blank_ends else end
    if to_offset is not None and missing is None and to_offset > reach:
        missing = (reach, to_offset)
    for k in range(int(o[0]) // size, int(o[-1]) // size + 1):
        lo, hi = (int(np.searchsorted(o, at)) for at in (k * size, (k + 1) * size))
        if hi > lo:
            file_end = int(o[hi - 1]) + int(s[hi - 1])
            plans.append(FilePlan(k * size, file_end, file_end in blank_ends, hi - lo))
    return RestorePlan(broker, size, start, end, tuple(plans), missing, skipped, int(len(o)), table_files=files)
