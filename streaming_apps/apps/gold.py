"""The gold app: per-minute order aggregates with an event-time watermark.

``hareplica run gold --brokers ... [--watermark "1 minute"]`` decodes the order events as silver does
(invalid bodies are dropped here; silver quarantines them), then counts per one-minute window of the
event's own time (``eventTimeMs``) and status, region and currency:

    windowStart, windowEnd (timestamps), windowDate (UTC date of windowStart, the partition column),
    status, region, currency, orders (count), amountCents (sum), itemQuantity (sum of item quantities)

into ``gold_orders_per_minute`` with output mode append: Spark emits a window once the watermark (the
latest event time seen minus ``--watermark``) has passed its end, so every row is final and written
exactly once; events later than the watermark are dropped by Spark. The query runs micro-batches
without new data when the watermark moves (``spark.sql.streaming.noDataMicroBatches.enabled`` is set
for this query), so the last windows land without waiting for more data.
"""

from __future__ import annotations

import logging

from streaming_apps.apps.common import AppConfig, DeltaSink
from streaming_apps.apps.silver import MS_PER_DAY, decoded_orders

log = logging.getLogger(__name__)

NAME = "gold"
TABLE = "gold_orders_per_minute"
TABLES = (TABLE,)
QUERY_NAMES = ("hareplica-gold",)
WINDOW = "1 minute"
GROUP_COLUMNS = ("status", "region", "currency")
NO_DATA_BATCHES_CONF = "spark.sql.streaming.noDataMicroBatches.enabled"


def aggregates(spark, config: AppConfig):
    """The streaming DataFrame of per-minute aggregates (columns in the module docstring)."""
    from pyspark.sql import functions as F

    orders = decoded_orders(spark, config).where(F.col("reason").isNull())
    windowed = (orders.withWatermark("eventTime", config.watermark)
                .groupBy(F.window("eventTime", WINDOW).alias("w"), *GROUP_COLUMNS)
                .agg(F.count(F.lit(1)).alias("orders"), F.sum("amountCents").alias("amountCents"),
                     F.sum("itemQuantity").alias("itemQuantity")))
    return windowed.select(
        F.col("w.start").alias("windowStart"), F.col("w.end").alias("windowEnd"),
        F.date_from_unix_date(F.floor(F.unix_millis(F.col("w.start")) / MS_PER_DAY).cast("int")).alias("windowDate"),
        *GROUP_COLUMNS, "orders", "amountCents", "itemQuantity")


def start(spark, config: AppConfig, sink: DeltaSink) -> list:
    """Start the gold query (append mode, micro-batches also when only the watermark moves)."""
    previous = spark.conf.get(NO_DATA_BATCHES_CONF, None)
    spark.conf.set(NO_DATA_BATCHES_CONF, "true")  # read when the query starts (the query keeps a copy)
    try:
        query = sink.start_stream(aggregates(spark, config), table=TABLE, query_name=QUERY_NAMES[0],
                                  partition_by=("windowDate",), output_mode="append")
    finally:
        if previous is None:
            spark.conf.unset(NO_DATA_BATCHES_CONF)
        else:
            spark.conf.set(NO_DATA_BATCHES_CONF, previous)
    return [query]
