"""Issue 51: the apps, their checkpoints and progress files on a real S3 server (S3Proxy, one per test session), no
shared folder: bronze, silver and gold land every message once; the tables read back by deltalake and by Spark's
own ``format("delta")`` over ``s3a://``; ``hareplica query``, ``status`` and ``restore`` of the S3 tables; a
restart resumes from the S3 checkpoint without a duplicate. docs/object_storage.md.
"""

from __future__ import annotations

import uuid

import pytest

from broker_stub.launcher import BrokerProcess
from connector.delta.metadata_tables import METADATA_TABLES
from connector.storage import store
from connector.storage.config import StorageConfig
from streaming_apps.apps import AppConfig, run_app
from streaming_apps.apps.orders import OrderDecodeError, decode_order_body
from streaming_apps.cli import main
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.query import discover_tables, query_tables
from streaming_apps.spark_session import register_data_sources
from streaming_apps.workload import ORDER_TOPICS
from tests.integration.apps.test_apps import MAPPED_FILE_SIZE, _workload
from tests.support.s3_server import TEST_BUCKET
from tests.support.silver import silver_verdicts

pytestmark = pytest.mark.spark

APP_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("s3-broker"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "s3-test") as producer:
            futures = [producer.send_async(topic, body, tags=tags) for topic, body, tags in _workload()]
            assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
        yield b


@pytest.fixture(scope="module")
def commitlog(broker) -> dict[int, object]:
    return {rec.commit_log_offset: rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)}


@pytest.fixture(scope="module")
def s3_spark(spark, s3_server):
    """The shared session, with this process's storage settings those of the test server."""
    register_data_sources(spark)
    store.use(StorageConfig.from_options(s3_server.storage_options(), environ={}))
    yield spark


@pytest.fixture(scope="module")
def workdir() -> str:
    return f"s3://{TEST_BUCKET}/apps-on-s3/{uuid.uuid4().hex[:12]}"


def _config(broker, workdir: str, app: str, s3_server, **kw) -> AppConfig:
    kw.setdefault("max_bytes_per_trigger", MAPPED_FILE_SIZE)
    return AppConfig(app=app, brokers=f"broker-a={broker.ha_addr}", workdir=workdir, trigger="available-now",
                     storage_options=s3_server.storage_options(), **kw)


def _objects(s3_server, prefix: str) -> list[str]:
    import pyarrow.fs as pafs

    fs = s3_server.filesystem()
    return sorted(i.path for i in fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
                  if i.type == pafs.FileType.File)


