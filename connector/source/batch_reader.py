"""The batch side of ``format("hareplica")``: ``spark.read`` of a CommitLog range ``[start, end)``.

:class:`HAReplicaBatchReader` plans with the stream's driver code
(:class:`connector.source.driver.batches.BatchPlanner`: initial offsets, partitions; the end from
:func:`connector.source.driver.ranges.ending_offsets`) and reads with the stream's task code
(:func:`connector.source.task.read.read_task`). See docs/source.md "Batch reads".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from connector.decode.schema import column_subset
from connector.errors import HAReplicaOptionError
from connector.options.parse import SourceOptions
from connector.source.driver.batches import BatchPlanner
from connector.source.driver.offsets import SourceOffset
from connector.source.driver.ranges import await_settled, check_starting_records, ending_offsets
from connector.source.partition import HAReplicaInputPartition
from connector.source.task.partition_reader import PartitionReader
from connector.source.task.transform import transform_source_columns

log = logging.getLogger(__name__)


class HAReplicaBatchReader(DataSourceReader):
    """``spark.read.format("hareplica")``: every record of ``[start, end)`` of each broker set, once.

    ``start``: ``starting_offsets`` / ``starting_timestamp`` / ``starting_offsets_by_timestamp`` as for a stream
    without a checkpoint; ``end``: :func:`connector.source.driver.ranges.ending_offsets`. Both are fixed when
    Spark plans the read (:meth:`partitions`); ``columns``: the query schema's columns (None: all). Raises
    HAReplicaOptionError for a JSON start inside a record, an end below its start, past the broker's
    commitLogMaxOffset or inside a record; BrokerAdminError when a broker does not answer.
    """

    def __init__(self, options: SourceOptions, columns: tuple[str, ...] | None = None):
        self.options = options
        self.columns = columns

    def partitions(self) -> list[HAReplicaInputPartition]:
        """The InputPartitions of the read's range, planned as a micro-batch's are (one per broker set and
        mapped-file slice, split further by ``min_partitions`` / ``max_bytes_per_partition``), once a SYNC_MASTER's
        acknowledgement window allows reading them (:func:`connector.source.driver.ranges.await_settled`)."""
        planner = BatchPlanner(self.options)
        try:
            start = planner.initial_offsets()
            check_starting_records(planner, start)
            end = ending_offsets(planner, start)
            log.info("batch read of %s -> %s", start, end)
            await_settled(planner, start, end)
            return planner.partitions(SourceOffset.from_json(start), SourceOffset.from_json(end), self.columns)
        finally:
            planner.close()

    def __reduce__(self):
        """Pickled into the tasks' read function, the reader arrives as a
        :class:`connector.source.task.partition_reader.PartitionReader` (``read`` only; see its module)."""
        return (PartitionReader, ())

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Task: the partition's RecordBatches (:func:`connector.source.task.read.read_task`); nothing for the
        placeholder partition Spark sends when the range is empty (:class:`PartitionReader`'s ``read``)."""
        return PartitionReader().read(partition)


def query_columns(options: SourceOptions, schema) -> tuple[str, ...] | None:
    """The columns a query with ``schema`` gets: a subset of the source's (None: all), or with a
    ``batch_transform`` the transform's output columns (checked against its declaration). Raises
    HAReplicaOptionError naming ``schema`` for a column the source does not have."""
    if options.batch_transform is not None:  # the schema is the transform's output
        columns = tuple(f.name for f in schema.fields)
        transform_source_columns(options.batch_transform, columns)  # a bad declaration fails here
        return columns
    try:
        return column_subset(schema)
    except ValueError as exc:
        raise HAReplicaOptionError("schema", schema.simpleString(), str(exc)) from None
