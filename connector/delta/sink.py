"""The streaming sink ``writeStream.format("deltalake")``: Parquet on executors, one Delta commit per batch, without
Spark's Delta jars (Python data source API of pyspark 4.1+, ``DataSourceStreamArrowWriter``; on 4.0 a plain stream
writer, :mod:`connector.spark_compat`).

``write`` runs on executors and returns a :class:`connector.delta.messages.DeltaLakeCommitMessage` describing
every file (:mod:`connector.delta.parquet`); ``commit`` and ``abort`` run on the driver through
:class:`connector.delta.commit.DeltaBatchCommitter`. Options, exactly-once and errors: docs/delta.md "2. The sink
`format(\"deltalake\")`".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, WriterCommitMessage
from pyspark.sql.types import StructType

from connector.delta.commit import DeltaBatchCommitter, open_target_table, target_partition_by
from connector.delta.faults import fault_point
from connector.delta.file_names import task_file_prefix
from connector.delta.messages import DeltaLakeCommitMessage
from connector.delta.options import DeltaSinkOptions
from connector.delta.parquet import TaskFileWriter
from connector.errors import DeltaSinkConfigError
from connector.spark_compat import StreamWriterBase, arrow_batches
from connector.storage import store

log = logging.getLogger(__name__)

#: Spark sets this local property on every task of a micro-batch (MicroBatchExecution.BATCH_ID_KEY).
SPARK_BATCH_ID_PROPERTY = "streaming.sql.batchId"


class DeltaLakeStreamWriter(StreamWriterBase):
    """Writes micro-batches to a Delta table with exactly-once semantics (docs/delta.md "2. The sink"; module
    docstring).

    Created by :meth:`DeltaLakeDataSource.streamWriter` on the driver, pickled to executors for
    :meth:`write`, and created again on the driver for every :meth:`commit` / :meth:`abort`; it holds
    only options and the schema.
    """

    def __init__(self, options: DeltaSinkOptions, schema: StructType, partition_by: Sequence[str],
                 batch_id: int | None = None):
        """``batch_id``: the micro-batch the tasks write, when known up front (``write_batch``);
        None takes it from Spark's task property ``streaming.sql.batchId``."""
        self.options = options
        self.schema = schema
        self.partition_by = tuple(partition_by)
        self.batch_id = batch_id
        self.committer = DeltaBatchCommitter(options, schema, self.partition_by)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaLakeCommitMessage:
        """Write this task's rows as Parquet files in the table folder; return their descriptions.

        Files are named ``part-<appTag>-b<batchId>-p<partitionId>-a<attempt>-<uuid><codec>.parquet``
        (connector.delta.file_names; ``b<batchId>-`` is left out when Spark gives no batch id).
        On any error the files written so far are deleted before the error propagates.
        """
        task = self.open_task()
        try:
            for batch in arrow_batches(iterator, self.schema):
                task.write(batch)
            return task.close()
        except BaseException:
            task.discard()
            raise

    def open_task(self) -> DeltaLakeTaskWrite:
        """This task's file writer (on an executor, inside a Spark task; partition and attempt from its
        TaskContext, 0 outside one). Use it as :meth:`write` does: ``write`` batches, then ``close`` for the
        commit message, or ``discard`` on failure."""
        from pyspark import TaskContext

        store.use(self.options.storage)  # an executor has no settings of its own (connector.storage.store)
        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx else 0
        attempt = ctx.attemptNumber() if ctx else 0
        batch_id = self.batch_id
        if batch_id is None:
            raw_batch = ctx.getLocalProperty(SPARK_BATCH_ID_PROPERTY) if ctx else None
            batch_id = int(raw_batch) if raw_batch not in (None, "") else None
        files = TaskFileWriter(self.options.table_uri, self.partition_by, self.options.compression,
                               self.options.codec_infix, self.options.target_file_size,
                               task_file_prefix(self.options.app_id, batch_id, partition_id, attempt))
        return DeltaLakeTaskWrite(self.options.table_uri, files, partition_id, attempt, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit the batch's files, or skip a replay (:meth:`DeltaBatchCommitter.commit`, which lists the errors)."""
        self.committer.commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Remove the files of a failed batch, never a file the table references (:meth:`DeltaBatchCommitter.abort`)."""
        self.committer.abort(messages, batchId)


class DeltaLakeTaskWrite:
    """One task's write to one table (:meth:`DeltaLakeStreamWriter.open_task`): ``write(batch)`` any number of
    Arrow batches of the table's columns, then ``close()`` → the task's commit message, or ``discard()``
    (deletes every file written)."""

    def __init__(self, table_uri: str, files: TaskFileWriter, partition_id: int, attempt: int,
                 batch_id: int | None) -> None:
        self.table_uri = table_uri
        self.files = files
        self.partition_id = partition_id
        self.attempt = attempt
        self.batch_id = batch_id

    def write(self, batch: pa.RecordBatch) -> None:
        self.files.write(batch)

    def close(self) -> DeltaLakeCommitMessage:
        files = self.files.close()
        fault_point("after-task-write", self.batch_id, self.table_uri)
        log.debug("task partition %d attempt %d of batch %s wrote %d files to %s", self.partition_id, self.attempt,
                  self.batch_id, len(files), self.table_uri)
        return DeltaLakeCommitMessage(files=list(files), partition_id=self.partition_id, attempt=self.attempt,
                                      batch_id=self.batch_id)

    def discard(self) -> None:
        self.files.discard()


class DeltaLakeDataSource(DataSource):
    """``format("deltalake")``: a streaming sink into a Delta table without Spark's Delta jars (docs/delta.md "2. The
    sink").

    Use: ``df.writeStream.format("deltalake").option("appId", "bronze").option("checkpointLocation", cp)
    .start("/path/to/table")``. Options are listed in connector.delta.options.
    """

    @classmethod
    def name(cls) -> str:
        return "deltalake"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DeltaLakeStreamWriter:
        """Validate options, partition columns and, if the table exists, its schema; return the writer.

        Raises:
            DeltaSinkConfigError: bad options or partition columns, or complete output mode (``overwrite``).
            DeltaSchemaMismatchError: the existing table's columns or partitioning differ from the stream's.
        """
        opts = DeltaSinkOptions.from_options(self.options)
        if overwrite:
            raise DeltaSinkConfigError(
                f'format("deltalake") supports outputMode "append" only (table {opts.table_uri})')
        return checked_stream_writer(opts, schema)


def checked_stream_writer(opts: DeltaSinkOptions, schema: StructType) -> DeltaLakeStreamWriter:
    """The sink's writer of ``schema`` rows into ``opts.table_uri``, checked on the driver before any task runs.

    Partition columns: the existing table's (``opts.partition_by``, when given, must equal them), else
    ``opts.partition_by`` or none. Raises DeltaSchemaMismatchError when the table's columns or partitioning
    differ, DeltaSinkConfigError for bad partition columns or a type Delta cannot hold.
    """
    table = open_target_table(opts, schema)
    return DeltaLakeStreamWriter(opts, schema, target_partition_by(opts, schema, table))
