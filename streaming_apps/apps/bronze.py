"""The bronze app: the raw replica of the brokers' CommitLogs, every column, partitioned by store date.

``hareplica run bronze --brokers broker-a=HOST:10912 [--workdir DIR]`` streams ``format("hareplica")``
into the Delta table ``TABLES_ROOT/bronze`` (append only, one row per message, exactly once). Columns:
the source's (docs/source.md "Rows": topic, queueId, queueOffset, commitLogOffset, storeSize, bodyCRC, flag, sysFlag,
bornTimestamp, bornHost, storeTimestamp, storeHost, reconsumeTimes, preparedTransactionOffset, msgId,
uniqKey, tags, keys, properties, body, broker, decodeError), the restore columns (docs/restore.md "The columns
bronze keeps": storedBody, storedProperties, recordFormat, mappedFileSizeCommitLog) plus ``storeDate``, the UTC
date of storeTimestamp,
which is the partition column (``storeDate=YYYY-MM-DD/`` folders). Bad records (``decodeError`` not null:
BODYCRC mismatch, a body that does not decompress) are kept, with their stored bytes as ``body``.
"""

from __future__ import annotations

import logging

from connector.storage import locations
from streaming_apps.apps.common import (
    LANDING_DIRECT,
    AppConfig,
    AppError,
    DeltaSink,
    hareplica_stream,
    trigger_kwargs,
)
from streaming_apps.checkpoints import checkpoint_has_offsets

log = logging.getLogger(__name__)

NAME = "bronze"
TABLE = "bronze"
TABLES = (TABLE,)
QUERY_NAMES = ("hareplica-bronze",)
WORKER_MODULES = ()  # what the tasks import besides streaming_apps.worker_warmup.WARMUP_MODULES: nothing
PARTITION_BY = ("storeDate",)
MS_PER_DAY = 86_400_000


def store_date(column: str = "storeTimestamp"):
    """The UTC calendar date of a timestamp column, whatever the session time zone."""
    from pyspark.sql import functions as F

    return F.date_from_unix_date(F.floor(F.unix_millis(F.col(column)) / MS_PER_DAY).cast("int"))


def bronze_frame(spark, config: AppConfig):
    """The bronze rows: the hareplica stream with the restore columns (docs/restore.md) plus ``storeDate``."""
    from connector.landing import landed_source_schema

    return hareplica_stream(spark, config, schema=landed_source_schema()).withColumn(
        "storeDate", store_date())


def check_tables(config: AppConfig) -> None:
    """Refuse a table at bronze's path that is not a raw replica, before Spark starts (read with deltalake; the
    table is not changed): its columns must be the bronze columns, or those of an earlier version without some
    of ``connector.landing.ADDED_SOURCE_COLUMNS`` (:func:`start` adds them), partitioned by ``storeDate``.
    A missing or empty folder passes.

    Raises:
        AppError: ``table bronze: `` and the DeltaSchemaMismatchError naming every difference from the bronze
            columns.
    """
    from pyspark.sql.types import StructType

    from connector.delta.location import open_delta_table
    from connector.delta.schema import DeltaSchemaMismatchError, check_schema_matches
    from connector.landing import ADDED_SOURCE_COLUMNS, landed_schema

    path = str(config.table_path(TABLE))
    table = open_delta_table(path)
    if table is None:
        return
    schema_json, partitions = table.schema().to_json(), table.metadata().partition_columns
    have = {f.name for f in table.schema().fields}
    full = landed_schema()
    earlier = StructType([f for f in full.fields if f.name in have or f.name not in ADDED_SOURCE_COLUMNS])
    try:
        try:
            check_schema_matches(path, schema_json, partitions, earlier, PARTITION_BY)
        except DeltaSchemaMismatchError:
            check_schema_matches(path, schema_json, partitions, full, PARTITION_BY)  # names every difference
            raise
    except DeltaSchemaMismatchError as e:
        raise AppError(f"table {TABLE}: {e}") from e
    if table.file_uris():
        check_new_checkpoint(config)


def check_new_checkpoint(config: AppConfig) -> None:
    """A bronze stream whose checkpoint holds no offset yet, on a table that holds rows, must not land a record the
    table holds (``hareplica read`` backfills, or a stream of another checkpoint): the sets' starts are resolved
    now (``startingOffsets``, a starting time, the route) and a start at or before a record the table holds is
    refused (:func:`streaming_apps.landed.overlap`, the rule ``hareplica read`` follows; docs/delta.md "One table,
    several writers").

    Raises:
        AppError: one line naming the table, the records it holds per set, and the ``--starting-offsets`` JSON that
            starts after them; or why the starts could not be resolved.
    """
    import json

    from connector.errors import HAReplicaError
    from connector.options.parse import SourceOptions
    from connector.source.driver.batches import BatchPlanner
    from streaming_apps.landed import overlap

    if checkpoint_has_offsets(config.checkpoint()):
        return
    try:
        planner = BatchPlanner(SourceOptions.from_options(config.source_option_map()))
        try:
            start = planner.initial_offsets()
        finally:
            planner.close()
    except HAReplicaError as e:
        raise AppError(f"table {TABLE} holds rows and checkpoint {config.checkpoint()} is new: where the query "
                       f"would start cannot be resolved: {type(e).__name__}: {e}") from None
    held = overlap(str(config.table_path(TABLE)), start)
    if held is not None:
        line, after = held
        raise AppError(f"{line}, where checkpoint {config.checkpoint()} (new) would start: the stream would land "
                       f"them again; start after them with --starting-offsets '{json.dumps(after)}', or run with "
                       "the checkpoint that landed them")


def start(spark, config: AppConfig, sink: DeltaSink) -> list:
    """Start the bronze query; returns ``[StreamingQuery]``.

    ``--landing spark``: the stream goes through Spark into the sink. ``--landing direct``: the executors
    write the Delta files as they decode (:mod:`connector.landing`), same table, files and exactly-once.
    A bronze table written by an earlier version without ``decodeError`` gets that column first.
    """
    from connector.landing import add_new_source_columns

    add_new_source_columns(str(config.table_path(TABLE)))
    if config.landing == LANDING_DIRECT:
        from connector.landing import start_direct_landing

        return [start_direct_landing(spark, {**config.source_option_map(), **config.storage_option_map()},
                                     path=str(config.table_path(TABLE)),
                                     app_id=config.app_id(), checkpoint=locations.for_spark(config.checkpoint()),
                                     query_name=QUERY_NAMES[0], trigger=trigger_kwargs(config.trigger),
                                     partition_by=PARTITION_BY, target_file_size=config.target_file_size)]
    return [sink.start_stream(bronze_frame(spark, config), table=TABLE, query_name=QUERY_NAMES[0],
                              partition_by=PARTITION_BY)]
