"""Direct landing of the raw replica: executors decode their CommitLog slice and write it into Delta.

Through ``format("hareplica")`` → ``format("deltalake")`` every row crosses from the source's Python
worker into the JVM (Arrow → rows) and back out to the sink's Python worker (rows → Arrow) before it
is written. For the bronze table, which keeps every column as decoded, those two conversions are most
of the cost (bench/delta.py measures ~10 CPU-s per GB of CommitLog for Spark's part alone, which keeps a
2-core machine near 156 MB/s even with a free source). ``format("hareplica-landing")`` removes them:

- **Executors** (``read``): the partition is fetched and decoded exactly as ``format("hareplica")``
  does (:func:`connector.source.read_partition`); ``storeDate`` (the UTC date of storeTimestamp) is
  added, and the batches go straight into the Delta sink's task writer
  (:class:`connector.delta.sink.DeltaLakeStreamWriter`): same Parquet files, names, statistics and
  fault points. The task yields one row per landed record, all null but the last, which holds the
  task's pickled commit message (``message binary``): Spark's ``numInputRows`` then counts records,
  and null rows cost Spark next to nothing.
- **Driver** (:func:`start_direct_landing`, a ``foreachBatch``): collects the messages and commits
  them with the sink's own committer (connector.delta.commit): one Delta transaction carrying
  ``txn(appId, batchId)``; a replayed batch is skipped and its fresh files removed; a failed batch is
  aborted (files of the batch removed unless committed).

Offsets, read limits, Trigger.AvailableNow, data loss, slaves and acks are the ``hareplica`` source's
(the reader subclasses it), and Spark's checkpoint plus the txn give the same exactly-once as the sink.

Options: every ``format("hareplica")`` option, plus

=========================  ==================================================================
``landingPath``            Delta table location (required).
``landingAppId``           Delta txn appId (required; see ``format("deltalake")``'s ``appId``).
``landingPartitionBy``     partition columns (default ``storeDate``; empty string: none).
``landingTargetFileSize``  bytes per Parquet file (default 100 MiB).
``landingCompression``     Parquet codec (default snappy).
=========================  ==================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource

from connector.decode.schema import spark_schema
from connector.delta.commit import commit_task_messages
from connector.delta.location import open_delta_table
from connector.delta.messages import MESSAGE_COLUMN, message_bytes
from connector.delta.options import DeltaSinkOptions
from connector.delta.sink import DeltaLakeStreamWriter, checked_stream_writer
from connector.options import HAReplicaOptionError, SourceOptions
from connector.source import HAReplicaInputPartition, HAReplicaStreamReader, read_partition

log = logging.getLogger(__name__)

STORE_DATE = "storeDate"
DEFAULT_PARTITION_BY = (STORE_DATE,)
US_PER_DAY = 86_400_000_000
#: landing option → the Delta sink option it becomes
LANDING_OPTIONS = {"landingpath": "path", "landingappid": "appId", "landingpartitionby": "partitionBy",
                   "landingtargetfilesize": "targetFileSize", "landingcompression": "compression"}
MESSAGE_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary())])


def landed_schema():
    """Spark schema of the landed table: the ``hareplica`` columns plus ``storeDate`` (DateType, nullable as
    Spark types ``date_from_unix_date`` although never null), the same as ``bronze_frame``'s."""
    from pyspark.sql.types import DateType, StructField, StructType

    return StructType([*spark_schema().fields, StructField(STORE_DATE, DateType(), True)])


