"""The silver app: the demo's msgpack order events as typed columns, undecodable bodies quarantined.

``hareplica run silver --brokers ...`` reads the order topics (``--topics``, default the workload's
OrderCreated, OrderPaid, OrderShipped, OrderAudit) from ``format("hareplica")``, decodes every body
with :mod:`streaming_apps.apps.orders` on the executors and, per micro-batch (foreachBatch), appends

- ``silver_orders``: one row per valid order event — orderId, customerId, status, amountCents, currency,
  region, items (array of sku/qty/priceCents), itemQuantity, eventTime, eventDate (UTC date of
  eventTime, the partition column) and the message's broker, topic, queueId, queueOffset,
  commitLogOffset, msgId, tags, keys, storeTimestamp;
- ``silver_quarantine``: one row per body that is not a valid order event — broker, topic, queueId,
  queueOffset, commitLogOffset, msgId, tags, keys, storeTimestamp, reason (what is wrong) and the body;
  also every bad record the source kept (``decodeError`` set: BODYCRC mismatch, a body that does not
  decompress), with reason ``bad record: <decodeError>`` and the stored body.

Both tables are written with ``txn(appId, batchId)`` (``DeltaSink.write_batch``), so a micro-batch
replayed after a crash lands in neither table twice, also when the crash fell between the two commits.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from streaming_apps.apps.common import AppConfig, DeltaSink, hareplica_stream
from streaming_apps.apps.orders import DECODE_ERROR, PASS_THROUGH, decode_order_batches, decoded_ddl
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


def decoded_orders(spark, config: AppConfig, columns: Sequence[str] | None = None):
    """The order topics of the hareplica stream, decoded: ``orders.DECODED_SCHEMA``'s columns (or only
    ``columns`` of it, which must include eventTime) plus eventDate. Only the source columns the decoder
    needs go into it, and only the asked ones come out (Spark cannot prune a ``mapInArrow`` result)."""
    from pyspark.sql import functions as F

    topics = list(config.topics or ORDER_TOPICS)
    passed = [c for c in PASS_THROUGH if columns is None or c in columns]
    read = list(dict.fromkeys(["topic", *passed, DECODE_ERROR, "body"]))  # the source columns used
    source = hareplica_stream(spark, config, columns=read).where(F.col("topic").isin(topics))
    decoder = decode_order_batches if columns is None else functools.partial(decode_order_batches,
                                                                            columns=tuple(columns))
    decoded = source.select(*passed, DECODE_ERROR, "body").mapInArrow(decoder, decoded_ddl(columns))
    return decoded.withColumn(
        "eventDate", F.date_from_unix_date(F.floor(F.unix_millis("eventTime") / MS_PER_DAY).cast("int")))


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
    """Start the silver query (one foreachBatch query writing both tables); returns ``[StreamingQuery]``."""
    from streaming_apps.apps.common import trigger_kwargs

    query = (decoded_orders(spark, config).writeStream.queryName(QUERY_NAMES[0])
             .option("checkpointLocation", str(config.checkpoint()))
             .trigger(**trigger_kwargs(config.trigger))
             .foreachBatch(lambda df, batch_id: write_silver_batch(sink, df, batch_id))
             .start())
    return [query]
