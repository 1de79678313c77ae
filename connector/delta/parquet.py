"""The Parquet files of a write task, on executors: :class:`TaskFileWriter` splits a task's Arrow batches into
Hive-style partition folders (:mod:`connector.delta.partitions`), buffers row groups, rolls files at about
``targetFileSize`` bytes and describes each closed file as a :class:`connector.delta.messages.DataFileInfo` with
its Delta statistics. A file that cannot be written fails the task with one :class:`DeltaFileWriteError` line.
The settings and why: docs/delta.md "2. The sink", "Parquet settings" and "A full disk".
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from connector.arrow_numpy import from_numpy, to_numpy
from connector.delta.file_names import data_file_name
from connector.delta.files import delete_quietly, table_filesystem
from connector.delta.messages import DataFileInfo
from connector.delta.no_space import no_space_text
from connector.delta.partitions import partition_folder, partition_value_string
from connector.delta.stats import file_stats_json, is_container_type
from connector.errors import DeltaFileWriteError, DeltaSinkConfigError

#: Arrow bytes buffered per open file before they are written as one Parquet row group (docs/delta.md "Parquet
#: settings": against 64 MiB, a bronze task worker's peak RSS 253 instead of 280 MiB, files 2.3% larger).
ROW_GROUP_BUFFER_BYTES = 32 * 1024 * 1024
#: Arrow bytes a task may buffer over all open files before it flushes the largest buffer.
MAX_TASK_BUFFER_BYTES = 256 * 1024 * 1024
#: A file is closed once its on-disk size reaches this fraction of targetFileSize.
ROLL_FRACTION = 0.9
#: Rows of a file's first row group sampled to choose its dictionary-encoded columns.
DICTIONARY_SAMPLE_ROWS = 4096
#: A primitive column is dictionary-encoded when at most this fraction of the sampled values are distinct.
DICTIONARY_MAX_DISTINCT_FRACTION = 0.25


@contextmanager
def _writing(path: str) -> Iterator[None]:
    """Turn an OSError while writing ``path`` into one :class:`DeltaFileWriteError` line naming it and the cause."""
    try:
        yield
    except OSError as e:
        full = no_space_text(e)
        if full:
            what = (f"{full}: the file system is full; free space there (or give the table another place) and "
                    "rerun: the batch was not committed and lands again, once")
        else:
            what = e.strerror or next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise DeltaFileWriteError(f"cannot write {path}: {what}") from e


def _parquet_leaves(name: str, t: pa.DataType, values: pa.Array | None = None
                    ) -> Iterator[tuple[str, pa.DataType, pa.Array | None]]:
    """``(path, type, values)`` of every Parquet leaf column of an Arrow field: the dotted path as pyarrow's
    ``use_dictionary`` list names it, and, when ``values`` (the field's array) is given, the values under its rows,
    flattened: a map's keys or values, a list's elements, a struct's field. None when not given or under a
    dictionary-typed array (not followed)."""
    if pa.types.is_dictionary(t):
        t, values = t.value_type, None
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            field = t.field(i)
            yield from _parquet_leaves(f"{name}.{field.name}", field.type, None if values is None else values.field(i))
    elif pa.types.is_map(t):
        # the entries under the rows (MapArray.keys / .items would ignore a slice's offset)
        entries = None if values is None else values.cast(pa.list_(pa.struct([t.key_field, t.item_field]))).flatten()
        yield from _parquet_leaves(f"{name}.key_value.key", t.key_type, None if entries is None else entries.field(0))
        yield from _parquet_leaves(f"{name}.key_value.value", t.item_type,
                                   None if entries is None else entries.field(1))
    elif is_container_type(t):
        yield from _parquet_leaves(f"{name}.list.element", t.value_type, None if values is None else values.flatten())
    else:
        yield name, t, values


def _is_binary_type(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or pa.types.is_binary_view(t))


def dictionary_columns(schema: pa.Schema, sample: pa.Table | None) -> list[str]:
    """Parquet leaf columns worth dictionary encoding, judged on the first rows of a file's first row group.

    Dictionary encoding pays only for repeating values (topic, queueId, hosts, tags...). On unique
    values (msgId, offsets, CRCs) pyarrow still hashes every value until the dictionary page reaches
    1 MiB before it falls back to PLAIN, which costs 20-35% of the write time of a bronze row group and
    saves nothing. Rules: binary leaves never (payloads); any other leaf when at most
    :data:`DICTIONARY_MAX_DISTINCT_FRACTION` of its values in the first :data:`DICTIONARY_SAMPLE_ROWS` rows of
    ``sample`` are distinct. A leaf of a nested column counts the values under those rows: a map's keys or
    values, a list's elements, a struct's field (:func:`_parquet_leaves`; bronze's ``properties`` values hold every
    message's unique UNIQ_KEY, so they are left PLAIN, and its keys repeat). Without a sample, or under a
    dictionary-typed column, every non-binary leaf is encoded, as pyarrow's default. The encoding never
    changes the values read back, nor the statistics.
    """
    out: list[str] = []
    for f in schema:
        column = None
        if sample is not None and sample.num_rows:
            column = sample.column(f.name).slice(0, DICTIONARY_SAMPLE_ROWS).combine_chunks()
        for path, t, values in _parquet_leaves(f.name, f.type, column):
            if not _is_binary_type(t) and (values is None or _repeats(values)):
                out.append(path)
    return out


def _repeats(values: pa.Array) -> bool:
    """At most :data:`DICTIONARY_MAX_DISTINCT_FRACTION` of ``values`` are distinct (nulls count as one value)."""
    distinct = pc.count_distinct(values, mode="all").as_py()
    return distinct <= max(1, int(len(values) * DICTIONARY_MAX_DISTINCT_FRACTION))


def parquet_writer_options(schema: pa.Schema, compression: str, sample: pa.Table | None = None) -> dict:
    """Keyword arguments of ``pyarrow.parquet.ParquetWriter`` for the sink's data files of ``schema``.

    ``compression``: the pyarrow codec name (``DeltaSinkOptions.compression``); ``sample``: the first
    rows the file will hold, to choose the dictionary-encoded columns (:func:`dictionary_columns`).
    Column statistics stay on for every column: Delta's per-file statistics are read from them.
    """
    return {"compression": compression, "use_dictionary": dictionary_columns(schema, sample)}


class _OpenParquetFile:
    """One Parquet file being written: buffered batches become row groups; size known from the stream."""

    def __init__(self, fs, root: str, rel_path: str, schema: pa.Schema, compression: str,
                 partition_values: dict[str, str | None]):
        self.fs = fs
        self.rel_path = rel_path
        self.full_path = posixpath.join(root, rel_path)
        self.schema = schema
        self.partition_values = partition_values
        self.buffer: list[pa.RecordBatch] = []
        self.buffered_bytes = 0
        self.written_arrow_bytes = 0
        self.num_records = 0
        self.compression = compression
        self._collector: list[pq.FileMetaData] = []
        with _writing(self.full_path):
            self.stream = fs.open_output_stream(self.full_path)
        #: created at the first flush, when the rows that choose the dictionary columns are known
        self.writer: pq.ParquetWriter | None = None

    def bytes_on_disk(self) -> int:
        return self.stream.tell()

    def estimated_size(self) -> float:
        """Bytes on disk after the buffer is written, estimated from the compression seen so far."""
        ratio = self.bytes_on_disk() / self.written_arrow_bytes if self.written_arrow_bytes else 1.0
        return self.bytes_on_disk() + self.buffered_bytes * ratio

    def append(self, batch: pa.RecordBatch) -> int:
        size = batch.nbytes
        self.buffer.append(batch)
        self.buffered_bytes += size
        return size

    def flush(self) -> int:
        """Write the buffer as one row group; returns the Arrow bytes released. Raises DeltaFileWriteError."""
        if not self.buffer:
            return 0
        table = pa.Table.from_batches(self.buffer, schema=self.schema)
        with _writing(self.full_path):
            if self.writer is None:
                self.writer = pq.ParquetWriter(self.stream, self.schema, metadata_collector=self._collector,
                                               **parquet_writer_options(self.schema, self.compression, table))
            self.writer.write_table(table, row_group_size=max(1, table.num_rows))
        released = self.buffered_bytes
        self.written_arrow_bytes += released
        self.num_records += table.num_rows
        self.buffer = []
        self.buffered_bytes = 0
        return released

    def close(self) -> DataFileInfo:
        """Write what is buffered and the footer; the file's description. Raises DeltaFileWriteError."""
        self.flush()
        with _writing(self.full_path):
            if self.writer is None:  # nothing was appended: still a valid (empty) Parquet file
                self.writer = pq.ParquetWriter(self.stream, self.schema, metadata_collector=self._collector,
                                               **parquet_writer_options(self.schema, self.compression))
            self.writer.close()
            self.stream.close()
        info = self.fs.get_file_info(self.full_path)
        metadata = self._collector[0]
        mtime_ms = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else int(time.time() * 1000)
        return DataFileInfo(path=self.rel_path, size=info.size, partition_values=dict(self.partition_values),
                            modification_time=mtime_ms, stats=file_stats_json(metadata, self.schema),
                            num_records=metadata.num_rows)

    def discard(self) -> None:
        """Close without caring for errors and delete the partial file."""
        for closer in ((self.writer.close, self.stream.close) if self.writer is not None else (self.stream.close,)):
            try:
                closer()
            except Exception:  # noqa: BLE001 - best effort on the failure path
                pass
        if self.writer is not None:
            self.writer.is_open = False  # else its __del__ closes again and prints a traceback to stderr
        delete_quietly(self.fs, self.full_path)


class TaskFileWriter:
    """All files of one write task: splits batches by partition values, rolls at the target size and when a batch
    has other columns than the open files (their schema is the first batch's).

    Args:
        table_uri: the table root; partition_by: partition columns (not written into the files).
        compression, codec_infix: pyarrow codec and its file-name infix (``DeltaSinkOptions``).
        target_file_size: bytes per file before rolling.
        name_prefix: the task's file-name prefix (:func:`connector.delta.file_names.task_file_prefix`).
    Call :meth:`write` for each batch, then :meth:`close`; :meth:`discard` deletes every file of the task.
    """

    def __init__(self, table_uri: str, partition_by: Sequence[str], compression: str, codec_infix: str,
                 target_file_size: int, name_prefix: str):
        self.fs, self.root = table_filesystem(table_uri)
        self.partition_by = list(partition_by)
        self.compression = compression
        self.codec_infix = codec_infix
        self.target_file_size = target_file_size
        self.row_group_bytes = min(ROW_GROUP_BUFFER_BYTES, max(1, target_file_size))
        self.name_prefix = name_prefix
        self.open_files: dict[tuple, _OpenParquetFile] = {}
        self.closed: list[DataFileInfo] = []
        self.buffered_bytes = 0
        self._made_dirs: set[str] = set()
        self._data_schema: pa.Schema | None = None
        self._batch_schema: pa.Schema | None = None

    def _new_file(self, key: tuple, values: list[str | None]) -> _OpenParquetFile:
        folder = partition_folder(self.partition_by, values)
        name = data_file_name(self.name_prefix, self.codec_infix)
        rel = f"{folder}/{name}" if folder else name
        parent = posixpath.dirname(posixpath.join(self.root, rel))
        if parent not in self._made_dirs:
            if isinstance(self.fs, pafs.LocalFileSystem):  # an object store has no folders: no request, no marker
                with _writing(parent):
                    self.fs.create_dir(parent, recursive=True)
            self._made_dirs.add(parent)
        f = _OpenParquetFile(self.fs, self.root, rel, self._data_schema, self.compression,
                             dict(zip(self.partition_by, values, strict=True)))
        self.open_files[key] = f
        return f

    def _split(self, batch: pa.RecordBatch) -> list[tuple[tuple, pa.RecordBatch]]:
        """``batch``'s rows by partition: ``(partition values, rows)`` per distinct value tuple, in order of
        first appearance, each part's rows in batch order. Dictionary codes of each partition column (a null
        its own code) combine into one key per row, so neither Acero nor pandas is imported."""
        if not self.partition_by:
            return [((), batch)]
        encoded = [batch.column(batch.schema.get_field_index(c)).dictionary_encode(null_encoding="encode")
                   for c in self.partition_by]
        key = np.zeros(batch.num_rows, dtype=np.int64)
        for column in encoded:
            key = key * len(column.dictionary) + to_numpy(column.indices)
        distinct, first = np.unique(key, return_index=True)
        out = []
        for k in distinct[np.argsort(first)]:
            rows = np.flatnonzero(key == k)
            codes = [column.indices[int(rows[0])].as_py() for column in encoded]
            values = tuple(column.dictionary[code].as_py() for column, code in zip(encoded, codes, strict=True))
            part = batch if len(rows) == batch.num_rows else batch.take(from_numpy(rows, pa.int64()))
            out.append((values, part))
        return out

    def write(self, batch: pa.RecordBatch) -> None:
        """Add one batch's rows to the open files of their partitions; flush and roll files as they fill.

        Raises:
            DeltaSinkConfigError: a partition column is not in the first batch's schema.
        """
        if batch.num_rows == 0:
            return
        if self._batch_schema is not None and not batch.schema.equals(self._batch_schema):
            self._close_open_files()  # a batch with other columns (a table whose columns come from the data)
            self._data_schema = None
        if self._data_schema is None:
            missing = [c for c in self.partition_by if batch.schema.get_field_index(c) < 0]
            if missing:
                raise DeltaSinkConfigError(f"partition columns {missing} are not in the batch schema {batch.schema}")
            self._batch_schema = batch.schema
            self._data_schema = pa.schema([f for f in batch.schema if f.name not in self.partition_by])
        data_names = self._data_schema.names
        for key, part in self._split(batch):
            f = self.open_files.get(key)
            if f is None:
                f = self._new_file(key, [partition_value_string(v) for v in key])
            self.buffered_bytes += f.append(part.select(data_names) if self.partition_by else part)
            if f.buffered_bytes >= self.row_group_bytes or f.estimated_size() >= self.target_file_size:
                self.buffered_bytes -= f.flush()
                if f.bytes_on_disk() >= self.target_file_size * ROLL_FRACTION:
                    self.closed.append(f.close())
                    del self.open_files[key]
        while self.buffered_bytes > MAX_TASK_BUFFER_BYTES and self.open_files:
            released = max(self.open_files.values(), key=lambda o: o.buffered_bytes).flush()
            if not released:
                break
            self.buffered_bytes -= released

    def _close_open_files(self) -> None:
        for key in list(self.open_files):
            self.closed.append(self.open_files[key].close())  # a file that fails stays open for discard()
            del self.open_files[key]
        self.buffered_bytes = 0

    def close(self) -> list[DataFileInfo]:
        """Close every open file; the descriptions of all files the task wrote, in the order they were closed."""
        self._close_open_files()
        return self.closed

    def discard(self) -> None:
        """Delete every file of this task (failure path)."""
        for f in self.open_files.values():
            f.discard()
        self.open_files.clear()
        for info in self.closed:
            delete_quietly(self.fs, posixpath.join(self.root, info.path))
        self.closed = []

