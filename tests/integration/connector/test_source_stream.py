"""``spark.readStream.format("hareplica")`` end to end: stub masters, the shared Spark session, AvailableNow."""

from __future__ import annotations

import base64
import json

import pytest
from pyspark.errors import StreamingQueryException

from connector.client.producer import Producer
from connector.protocol.topics import is_system_topic
from streaming_apps.progress_listener import progress_record
from tests.integration.connector.conftest import (
    FIXTURE_MAX_OFFSET,
    MAPPED_FILE_SIZE,
    brokers_option,
    run_stream,
    start_fixture_master,
)
from tests.support.brokers import max_offset

pytestmark = pytest.mark.spark

SCALAR_FIELDS = ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
                 "bornHost", "storeHost", "reconsumeTimes", "preparedTransactionOffset", "msgId", "uniqKey", "tags",
                 "keys")


def assert_rows_match(rows: list[dict], expected: list[dict], *, body_key: str = "bodyDecompressedBase64") -> None:
    rows = sorted(rows, key=lambda r: r["commitLogOffset"])
    assert [r["commitLogOffset"] for r in rows] == [e["commitLogOffset"] for e in expected]
    for r, e in zip(rows, expected, strict=True):
        for f in SCALAR_FIELDS:
            assert r[f] == e[f], (f, e["commitLogOffset"])
        assert (r["bornMs"], r["storeMs"]) == (e["bornTimestamp"], e["storeTimestamp"])
        assert dict(r["properties"]) == e["properties"]
        assert bytes(r["body"]) == base64.b64decode(e[body_key])
        assert r["broker"] == "broker-a"


def user_messages(messages: list[dict]) -> list[dict]:
    """messages.jsonl without RocketMQ's system topics (hidden by default, includeSystemTopics=false)."""
    return [m for m in messages if not is_system_topic(m["topic"])]


def test_stream_of_the_fixture_commitlog_equals_messages_jsonl(hareplica_spark, fixture_master, messages, tmp_path):
    run = run_stream(hareplica_spark, tmp_path / "cp", {"brokers": brokers_option(fixture_master),
                                                        "includeSystemTopics": "true"})
    assert_rows_match(run.rows, messages)
    assert run.end_offsets[-1] == {"broker-a": FIXTURE_MAX_OFFSET}
    assert run.progress[-1]["sources"][0]["latestOffset"] == '{"broker-a": 3402931}'


def test_raw_bodies_when_decompress_body_is_false(hareplica_spark, fixture_master, messages, tmp_path):
    run = run_stream(hareplica_spark, tmp_path / "cp", {"brokers": brokers_option(fixture_master),
                                                        "decompressBody": "false"})
    assert_rows_match(run.rows, user_messages(messages), body_key="bodyBase64")


def test_max_bytes_per_trigger_gives_several_batches_without_gap_or_duplicate(hareplica_spark, fixture_master,
                                                                              messages, tmp_path):
    run = run_stream(hareplica_spark, tmp_path / "cp", {"brokers": brokers_option(fixture_master),
                                                        "maxBytesPerTrigger": "300000", "includeSystemTopics": "true"})
    # the driver knows no record boundary inside a file: each batch ends at the next mapped-file start
    assert run.end_offsets == [{"broker-a": MAPPED_FILE_SIZE}, {"broker-a": 2 * MAPPED_FILE_SIZE},
                               {"broker-a": 3 * MAPPED_FILE_SIZE}, {"broker-a": FIXTURE_MAX_OFFSET}]
    assert [b for b, _ in run.batches] == [0, 1, 2, 3]
    for (_, rows), end in zip(run.batches, run.end_offsets, strict=True):
        assert rows and all(r["commitLogOffset"] < end["broker-a"] for r in rows)
    offsets = [r["commitLogOffset"] for r in run.rows]
    assert len(offsets) == len(set(offsets))
    assert_rows_match(run.rows, messages)
    # a query held behind reports the true lag: the broker holds still, so max offset - each batch's end
    assert [progress_record(p)["sources"][0]["lagBytes"] for p in run.progress] == [
        {"broker-a": FIXTURE_MAX_OFFSET - e["broker-a"]} for e in run.end_offsets]


