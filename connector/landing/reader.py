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
  fault points. The task yields one row per record read, all null but the last, which holds the
  task's pickled commit messages (``message binary``; a tuple, one
  :class:`connector.delta.messages.DeltaLakeCommitMessage` per table): Spark's ``numInputRows`` then
  counts records (a Python streaming source has no other way to report a count in Spark 4.2), for at most
  ~0.65 CPU-s per GB of CommitLog in the JVM's task threads (README "Benchmarks", "Where the time goes").
- **Driver** (:func:`start_direct_landing`, a ``foreachBatch``): collects the messages and commits
  them with the sink's own committer (connector.delta.commit): one Delta transaction carrying
  ``txn(appId, batchId)``; a replayed batch is skipped and its fresh files removed; a failed batch is
  aborted (files of the batch removed unless committed).

**Several tables** (the silver app): ``landingTargets`` names the tables and ``landingSplit`` a function
``split(batch) -> (batch for target 0, batch for target 1, ...)`` that the tasks apply to every decoded
batch (e.g. decode the bodies and route valid and invalid ones). Each task then writes every table and
its message row holds one commit message per table; the driver commits the tables one after the other,
each with ``txn(appId, batchId)`` of its own appId, so a replay after a crash between two commits writes
only the tables that do not hold the batch yet.

Offsets, read limits, Trigger.AvailableNow, data loss, slaves and acks are the ``hareplica`` source's
(the reader holds one and hands it every planning call), and Spark's checkpoint plus the txn give the same
exactly-once as the sink.

Options: every ``format("hareplica")`` option, plus

=========================  ==================================================================
``landingPath``            Delta table location (required).
``landingAppId``           Delta txn appId (required; see ``format("deltalake")``'s ``appId``).
``landingPartitionBy``     partition columns (default ``storeDate``; empty string: none).
``landingTargetFileSize``  bytes per Parquet file (default 100 MiB).
``landingCompression``     Parquet codec (default snappy).
``landingTargets``         instead of the five above, several tables: a JSON list of objects with
                           ``path``, ``appId``, ``schema`` (the table's Spark schema as JSON) and
                           optionally ``partitionBy`` (list), ``targetFileSize``, ``compression``.
``landingSplit``           with ``landingTargets`` (required there): ``package.module:function``
                           importable on the executors; ``function(pyarrow.RecordBatch)`` of the
                           ``hareplica`` columns returns one RecordBatch per target, in order, holding
                           exactly that table's columns.
=========================  ==================================================================
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from connector.arrow_numpy import binary_array, from_numpy, to_numpy
from connector.decode.schema import spark_schema
from connector.delta.location import open_delta_table
from connector.delta.messages import MESSAGE_COLUMN, message_bytes, messages_of_rows
from connector.delta.options import DeltaSinkOptions
from connector.delta.sink import DeltaLakeStreamWriter, checked_stream_writer
from connector.options import HAReplicaOptionError, SourceOptions, import_function
from connector.source import (
    HAReplicaInputPartition,
    HAReplicaStreamReader,
    read_partition,
    warn_without_admission_control,
)
from connector.spark_compat import SupportsTriggerAvailableNow

log = logging.getLogger(__name__)

STORE_DATE = "storeDate"
DEFAULT_PARTITION_BY = (STORE_DATE,)
US_PER_DAY = 86_400_000_000
#: landing option → the Delta sink option it becomes
LANDING_OPTIONS = {"landingpath": "path", "landingappid": "appId", "landingpartitionby": "partitionBy",
                   "landingtargetfilesize": "targetFileSize", "landingcompression": "compression",
                   "landingtargets": "targets", "landingsplit": "split"}
TARGETS_KEY, SPLIT_KEY = "targets", "split"
#: the keys of a landingTargets entry that are Delta sink options of the same name (``schema`` is the entry's own)
_TARGET_KEYS = ("path", "appId", "partitionBy", "targetFileSize", "compression")
MESSAGE_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary())])


def landed_schema():
    """Spark schema of the landed table: the ``hareplica`` columns plus ``storeDate`` (DateType, nullable as
    Spark types ``date_from_unix_date`` although never null), the same as ``bronze_frame``'s."""
    from pyspark.sql.types import DateType, StructField, StructType

    return StructType([*spark_schema().fields, StructField(STORE_DATE, DateType(), True)])


