"""``format("hareplica-landing")``: the ``hareplica`` stream whose tasks decode their slice and write it into
Delta (docs/delta.md "``--landing direct``").

Planning is the ``hareplica`` source's (the reader holds one and hands it every driver call); a task writes
the Delta sink's Parquet files and yields one row per record read, all null but the last, which holds its
pickled commit messages, so Spark's ``numInputRows`` counts records (docs/performance.md "The row per record").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from connector.arrow_numpy import binary_array
from connector.delta.messages import MESSAGE_COLUMN, message_bytes
from connector.delta.sink import DeltaLakeStreamWriter
from connector.errors import HAReplicaOptionError
from connector.landing.options import landing_writers, resolve_split, split_landing_options
from connector.landing.rows import LANDED_SOURCE_COLUMNS, with_store_date
from connector.options.declaration import LANDING_OPTIONS, OPTIONS
from connector.options.parse import SourceOptions
from connector.source import (
    HAReplicaInputPartition,
    HAReplicaStreamReader,
    read_partition,
    warn_without_admission_control,
)
from connector.spark_compat import SupportsTriggerAvailableNow

MESSAGE_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary())])

class HAReplicaLandingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The ``hareplica`` stream whose tasks write their rows into the Delta table(s) and yield one message row.

    Planning is the ``hareplica`` source's own: every driver call (offsets, read limits, Trigger.AvailableNow,
    partitions, commit, stop) goes to the :class:`connector.source.HAReplicaStreamReader` it holds, so offsets,
    data loss, slaves and acks behave exactly as ``format("hareplica")``. Only :meth:`read` differs.
    ``writers``: one per table; ``split``: a ``landingSplit`` spec and its ``landingSplitConfig`` (None: one
    table, rows plus storeDate).
    """

    def __init__(self, options: SourceOptions, writers: Sequence[DeltaLakeStreamWriter],
                 split: tuple[str, str | None] | None = None):
        # one table: the raw replica, with the restore columns (docs/restore.md); a split picks its own columns
        self.source = HAReplicaStreamReader(options, columns=LANDED_SOURCE_COLUMNS if split is None else None)
        self.writers = list(writers)
        self.split = split

    def __getstate__(self) -> dict:
        # pickled to the executors for read(): the source's options, the writers, the split
        return {"options": self.source.options, "writers": self.writers, "split": self.split}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"], state["writers"], state["split"])

    # --- Spark API (driver): the source's -----------------------------------------------------------
    def initialOffset(self) -> dict:
        return self.source.initialOffset()

    def getDefaultReadLimit(self):
        return self.source.getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        self.source.prepareForTriggerAvailableNow()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        return self.source.latestOffset(start, limit)

    def reportLatestOffset(self) -> dict:
        return self.source.reportLatestOffset()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return self.source.partitions(start, end)

    def commit(self, end: dict) -> None:
        self.source.commit(end)

    def stop(self) -> None:
        self.source.stop()

    # --- executors ------------------------------------------------------------------------------------
    def read(self, partition: HAReplicaInputPartition) -> Iterator[pa.RecordBatch]:
        """Decode the partition and write it as Parquet files of the table(s); yield one row per record read,
        null but the last, which holds the task's pickled commit messages, one per table (nothing when the
        partition kept no record)."""
        split = resolve_split(self.split) if self.split else (lambda b: (with_store_date(b),))
        tasks = [w.open_task() for w in self.writers]
        records = 0
        try:
            for batch in read_partition(partition, partition.columns):
                records += batch.num_rows
                for task, part in zip(tasks, split(batch), strict=True):
                    if part.num_rows:
                        task.write(part)
            messages = tuple(task.close() for task in tasks)
        except BaseException:
            for task in tasks:
                task.discard()
            raise
        if records == 0:
            return
        last = binary_array([message_bytes(messages)])
        column = pa.concat_arrays([pa.nulls(records - 1, pa.binary()), last])
        yield pa.record_batch([column], schema=MESSAGE_SCHEMA)


class HAReplicaLandingDataSource(DataSource):
    """``format("hareplica-landing")``: the ``hareplica`` stream landed into Delta tables by the executors.

    Use :func:`start_direct_landing` or :func:`start_direct_landing_tables` (they add the driver's commit).
    Schema: ``message binary``: one row per record read, null except, per task that read records, one
    pickled tuple of :class:`connector.delta.messages.DeltaLakeCommitMessage` (one per table). Options:
    :mod:`connector.landing.options`.
    """

    def __init__(self, options):
        super().__init__(options)
        source, sink = split_landing_options(options)
        self.source_options = SourceOptions.from_options(source)
        if self.source_options.batch_transform is not None:
            raise HAReplicaOptionError(OPTIONS.batch_transform.name, self.source_options.batch_transform,
                                       "format(\"hareplica-landing\") writes the decoded rows; to change them "
                                       f"per table use {LANDING_OPTIONS.targets.name} with "
                                       f"{LANDING_OPTIONS.split.name}")
        self.sink_options = sink

    @classmethod
    def name(cls) -> str:
        return "hareplica-landing"

    def schema(self):
        from pyspark.sql.types import BinaryType, StructField, StructType

        return StructType([StructField(MESSAGE_COLUMN, BinaryType(), True)])

    def streamReader(self, schema) -> HAReplicaLandingStreamReader:
        if schema is not None and schema != self.schema():
            raise HAReplicaOptionError("schema", schema.simpleString(), "format(\"hareplica-landing\") has a fixed "
                                       "schema; do not call .schema() on the reader")
        warn_without_admission_control(self.source_options)
        return HAReplicaLandingStreamReader(self.source_options, *landing_writers(self.sink_options))
