"""Upsert targets of the direct landing: the tasks stage a table's rows as Parquet beside it
(:mod:`connector.landing.staging`), and the driver's commit keeps each key's latest row and merges it into the
table with the micro-batch's ``txn`` (docs/tables.md "Upserts", docs/delta.md "The replay rule").

A task stages the rows the split gives the target — the table's columns plus :data:`ORDER_COLUMN` (which row of a
key is the latest: the largest wins) and :data:`DELETE_COLUMN` (true: a tombstone). The driver, for the batch:
skips it when the table's txn already holds it (a replay), else reads the files the tasks reported, keeps the
latest row per key and runs :func:`connector.delta.merge.merge_batch` (update, insert, delete) with
``txn(appId, batchId)``; then it removes the staged files of this and earlier batches of the appId. A crash
before the merge replays the batch from new staged files; after it, the replay is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from connector.delta.commit import batch_already_committed
from connector.delta.location import open_delta_table
from connector.delta.messages import files_of
from connector.delta.options import DeltaSinkOptions
from connector.delta.sink import DeltaLakeTaskWrite
from connector.landing.staging import STAGED_FOLDER, StagedFiles

log = logging.getLogger(__name__)

__all__ = ["DELETE_COLUMN", "ORDER_COLUMN", "STAGED_FOLDER", "UpsertCommitter", "UpsertStreamWriter",
           "latest_per_key", "staged_schema"]

#: Staged column (int64, not null) ordering the rows of one key: the row with the largest value is the latest.
ORDER_COLUMN = "_hareplicaOrder"
#: Staged column (boolean): true for a tombstone, which deletes its key.
DELETE_COLUMN = "_hareplicaDelete"


def staged_schema(schema):
    """The Spark schema of a target's staged rows: the table's ``schema``, then :data:`ORDER_COLUMN` (long, not
    null) and :data:`DELETE_COLUMN` (boolean, not null).

    Raises:
        ValueError: ``schema`` already has a column of one of those names.
    """
    from pyspark.sql.types import BooleanType, LongType, StructField, StructType

    clash = [c for c in (ORDER_COLUMN, DELETE_COLUMN) if c in schema.fieldNames()]
    if clash:
        raise ValueError(f"column {clash[0]} is reserved for the upsert's staged rows")
    return StructType([*schema.fields, StructField(ORDER_COLUMN, LongType(), False),
                       StructField(DELETE_COLUMN, BooleanType(), False)])


def latest_per_key(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The row of ``rows`` with the largest :data:`ORDER_COLUMN` for each value of ``keys`` (ties: the one read
    last), in no particular order. ``rows``: staged rows (:func:`staged_schema`); key columns of a type pyarrow
    can group by (no nested types)."""
    if rows.num_rows == 0:
        return rows
    order = np.argsort(rows.column(ORDER_COLUMN).to_numpy(), kind="stable")
    ordered = rows.take(pa.array(order, pa.int64()))
    ordered = ordered.append_column("_hareplicaRow", pa.array(np.arange(ordered.num_rows), pa.int64()))
    last = ordered.select([*keys, "_hareplicaRow"]).group_by(list(keys), use_threads=False).aggregate(
        [("_hareplicaRow", "max")])
    return ordered.take(last.column("_hareplicaRow_max")).drop_columns(["_hareplicaRow"])


@dataclass(frozen=True)
class UpsertCommitter:
    """The driver's commit of one upsert target (module docstring); picklable, holds no table.

    Attributes:
        options: the table's sink options (location, appId, storage settings).
        schema: the table's Spark schema (without the staged columns).
        partition_by: the table's partition columns (all among ``keys``: a key never moves between partitions).
        keys: the columns identifying a row.
    """

    options: DeltaSinkOptions
    schema: object
    partition_by: tuple[str, ...]
    keys: tuple[str, ...]

    @property
    def staged(self) -> StagedFiles:
        """The target's staged files."""
        return StagedFiles(self.options)

    def commit(self, messages: Iterable, batch_id: int) -> int:
        """Merge the batch's staged rows (each key's latest) into the table with ``txn(appId, batch_id)``, or skip
        a replay; then remove the staged files of batches up to ``batch_id``. Returns the rows merged (0 for a
        replay).

        Raises:
            DeltaSchemaMismatchError, UnsupportedTableFeatureError, DeltaTablePathError, DeltaCommitError: as
                :func:`connector.delta.merge.merge_batch`; the staged files stay for the replay.
            OSError: a staged file cannot be read.
        """
        from connector.delta.merge import merge_batch

        uri, app_id = self.options.table_uri, self.options.app_id
        paths = [f.path for f in files_of(messages)]
        table = open_delta_table(uri)
        committed = table.transaction_version(app_id) if table is not None else None
        merged = 0
        if batch_already_committed(committed, batch_id):
            log.warning("batch %d of appId %s is already in Delta table %s (txn version %d): replay skipped, its "
                        "staged rows dropped", batch_id, app_id, uri, committed)
        else:
            latest = latest_per_key(self._read(paths), self.keys)
            merged = latest.num_rows
            merge_batch(latest, self.schema, uri, app_id, batch_id, keys=self.keys, partition_by=self.partition_by,
                        delete=DELETE_COLUMN)
        self.staged.remove(paths, batch_id)
        return merged

    def abort(self, messages: Iterable, batch_id: int) -> None:
        """Remove the staged files of a failed batch (the table is not touched)."""
        self.staged.remove([f.path for f in files_of(messages)], batch_id, only_batch=True)

    def _read(self, paths: Sequence[str]) -> pa.Table:
        """The staged rows of the files at ``paths`` (relative to the staging folder), as one table."""
        from connector.delta.schema import delta_schema_of

        tables = self.staged.read(paths)
        if not tables:
            schema = pa.schema(delta_schema_of(staged_schema(self.schema)).to_arrow())
            return schema.empty_table()
        return pa.concat_tables(tables, promote_options="permissive")


class UpsertStreamWriter:
    """A landing target merged into its table (module docstring): ``open_task()`` in a task writes the staged
    rows, ``committer`` commits on the driver. Picklable; holds only options and schemas.

    Attributes:
        options: the table's sink options; schema: the table's Spark schema; partition_by: its partition columns;
        keys: the key columns.
    """

    def __init__(self, options: DeltaSinkOptions, schema, partition_by: Sequence[str], keys: Sequence[str]):
        self.options = options
        self.schema = schema
        self.partition_by = tuple(partition_by)
        self.keys = tuple(keys)
        self.committer = UpsertCommitter(options, schema, self.partition_by, self.keys)

    def open_task(self) -> DeltaLakeTaskWrite:
        """This task's writer of staged rows (:func:`staged_schema` columns), unpartitioned, in the staging folder;
        used as :meth:`connector.delta.sink.DeltaLakeStreamWriter.open_task`'s."""
        return self.committer.staged.open_task(staged_schema(self.schema))
