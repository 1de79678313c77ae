"""The silver app: the demo's msgpack order events as typed columns (``silver_orders``), undecodable bodies and bad
records quarantined (``silver_quarantine``), both written with ``txn(appId, batchId)`` per micro-batch. With
``--landing direct`` the source's tasks decode the bodies and write both tables' files (:func:`split_silver`
through the direct landing); with ``--landing spark`` each table is a write of the foreachBatch DataFrame. The
tables' columns, the topics and the landing modes: docs/delta.md "4. The apps", "silver → tables `silver_orders`
and `silver_quarantine`".
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from connector.storage import locations
from streaming_apps.apps.common import LANDING_DIRECT, AppConfig, AppError, DeltaSink, hareplica_stream, trigger_kwargs
from streaming_apps.apps.orders import decode_order_batch, decoded_ddl
from streaming_apps.workload import ORDER_TOPICS

log = logging.getLogger(__name__)

NAME = "silver"
ORDERS_TABLE = "silver_orders"
QUARANTINE_TABLE = "silver_quarantine"
TABLES = (ORDERS_TABLE, QUARANTINE_TABLE)
QUERY_NAMES = ("hareplica-silver",)
ORDER_COLUMNS = ("orderId", "customerId", "status", "amountCents", "currency", "region", "items", "itemQuantity",
                 "eventTime", "eventDate", "broker", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId",
                 "tags", "keys", "storeTimestamp")
QUARANTINE_COLUMNS = ("broker", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "tags", "keys",
                      "storeTimestamp", "reason", "body")
MS_PER_DAY = 86_400_000
#: the source's batchTransform of silver (--landing spark) and gold: the order decoder, run in the source's tasks
DECODE_TRANSFORM = "streaming_apps.apps.orders:decode_order_batch"
#: what the tasks import besides streaming_apps.worker_warmup.WARMUP_MODULES: the order decoder's module
WORKER_MODULES = (DECODE_TRANSFORM.partition(":")[0],)


#: source options that choose topics: silver and gold choose them with --topics (AppConfig.topics) instead
TOPIC_OPTIONS = ("subscribe", "topics", "subscribepattern", "topicpattern")


def order_source_options(config: AppConfig) -> dict[str, str]:
    """The run's source options with ``subscribe`` set to the order topics (``--topics``, default the
    workload's), so the executors skip every other topic before decoding it.

    Raises AppError when ``--option`` also chooses topics (``subscribe``, ``topics``, ``subscribePattern``,
    ``topicPattern``): the apps' topics are ``--topics``."""
    options = config.source_option_map()
    chosen = sorted(k for k in options if k.lower() in TOPIC_OPTIONS)
    if chosen:
        raise AppError(f"--option {chosen[0]}={options[chosen[0]]}: the {config.app} app reads the topics of "
                       "--topics (default: the demo's order topics); give them there")
    return {**options, "subscribe": ",".join(config.topics or ORDER_TOPICS)}


def decoded_orders(spark, config: AppConfig, columns: Sequence[str] | None = None):
    """The order topics of the hareplica stream, decoded by the source's own tasks (``batchTransform`` =
    :func:`streaming_apps.apps.orders.decode_order_batch`, so no body enters the JVM):
    ``orders.DECODED_SCHEMA``'s columns (or only ``columns`` of it, which must include eventTime) plus
    eventDate."""
    from pyspark.sql import functions as F

    options = {**order_source_options(config), "batchTransform": DECODE_TRANSFORM}
    decoded = hareplica_stream(spark, config, schema=decoded_ddl(columns), options=options)
    return decoded.withColumn(
        "eventDate", F.date_from_unix_date(F.floor(F.unix_millis("eventTime") / MS_PER_DAY).cast("int")))


def split_silver(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    """Decode a batch of the source's rows (every ``format("hareplica")`` column) and route them:
    ``(silver_orders rows, silver_quarantine rows)``, each with exactly its table's columns
    (:data:`ORDER_COLUMNS`, :data:`QUARANTINE_COLUMNS`); eventDate is the UTC date of eventTime, as
    :func:`decoded_orders` computes it. A side without rows is an empty batch of its columns; when every row is
    valid (or none is) the other side is the decoded batch itself, not a filtered copy."""
    decoded = decode_order_batch(batch)
    event_date = decoded.column(decoded.schema.get_field_index("eventTime")).cast(pa.date32())  # UTC, floored
    decoded = decoded.append_column("eventDate", event_date)
    orders, rejected = decoded.select(list(ORDER_COLUMNS)), decoded.select(list(QUARANTINE_COLUMNS))
    reason = decoded.column(decoded.schema.get_field_index("reason"))
    if reason.null_count == decoded.num_rows:  # every row valid
        return orders, rejected.slice(0, 0)
    if reason.null_count == 0:  # none valid
        return orders.slice(0, 0), rejected
    valid = pc.is_null(reason)
    return orders.filter(valid), rejected.filter(pc.invert(valid))


def write_silver_batch(sink: DeltaSink, batch_df, batch_id: int) -> None:
    """foreachBatch: valid orders to silver_orders, the rest to silver_quarantine (each exactly once)."""
    from pyspark.sql import functions as F

    batch_df = batch_df.persist()
    try:
        orders = batch_df.where(F.col("reason").isNull()).select(*ORDER_COLUMNS)
        rejected = batch_df.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)
        sink.write_batch(orders, table=ORDERS_TABLE, batch_id=batch_id, partition_by=("eventDate",))
        sink.write_batch(rejected, table=QUARANTINE_TABLE, batch_id=batch_id)
    finally:
        batch_df.unpersist()


def start(spark, config: AppConfig, sink: DeltaSink) -> list:
    """Start the silver query (one query writing both tables); returns ``[StreamingQuery]``."""
    decoded = decoded_orders(spark, config)
    if config.landing == LANDING_DIRECT:
        from connector.landing import LandingTarget, start_direct_landing_tables

        # the tables' schemas as Spark derives them for --landing spark (analysis only, no job)
        targets = [LandingTarget(str(config.table_path(ORDERS_TABLE)), config.app_id(),
                                 decoded.select(*ORDER_COLUMNS).schema, ("eventDate",), config.target_file_size),
                   LandingTarget(str(config.table_path(QUARANTINE_TABLE)), config.app_id(),
                                 decoded.select(*QUARANTINE_COLUMNS).schema, (), config.target_file_size)]
        return [start_direct_landing_tables(
            spark, {**order_source_options(config), **config.storage_option_map()},
            targets=targets, split=f"{__name__}:{split_silver.__name__}",
            checkpoint=locations.for_spark(config.checkpoint()),
            query_name=QUERY_NAMES[0], trigger=trigger_kwargs(config.trigger))]
    query = (decoded.writeStream.queryName(QUERY_NAMES[0])
             .option("checkpointLocation", locations.for_spark(config.checkpoint()))
             .trigger(**trigger_kwargs(config.trigger))
             .foreachBatch(functools.partial(write_silver_batch, sink))
             .start())
    return [query]