def test_starting_offsets_json_and_latest(hareplica_spark, fixture_master, messages, tmp_path):
    run = run_stream(hareplica_spark, tmp_path / "cp1", {"brokers": brokers_option(fixture_master),
                                                         "startingOffsets": '{"broker-a": 554616}'})
    assert_rows_match(run.rows, [m for m in user_messages(messages) if m["commitLogOffset"] >= 554616])
    latest = run_stream(hareplica_spark, tmp_path / "cp2", {"brokers": brokers_option(fixture_master),
                                                            "startingOffsets": "latest"})
    assert latest.rows == []


def test_bad_option_fails_the_query_naming_it(hareplica_spark, fixture_master):
    with pytest.raises(Exception, match=r"option maxBytesPerTrigger='lots': must be an integer"):
        (hareplica_spark.readStream.format("hareplica").option("brokers", brokers_option(fixture_master))
         .option("maxBytesPerTrigger", "lots").load())


def _produce(broker, count: int, start: int = 0) -> list[tuple[str, bytes]]:
    sent = []
    with Producer(broker.remoting_addr) as producer:
        for i in range(start, start + count):
            topic = f"orders-{i % 3}"
            body = (f"order-{i}:" + "x" * (50 + (i * 37) % 900)).encode()
            if i % 10 == 0:
                body = body * 8  # > 4096 bytes: compressed by the producer
            producer.send(topic, body, tags=f"t{i % 4}", keys=[f"k{i}", f"c{i % 7}"], properties={"seq": str(i)})
            sent.append((topic, body))
    return sent


def _assert_produced(rows: list[dict], sent: list[tuple[str, bytes]]) -> None:
    rows = sorted(rows, key=lambda r: r["commitLogOffset"])
    assert [(r["topic"], bytes(r["body"])) for r in rows] == sent
    for r, (_, body) in zip(rows, sent, strict=True):
        seq = int(r["properties"]["seq"])
        assert body.startswith(f"order-{seq}:".encode())
        assert (r["tags"], r["keys"]) == (f"t{seq % 4}", f"k{seq} c{seq % 7}")


def test_latest_then_checkpoint_restart_reads_exactly_the_new_messages(hareplica_spark, broker_factory, tmp_path):
    broker = broker_factory(mappedFileSizeCommitLog=65536)
    _produce(broker, 20)  # before the query starts: skipped by startingOffsets=latest
    options = {"brokers": brokers_option(broker), "startingOffsets": "latest"}
    first = run_stream(hareplica_spark, tmp_path / "cp", options)
    assert first.rows == []
    sent = _produce(broker, 60, start=20)
    second = run_stream(hareplica_spark, tmp_path / "cp", options)
    _assert_produced(second.rows, sent)
    sent_more = _produce(broker, 15, start=80)
    third = run_stream(hareplica_spark, tmp_path / "cp", options)
    _assert_produced(third.rows, sent_more)


def test_crash_mid_way_and_restart_from_the_checkpoint_loses_and_duplicates_nothing(hareplica_spark, broker_factory,
                                                                                    tmp_path):
    broker = broker_factory(mappedFileSizeCommitLog=32768)
    sent = _produce(broker, 300)
    options = {"brokers": brokers_option(broker), "maxBytesPerTrigger": "20000"}
    crashed: list = []
    with pytest.raises(StreamingQueryException, match="simulated crash in batch 2"):
        run_stream(hareplica_spark, tmp_path / "cp", options, fail_on_batch=2, collected=crashed)
    assert [b for b, _ in crashed] == [0, 1]
    # batches 0 and 1 were committed by the crashed run; the restart replays batch 2 and goes on
    restarted = run_stream(hareplica_spark, tmp_path / "cp", options)
    assert [b for b, _ in restarted.batches][:2] == [2, 3]
    _assert_produced([r for _, rows in crashed for r in rows] + restarted.rows, sent)