def test_bronze_on_s3_lands_every_message_once_and_spark_delta_reads_it(s3_spark, broker, commitlog, workdir,
                                                                       s3_server, tmp_path, capsys):
    cfg = _config(broker, workdir, "bronze", s3_server, maintenance_every=2)
    assert cfg.landing == "direct"
    result = run_app(s3_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert result.batches >= 3 and result.rows == len(commitlog)
    # the session's later queries with a local checkpoint keep theirs: the object store's class was for this app's
    from streaming_apps.checkpoints import ABORTABLE_CHECKPOINT_FILE_MANAGER, CHECKPOINT_FILE_MANAGER_CONF

    assert s3_spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF, None) != ABORTABLE_CHECKPOINT_FILE_MANAGER
    table = str(cfg.table_path("bronze"))
    assert table == f"{workdir}/tables/bronze"
    rows = query_tables("SELECT commitLogOffset, topic FROM bronze", {"bronze": table}).to_pylist()
    assert sorted(r["commitLogOffset"] for r in rows) == sorted(commitlog)
    # everything is in the bucket: the table, the checkpoint, the progress file; nothing on a local disk
    key = workdir.removeprefix("s3://")
    objects = _objects(s3_server, key)
    assert any(o.startswith(f"{key}/checkpoints/bronze/offsets/") for o in objects)
    assert any(o.startswith(f"{key}/checkpoints/bronze/commits/") for o in objects)
    assert f"{key}/status/bronze.jsonl" in objects
    assert any(o.startswith(f"{key}/tables/bronze/_delta_log/") for o in objects)
    # Spark's own Delta over s3a://, with the same settings
    count = s3_spark.read.format("delta").load(table.replace("s3://", "s3a://", 1)).count()
    assert count == len(commitlog)

    # a restart from the S3 checkpoint after more messages: only the new ones, once
    from connector.client.producer import Producer

    with Producer(broker.remoting_addr, "s3-test-more") as producer:
        for i in range(20):
            assert producer.send("Inventory", f"more {i}".encode()).send_status == "SEND_OK"
    again = run_app(s3_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert again.rows == 20
    offsets = [r["commitLogOffset"] for r in
               query_tables("SELECT commitLogOffset FROM bronze", {"bronze": table}).to_pylist()]
    assert len(offsets) == len(set(offsets)) == len(commitlog) + 20

    # the CLI reads the same tables, status and restore from S3 (one process's settings: --storage-option)
    options = [a for k, v in s3_server.storage_options().items() for a in ("--storage-option", f"{k}={v}")]
    assert main(["status", "--workdir", workdir, "--json", *options]) == 0
    assert main(["query", "SELECT count(*) AS n FROM bronze", "--workdir", workdir, "--format", "jsonl",
                 *options]) == 0
    out = capsys.readouterr().out
    assert f'{{"n":{len(commitlog) + 20}}}' in out.replace(" ", "")
    assert s3_server.secret_key not in out + repr(cfg)
    status_text = s3_server.filesystem().open_input_stream(f"{key}/status/bronze.jsonl").read().decode()
    assert '"event":"progress"' in status_text.replace(" ", "") and s3_server.secret_key not in status_text
    assert set(discover_tables(f"{workdir}/tables")) == {"bronze", *(t.name for t in METADATA_TABLES)}
    store_dir = tmp_path / "restored"
    assert main(["restore", table, "--broker-name", "broker-a", "--store-dir", str(store_dir), *options]) == 0
    for name in sorted(p.name for p in broker.commitlog_dir.iterdir())[:-1]:  # whole files; the last grows
        assert (store_dir / "commitlog" / name).read_bytes() == (broker.commitlog_dir / name).read_bytes(), name


def test_silver_and_gold_on_s3_land_the_order_events(s3_spark, broker, commitlog, workdir, s3_server):
    good = {}
    for off, rec in commitlog.items():
        if rec.topic in ORDER_TOPICS:
            try:
                good[off] = decode_order_body(rec.decompressed_body())
            except OrderDecodeError:
                pass
    declared, dead = silver_verdicts((off, rec.decompressed_body()) for off, rec in commitlog.items()
                                     if rec.topic in ORDER_TOPICS)
    silver = _config(broker, workdir, "silver", s3_server)
    run_app(s3_spark, silver, max_runtime_s=APP_TIMEOUT_S)
    orders = query_tables("SELECT commitLogOffset FROM o", {"o": str(silver.table_path("silver_orders"))}).to_pylist()
    assert sorted(r["commitLogOffset"] for r in orders) == sorted(declared)
    quarantined = query_tables("SELECT commitLogOffset FROM q",
                               {"q": str(silver.table_path("silver_quarantine"))}).to_pylist()
    assert sorted(r["commitLogOffset"] for r in quarantined) == sorted(dead)

    gold = _config(broker, workdir, "gold", s3_server)
    run_app(s3_spark, gold, max_runtime_s=APP_TIMEOUT_S)
    table = str(gold.table_path("gold_orders_per_minute"))
    total = query_tables("SELECT sum(orders) AS n FROM g", {"g": table}).to_pylist()[0]["n"]
    assert total == len(good)  # every decoded order counted once, the tick included
    assert set(discover_tables(f"{workdir}/tables")) >= {"silver_orders", "silver_quarantine",
                                                         "gold_orders_per_minute"}


def test_hareplica_read_lands_a_range_into_an_s3_bronze_table(broker, commitlog, s3_server, tmp_path):
    """``hareplica read`` (its own process and Spark, as a user runs it) of the whole CommitLog into a new S3 workdir,
    twice: the second is a no-op."""
    import os
    import subprocess
    import sys

    workdir = f"s3://{TEST_BUCKET}/read-on-s3/{uuid.uuid4().hex[:12]}"
    end = max(off + rec.store_size for off, rec in commitlog.items())
    command = [sys.executable, "-m", "streaming_apps.cli", "read", "--brokers", f"broker-a={broker.ha_addr}",
               "--workdir", workdir, "--ending-offsets", f'{{"broker-a": {end}}}']
    env = {**os.environ, **s3_server.env()}
    for _ in range(2):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
    assert "already landed, nothing written" in done.stdout
    store.use(StorageConfig.from_options(s3_server.storage_options(), environ={}))
    rows = query_tables("SELECT commitLogOffset FROM b", {"b": f"{workdir}/tables/bronze"}).to_pylist()
    assert sorted(r["commitLogOffset"] for r in rows) == sorted(off for off in commitlog if off < end)

