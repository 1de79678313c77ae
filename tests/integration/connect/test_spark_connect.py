"""The bronze app over Spark Connect: a Connect server from pyspark's own jars, the CLI as its client.

The server is a separate process (``spark-submit --class ...SparkConnectServer``, local[2], this venv's
Python as ``PYSPARK_PYTHON`` so its Python workers import the project). Each client is ``hareplica run
bronze --remote sc://...`` in its own process: PySpark switches a process that makes a Connect session to
Connect mode, which the suite's shared classic session must not see. The client registers the data
sources, runs the bronze query with Trigger.AvailableNow (hareplica → Spark → format("deltalake"), and the
direct landing's foreachBatch), and the Delta table is read back with ``deltalake`` and compared with the
broker's CommitLog files; a second run from the same checkpoint lands only the messages sent since.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest
from deltalake import DeltaTable

from broker_stub.launcher import free_port
from connector.client.producer import Producer
from streaming_apps.apps.orders import OrderDecodeError, decode_order_body
from streaming_apps.cli import main as hareplica
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.progress_listener import read_events
from streaming_apps.workload import ORDER_TOPICS, order_events

pytestmark = pytest.mark.spark

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SERVER_START_TIMEOUT_S = 120
CLIENT_TIMEOUT_S = 180
FIRST, SECOND = 300, 200
ORDERS = 200


@dataclass
class ConnectServer:
    """A running Spark Connect server: its process, ``sc://`` URL and log file."""

    process: subprocess.Popen
    url: str
    port: int
    log: Path

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _wait_listening(server: ConnectServer, timeout_s: float) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"the Connect server exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"the Connect server did not listen within {timeout_s} s:\n{server.log_tail()}")


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory, request):
    """A Spark Connect server started from pyspark's bundled jars; killed (its process group) at teardown."""
    folder = tmp_path_factory.mktemp("spark-connect")
    port = free_port()
    spark_home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable}
    command = [str(spark_home / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS, "--master", "local[2]",
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", "spark.ui.enabled=false", "--conf", f"spark.local.dir={folder / 'local'}",
               "--conf", "spark.python.worker.reuse=true", "--driver-memory", "1g"]
    log = folder / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = ConnectServer(process=process, url=f"sc://127.0.0.1:{port}", port=port, log=log)
    failed_before = request.session.testsfailed
    try:
        _wait_listening(server, SERVER_START_TIMEOUT_S)
        yield server
    finally:
        for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            if process.poll() is not None:
                break
            os.killpg(process.pid, sig)
            try:
                process.wait(wait_s)
            except subprocess.TimeoutExpired:
                pass
        if request.session.testsfailed > failed_before:
            print(f"--- Spark Connect server log ({log}) ---\n{server.log_tail(200)}")


def _produce(broker, count: int, start: int) -> None:
    with Producer(broker.remoting_addr, "connect-test") as producer:
        futures = [producer.send_async(f"Connect{i % 3}", f"message {i} ".encode() * (1 + i % 7), tags=f"T{i % 2}")
                   for i in range(start, start + count)]
        assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}


