"""Issue 52 on an object store: ``run tables`` with upsert tables whose tables, staged rows and checkpoint are all
in a real S3 server: keys updated and deleted across micro-batches equal the last value per key from the
CommitLog, read by deltalake and by Spark's ``format("delta")`` over ``s3a://``; no staged object is left
(docs/tables.md "Upserts"). A JSON ``infer`` table (staged too) lands every body as its columns there
(docs/tables.md "Inferred columns")."""

from __future__ import annotations

import json
import random
import textwrap
import uuid

import pytest

from broker_stub.launcher import BrokerProcess
from connector.landing.upsert import STAGED_FOLDER
from connector.storage import store
from connector.storage.config import StorageConfig
from streaming_apps.apps import AppConfig, run_app
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.spark_session import register_data_sources
from tests.integration.tables.test_run_tables_upsert import (
    MAPPED_FILE_SIZE,
    expected_tables,
    key_of,
    produce_round,
    write_declaration,
)
from tests.support.s3_server import TEST_BUCKET

pytestmark = pytest.mark.spark

APP_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    folder = tmp_path_factory.mktemp("s3-upsert-broker")
    with BrokerProcess.start(folder, mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "s3-upsert", allow_empty_body=True) as producer:
            produce_round(producer, random.Random(51), 0, 400)
        yield b


def _run_on_s3(spark, s3_server, broker, prefix: str, declaration: str):
    """``run tables`` of ``declaration`` available-now with its workdir under a new ``s3://`` prefix: (config,
    result)."""
    register_data_sources(spark)
    store.use(StorageConfig.from_options(s3_server.storage_options(), environ={}))
    workdir = f"s3://{TEST_BUCKET}/{prefix}/{uuid.uuid4().hex[:12]}"
    config = AppConfig(app="tables", brokers=f"broker-a={broker.ha_addr}", workdir=workdir, trigger="available-now",
                       declaration=declaration, max_bytes_per_trigger=MAPPED_FILE_SIZE,
                       storage_options=s3_server.storage_options())
    return config, run_app(spark, config, max_runtime_s=APP_TIMEOUT_S)


def test_upsert_tables_on_s3_equal_the_last_value_per_key(spark, s3_server, broker, tmp_path):
    import pyarrow.fs as pafs

    config, result = _run_on_s3(spark, s3_server, broker, "tables-upsert", write_declaration(tmp_path))
    assert result.batches >= 3
    expected = expected_tables(broker.commitlog_dir)
    fs = s3_server.filesystem()
    for name in ("accounts", "balances", "sessions"):
        path = str(config.table_path(name))
        assert path.startswith("s3://")
        rows = store.delta_table(path).to_pyarrow_table().to_pylist()
        assert {key_of(name, r): (r["amount"], r["commitLogOffset"]) for r in rows} == expected[name]
        by_spark = spark.read.format("delta").load(path.replace("s3://", "s3a://", 1)).collect()
        assert {key_of(name, r.asDict()): (r["amount"], r["commitLogOffset"]) for r in by_spark} == expected[name]
        assert len(by_spark) == len(expected[name])
        staged = fs.get_file_info(pafs.FileSelector(f"{path.removeprefix('s3://')}/{STAGED_FOLDER}",
                                                    allow_not_found=True))
        assert not [i.path for i in staged if i.type == pafs.FileType.File], "staged objects removed"


def test_an_inferred_table_on_s3_lands_every_body_as_its_columns(spark, s3_server, broker, tmp_path):
    declaration = tmp_path / "infer.toml"
    declaration.write_text(textwrap.dedent("""
        [[table]]
        name = "balances"
        topics = ["Balances"]
        format = "json"
        schema = "infer"
        columns = ["commitLogOffset"]
    """), encoding="utf-8")
    config, result = _run_on_s3(spark, s3_server, broker, "tables-infer", str(declaration))
    assert result.batches >= 2
    expected = {rec.commit_log_offset: json.loads(rec.body) for _, rec in iter_commitlog_dir(broker.commitlog_dir)
                if rec.topic == "Balances"}
    path = str(config.table_path("balances"))
    rows = store.delta_table(path).to_pyarrow_table().to_pylist()
    assert {r["commitLogOffset"]: {k: r[k] for k in ("region", "id", "amount") if r[k] is not None} for r in rows} \
        == expected
    by_spark = spark.read.format("delta").load(path.replace("s3://", "s3a://", 1)).select("commitLogOffset").collect()
    assert sorted(r[0] for r in by_spark) == sorted(expected)
