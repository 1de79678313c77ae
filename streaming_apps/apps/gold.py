"""The gold app: per-minute order aggregates (``gold_orders_per_minute``) under an event-time watermark, upserted
with one Delta MERGE per micro-batch, every window with data shown and marked ``final`` once the watermark has
passed it. Columns, keys and the ``final`` rule: docs/delta.md "4. The apps" (gold).
"""

from __future__ import annotations

import json
import logging

from connector.delta.merge import FinalizeRows
from connector.storage import locations
from streaming_apps.apps.common import (
    AppConfig,
    AppError,
    DeltaSink,
    Location,
    hareplica_stream,
    trigger_kwargs,
    under,
)
from streaming_apps.apps.orders import decoded_ddl
from streaming_apps.apps.silver import refuse_topic_options
from streaming_apps.checkpoints import read_checkpoint_file
from streaming_apps.workload import ORDER_TOPICS

log = logging.getLogger(__name__)

NAME = "gold"
TABLE = "gold_orders_per_minute"
TABLES = (TABLE,)
QUERY_NAMES = ("hareplica-gold",)
#: the source's batchTransform: the order decoder, run in the source's tasks
DECODE_TRANSFORM = "streaming_apps.apps.orders:decode_order_batch"
#: what the tasks import besides streaming_apps.worker_warmup.WARMUP_MODULES: the order decoder's module
WORKER_MODULES = (DECODE_TRANSFORM.partition(":")[0],)
MS_PER_DAY = 86_400_000
WINDOW = "1 minute"
GROUP_COLUMNS = ("status", "region", "currency")
#: The MERGE key of a row (the partition column first, so only the touched dates are read).
KEY_COLUMNS = ("windowDate", "windowStart", *GROUP_COLUMNS)
FINAL_COLUMN = "final"
NO_DATA_BATCHES_CONF = "spark.sql.streaming.noDataMicroBatches.enabled"
#: The decoded columns the aggregation reads (orders.DECODED_SCHEMA names).
DECODED_COLUMNS = ("eventTime", *GROUP_COLUMNS, "amountCents", "itemQuantity", "reason")


def order_source_options(config: AppConfig) -> dict[str, str]:
    """The run's source options with ``subscribe`` set to the order topics (``--topics``, default the
    workload's), so the executors skip every other topic before decoding it.

    Raises AppError when ``--option`` also chooses topics (``subscribe``, ``topics``, ``subscribePattern``,
    ``topicPattern``): the apps' topics are ``--topics``."""
    refuse_topic_options(config)
    return {**config.source_option_map(), "subscribe": ",".join(config.topics or ORDER_TOPICS)}


def decoded_orders(spark, config: AppConfig, columns=None):
    """The order topics of the hareplica stream, decoded by the source's own tasks (``batchTransform`` =
    :func:`streaming_apps.apps.orders.decode_order_batch`, so no body enters the JVM):
    ``orders.DECODED_SCHEMA``'s columns, or only ``columns`` of it (a sequence of names)."""
    options = {**order_source_options(config), "batchTransform": DECODE_TRANSFORM}
    return hareplica_stream(spark, config, schema=decoded_ddl(columns), options=options)


def aggregates(spark, config: AppConfig):
    """The streaming DataFrame of per-minute aggregates (module docstring columns, ``final`` not yet)."""
    from pyspark.sql import functions as F

    orders = decoded_orders(spark, config, columns=DECODED_COLUMNS).where(F.col("reason").isNull())
    windowed = (orders.withWatermark("eventTime", config.watermark)
                .groupBy(F.window("eventTime", WINDOW).alias("w"), *GROUP_COLUMNS)
                .agg(F.count(F.lit(1)).alias("orders"), F.sum("amountCents").alias("amountCents"),
                     F.sum("itemQuantity").alias("itemQuantity")))
    return windowed.select(
        F.col("w.start").alias("windowStart"), F.col("w.end").alias("windowEnd"),
        F.date_from_unix_date(F.floor(F.unix_millis(F.col("w.start")) / MS_PER_DAY).cast("int")).alias("windowDate"),
        *GROUP_COLUMNS, "orders", "amountCents", "itemQuantity")


def batch_watermark_ms(checkpoint: Location, batch_id: int) -> int:
    """The event-time watermark micro-batch ``batch_id`` runs with: ms since the epoch (0 before any event).

    Read from the query's offset log, ``checkpoint/offsets/<batchId>``, which Spark writes before it runs
    the batch: a version line (``v1``), then the batch metadata as JSON with ``batchWatermarkMs``, then
    one line per source.

    Raises:
        AppError: the file is missing or holds no ``batchWatermarkMs``.
    """
    path = under(checkpoint, "offsets", str(batch_id))
    try:
        lines = read_checkpoint_file(checkpoint, "offsets", str(batch_id)).splitlines()
    except OSError as e:
        raise AppError(f"gold: cannot read the watermark of batch {batch_id} from {path}: {e}") from e
    for line in lines[1:]:
        try:
            meta = json.loads(line)
        except ValueError:
            continue
        if isinstance(meta, dict) and "batchWatermarkMs" in meta:
            return int(meta["batchWatermarkMs"])
    raise AppError(f"gold: {path} holds no batchWatermarkMs (not a Spark offset log entry)")


def write_gold_batch(sink: DeltaSink, checkpoint: Location, batch_df, batch_id: int) -> None:
    """foreachBatch: upsert the changed windows, marking final those the batch's watermark has passed (the
    batch's rows and the table's others, by one rule: ``windowEnd <= watermark``)."""
    watermark_us = batch_watermark_ms(checkpoint, batch_id) * 1000
    sink.merge_batch(batch_df, table=TABLE, batch_id=batch_id, keys=KEY_COLUMNS, partition_by=("windowDate",),
                     finalize=FinalizeRows(FINAL_COLUMN, "windowEnd", watermark_us))


def start(spark, config: AppConfig, sink: DeltaSink) -> list:
    """Start the gold query: output mode update, a foreachBatch MERGE, also batches when only the watermark moves."""
    checkpoint = config.checkpoint()
    previous = spark.conf.get(NO_DATA_BATCHES_CONF, None)
    spark.conf.set(NO_DATA_BATCHES_CONF, "true")  # read when the query starts (the query keeps a copy)
    try:
        query = (aggregates(spark, config).writeStream.queryName(QUERY_NAMES[0]).outputMode("update")
                 .option("checkpointLocation", locations.for_spark(checkpoint))
                 .trigger(**trigger_kwargs(config.trigger))
                 .foreachBatch(lambda df, batch_id: write_gold_batch(sink, checkpoint, df, batch_id))
                 .start())
    finally:
        if previous is None:
            spark.conf.unset(NO_DATA_BATCHES_CONF)
        else:
            spark.conf.set(NO_DATA_BATCHES_CONF, previous)
    return [query]
