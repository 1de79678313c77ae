"""The bronze, silver and gold apps end to end: a real broker stub, the shared Spark session, real Delta tables.

One broker per module holds a known workload: order events whose event times rise over five minutes, plus
one "tick" ten minutes later (it moves gold's watermark past the five), bodies that are not valid order
events on the order topics (silver's quarantine), and messages on another topic (bronze only). The gold
test sends the same workload to a broker of its own in two parts, running gold after each. Every app runs
with Trigger.AvailableNow and its checks compare the tables with what the broker's CommitLog files hold.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import msgpack
import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from connector.delta.metadata_tables import METADATA_TABLES
from streaming_apps.apps import AppConfig, AppError, run_app
from streaming_apps.apps.orders import OrderDecodeError, decode_order_body
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.progress_listener import read_events
from streaming_apps.query import discover_tables, query_tables, register_spark_views
from streaming_apps.spark_session import register_data_sources
from streaming_apps.status import collect_status
from streaming_apps.workload import ORDER_TOPICS, order_events
from tests.support.silver import silver_verdicts

pytestmark = pytest.mark.spark

MAPPED_FILE_SIZE = 96 * 1024
ORDERS = 400
MINUTE_MS = 60_000
BASE_MS = 29_833_334 * MINUTE_MS  # a whole minute, 2026-09-21T14:14:00Z
TICK_MS = BASE_MS + 10 * MINUTE_MS
BAD_BODIES = [b"\x01\x02 not msgpack", msgpack.packb([1, 2, 3]), msgpack.packb({"orderId": "ORD-X"}),
              msgpack.packb({"orderId": "ORD-Y", "items": [], "eventTimeMs": "soon"}), b"\xc1"]
APP_TIMEOUT_S = 240


def _workload() -> list[tuple[str, bytes, str | None]]:
    """(topic, body, tags) in send order."""
    out = []
    for seq, msg in enumerate(order_events(ORDERS, seed=11)):
        event = msgpack.unpackb(msg.body)
        event["eventTimeMs"] = BASE_MS + seq * (5 * MINUTE_MS // ORDERS)  # in order over five minutes
        out.append((msg.topic, msgpack.packb(event), msg.tags))
    for i, body in enumerate(BAD_BODIES):
        out.append((ORDER_TOPICS[i % len(ORDER_TOPICS)], body, "BAD"))
    for i in range(30):
        out.append(("Inventory", f"stock {i}".encode() * 10, None))
    tick = next(order_events(1, seed=12))
    event = msgpack.unpackb(tick.body)
    event.update(orderId="ORD-TICK", eventTimeMs=TICK_MS)
    out.append(("OrderCreated", msgpack.packb(event), "TICK"))
    return out


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("apps-broker"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "apps-test") as producer:
            futures = [producer.send_async(topic, body, tags=tags) for topic, body, tags in _workload()]
            assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
        yield b


@pytest.fixture(scope="module")
def commitlog(broker) -> dict[int, object]:
    """commitLogOffset → MessageRecord of every message the broker stored."""
    return {rec.commit_log_offset: rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)}


@pytest.fixture(scope="module")
def app_spark(spark):
    register_data_sources(spark)
    return spark


def _config(broker, workdir: Path, app: str, **kw) -> AppConfig:
    kw.setdefault("max_bytes_per_trigger", MAPPED_FILE_SIZE)
    return AppConfig(app=app, brokers=f"broker-a={broker.ha_addr}", workdir=workdir, trigger="available-now", **kw)


def _expected_orders(commitlog) -> tuple[dict[int, dict], dict[int, str]]:
    """(offset → decoded order, offset → quarantine reason) over the order topics, by gold's order decoder."""
    good, bad = {}, {}
    for off, rec in commitlog.items():
        if rec.topic not in ORDER_TOPICS:
            continue
        try:
            good[off] = decode_order_body(rec.decompressed_body())
        except OrderDecodeError as e:
            bad[off] = str(e)
    return good, bad


