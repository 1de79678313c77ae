"""Crash injection at the Delta sink's commit points: the app process is SIGKILLed and restarted.

Each test runs ``hareplica run APP`` in a subprocess (its own session: driver, Spark JVM and Python
workers) with ``HAREPLICA_DELTA_FAULT=POINT:BATCH[:TABLE]`` (connector.delta.faults):
when the sink reaches the point it writes a marker file and waits; the test then SIGKILLs every
process of the session, checks the state the crash left, and restarts the app from its checkpoint
without the fault. At the end every message of the broker's CommitLog is in the tables exactly once
and no data file is left that the table does not reference.

``--sink delta`` (Spark's own format("delta")) is crashed at the same two commit points by a Delta
LogStore of the test's own (tests/faults/java/FaultInjectingLogStore.java, compiled here and passed with
``--jars``) that stops before or after writing the table's commit file of a given version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgpack
import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from connector.delta.faults import FAULT_INJECTION_ENV, FAULT_MARKER_ENV, FAULT_PAUSE_ENV
from connector.delta.file_names import batch_file_prefix
from streaming_apps.apps import AppConfig
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.query import query_tables
from streaming_apps.workload import ORDER_TOPICS, order_events
from tests.support.processes import kill_at_marker, kill_session, log_tail

MAPPED_FILE_SIZE = 96 * 1024
ORDERS = 200  # ~250 KB of CommitLog: three mapped files, so three micro-batches (batch 2 runs after the replay)
BAD_BODIES = [b"\x01 definitely not msgpack", msgpack.packb(["a", "list"]), msgpack.packb({"orderId": 5})]
MARKER_TIMEOUT_S = 240
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A stub master holding bad bodies first (so batch 0 has quarantine rows), then order events."""
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("crash-broker"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "crash-test") as producer:
            futures = [producer.send_async(ORDER_TOPICS[i], body) for i, body in enumerate(BAD_BODIES)]
            futures += [producer.send_async(m.topic, m.body, tags=m.tags, keys=m.keys, properties=m.properties)
                        for m in order_events(ORDERS, seed=5)]
            assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
        yield b