def with_store_date(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` plus ``storeDate``: floor(storeTimestamp / 1 day) as a date32 (UTC, as Spark's
    ``date_from_unix_date(floor(unix_millis(ts) / 86400000))``). The decoder never leaves storeTimestamp null."""
    micros = to_numpy(batch.column("storeTimestamp"))
    days = from_numpy(np.floor_divide(micros, US_PER_DAY), pa.date32())
    return pa.RecordBatch.from_arrays([*batch.columns, days],
                                      names=[*batch.schema.names, STORE_DATE])


#: Nullable columns later versions of the source added; a raw-replica table written before gets them on
#: start (:func:`add_new_source_columns`), its earlier rows reading them as null.
ADDED_SOURCE_COLUMNS = ("decodeError",)


def add_new_source_columns(table_uri: str, partition_by: Sequence[str] = DEFAULT_PARTITION_BY) -> list[str]:
    """Add :data:`ADDED_SOURCE_COLUMNS` missing from an existing raw-replica Delta table (a metadata-only commit).

    The bronze app calls this before it starts, so a table landed before ``decodeError`` existed goes on
    (docs/source.md, "Bad records"). Only a table that is :func:`landed_schema` minus some of those columns,
    partitioned by ``partition_by``, and writable by this project is changed; any other table is refused
    before anything is written to it (docs/source.md, "Bad records"). Returns the names added (none when the
    table does not exist or has them all).

    Raises:
        DeltaSchemaMismatchError: the table's columns or partitioning are not a raw replica's (the table is
            left as it was).
        UnsupportedTableFeatureError: the table has writer features this project cannot honour (unchanged).
        connector.delta.location.DeltaTablePathError: an unreadable ``_delta_log``.
    """
    from deltalake import Field
    from pyspark.sql.types import StructType

    from connector.delta.features import check_writable
    from connector.delta.schema import DeltaSchemaMismatchError, check_schema_matches

    table = open_delta_table(table_uri)
    if table is None:
        return []
    have = {f.name for f in table.schema().fields}
    missing = [name for name in ADDED_SOURCE_COLUMNS if name not in have]
    if missing:
        schema_json, partitions = table.schema().to_json(), table.metadata().partition_columns
        full = landed_schema()
        earlier = StructType([f for f in full.fields if f.name not in missing])
        try:  # the table must be a raw replica of an earlier version: the full schema minus the added columns
            check_schema_matches(table_uri, schema_json, partitions, earlier, partition_by)
        except DeltaSchemaMismatchError:
            check_schema_matches(table_uri, schema_json, partitions, full, partition_by)  # names every difference
            raise
        check_writable(table, table_uri, "append")
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


def target_writers(targets_json: str) -> list[DeltaLakeStreamWriter]:
    """The writers of a ``landingTargets`` value (module docstring), each checked as :func:`landing_writer`.

    Raises:
        HAReplicaOptionError: not a JSON list of objects with ``path``, ``appId`` and ``schema``.
        DeltaSinkConfigError, DeltaSchemaMismatchError: as :func:`landing_writer`, per table.
    """
    from pyspark.sql.types import StructType

    try:
        targets = json.loads(targets_json)
        if not isinstance(targets, list) or not targets:
            raise ValueError("expected a non-empty JSON list")
        writers = []
        for i, target in enumerate(targets):
            missing = [k for k in ("path", "appId", "schema") if k not in target]
            if missing:
                raise ValueError(f"entry {i} has no {', '.join(missing)}")
            options = {k: ",".join(v) if k == "partitionBy" else str(v) for k, v in target.items() if k in _TARGET_KEYS}
            schema = StructType.fromJson(target["schema"])
            writers.append((options, schema))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise HAReplicaOptionError("landingTargets", targets_json[:200], str(e)) from None
    return [checked_stream_writer(DeltaSinkOptions.from_options(o), schema) for o, schema in writers]


def resolve_split(spec: str) -> Callable[[pa.RecordBatch], Sequence[pa.RecordBatch]]:
    """The function a ``landingSplit`` value (``package.module:function``) names.

    Raises HAReplicaOptionError when it is malformed, cannot be imported or is not callable.
    """
    return import_function("landingSplit", spec)


class HAReplicaLandingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The ``hareplica`` stream whose tasks write their rows into the Delta table(s) and yield one message row.

    Planning is the ``hareplica`` source's own: every driver call (offsets, read limits, Trigger.AvailableNow,
    partitions, commit, stop) goes to the :class:`connector.source.HAReplicaStreamReader` it holds, so offsets,
    data loss, slaves and acks behave exactly as ``format("hareplica")``. Only :meth:`read` differs.
    ``writers``: one per table; ``split``: a ``landingSplit`` spec (None: one table, rows plus storeDate).
    """

    def __init__(self, options: SourceOptions, writers: Sequence[DeltaLakeStreamWriter], split: str | None = None):
        self.source = HAReplicaStreamReader(options)
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
            for batch in read_partition(partition):
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
    see the module docstring.
    """

    def __init__(self, options):
        super().__init__(options)
        source, sink = split_landing_options(options)
        self.source_options = SourceOptions.from_options(source)
        if self.source_options.batch_transform is not None:
            raise HAReplicaOptionError("batchTransform", self.source_options.batch_transform,
                                       "format(\"hareplica-landing\") writes the decoded rows; to change them "
                                       "per table use landingTargets with landingSplit")
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


def landing_writers(sink_options: Mapping[str, str]) -> tuple[list[DeltaLakeStreamWriter], str | None]:
    """``(writers, split spec)`` of a landing's sink options: several tables (``landingTargets`` with
    ``landingSplit``) or one (``landingPath``...). Raises as :func:`target_writers` / :func:`landing_writer`,
    and HAReplicaOptionError for ``landingTargets`` without ``landingSplit`` or mixed with ``landingPath``."""
    if TARGETS_KEY not in sink_options:
        if SPLIT_KEY in sink_options:
            raise HAReplicaOptionError("landingSplit", sink_options[SPLIT_KEY], "needs landingTargets")
        return [landing_writer(sink_options)], None
    others = sorted(k for k in sink_options if k not in (TARGETS_KEY, SPLIT_KEY))
    if others:
        raise HAReplicaOptionError("landingTargets", sink_options[TARGETS_KEY][:200],
                                   f"give the tables' options inside it, not as {', '.join(others)}")
    if SPLIT_KEY not in sink_options:
        raise HAReplicaOptionError("landingTargets", sink_options[TARGETS_KEY][:200], "needs landingSplit")
    resolve_split(sink_options[SPLIT_KEY])  # fail at start, on the driver
    return target_writers(sink_options[TARGETS_KEY]), sink_options[SPLIT_KEY]


def commit_landed_batch(writers: Sequence[DeltaLakeStreamWriter], batch_df, batch_id: int) -> list[int]:
    """The ``foreachBatch`` body: run the batch's tasks (they write the files), commit each table's messages,
    in ``writers`` order (:meth:`connector.delta.commit.DeltaBatchCommitter.commit`).

    Returns the rows the batch's tasks wrote per table (on a replay of a committed batch they are removed,
    not committed). A failed job aborts the batch in every table (its files are removed unless the table
    already holds it). Raises what the tasks or the commits raise.
    """
    try:
        rows = batch_df.where(batch_df[MESSAGE_COLUMN].isNotNull()).collect()
    except BaseException:
        for writer in writers:
            writer.committer.abort([], batch_id)
        raise
    per_task = messages_of_rows(rows)
    landed = []
    for index, writer in enumerate(writers):
        messages = [task_messages[index] for task_messages in per_task]
        writer.committer.commit(messages, batch_id)
        landed.append(sum(f.num_records for m in messages for f in m.files))
    return landed


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
    return _start(spark, {**source_options, **sink}, checkpoint=checkpoint, query_name=query_name, trigger=trigger)


@dataclass(frozen=True)
class LandingTarget:
    """One table of :func:`start_direct_landing_tables`: location, Delta txn appId, Spark schema (a pyspark
    StructType, the columns the split gives it), partition columns, bytes per Parquet file, codec."""

    path: str
    app_id: str
    schema: Any
    partition_by: Sequence[str] = ()
    target_file_size: int | None = None
    compression: str | None = None

    def to_json(self) -> dict:
        """This target as a ``landingTargets`` entry."""
        out = {"path": self.path, "appId": self.app_id, "schema": self.schema.jsonValue(),
               "partitionBy": list(self.partition_by)}
        if self.target_file_size:
            out["targetFileSize"] = self.target_file_size
        if self.compression:
            out["compression"] = self.compression
        return out


def start_direct_landing_tables(spark, source_options: Mapping[str, str], *, targets: Sequence[LandingTarget],
                                split: str, checkpoint: str, query_name: str, trigger: Mapping[str, object]):
    """Start a query whose tasks apply ``split`` (a ``landingSplit`` spec) to the decoded ``hareplica`` stream
    and write every part into its table of ``targets`` (module docstring, "Several tables").

    Returns the StreamingQuery. Raises HAReplicaOptionError (a bad ``split``), DeltaSinkConfigError and
    DeltaSchemaMismatchError at start, on the driver.
    """
    sink = {"landingTargets": json.dumps([t.to_json() for t in targets]), "landingSplit": split}
    return _start(spark, {**source_options, **sink}, checkpoint=checkpoint, query_name=query_name, trigger=trigger)


def _start(spark, options: Mapping[str, str], *, checkpoint: str, query_name: str, trigger: Mapping[str, object]):
    writers, _ = landing_writers(split_landing_options(options)[1])  # fail at start, on the driver
    tables = ", ".join(w.options.table_uri for w in writers)
    reader = spark.readStream.format("hareplica-landing")
    for key, value in options.items():
        reader = reader.option(key, value)

    def on_batch(batch_df, batch_id: int) -> None:
        rows = commit_landed_batch(writers, batch_df, batch_id)
        log.debug("%s: batch %d landed %s rows in %s", query_name, batch_id, rows, tables)

    log.info("starting %s: direct landing into %s (checkpoint %s)", query_name, tables, checkpoint)
    return (reader.load().writeStream.queryName(query_name).option("checkpointLocation", checkpoint)
            .trigger(**trigger).foreachBatch(on_batch).start())