def _run_app(server: ConnectServer, broker, workdir: Path, *extra: str, app: str = "bronze"
             ) -> subprocess.CompletedProcess:
    """``hareplica run APP --remote`` in its own process (Connect mode must not reach this one)."""
    command = [sys.executable, "-m", "streaming_apps.cli", "run", app, "--remote", server.url,
               "--brokers", f"broker-a={broker.ha_addr}", "--workdir", str(workdir), "--trigger", "available-now",
               "--maintenance-every", "0", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def _run_ok(server: ConnectServer, broker, workdir: Path, *extra: str, app: str = "bronze") -> str:
    done = _run_app(server, broker, workdir, *extra, app=app)
    assert done.returncode == 0, (f"client exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}\n"
                                  f"server log:\n{server.log_tail()}")
    return done.stderr


def _landed(server: ConnectServer, broker, workdir: Path, *extra: str) -> tuple[str, list[dict]]:
    output = _run_ok(server, broker, workdir, *extra)
    rows = DeltaTable(str(workdir / "tables" / "bronze")).to_pyarrow_table(
        columns=["commitLogOffset", "topic", "body", "msgId", "storeSize", "storeDate", "storeTimestamp"]).to_pylist()
    return output, rows


def _assert_rows_match_commitlog(rows: list[dict], broker) -> None:
    commitlog = {rec.commit_log_offset: rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
    offsets = Counter(r["commitLogOffset"] for r in rows)
    assert set(offsets) == set(commitlog) and max(offsets.values()) == 1
    for r in rows:
        rec = commitlog[r["commitLogOffset"]]
        assert (r["topic"], r["body"], r["msgId"], r["storeSize"]) == (rec.topic, rec.decompressed_body(),
                                                                       rec.msg_id, rec.store_size)
        assert r["storeDate"] == r["storeTimestamp"].date()


@pytest.mark.parametrize("landing", ["spark", "direct"])
def test_bronze_over_spark_connect_lands_every_message_once_and_resumes(connect_server, broker_factory, tmp_path,
                                                                       landing):
    broker = broker_factory("broker")
    _produce(broker, FIRST, 0)
    workdir = tmp_path / "work"

    output, rows = _landed(connect_server, broker, workdir, "--landing", landing)
    assert f"bronze: {FIRST} rows" in output
    assert len(rows) == FIRST
    _assert_rows_match_commitlog(rows, broker)

    # the progress listener runs in the client (Connect's client-side listener bus): batches and lag recorded
    status = workdir / "status" / "bronze.jsonl"
    progress = [e for e in read_events(status) if e["event"] == "progress"]
    assert sum(e["numInputRows"] for e in progress) == FIRST and progress[-1]["lagBytes"] == 0
    first_batches = len(progress)

    _produce(broker, SECOND, FIRST)
    output, rows = _landed(connect_server, broker, workdir, "--landing", landing)
    assert f"bronze: {SECOND} rows" in output, "the second run resumes from the checkpoint"
    assert len(rows) == FIRST + SECOND
    _assert_rows_match_commitlog(rows, broker)
    progress = [e for e in read_events(status) if e["event"] == "progress"]
    assert [e["batchId"] for e in progress][first_batches:][0] == first_batches, "batch ids go on from the checkpoint"


def test_silver_and_gold_over_spark_connect_foreach_batch_writes_and_merge(connect_server, broker_factory,
                                                                          tmp_path):
    """silver's commit of its two tables (the direct landing's foreachBatch) and gold's MERGE run in the server's
    foreachBatch worker."""
    broker = broker_factory("broker")
    with Producer(broker.remoting_addr, "connect-orders") as producer:
        futures = [producer.send_async(m.topic, m.body, tags=m.tags) for m in order_events(ORDERS, seed=13)]
        futures += [producer.send_async(ORDER_TOPICS[i], body, tags="BAD")
                    for i, body in enumerate([b"not msgpack \xc1", b"\x93\x01\x02\x03"])]
        assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
    good, bad = {}, set()
    for _, rec in iter_commitlog_dir(broker.commitlog_dir):
        try:
            good[rec.commit_log_offset] = decode_order_body(rec.decompressed_body())
        except OrderDecodeError:
            bad.add(rec.commit_log_offset)
    assert len(good) == ORDERS and len(bad) == 2
    workdir = tmp_path / "work"

    assert f"silver: {ORDERS + 2} rows" in _run_ok(connect_server, broker, workdir, app="silver")
    tables = workdir / "tables"
    orders = DeltaTable(str(tables / "silver_orders")).to_pyarrow_table(
        columns=["commitLogOffset", "orderId", "amountCents"]).to_pylist()
    assert {r["commitLogOffset"]: (r["orderId"], r["amountCents"]) for r in orders} == {
        off: (o["orderId"], o["amountCents"]) for off, o in good.items()} and len(orders) == ORDERS
    quarantined = DeltaTable(str(tables / "silver_quarantine")).to_pyarrow_table(columns=["commitLogOffset"])
    assert sorted(quarantined.column("commitLogOffset").to_pylist()) == sorted(bad)

    _run_ok(connect_server, broker, workdir, "--watermark", "0 seconds", app="gold")
    gold = DeltaTable(str(tables / "gold_orders_per_minute")).to_pyarrow_table(
        columns=["orders", "amountCents"]).to_pylist()
    assert sum(r["orders"] for r in gold) == ORDERS
    assert sum(r["amountCents"] for r in gold) == sum(o["amountCents"] for o in good.values())


def test_sink_delta_over_connect_without_the_servers_delta_jars_fails_with_what_to_do(connect_server,
                                                                                      broker_factory, tmp_path):
    broker = broker_factory("broker")
    done = _run_app(connect_server, broker, tmp_path / "work", "--sink", "delta")
    assert done.returncode == 2, done.stderr
    assert "Connect server" in done.stderr and "DeltaSparkSessionExtension" in done.stderr
    assert not (tmp_path / "work" / "checkpoints" / "bronze").exists(), "no query started"


def test_a_static_conf_over_connect_is_refused_in_one_line(connect_server, broker_factory, tmp_path):
    broker = broker_factory("broker")
    done = _run_app(connect_server, broker, tmp_path / "work", "--conf", "spark.sql.warehouse.dir=/elsewhere")
    assert done.returncode == 2, done.stderr
    assert "the server refused the session" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "work" / "checkpoints" / "bronze").exists(), "no query started"


def test_remote_refuses_what_a_connect_client_cannot_do_and_an_unreachable_server(tmp_path, capsys):
    # checked before the brokers and before any session: nothing listens at broker-a's address either
    base = ["run", "bronze", "--brokers", f"broker-a=127.0.0.1:{free_port()}", "--workdir", str(tmp_path / "w")]
    assert hareplica([*base, "--remote", "sc://127.0.0.1:15002", "--master", "local[4]", "--jars", "a.jar"]) == 2
    assert "--master, --jars set up a Spark that `hareplica run` starts" in capsys.readouterr().err
    closed = free_port()
    assert hareplica([*base, "--remote", f"sc://127.0.0.1:{closed}"]) == 2
    assert f"no Spark Connect server answers at 127.0.0.1:{closed}" in capsys.readouterr().err
    assert hareplica([*base, "--remote", "http://127.0.0.1:1"]) == 2
    assert "a Spark Connect URL is sc://HOST:PORT" in capsys.readouterr().err
    gold = ["run", "gold", *base[2:], "--remote", "sc://127.0.0.1:15002", "--sink", "delta"]
    assert hareplica(gold) == 2
    assert "'string collate UTF8_BINARY'" in capsys.readouterr().err
    silver = ["run", "silver", *base[2:], "--remote", "sc://127.0.0.1:15002", "--sink", "delta"]
    assert hareplica(silver) == 2
    assert "run silver lands its tables with --landing direct and --sink deltalake" in capsys.readouterr().err


def test_a_connect_session_is_refused_in_a_process_with_the_classic_one(spark):
    from streaming_apps.spark_session import ConnectSessionError, build_connect_session

    with pytest.raises(ConnectSessionError, match="SESSION_ALREADY_EXIST"):
        build_connect_session("sc://127.0.0.1:15002")
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ, "the classic session's process stays in classic mode"
    assert spark.range(3).count() == 3