@pytest.fixture(scope="module")
def commitlog(broker) -> dict[int, object]:
    """commitLogOffset → record of every message; they span at least three mapped files (three micro-batches)."""
    records = {rec.commit_log_offset: rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
    assert max(records) >= 2 * MAPPED_FILE_SIZE, "the tests need a batch 2 after the replayed batch 1"
    return records


def _command(app: str, broker, workdir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING", "run", app,
            "--brokers", f"broker-a={broker.ha_addr}", "--workdir", str(workdir), "--trigger", "available-now",
            "--max-bytes-per-trigger", str(MAPPED_FILE_SIZE), "--maintenance-every", "0", *extra]


def run_until_fault(app: str, broker, workdir: Path, fault: str, *extra: str, fault_env: str = FAULT_INJECTION_ENV,
                    marker_env: str = FAULT_MARKER_ENV, env: dict[str, str] | None = None) -> dict:
    """Start the app with the fault armed, wait for the marker, SIGKILL the whole session; the marker JSON."""
    marker = workdir / "fault-marker.json"
    log_path = workdir / f"{app}-crash.log"
    env = {**os.environ, **(env or {}), fault_env: fault, marker_env: str(marker), FAULT_PAUSE_ENV: "600"}
    workdir.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(_command(app, broker, workdir, *extra), env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return json.loads(kill_at_marker(proc, marker, log_path, what=fault, timeout_s=MARKER_TIMEOUT_S))


def run_to_completion(app: str, broker, workdir: Path, *extra: str) -> None:
    """Restart the app from its checkpoint without a fault; it must catch up and exit 0."""
    log_path = workdir / f"{app}-restart.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAREPLICA_DELTA_FAULT")}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(_command(app, broker, workdir, *extra), env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        kill_session(proc)
    assert code == 0, f"restart exited {code}:\n{log_tail(log_path)}"


def parquet_on_disk(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet") if "_delta_log" not in p.parts}


def table_files(table: Path) -> set[str]:
    return {os.path.relpath(u, table) for u in DeltaTable(str(table)).file_uris()}


def spark_committed(checkpoint: Path) -> set[int]:
    return {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}


def assert_bronze_exactly_once(table: Path, commitlog: dict) -> None:
    rows = query_tables("SELECT commitLogOffset, msgId FROM bronze", {"bronze": str(table)}).to_pylist()
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert set(counts) == set(commitlog), "no message missing"
    assert max(counts.values()) == 1, "no message twice"
    assert all(commitlog[r["commitLogOffset"]].msg_id == r["msgId"] for r in rows)
    assert parquet_on_disk(table) == table_files(table), "no data file left that the table does not reference"


@pytest.mark.parametrize("landing", ["spark", "direct"])
def test_bronze_killed_at_each_commit_point_and_restarted_lands_every_message_once(broker, commitlog, tmp_path,
                                                                                   landing):
    cfg = AppConfig(app="bronze", brokers="unused", workdir=tmp_path)
    table = cfg.table_path("bronze")
    batch1_prefix = batch_file_prefix(cfg.app_id(), 1)
    mode = ("--landing", landing)

    # run 1: killed after batch 1's Parquet files are written, before its Delta commit
    marker = run_until_fault("bronze", broker, tmp_path, "before-delta-commit:1", *mode)
    assert marker["point"] == "before-delta-commit" and marker["batchId"] == 1
    assert DeltaTable(str(table)).transaction_version(cfg.app_id()) == 0
    dead_attempt = {f for f in parquet_on_disk(table) if Path(f).name.startswith(batch1_prefix)}
    assert dead_attempt, "the killed batch had written Parquet files"
    assert not dead_attempt & table_files(table)
    assert (cfg.checkpoint() / "offsets" / "1").exists() and spark_committed(cfg.checkpoint()) == {0}

    # run 2: batch 1 again; killed after its Delta commit, before Spark's commit log (and before the
    # dead attempt's files were removed)
    (tmp_path / "fault-marker.json").unlink()
    run_until_fault("bronze", broker, tmp_path, "after-delta-commit:1", *mode)
    dt = DeltaTable(str(table))
    assert dt.transaction_version(cfg.app_id()) == 1
    assert spark_committed(cfg.checkpoint()) == {0}, "Spark does not know batch 1 is done"
    assert dead_attempt <= parquet_on_disk(table)
    rows_after_batch_1 = query_tables("SELECT count(*) AS n FROM bronze", {"bronze": str(table)}).to_pylist()[0]["n"]
    assert 0 < rows_after_batch_1 < len(commitlog)

    # run 3: replays batch 1 (skipped: already in Delta), then the rest
    run_to_completion("bronze", broker, tmp_path, *mode)
    committed = spark_committed(cfg.checkpoint())
    assert 1 in committed and max(committed) >= 2
    batch_commits = Counter(h.get("hareplica.batchId") for h in DeltaTable(str(table)).history()
                            if "hareplica.batchId" in h)
    assert batch_commits[1] == 1, "the replayed batch 1 was skipped, not committed again"
    assert set(batch_commits.values()) == {1} and len(batch_commits) == max(committed) + 1
    assert DeltaTable(str(table)).transaction_version(cfg.app_id()) == max(committed)
    assert not dead_attempt & parquet_on_disk(table), "the dead attempt's files were removed"
    assert_bronze_exactly_once(table, commitlog)


def test_silver_killed_between_its_two_table_commits(broker, commitlog, tmp_path):
    from tests.support.silver import silver_verdicts

    cfg = AppConfig(app="silver", brokers="unused", workdir=tmp_path)
    orders, quarantine = cfg.table_path("silver_orders"), cfg.table_path("silver_quarantine")
    run_until_fault("silver", broker, tmp_path, "after-delta-commit:0:silver_orders")
    assert DeltaTable(str(orders)).transaction_version(cfg.app_id()) == 0
    assert not (quarantine / "_delta_log").exists(), "the crash came before the quarantine commit"

    run_to_completion("silver", broker, tmp_path)
    good, bad = silver_verdicts((off, rec.decompressed_body()) for off, rec in commitlog.items())
    assert good and bad, "the broker holds both"
    tables = {"silver_orders": str(orders), "silver_quarantine": str(quarantine)}
    got = Counter(r["commitLogOffset"] for r in query_tables("SELECT commitLogOffset FROM silver_orders",
                                                             tables).to_pylist())
    assert set(got) == set(good) and max(got.values()) == 1
    rejected = query_tables("SELECT commitLogOffset, error FROM silver_quarantine", tables).to_pylist()
    assert sorted(r["commitLogOffset"] for r in rejected) == sorted(bad)
    assert {r["commitLogOffset"]: r["error"] for r in rejected} == bad
    for t in (orders, quarantine):
        assert parquet_on_disk(t) == table_files(t)


def _expected_gold_counts(commitlog) -> dict[tuple, list[int]]:
    """(windowStart ms, status, region, currency) → [orders, amountCents] over the CommitLog's valid orders."""
    from streaming_apps.apps.orders import OrderDecodeError, decode_order_body

    expected: dict[tuple, list[int]] = {}
    for rec in commitlog.values():
        try:
            order = decode_order_body(rec.decompressed_body())
        except OrderDecodeError:
            continue
        ms = int(order["eventTime"].timestamp() * 1000)
        row = expected.setdefault((ms - ms % 60_000, order["status"], order["region"], order["currency"]), [0, 0])
        row[0] += 1
        row[1] += order["amountCents"]
    return expected


def _gold_counts(table: Path) -> dict[tuple, list[int]]:
    rows = query_tables("SELECT windowStart, status, region, currency, orders, amountCents FROM gold",
                        {"gold": str(table)}).to_pylist()
    got = {(int(r["windowStart"].timestamp() * 1000), r["status"], r["region"], r["currency"]):
           [r["orders"], r["amountCents"]] for r in rows}
    assert len(got) == len(rows), "one row per window and group"
    return got


def test_gold_killed_at_each_commit_point_and_restarted_counts_every_order_once(broker, commitlog, tmp_path):
    cfg = AppConfig(app="gold", brokers="unused", workdir=tmp_path)
    table = cfg.table_path("gold_orders_per_minute")
    # run 1: killed before batch 1's MERGE; run 2: killed after it, before Spark's commit log
    run_until_fault("gold", broker, tmp_path, "before-delta-commit:1")
    assert DeltaTable(str(table)).transaction_version(cfg.app_id()) == 0
    (tmp_path / "fault-marker.json").unlink()
    run_until_fault("gold", broker, tmp_path, "after-delta-commit:1")
    assert DeltaTable(str(table)).transaction_version(cfg.app_id()) == 1
    assert spark_committed(cfg.checkpoint()) == {0}, "Spark does not know batch 1 is done"

    # run 3: replays batch 1 (skipped: the table holds it), then the rest
    run_to_completion("gold", broker, tmp_path)
    committed = spark_committed(cfg.checkpoint())
    merges = Counter(h.get("hareplica.batchId") for h in DeltaTable(str(table)).history() if "hareplica.batchId" in h)
    assert merges[1] == 1 and set(merges.values()) == {1}, "every batch committed once, the replayed one too"
    assert DeltaTable(str(table)).transaction_version(cfg.app_id()) == max(committed)
    assert _gold_counts(table) == _expected_gold_counts(commitlog)


# --- Spark's own format("delta") (--sink delta): the same crash points, stopped inside Delta's LogStore ----
#: tests/faults/java/FaultInjectingLogStore.java reads these (POINT:VERSION[:TABLE], the marker file).
SPARK_FAULT_ENV = "HAREPLICA_SPARK_DELTA_FAULT"
SPARK_FAULT_MARKER_ENV = "HAREPLICA_SPARK_DELTA_FAULT_MARKER"
FAULT_LOGSTORE_SOURCE = Path(__file__).parent / "java" / "FaultInjectingLogStore.java"
JAVA_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def fault_logstore_jar(tmp_path_factory) -> Path:
    """FaultInjectingLogStore compiled against the staged delta-storage and Spark's Hadoop API, as a jar."""
    import pyspark

    from streaming_apps.spark_session import PROJECT_ROOT, STAGED_DELTA_JARS_DIR, staged_delta_jars

    delta = staged_delta_jars([PROJECT_ROOT])
    assert delta, f"Spark's Delta jars are not staged in {PROJECT_ROOT / STAGED_DELTA_JARS_DIR}: run make jvm-peers"
    hadoop = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    out = tmp_path_factory.mktemp("fault-logstore")
    classpath = ":".join([*delta, *map(str, hadoop)])
    subprocess.run(["javac", "--release", "17", "-d", str(out / "classes"), "-cp", classpath,
                    str(FAULT_LOGSTORE_SOURCE)], check=True, timeout=JAVA_TIMEOUT_S)
    jar = out / "fault-logstore.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(out / "classes"), "."], check=True, timeout=JAVA_TIMEOUT_S)
    return jar


def test_spark_delta_sink_killed_at_each_commit_point_and_restarted_lands_every_message_once(
        broker, commitlog, tmp_path, fault_logstore_jar):
    from streaming_apps.spark_session import PROJECT_ROOT, staged_delta_jars

    cfg = AppConfig(app="bronze", brokers="unused", workdir=tmp_path, sink="delta")
    table, checkpoint = cfg.table_path("bronze"), cfg.checkpoint()
    mode = ("--sink", "delta", "--jars", *staged_delta_jars([PROJECT_ROOT]), str(fault_logstore_jar))
    armed = {"PYSPARK_SUBMIT_ARGS": "--conf spark.delta.logStore.file.impl=FaultInjectingLogStore pyspark-shell"}
    spark_fault = {"fault_env": SPARK_FAULT_ENV, "marker_env": SPARK_FAULT_MARKER_ENV, "env": armed}

    # run 1: killed after batch 1's data files are written, before Delta's commit file 1 exists
    marker = run_until_fault("bronze", broker, tmp_path, "before-delta-commit:1:bronze", *mode, **spark_fault)
    assert marker["point"] == "before-delta-commit" and marker["commitFile"].endswith("00000000000000000001.json")
    assert DeltaTable(str(table)).version() == 0
    assert (checkpoint / "offsets" / "1").exists() and spark_committed(checkpoint) == {0}
    dead_attempt = parquet_on_disk(table) - table_files(table)
    assert dead_attempt, "the killed batch had written data files the table does not reference"

    # run 2: batch 1 again; killed after Delta's commit of it, before Spark's commit log
    (tmp_path / "fault-marker.json").unlink()
    run_until_fault("bronze", broker, tmp_path, "after-delta-commit:1:bronze", *mode, **spark_fault)
    query_id = json.loads((checkpoint / "metadata").read_text())["id"]
    dt = DeltaTable(str(table))
    assert dt.version() == 1 and dt.transaction_version(query_id) == 1, "Delta's sink records txn(queryId, batchId)"
    assert spark_committed(checkpoint) == {0}, "Spark does not know batch 1 is done"
    rows_after_batch_1 = query_tables("SELECT count(*) AS n FROM bronze", {"bronze": str(table)}).to_pylist()[0]["n"]
    assert 0 < rows_after_batch_1 < len(commitlog)

    # run 3 (no fault LogStore): Delta's sink skips the replayed batch 1, then the rest lands
    run_to_completion("bronze", broker, tmp_path, "--sink", "delta")
    committed = spark_committed(checkpoint)
    assert 1 in committed and max(committed) >= 2
    epochs = Counter(int(h["operationParameters"]["epochId"]) for h in DeltaTable(str(table)).history()
                     if h.get("operation") == "STREAMING UPDATE")
    assert epochs[1] == 1, "the replayed batch 1 was not committed again"
    assert set(epochs.values()) == {1} and set(epochs) == set(range(max(committed) + 1))
    assert DeltaTable(str(table)).transaction_version(query_id) == max(committed)
    rows = query_tables("SELECT commitLogOffset, msgId FROM bronze", {"bronze": str(table)}).to_pylist()
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert set(counts) == set(commitlog) and max(counts.values()) == 1
    assert all(commitlog[r["commitLogOffset"]].msg_id == r["msgId"] for r in rows)
    # Spark's Delta leaves the dead attempts' files for VACUUM (they are older than no retention yet)
    assert not dead_attempt & table_files(table)


def _txn_versions(table: Path, app_id: str) -> Counter:
    """How many commits of the table's log carry ``txn(app_id, version)``, per version."""
    counts: Counter = Counter()
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            txn = json.loads(line).get("txn") if line.strip() else None
            if txn and txn.get("appId") == app_id:
                counts[int(txn["version"])] += 1
    return counts


def test_gold_with_spark_delta_killed_at_each_commit_point_and_restarted_counts_every_order_once(
        broker, commitlog, tmp_path, fault_logstore_jar):
    from streaming_apps.spark_session import PROJECT_ROOT, staged_delta_jars

    cfg = AppConfig(app="gold", brokers="unused", workdir=tmp_path, sink="delta")
    table = cfg.table_path("gold_orders_per_minute")
    mode = ("--sink", "delta", "--jars", *staged_delta_jars([PROJECT_ROOT]), str(fault_logstore_jar))
    armed = {"PYSPARK_SUBMIT_ARGS": "--conf spark.delta.logStore.file.impl=FaultInjectingLogStore pyspark-shell"}
    spark_fault = {"fault_env": SPARK_FAULT_ENV, "marker_env": SPARK_FAULT_MARKER_ENV, "env": armed}

    # version 0 is batch 0 (the table's creation), version 1 the MERGE of batch 1: killed before, then after it
    run_until_fault("gold", broker, tmp_path, "before-delta-commit:1:gold_orders_per_minute", *mode, **spark_fault)
    assert DeltaTable(str(table)).version() == 0
    (tmp_path / "fault-marker.json").unlink()
    run_until_fault("gold", broker, tmp_path, "after-delta-commit:1:gold_orders_per_minute", *mode, **spark_fault)
    assert DeltaTable(str(table)).transaction_version(cfg.app_id()) == 1, "the MERGE records txn(appId, batchId)"
    assert spark_committed(cfg.checkpoint()) == {0}

    # restarted without the fault: Delta skips the replayed MERGE of batch 1 (idempotent DML), then the rest
    run_to_completion("gold", broker, tmp_path, "--sink", "delta")
    committed = spark_committed(cfg.checkpoint())
    txns = _txn_versions(table, cfg.app_id())
    assert txns[1] == 1 and set(txns.values()) == {1}, "no batch committed twice"
    assert DeltaTable(str(table)).transaction_version(cfg.app_id()) == max(committed)
    assert _gold_counts(table) == _expected_gold_counts(commitlog)