@pytest.mark.parametrize("landing", ["spark", "direct"])
def test_bronze_lands_every_message_once_partitioned_by_store_date_with_maintenance(app_spark, broker, commitlog,
                                                                                     tmp_path, landing):
    cfg = _config(broker, tmp_path, "bronze", maintenance_every=2, landing=landing)
    result = run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert result.batches >= 3, "the read limit must split the backlog into several micro-batches"
    assert result.rows == len(commitlog)

    table = cfg.table_path("bronze")
    rows = query_tables("SELECT * FROM bronze", {"bronze": str(table)}).to_pylist()
    offsets = Counter(r["commitLogOffset"] for r in rows)
    assert set(offsets) == set(commitlog) and max(offsets.values()) == 1
    for r in rows:
        rec = commitlog[r["commitLogOffset"]]
        assert (r["topic"], r["msgId"], r["body"], r["storeSize"]) == (rec.topic, rec.msg_id, rec.decompressed_body(),
                                                                       rec.store_size)
        assert r["storeDate"] == r["storeTimestamp"].date()
    dt = DeltaTable(str(table))
    assert dt.metadata().partition_columns == ["storeDate"]
    assert {Path(u).parent.name for u in dt.file_uris()} == {f"storeDate={d}" for d in {r["storeDate"] for r in rows}}
    assert dt.transaction_version(cfg.app_id()) == result.batches - 1

    # maintenance ran on schedule and compacted without changing the rows
    assert result.maintenance and all("error" not in m for m in result.maintenance)
    assert sum(m["filesRemoved"] for m in result.maintenance) > 0
    assert len(dt.file_uris()) < result.batches
    assert any(p.name.endswith(".checkpoint.parquet") for p in (table / "_delta_log").iterdir())

    # the listener recorded every batch, the broker lag, the maintenance and the end
    events = list(read_events(cfg.status_file))
    progress = [e for e in events if e["event"] == "progress"]
    assert [e["batchId"] for e in progress] == list(range(result.batches))
    assert sum(e["numInputRows"] for e in progress) == len(commitlog)
    assert progress[0]["lagBytes"] > 0 and progress[-1]["lagBytes"] == 0
    last = max(commitlog)
    end_offset = progress[-1]["sources"][0]["endOffset"]
    assert end_offset["broker-a"] == last + commitlog[last].store_size
    # the end offset names the last record landed (docs/source.md, rewritten history)
    rec = commitlog[last]
    assert end_offset["@lastRecord"]["broker-a"] == [last, rec.store_size, rec.store_timestamp, rec.body_crc]
    assert any(e["event"] == "maintenance" for e in events)
    status = collect_status([cfg.status_dir], brokers=f"broker-a={broker.ha_addr}")
    entry = status["queries"]["hareplica-bronze"]
    assert entry["state"] == "terminated" and entry["rows"] == len(commitlog)
    assert entry["liveLagBytes"] == {"broker-a": 0}

    # the same table through Spark SQL, without Delta jars
    frames = register_spark_views(app_spark, cfg.tables_root)
    assert set(frames) == {"bronze", *(t.name for t in METADATA_TABLES)}  # bronze and the broker metadata tables
    got = app_spark.sql("SELECT count(*) AS n, sum(commitLogOffset) AS s, count(DISTINCT storeDate) AS d, "
                        "max(length(body)) AS b FROM bronze").collect()[0].asDict()
    assert got == {"n": len(commitlog), "s": sum(commitlog), "d": len({r["storeDate"] for r in rows}),
                   "b": max(len(r["body"]) for r in rows)}
    assert app_spark.table("bronze").schema.fieldNames()[-1] == "storeDate"


