"""The stream reader of ``format("hareplica-landing")``: ``HAReplicaLandingStreamReader``, which
:class:`connector.landing.datasource.HAReplicaLandingDataSource` creates; the ``hareplica`` stream whose tasks
decode their slice and write it into Delta (docs/delta.md "``--landing direct``").

Planning is the ``hareplica`` source's (the reader holds one and hands it every driver call); a task, where the
reader is a :class:`connector.landing.partition_reader.LandingPartitionReader`, writes the Delta sink's Parquet
files and yields one row per record read, all null but the last, which holds its pickled commit messages, so
Spark's ``numInputRows`` counts records (docs/performance.md "The row per record").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from connector.delta.sink import DeltaLakeStreamWriter
from connector.landing.partition_reader import LandingPartitionReader
from connector.landing.rows import LANDED_SOURCE_COLUMNS
from connector.options.parse import SourceOptions
from connector.source import HAReplicaStreamReader
from connector.spark_compat import SupportsTriggerAvailableNow


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

    def __reduce__(self):
        """Spark pickles the reader into its tasks' read function and calls only ``read`` there: it arrives as a
        :class:`connector.landing.partition_reader.LandingPartitionReader` holding the writers and the split, so a
        worker imports neither the options parser nor the driver's modules, and builds no source reader or
        BatchPlanner; connections and caches stay on the driver."""
        return (LandingPartitionReader, (self.writers, self.split))

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
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Task: decode the partition and write it into the table(s), one message row per record read
        (:class:`LandingPartitionReader`'s ``read``, which is what a task holds: :meth:`__reduce__`)."""
        return LandingPartitionReader(self.writers, self.split).read(partition)
