"""``PartitionReader``: what a Spark task's Python worker receives in place of the source's readers.

Spark pickles the reader it planned with (``HAReplicaStreamReader`` or ``HAReplicaBatchReader``) into the read
function its tasks run, and calls only ``read(partition)`` on it there (pyspark
``sql/worker/plan_data_source_read.py``, Spark 4.0-4.3). Both readers pickle to this class (their
``__reduce__``), so unpickling in a worker imports the task side only: not the options parser, not the driver's
modules, not the Spark classes of :mod:`connector.source.reader` (docs/architecture.md "Layers").
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from connector.arrow_pool import use_jemalloc
from connector.source.partition import HAReplicaInputPartition
from connector.source.task.read import read_task


class PartitionReader:
    """The task side of a hareplica reader: ``read`` only; it holds no state (an InputPartition carries all a
    task needs). Pickles to itself."""

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's RecordBatches (:func:`connector.source.task.read.read_task`); nothing for the
        placeholder InputPartition Spark sends when a batch read's range is empty. Arrow's buffers in this
        worker come from jemalloc from here on (:func:`connector.arrow_pool.use_jemalloc`)."""
        use_jemalloc()
        if not isinstance(partition, HAReplicaInputPartition):
            return iter(())
        return read_task(partition)