def test_data_loss_fails_the_query_or_is_skipped(hareplica_spark, tmp_path, fixture_dir, messages):
    broker = start_fixture_master(tmp_path / "lossy", fixture_dir,
                                  files=[f"{i * MAPPED_FILE_SIZE:020d}" for i in (1, 2, 3)])
    try:
        options = {"brokers": brokers_option(broker), "startingOffsets": '{"broker-a": 554616}'}
        with pytest.raises(StreamingQueryException, match=r"no longer holds CommitLog bytes \[554616, 1048576\)"):
            run_stream(hareplica_spark, tmp_path / "cp1", options)
        run = run_stream(hareplica_spark, tmp_path / "cp2", {**options, "failOnDataLoss": "false"})
        assert_rows_match(run.rows, [m for m in user_messages(messages) if m["commitLogOffset"] >= MAPPED_FILE_SIZE])
    finally:
        try:
            broker.stop()
        finally:
            broker.kill9()


def _adjacent_free_ports() -> int:
    """A listenPort whose listenPort + 1 was free too (so the HA port is derived as upstream does)."""
    import socket

    for _ in range(20):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise AssertionError("no two adjacent free loopback ports found")


def test_two_broker_sets_in_one_query(hareplica_spark, fixture_master, broker_factory, messages, tmp_path):
    broker_b = broker_factory("broker-b", brokerName="broker-b", listenPort=_adjacent_free_ports(),
                              mappedFileSizeCommitLog=65536)
    assert broker_b.ha_port == broker_b.listen_port + 1
    sent = _produce(broker_b, 40)
    option = f"{brokers_option(fixture_master)},broker-b={broker_b.ha_addr}"  # broker-b: remoting = HA port - 1
    run = run_stream(hareplica_spark, tmp_path / "cp", {"brokers": option, "maxBytesPerTrigger": "1500000"})
    by_broker = {"broker-a": [], "broker-b": []}
    for r in run.rows:
        by_broker[r["broker"]].append(r)
    assert_rows_match(by_broker["broker-a"], user_messages(messages))
    _assert_produced(by_broker["broker-b"], sent)
    assert set(run.end_offsets[-1]) == {"broker-a", "broker-b"}
    assert run.end_offsets[-1]["broker-a"] == FIXTURE_MAX_OFFSET
    assert len(run.batches) >= 2
    # progress: per broker, how far the broker is (latestOffset) next to where the batch ended (endOffset)
    first = run.progress[0]["sources"][0]
    latest = json.loads(first["latestOffset"])
    assert latest == {"broker-a": FIXTURE_MAX_OFFSET, "broker-b": max_offset(broker_b.remoting_addr)}
    assert any(json.loads(first["endOffset"])[b] < latest[b] for b in latest)  # the first batch was behind


def test_a_schema_naming_some_columns_gets_exactly_those(hareplica_spark, fixture_master, messages, tmp_path):
    from pyspark.sql.types import StructType

    from connector.decode.schema import spark_schema

    fields = {f.name: f for f in spark_schema().fields}
    wanted = ["commitLogOffset", "body", "topic", "decodeError"]
    query = (hareplica_spark.readStream.format("hareplica").schema(StructType([fields[n] for n in wanted]))
             .option("brokers", brokers_option(fixture_master)).option("includeSystemTopics", "true").load()
             .writeStream.format("memory").queryName("hareplica_subset")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120)
        rows = hareplica_spark.sql("SELECT * FROM hareplica_subset").collect()
    finally:
        if query.isActive:
            query.stop()
    assert rows and list(rows[0].asDict()) == wanted
    got = {r["commitLogOffset"]: r for r in rows}
    assert sorted(got) == [m["commitLogOffset"] for m in messages]
    for m in messages:
        row = got[m["commitLogOffset"]]
        body = base64.b64decode(m.get("bodyDecompressedBase64") or m["bodyBase64"])
        assert (row["topic"], bytes(row["body"]), row["decodeError"]) == (m["topic"], body, None)