def test_silver_decodes_orders_and_quarantines_bad_bodies(app_spark, broker, commitlog, tmp_path):
    cfg = _config(broker, tmp_path, "silver")
    run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    good, bad = silver_verdicts((off, rec.decompressed_body()) for off, rec in commitlog.items()
                                if rec.topic in ORDER_TOPICS)
    # a body without some field is an order with nulls there (the msgpack format's rule): ORD-X
    assert len(bad) == len(BAD_BODIES) - 1 and len(good) == ORDERS + 2
    tables = discover_tables(cfg.tables_root)
    assert set(tables) == {"silver_orders", "silver_quarantine"}

    valid, _ = _expected_orders(commitlog)
    orders = query_tables("SELECT * FROM silver_orders", tables).to_pylist()
    assert sorted(r["commitLogOffset"] for r in orders) == sorted(good)
    for r in orders:
        want = good[r["commitLogOffset"]]
        for k in ("orderId", "customerId", "status", "amountCents", "currency", "region", "items", "eventTimeMs"):
            assert r[k] == want[k], k
        if r["orderId"] == "ORD-X":
            assert r["eventTimeMs"] is None and r["eventDate"] is None
            continue
        assert r["eventTimeMs"] == valid[r["commitLogOffset"]]["eventTime"]  # gold's decoder agrees
        assert r["eventDate"] == r["eventTimeMs"].date()
        rec = commitlog[r["commitLogOffset"]]
        assert (r["topic"], r["msgId"], r["queueOffset"], r["broker"], r["tags"]) == (
            rec.topic, rec.msg_id, rec.queue_offset, "broker-a", rec.tags)
    assert DeltaTable(tables["silver_orders"]).metadata().partition_columns == ["eventDate"]

    quarantine = query_tables("SELECT commitLogOffset, error, body, topic, \"table\" FROM silver_quarantine",
                              tables).to_pylist()
    assert {r["commitLogOffset"]: r["error"] for r in quarantine} == bad
    assert {r["body"] for r in quarantine} == set(BAD_BODIES) - {msgpack.packb({"orderId": "ORD-X"})}
    assert {r["table"] for r in quarantine} == {"silver_orders"}
    errors = sorted(r["error"] for r in quarantine)
    assert any(x.endswith("Expected `object`, got `array`") for x in errors)
    assert any("at `$.eventTimeMs`" in x for x in errors)

    # a rerun from the same checkpoint finds nothing new and writes nothing twice
    versions = {n: DeltaTable(p).version() for n, p in tables.items()}
    run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert {n: DeltaTable(p).version() for n, p in tables.items()} == versions


def _send(broker, messages: list[tuple[str, bytes, str | None]]) -> None:
    from connector.client.producer import Producer

    with Producer(broker.remoting_addr, "gold-test") as producer:
        futures = [producer.send_async(topic, body, tags=tags) for topic, body, tags in messages]
        assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}


