"""Issue 2 end to end: producer → broker stub → format("hareplica") → format("deltalake") → query.

The query is stopped mid-way (between and inside micro-batches) and restarted from its checkpoint; at
the end every message of the broker's CommitLog is in the Delta table exactly once, with identical body
and metadata.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from connector.delta.options import app_id_from_checkpoint
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.spark_session import register_data_sources
from streaming_apps.workload import decode_order, order_events

MAPPED_FILE_SIZE = 1024 * 1024
MESSAGES = 1500
QUERY_TIMEOUT_S = 180


def _produce(broker, count: int) -> None:
    from connector.client.producer import Producer

    with Producer(broker.remoting_addr, "e2e") as producer:
        futures = [producer.send_async(m.topic, m.body, tags=m.tags, keys=m.keys, properties=m.properties)
                   for m in order_events(count, seed=7)]
        statuses = {f.result(timeout=60).send_status for f in futures}
    assert statuses == {"SEND_OK"}


def _start(spark, broker, table: Path, checkpoint: Path, *, available_now: bool):
    writer = (spark.readStream.format("hareplica")
              .option("brokers", f"broker-a={broker.ha_addr}")
              .option("startingOffsets", "earliest")
              .option("maxBytesPerTrigger", str(MAPPED_FILE_SIZE // 2))
              .load()
              .writeStream.format("deltalake")
              .option("appId", app_id_from_checkpoint(str(checkpoint), "bronze"))
              .option("checkpointLocation", str(checkpoint)))
    trigger = {"availableNow": True} if available_now else {"processingTime": "200 milliseconds"}
    return writer.trigger(**trigger).start(str(table))


def _table(table: Path) -> pa.Table:
    reader = QueryBuilder().register("t", DeltaTable(str(table))).execute("SELECT * FROM t")
    return pa.RecordBatchReader.from_stream(reader).read_all()


def test_stream_to_delta_stopped_mid_way_and_restarted_lands_every_message_once(spark, broker_factory, tmp_path):
    register_data_sources(spark)
    broker = broker_factory("master", mappedFileSizeCommitLog=MAPPED_FILE_SIZE)
    _produce(broker, MESSAGES)
    table, checkpoint = tmp_path / "bronze", tmp_path / "checkpoint"

    # run 1: stopped as soon as one micro-batch has committed, while the next ones are running
    query = _start(spark, broker, table, checkpoint, available_now=False)
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while not query.recentProgress and time.monotonic() < deadline:
        assert query.exception() is None, query.exception()
        time.sleep(0.05)
    query.stop()
    first_run_rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert 0 < first_run_rows < MESSAGES, "run 1 must stop mid-way"

    # more messages arrive while the query is down
    _produce(broker, 500)

    # run 2: restart from the checkpoint until caught up
    query = _start(spark, broker, table, checkpoint, available_now=True)
    assert query.awaitTermination(QUERY_TIMEOUT_S), f"restart did not finish: {query.lastProgress}"
    assert query.exception() is None

    landed = _table(table)
    expected = {rec.commit_log_offset: rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
    assert len(expected) == MESSAGES + 500
    offsets = landed.column("commitLogOffset").to_pylist()
    assert len(offsets) == len(set(offsets)), "no message twice"
    assert set(offsets) == set(expected), "no message missing"

    compressed = 0
    for row in landed.to_pylist():
        rec = expected[row["commitLogOffset"]]
        assert row["body"] == rec.decompressed_body()
        compressed += bool(rec.sys_flag & 1)
        assert (row["topic"], row["queueId"], row["queueOffset"], row["storeSize"], row["bodyCRC"], row["flag"],
                row["sysFlag"], row["reconsumeTimes"], row["preparedTransactionOffset"]) == (
            rec.topic, rec.queue_id, rec.queue_offset, rec.store_size, rec.body_crc, rec.flag, rec.sys_flag,
            rec.reconsume_times, rec.prepared_transaction_offset)
        assert int(row["bornTimestamp"].timestamp() * 1000) == rec.born_timestamp
        assert int(row["storeTimestamp"].timestamp() * 1000) == rec.store_timestamp
        assert (row["bornHost"], row["storeHost"]) == (str(rec.born_host), str(rec.store_host))
        assert (row["msgId"], row["uniqKey"], row["tags"], row["keys"]) == (rec.msg_id, rec.uniq_key, rec.tags,
                                                                            rec.keys)
        assert dict(row["properties"]) == rec.properties
        assert row["broker"] == "broker-a"
        assert decode_order(row["body"])["status"] == row["tags"]
    assert compressed > 0, "the workload must include zlib-compressed bodies"
    assert DeltaTable(str(table)).transaction_version(app_id_from_checkpoint(str(checkpoint), "bronze")) >= 1
