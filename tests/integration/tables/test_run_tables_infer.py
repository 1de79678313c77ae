"""Issue 52, JSON ``schema = "infer"``: ``run tables`` on a real broker stub, the shared Spark session and real Delta
tables. Bodies made by Python's ``json`` land as columns typed by what they hold; a field that appears in a later
micro-batch, or in a later run, adds a nullable column (or a struct field) in the commit of the rows that hold it;
a value that does not fit its column's type, a body that is not a JSON object and a field named as a kept RocketMQ
column are dead letters; rows + dead letters = records matched; each micro-batch is one commit (its txn); deltalake
and Spark's ``format("delta")`` read the same rows (docs/tables.md "Schema evolution")."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from streaming_apps.apps import AppConfig, run_app
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.spark_session import register_data_sources

pytestmark = pytest.mark.spark

APP_TIMEOUT_S = 240
MAPPED_FILE_SIZE = 32 * 1024
TOPIC = "Events"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess.start(tmp_path_factory.mktemp("infer-broker"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        yield b


def _send(broker, bodies: list[bytes]) -> None:
    from connector.client.producer import Producer

    with Producer(broker.remoting_addr, "infer-test") as producer:
        sends = [producer.send_async(TOPIC, body, keys=[f"K-{i}"]) for i, body in enumerate(bodies)]
        assert {s.result(timeout=60).send_status for s in sends} == {"SEND_OK"}


def declaration_file(tmp_path) -> str:
    path = tmp_path / "tables.toml"
    path.write_text(textwrap.dedent(f"""
        [[table]]
        name = "events"
        topics = ["{TOPIC}"]
        format = "json"
        schema = "infer"
        columns = ["keys", "commitLogOffset"]
        partition_by = ["storeDate"]
    """), encoding="utf-8")
    return str(path)


def _run(spark, broker, workdir, declaration):
    register_data_sources(spark)
    config = AppConfig(app="tables", brokers=f"broker-a={broker.ha_addr}", workdir=workdir,
                       trigger="available-now", declaration=declaration, max_bytes_per_trigger=MAPPED_FILE_SIZE)
    return config, run_app(spark, config, max_runtime_s=APP_TIMEOUT_S)


def _landed(path) -> dict[int, dict]:
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    by_offset = {r["commitLogOffset"]: r for r in rows}
    assert len(by_offset) == len(rows), "each record once"
    return by_offset


def test_inferred_columns_appear_with_the_rows_that_hold_them(spark, broker, tmp_path):
    first = [json.dumps({"id": i, "amount": 10 * i, "who": {"name": f"n{i}"}}).encode() for i in range(300)]
    first += [json.dumps({"id": 300 + i, "amount": i, "who": {"name": "late"}, "late": True}).encode()
              for i in range(40)]
    first += [b"not json", b"[1, 2]"]
    _send(broker, first)
    declaration = declaration_file(tmp_path)
    config, result = _run(spark, broker, tmp_path / "work", declaration)
    assert result.batches >= 3, "several micro-batches"
    events, dead_letters = config.table_path("events"), config.table_path("dead_letters")
    landed = _landed(events)
    assert len(landed) == 340
    fields = [f.name for f in DeltaTable(str(events)).schema().fields]
    assert fields[:3] == ["id", "amount", "who"] and "late" in fields
    versions = {h["version"]: h for h in DeltaTable(str(events)).history()}
    late_version = min(v for v, h in versions.items() if h.get("hareplica.batchId") is not None and
                       "late" in [f.name for f in DeltaTable(str(events), version=v).schema().fields])
    assert late_version > min(v for v, h in versions.items() if h.get("hareplica.batchId") is not None), \
        "the column came with a later micro-batch"
    assert all(r["late"] is None for r in landed.values() if r["id"] < 300)
    assert all(r["late"] is True for r in landed.values() if r["id"] >= 300)

    # a second run: a struct field and a column appear; values that do not fit, a reserved field: dead letters
    second = [json.dumps({"id": 400 + i, "amount": i, "who": {"name": "b", "city": "c"}, "note": "x"}).encode()
              for i in range(60)]
    second += [json.dumps({"id": 500, "amount": 1.5}).encode(), json.dumps({"id": 501, "who": "a text"}).encode(),
               json.dumps({"id": 502, "keys": "mine"}).encode()]
    _send(broker, second)
    _, again = _run(spark, broker, tmp_path / "work", declaration)
    assert again.batches >= 1
    landed = _landed(events)
    records = [rec for _, rec in iter_commitlog_dir(broker.commitlog_dir) if rec.topic == TOPIC]
    dead = DeltaTable(str(dead_letters)).to_pyarrow_table().to_pylist()
    assert len(landed) + len(dead) == len(records), "rows + dead letters = records matched"
    assert Counter(r["error"].split(":")[0] for r in dead) == Counter(
        {"body is not JSON": 1, "body is JSON list, not an object": 1, "field $.amount": 1, "field $.who": 1,
         "field $.keys": 1})
    assert {r["schema"] for r in dead} == {"infer"}
    for rec in records:
        body = json.loads(rec.body) if rec.body.startswith(b"{") else None
        if rec.commit_log_offset in landed:
            row = landed[rec.commit_log_offset]
            assert row["id"] == body["id"] and row["amount"] == body["amount"] and row["keys"] == rec.keys
            assert row["who"] == {"name": body["who"]["name"], "city": body["who"].get("city")}
            assert row["note"] == body.get("note")
    table = DeltaTable(str(events))
    assert {f.name for f in table.schema().fields} == {"id", "amount", "who", "keys", "commitLogOffset", "storeDate",
                                                         "late", "note"}
    assert table.metadata().partition_columns == ["storeDate"]
    batches = Counter(h["hareplica.batchId"] for h in table.history() if h.get("hareplica.appId") == config.app_id())
    assert set(batches.values()) == {1} and len(batches) == result.batches + again.batches

    by_spark = {r["commitLogOffset"]: r.asDict(recursive=True)
                for r in spark.read.format("delta").load(str(events)).collect()}
    assert by_spark == landed
