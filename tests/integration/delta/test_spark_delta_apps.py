"""``--sink delta``: the apps write with Spark's own ``format("delta")`` (the staged delta-spark jars), for real:
bronze (Delta's streaming sink) and gold (``MERGE INTO`` per micro-batch). Silver lands its declaration with the
direct landing only and refuses ``--sink delta`` (tests/unit/apps/test_orders_decode.py).

Each app runs on the shared Spark session (which has the Delta jars and SQL extension) with
Trigger.AvailableNow and a read limit of one mapped file; its tables are read back with Spark's Delta
reader AND with delta-rs (``deltalake``), and compared with the broker's CommitLog. The command line
finds the staged jars by itself and still refuses a classpath without Delta's classes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest
from deltalake import DeltaTable

from streaming_apps.apps import AppConfig, run_app, start
from streaming_apps.apps.orders import OrderDecodeError, decode_order_body
from streaming_apps.query import query_tables
from streaming_apps.spark_session import PROJECT_ROOT, register_data_sources
from streaming_apps.workload import ORDER_TOPICS
from tests.integration.delta.conftest import BAD_BODIES, MAPPED_FILE_SIZE, ORDERS

pytestmark = pytest.mark.spark

APP_TIMEOUT_S = 300
CLI_TIMEOUT_S = 300
MAINTENANCE_TIMEOUT_S = 300


def _config(broker, workdir, app: str, **kw) -> AppConfig:
    kw.setdefault("max_bytes_per_trigger", MAPPED_FILE_SIZE)
    kw.setdefault("maintenance_every", 0)
    return AppConfig(app=app, brokers=f"broker-a={broker.ha_addr}", workdir=workdir, trigger="available-now",
                     sink="delta", **kw)


def _spark_rows(spark, path, columns: str):
    return [r.asDict() for r in spark.read.format("delta").load(str(path)).selectExpr(*columns.split(",")).collect()]


def test_bronze_with_spark_delta_lands_every_message_once(spark, broker, commitlog, tmp_path):
    register_data_sources(spark)
    cfg = _config(broker, tmp_path, "bronze", maintenance_every=2)
    assert cfg.landing == "spark"
    running = start(spark, cfg)
    try:
        assert running.wait(APP_TIMEOUT_S)
        # Spark's VACUUM takes tens of seconds on 2 cores: wait for the scheduled run to end
        assert running.maintainer.wait(MAINTENANCE_TIMEOUT_S)
    finally:
        running.close()
    batches = len({p["batchId"] for p in running.progress})
    assert batches >= 3 and sum(p["numInputRows"] for p in running.progress) == len(commitlog)
    maintenance = running.maintainer.results
    table = cfg.table_path("bronze")

    # Spark's reader: every CommitLog record once, the same bytes
    rows = _spark_rows(spark, table, "commitLogOffset,topic,msgId,body,storeSize,storeTimestamp,storeDate")
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert set(counts) == set(commitlog) and max(counts.values()) == 1
    for r in rows:
        rec = commitlog[r["commitLogOffset"]]
        assert (r["topic"], r["msgId"], bytes(r["body"]), r["storeSize"]) == (
            rec.topic, rec.msg_id, rec.decompressed_body(), rec.store_size)
    # delta-rs reads what Spark wrote: the same rows and partitioning
    dt = DeltaTable(str(table))
    assert dt.metadata().partition_columns == ["storeDate"]
    by_rs = query_tables("SELECT commitLogOffset, msgId FROM bronze", {"bronze": str(table)}).to_pylist()
    assert sorted((r["commitLogOffset"], r["msgId"]) for r in by_rs) == sorted(
        (off, rec.msg_id) for off, rec in commitlog.items())

    # Delta's streaming sink: one commit per micro-batch (txn = the query id, version = batchId), then
    # the scheduled maintenance through Spark SQL (OPTIMIZE; VACUUM with the table's retention)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    ops = Counter(h["operation"] for h in history)
    assert ops["STREAMING UPDATE"] == batches
    assert ops["OPTIMIZE"] >= 1 and ops["VACUUM END"] >= 1, ops
    assert maintenance and all("error" not in m for m in maintenance), maintenance
    assert sum(m["filesRemoved"] for m in maintenance) > 0

    # a rerun from the same checkpoint adds nothing
    version = dt.version()
    again = run_app(spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert again.rows == 0 and DeltaTable(str(table)).version() == version


def _expected_orders(commitlog):
    good, bad = {}, {}
    for off, rec in commitlog.items():
        if rec.topic not in ORDER_TOPICS:
            continue
        try:
            good[off] = decode_order_body(rec.decompressed_body())
        except OrderDecodeError as e:
            bad[off] = str(e)
    return good, bad


def test_gold_with_spark_delta(spark, broker, commitlog, tmp_path):
    register_data_sources(spark)
    good, bad = _expected_orders(commitlog)
    assert len(good) == ORDERS + 1 and len(bad) == len(BAD_BODIES)

    gold = _config(broker, tmp_path, "gold")
    run_app(spark, gold, max_runtime_s=APP_TIMEOUT_S)
    table = gold.table_path("gold_orders_per_minute")
    # every window with data, exact; final where the last watermark (latest event - 1 minute) passed its end
    latest_ms = max(int(o["eventTime"].timestamp() * 1000) for o in good.values())
    expected: dict[tuple, list] = {}
    for o in good.values():
        ms = int(o["eventTime"].timestamp() * 1000)
        start_ms = ms - ms % 60_000
        row = expected.setdefault((start_ms, o["status"], o["region"], o["currency"]),
                                  [0, 0, 0, start_ms + 60_000 <= latest_ms - 60_000])
        row[0] += 1
        row[1] += o["amountCents"]
        row[2] += o["itemQuantity"]
    assert {row[3] for row in expected.values()} == {True, False}, "closed windows and the tick's open one"
    rows = _spark_rows(spark, table, "unix_millis(windowStart) AS startMs,status,region,currency,orders,amountCents,"
                                     "itemQuantity,final")
    got = {(r["startMs"], r["status"], r["region"], r["currency"]): [r["orders"], r["amountCents"], r["itemQuantity"],
                                                                     r["final"]] for r in rows}
    assert len(got) == len(rows) and got == expected
    history = DeltaTable(str(table)).history()
    assert any(h.get("operation") == "MERGE" for h in history), "upserted by Spark's MERGE INTO"
    committed = DeltaTable(str(table)).transaction_version(gold.app_id())
    assert committed is not None and committed >= 1
    # a rerun from the same checkpoint changes nothing
    version = DeltaTable(str(table)).version()
    run_app(spark, gold, max_runtime_s=APP_TIMEOUT_S)
    assert DeltaTable(str(table)).version() == version


def _cli(args: list[str], cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING", *args], cwd=cwd,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


def test_cli_sink_delta_uses_the_staged_jars_by_default(broker, commitlog, tmp_path):
    """`hareplica run bronze --sink delta` without --jars: the jars `make jvm-peers` staged are used."""
    work = tmp_path / "work"
    done = _cli(["run", "bronze", "--brokers", f"broker-a={broker.ha_addr}", "--workdir", str(work), "--sink",
                 "delta", "--trigger", "available-now", "--maintenance-every", "0"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"bronze: {len(commitlog)} rows" in done.stderr
    log = sorted((work / "tables" / "bronze" / "_delta_log").glob("*.json"))
    assert "Delta-Lake/" in log[0].read_text(), "written by Spark's Delta Lake, not delta-rs"
    assert DeltaTable(str(work / "tables" / "bronze")).to_pyarrow_dataset().count_rows() == len(commitlog)


def test_cli_sink_delta_refuses_a_classpath_without_delta(broker, tmp_path):
    """Jars given, but none of them Delta's: one error line saying how to add them, exit 2, nothing written."""
    other = sorted((PROJECT_ROOT / ".jvm" / "rocketmq-4.9" / "lib").glob("commons-cli-*.jar"))
    assert other, "make jvm-peers stages the RocketMQ jars too"
    work = tmp_path / "work"
    done = _cli(["run", "bronze", "--brokers", f"broker-a={broker.ha_addr}", "--workdir", str(work), "--sink",
                 "delta", "--jars", str(other[0]), "--trigger", "available-now"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "DeltaSparkSessionExtension" in done.stderr and "make jvm-peers" in done.stderr
    assert not (work / "tables" / "bronze").exists()