def _expected_gold(broker, watermark_ms: int) -> dict[tuple, dict]:
    """Gold's rows computed from the broker's CommitLog: every window with data, final once the watermark passed it."""
    commitlog = {rec.commit_log_offset: rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
    good, _ = _expected_orders(commitlog)
    latest_ms = max(int(o["eventTime"].timestamp() * 1000) for o in good.values())
    expected: dict[tuple, dict] = {}
    for order in good.values():
        ms = int(order["eventTime"].timestamp() * 1000)
        key = (ms - ms % MINUTE_MS, order["status"], order["region"], order["currency"])
        row = expected.setdefault(key, {"orders": 0, "amountCents": 0, "itemQuantity": 0})
        row["orders"] += 1
        row["amountCents"] += order["amountCents"]
        row["itemQuantity"] += order["itemQuantity"]
    for (start_ms, *_), row in expected.items():
        row["final"] = start_ms + MINUTE_MS <= latest_ms - watermark_ms
    return expected


def _gold_rows(cfg: AppConfig) -> dict[tuple, dict]:
    got = query_tables("SELECT * FROM gold_orders_per_minute", discover_tables(cfg.tables_root)).to_pylist()
    actual = {}
    for r in got:
        start_ms = int(r["windowStart"].timestamp() * 1000)
        assert int(r["windowEnd"].timestamp() * 1000) == start_ms + MINUTE_MS
        assert r["windowDate"] == r["windowStart"].date()
        key = (start_ms, r["status"], r["region"], r["currency"])
        assert key not in actual, "one row per window and group"
        actual[key] = {"orders": r["orders"], "amountCents": r["amountCents"], "itemQuantity": r["itemQuantity"],
                       "final": r.get("final")}
    return actual


def test_gold_shows_every_window_with_data_and_marks_those_behind_the_watermark_final(app_spark, tmp_path):
    workload = _workload()
    split = 250  # the first 250 orders: event times up to 14:17:06.75, so windows 14:16 and 14:17 stay open
    with BrokerProcess.start(tmp_path / "gold-broker", mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        _send(b, workload[:split])
        cfg = _config(b, tmp_path / "work", "gold", watermark="1 minute")
        run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
        first = _expected_gold(b, MINUTE_MS)
        got = _gold_rows(cfg)
        assert sorted(got) == sorted(first), "after one AvailableNow run every window with data is in the table"
        assert got == first
        finals = {k[0]: row["final"] for k, row in first.items()}
        assert finals == {BASE_MS + m * MINUTE_MS: m < 2 for m in range(4)}
        table = DeltaTable(str(cfg.table_path("gold_orders_per_minute")))
        assert table.transaction_version(cfg.app_id()) is not None

        # more data: the open windows are updated, and final once the watermark (the tick - 1 minute) passed them
        _send(b, workload[split:])
        run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
        second = _expected_gold(b, MINUTE_MS)
        got = _gold_rows(cfg)
        assert sorted(got) == sorted(second) and got == second
        assert {k[0] for k in second} == {BASE_MS + m * MINUTE_MS for m in range(5)} | {TICK_MS}
        assert [k for k, row in second.items() if not row["final"]] == [k for k in second if k[0] == TICK_MS]
        updated = [k for k in first if first[k]["orders"] != second[k]["orders"]]
        assert updated and all(not first[k]["final"] for k in updated), "only open windows changed"
        assert any(not first[k]["final"] and k not in updated for k in first), "an open window closed unchanged"
    watermark = [e["watermark"] for e in read_events(cfg.status_file) if e["event"] == "progress"][-1]
    assert watermark == "2026-09-21T14:23:00.000Z"  # the tick's event time minus one minute


def test_app_status_file_is_valid_json_lines(app_spark, broker, tmp_path):
    cfg = _config(broker, tmp_path, "bronze", max_bytes_per_trigger=None, maintenance_every=0)
    run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    lines = cfg.status_file.read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["event"] for e in events] == ["started", "progress", "terminated"]
    assert events[-1]["exception"] is None


def test_direct_landing_writes_the_schema_of_the_spark_path(app_spark, broker, tmp_path):
    from connector.landing import landed_schema
    from streaming_apps.apps.bronze import bronze_frame

    # same columns, types and nullability: either landing mode can create the table the other continues
    assert bronze_frame(app_spark, _config(broker, tmp_path, "bronze")).schema == landed_schema()


def test_direct_landing_is_for_bronze_and_silver_with_the_deltalake_sink(broker, tmp_path):
    assert _config(broker, tmp_path, "bronze").landing == "direct"  # the default where it applies
    assert _config(broker, tmp_path, "silver").landing == "direct"
    assert _config(broker, tmp_path, "bronze", sink="delta").landing == "spark"
    with pytest.raises(AppError, match="run silver lands its tables with --landing direct and --sink deltalake"):
        _config(broker, tmp_path, "silver", sink="delta")
    assert _config(broker, tmp_path, "gold").landing == "spark"
    with pytest.raises(AppError, match="--landing direct .* bronze and silver apps with --sink deltalake"):
        _config(broker, tmp_path, "gold", landing="direct")
    with pytest.raises(AppError, match="--landing direct"):
        _config(broker, tmp_path, "silver", landing="direct", sink="delta")
    with pytest.raises(AppError, match="--landing 'rows' must be one of spark, direct"):
        _config(broker, tmp_path, "bronze", landing="rows")


def test_apps_write_checkpoints_with_the_file_system_api_unless_the_session_names_a_class(app_spark):
    from streaming_apps.checkpoints import (
        CHECKPOINT_FILE_MANAGER_CONF,
        FILE_SYSTEM_CHECKPOINT_FILE_MANAGER,
        use_checkpoint_file_manager,
    )

    app_spark.conf.unset(CHECKPOINT_FILE_MANAGER_CONF)
    use_checkpoint_file_manager(app_spark)  # what start_app does before any query starts
    assert app_spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF) == FILE_SYSTEM_CHECKPOINT_FILE_MANAGER
    default = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"
    app_spark.conf.set(CHECKPOINT_FILE_MANAGER_CONF, default)
    try:
        use_checkpoint_file_manager(app_spark)
        assert app_spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF) == default  # a class the user names stays
    finally:
        app_spark.conf.set(CHECKPOINT_FILE_MANAGER_CONF, FILE_SYSTEM_CHECKPOINT_FILE_MANAGER)