def with_store_date(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` plus ``storeDate``: floor(storeTimestamp / 1 day) as a date32 (UTC, as Spark's
    ``date_from_unix_date(floor(unix_millis(ts) / 86400000))``)."""
    micros = batch.column("storeTimestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
    days = np.floor_divide(micros, US_PER_DAY).astype(np.int32)
    return pa.RecordBatch.from_arrays([*batch.columns, pa.array(days, type=pa.int32()).cast(pa.date32())],
                                      names=[*batch.schema.names, STORE_DATE])


#: Nullable columns later versions of the source added; a raw-replica table written before gets them on
#: start (:func:`add_new_source_columns`), its earlier rows reading them as null.
ADDED_SOURCE_COLUMNS = ("decodeError",)


def add_new_source_columns(table_uri: str) -> list[str]:
    """Add :data:`ADDED_SOURCE_COLUMNS` missing from an existing Delta table (a metadata-only commit).

    The bronze app calls this before it starts, so a table landed before ``decodeError`` existed goes on
    (docs/source.md, "Bad records"); other sinks refuse such a table with DeltaSchemaMismatchError naming
    the column. Returns the names added (none when the table does not exist or has them all).
    Raises connector.delta.location.DeltaTablePathError for an unreadable ``_delta_log``.
    """
    from deltalake import Field

    table = open_delta_table(table_uri)
    if table is None:
        return []
    have = {f.name for f in table.schema().fields}
    missing = [name for name in ADDED_SOURCE_COLUMNS if name not in have]
    if missing:
        table.alter.add_columns([Field(name, "string", nullable=True) for name in missing])
        log.warning("Delta table %s: added the nullable column(s) %s of this hareplica version (earlier rows read "
                    "them as null)", table_uri, ", ".join(missing))
    return missing


def split_landing_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(source options, Delta sink options) of a ``hareplica-landing`` option map (keys case-insensitive)."""
    source, sink = {}, {}
    for key, value in options.items():
        target = LANDING_OPTIONS.get(key.lower())
        if target is None:
            source[key] = value
        else:
            sink[target] = value
    return source, sink


def landing_writer(sink_options: Mapping[str, str]) -> DeltaLakeStreamWriter:
    """The Delta sink writer of a landing (``partitionBy`` defaults to ``storeDate``), checked against the
    existing table on the driver (:func:`connector.delta.sink.checked_stream_writer`).

    Raises:
        DeltaSinkConfigError: missing ``landingPath`` / ``landingAppId``, bad partition columns.
        DeltaSchemaMismatchError: the existing table's columns or partitioning differ.
    """
    options = {"partitionBy": ",".join(DEFAULT_PARTITION_BY), **sink_options}
    return checked_stream_writer(DeltaSinkOptions.from_options(options), landed_schema())


class HAReplicaLandingStreamReader(HAReplicaStreamReader):
    """The ``hareplica`` reader whose tasks write their rows into the Delta table and yield one message row."""

    def __init__(self, options: SourceOptions, writer: DeltaLakeStreamWriter):
        super().__init__(options)
        self.writer = writer

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "writer": self.writer}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"], state["writer"])

    def read(self, partition: HAReplicaInputPartition) -> Iterator[pa.RecordBatch]:
        """Decode the partition and write it as Parquet files of the table; yield one row per landed record,
        null but the last, which holds the task's pickled commit message (nothing when no record was kept)."""
        message = self.writer.write(with_store_date(b) for b in read_partition(partition))
        landed = sum(f.num_records for f in message.files)
        if landed == 0:
            return
        column = pa.concat_arrays([pa.nulls(landed - 1, pa.binary()), pa.array([message_bytes(message)], pa.binary())])
        yield pa.record_batch([column], schema=MESSAGE_SCHEMA)


class HAReplicaLandingDataSource(DataSource):
    """``format("hareplica-landing")``: the ``hareplica`` stream landed into a Delta table by the executors.

    Use :func:`start_direct_landing` (it adds the driver's commit). Schema: ``message binary``: one row per
    landed record, null except one pickled :class:`connector.delta.messages.DeltaLakeCommitMessage` per task
    that landed rows. Options: see the module docstring.
    """

    def __init__(self, options):
        super().__init__(options)
        source, sink = split_landing_options(options)
        self.source_options = SourceOptions.from_options(source)
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
        return HAReplicaLandingStreamReader(self.source_options, landing_writer(self.sink_options))


def commit_landed_batch(writer: DeltaLakeStreamWriter, batch_df, batch_id: int) -> int:
    """The ``foreachBatch`` body: run the batch's tasks (they write the files), commit their messages.

    Returns the rows the batch's tasks wrote (on a replay of a committed batch they are removed, not
    committed). A failed job aborts the batch (its files are removed unless the table already holds it).
    Raises what the tasks or the commit raise.
    """
    messages = commit_task_messages(
        writer.committer, lambda: batch_df.where(batch_df[MESSAGE_COLUMN].isNotNull()).collect(), batch_id)
    return sum(f.num_records for m in messages for f in m.files)


def start_direct_landing(spark, source_options: Mapping[str, str], *, path: str, app_id: str, checkpoint: str,
                         query_name: str, trigger: Mapping[str, object], partition_by: Sequence[str] | None = None,
                         target_file_size: int | None = None, compression: str | None = None):
    """Start a query landing the ``hareplica`` stream of ``source_options`` into the Delta table ``path``.

    Args:
        source_options: ``format("hareplica")`` options (``brokers`` required).
        path, app_id: the table and the Delta txn appId (stable per checkpoint).
        checkpoint: Spark checkpoint location; query_name: the StreamingQuery's name.
        trigger: ``DataStreamWriter.trigger`` keyword arguments.
        partition_by: partition columns of a new table (default ``storeDate``).
        target_file_size: bytes per Parquet file; compression: Parquet codec.
    Returns the StreamingQuery. Raises HAReplicaOptionError, DeltaSinkConfigError, DeltaSchemaMismatchError
    at start for bad options or a table that does not match.
    """
    sink = {"landingPath": path, "landingAppId": app_id}
    if partition_by is not None:
        sink["landingPartitionBy"] = ",".join(partition_by)
    if target_file_size:
        sink["landingTargetFileSize"] = str(target_file_size)
    if compression:
        sink["landingCompression"] = compression
    options = {**source_options, **sink}
    writer = landing_writer(split_landing_options(options)[1])  # fail at start, on the driver
    reader = spark.readStream.format("hareplica-landing")
    for key, value in options.items():
        reader = reader.option(key, value)

    def on_batch(batch_df, batch_id: int) -> None:
        rows = commit_landed_batch(writer, batch_df, batch_id)
        log.debug("%s: batch %d landed %d rows in %s", query_name, batch_id, rows, path)

    log.info("starting %s: direct landing into %s (checkpoint %s)", query_name, path, checkpoint)
    return (reader.load().writeStream.queryName(query_name).option("checkpointLocation", checkpoint)
            .trigger(**trigger).foreachBatch(on_batch).start())
