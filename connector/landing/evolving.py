"""Landing targets whose columns come from the data (``run tables``' JSON ``schema = "infer"``): the tasks stage
the rows they decoded, each file with the columns its rows have (:mod:`connector.landing.staging`); the driver
reads the micro-batch's files, widens their columns into one schema (:mod:`connector.delta.schema_evolution`),
and appends the rows with delta-rs, the new columns added in the same commit as the rows that need them (Delta
schema evolution) with ``txn(appId, batchId)``. A replay is skipped by the txn; the staged files are removed after
the commit. docs/tables.md "Schema evolution", docs/delta.md "The replay rule".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from connector.delta.commit import batch_already_committed
from connector.delta.faults import fault_point
from connector.delta.features import check_writable
from connector.delta.files import table_storage_options
from connector.delta.location import check_new_table_location, open_delta_table
from connector.delta.messages import files_of
from connector.delta.options import DeltaSinkOptions
from connector.delta.schema_evolution import conform_table, conforms, keep_schema, plain_schema, widen_schema
from connector.delta.sink import DeltaLakeTaskWrite
from connector.errors import DeltaSchemaMismatchError
from connector.landing.staging import StagedFiles
from connector.retry import retry_attempts

log = logging.getLogger(__name__)

#: Append attempts when another commit (e.g. maintenance compacting the table) wins the race.
MAX_APPEND_ATTEMPTS = 10


def batch_schema(table: pa.Schema | None, staged: Sequence[pa.Schema]) -> pa.Schema:
    """The schema of a micro-batch's rows: the table's columns (``table``; None for a new table), each keeping its
    type with the struct fields the staged rows add, then the columns only the staged rows have, each widened over
    every file that has it (:func:`connector.delta.schema_evolution.widen_type`).

    Raises:
        DeltaSchemaMismatchError: a staged column does not fit the table's column of its name (e.g. ``double``
            values for a ``bigint`` column), naming the column and both types.
    """
    new = pa.schema([])
    for schema in staged:
        new = widen_schema(new, pa.schema([f for f in schema if table is None or f.name not in table.names]))
    if table is None:
        return new
    target = pa.schema(list(table))
    for schema in staged:
        target = keep_schema(target, pa.schema([f for f in schema if f.name in table.names]))
    for schema in staged:
        for f in schema:
            if f.name in table.names and not conforms(f.type, target.field(f.name).type):
                raise DeltaSchemaMismatchError(
                    f"column {f.name} is {table.field(f.name).type} in the table, and the batch's rows hold "
                    f"{f.type}: a column's type never changes")
    return pa.schema(list(target) + [f for f in new if f.name not in target.names])


@dataclass(frozen=True)
class EvolvingCommitter:
    """The driver's commit of one target whose columns come from the data (module docstring); picklable.

    Attributes:
        options: the table's sink options (location, appId, storage settings).
        partition_by: the partition columns (columns every row has: kept RocketMQ columns or ``storeDate``).
    """

    options: DeltaSinkOptions
    partition_by: tuple[str, ...]

    @property
    def staged(self) -> StagedFiles:
        """The target's staged files."""
        return StagedFiles(self.options)

    def commit(self, messages: Iterable, batch_id: int) -> int:
        """Append the batch's staged rows with ``txn(appId, batch_id)``, new columns added in the same commit, or
        skip a replay; then remove the staged files of batches up to ``batch_id``. Returns the rows appended (0
        for a replay).

        Raises:
            DeltaSchemaMismatchError: a column's values do not fit the table's column, or other partitioning; the
                staged files stay for the replay.
            UnsupportedTableFeatureError, DeltaTablePathError: as the other writers (connector.delta.commit).
            deltalake.exceptions.CommitFailedError: still conflicting after :data:`MAX_APPEND_ATTEMPTS` attempts.
            OSError: a staged file cannot be read.
        """
        from deltalake import write_deltalake
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import CommitProperties, Transaction

        uri, app_id = self.options.table_uri, self.options.app_id
        paths = [f.path for f in files_of(messages)]
        parts = None
        appended = 0
        props = CommitProperties(app_transactions=[Transaction(app_id, batch_id)],
                                 custom_metadata={"hareplica.appId": app_id, "hareplica.batchId": batch_id})
        for attempt in retry_attempts(MAX_APPEND_ATTEMPTS, (CommitFailedError,)):
            with attempt:
                table = open_delta_table(uri)
                if table is not None:
                    committed = table.transaction_version(app_id)
                    if batch_already_committed(committed, batch_id):
                        log.warning("batch %d of appId %s is already in Delta table %s (txn version %d): replay "
                                    "skipped, its staged rows dropped", batch_id, app_id, uri, committed)
                        break
                    check_writable(table, uri, "append")
                    self._check_partitioning(table.metadata().partition_columns)
                else:
                    check_new_table_location(uri)
                if parts is None:
                    parts = self.staged.read(paths)
                if not parts and table is None:
                    break  # no row for a table not made yet: nothing to land, nothing to replay
                existing = None if table is None else pa.schema(table.schema().to_arrow())
                rows = self._rows(existing, parts)
                fault_point("before-delta-commit", batch_id, uri)
                write_deltalake(uri, rows, mode="append", schema_mode="merge",
                                partition_by=list(self.partition_by) or None,
                                storage_options=table_storage_options(uri), commit_properties=props)
                appended = rows.num_rows
                fault_point("after-delta-commit", batch_id, uri)
        self.staged.remove(paths, batch_id)
        return appended

    def abort(self, messages: Iterable, batch_id: int) -> None:
        """Remove the staged files of a failed batch (the table is not touched)."""
        self.staged.remove([f.path for f in files_of(messages)], batch_id, only_batch=True)

    def _rows(self, existing: pa.Schema | None, parts: Sequence[pa.Table]) -> pa.Table:
        """The batch's rows in :func:`batch_schema`'s schema (the table's columns first)."""
        uri = self.options.table_uri
        schema = batch_schema(plain_schema(existing), [p.schema for p in parts])
        missing = [c for c in self.partition_by if c not in schema.names]
        if missing:
            raise DeltaSchemaMismatchError(f"Delta table {uri}: partition column {missing[0]} is in no row")
        try:
            return pa.concat_tables([conform_table(p, schema) for p in parts]) if parts else schema.empty_table()
        except TypeError as e:
            raise DeltaSchemaMismatchError(f"Delta table {uri}: {e}") from None

    def _check_partitioning(self, partitions: Sequence[str]) -> None:
        if tuple(partitions) != self.partition_by:
            raise DeltaSchemaMismatchError(
                f"Delta table {self.options.table_uri} is partitioned by {list(partitions)}, the declaration by "
                f"{list(self.partition_by)}")


class EvolvingStreamWriter:
    """A landing target whose columns come from the data (module docstring): ``open_task()`` in a task stages the
    rows, ``committer`` commits on the driver. Picklable; holds only options.

    Attributes:
        options: the table's sink options; schema: the Spark schema of the columns every row has (the kept
        RocketMQ columns); partition_by: its partition columns.
    """

    def __init__(self, options: DeltaSinkOptions, schema, partition_by: Sequence[str]):
        self.options = options
        self.schema = schema
        self.partition_by = tuple(partition_by)
        self.committer = EvolvingCommitter(options, self.partition_by)

    def open_task(self) -> DeltaLakeTaskWrite:
        """This task's writer of staged rows, each batch with its own columns; used as
        :meth:`connector.delta.sink.DeltaLakeStreamWriter.open_task`'s."""
        return self.committer.staged.open_task(self.schema)
