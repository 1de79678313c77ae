"""Issue 52, upserts: ``run tables`` with upsert tables on a real broker stub, the shared Spark session and real
Delta tables. Keys are inserted, updated and deleted (a tombstone property, or an empty body) across several
micro-batches (a small
maxBytesPerTrigger) and two runs; each table equals the last value per key computed from the broker's CommitLog,
read by deltalake and by Spark's ``format("delta")``; a run with nothing new changes no table; every micro-batch is
one commit per table (docs/tables.md "Upserts")."""

from __future__ import annotations

import json
import random
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
ACCOUNTS, BALANCES = 40, 30
REGIONS = ("eu", "us", "ap")
ACCOUNT_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}, "amount": {"type": "integer"}}}
BALANCE_SCHEMA = {"type": "object", "properties": {"region": {"type": "string"}, "id": {"type": "string"},
                                                   "amount": {"type": "integer"}}}


def write_declaration(folder) -> str:
    """Three upsert tables: ``accounts`` keyed by the message keys (a tombstone: property op=delete, its body not
    decoded), ``balances`` keyed by two fields of the body and partitioned by one (a tombstone: property deleted),
    ``sessions`` keyed by the message keys (a tombstone: an empty body)."""
    (folder / "account.schema.json").write_text(json.dumps(ACCOUNT_SCHEMA), encoding="utf-8")
    (folder / "balance.schema.json").write_text(json.dumps(BALANCE_SCHEMA), encoding="utf-8")
    path = folder / "tables.toml"
    path.write_text(textwrap.dedent("""
        [[table]]
        name = "accounts"
        topics = ["Accounts"]
        format = "json"
        schema = "account.schema.json"
        columns = ["commitLogOffset"]
        mode = "upsert"
        key = ["keys"]
        tombstone = "property:op=delete"

        [[table]]
        name = "balances"
        topics = ["Balances"]
        format = "json"
        schema = "balance.schema.json"
        columns = ["commitLogOffset"]
        partition_by = ["region"]
        mode = "upsert"
        key = ["region", "id"]
        tombstone = "property:deleted"

        [[table]]
        name = "sessions"
        topics = ["Sessions"]
        format = "json"
        schema = "account.schema.json"
        columns = ["commitLogOffset"]
        mode = "upsert"
        key = ["keys"]
        tombstone = "empty-body"
    """), encoding="utf-8")
    return str(path)


def produce_round(producer, rng: random.Random, round_no: int, messages: int) -> None:
    """``messages`` random inserts, updates and deletes over the three topics; round 0 also sends a message with two
    keys (one key: the whole KEYS string) and one without keys (a dead letter)."""
    sends = []
    if round_no == 0:
        sends.append(producer.send_async("Accounts", json.dumps({"id": "multi", "amount": 7}).encode(),
                                         keys=["A-0", "A-1"]))
        sends.append(producer.send_async("Accounts", json.dumps({"id": "nokey", "amount": 8}).encode()))
    for i in range(messages):
        amount = round_no * 100_000 + i
        draw = rng.random()
        if draw < 0.2:
            key = f"S-{rng.randrange(ACCOUNTS)}"
            body = b"" if rng.random() < 0.25 else json.dumps({"id": key, "amount": amount}).encode()
            sends.append(producer.send_async("Sessions", body, keys=[key]))
        elif draw < 0.6:
            key = f"A-{rng.randrange(ACCOUNTS)}"
            if rng.random() < 0.2:
                sends.append(producer.send_async("Accounts", b"gone", keys=[key], properties={"op": "delete"}))
            else:
                body = json.dumps({"id": key, "amount": amount}).encode()
                sends.append(producer.send_async("Accounts", body, keys=[key], properties={"op": "upsert"}))
        else:
            region, key = rng.choice(REGIONS), f"B-{rng.randrange(BALANCES)}"
            if rng.random() < 0.2:
                body = json.dumps({"region": region, "id": key}).encode()
                sends.append(producer.send_async("Balances", body, properties={"deleted": "yes"}))
            else:
                body = json.dumps({"region": region, "id": key, "amount": amount}).encode()
                sends.append(producer.send_async("Balances", body))
    assert {s.result(timeout=60).send_status for s in sends} == {"SEND_OK"}


def expected_tables(commitlog_dir) -> dict[str, dict[tuple, tuple]]:
    """The last value per key of each table, replayed from the CommitLog in commitLogOffset order:
    ``{table: {key: (amount, commitLogOffset)}}``."""
    out: dict[str, dict[tuple, tuple]] = {"accounts": {}, "balances": {}, "sessions": {}}
    for _, rec in sorted(iter_commitlog_dir(commitlog_dir), key=lambda x: x[1].commit_log_offset):
        props = rec.properties
        if rec.topic == "Accounts":
            if rec.keys is None:
                continue  # no key: a dead letter
            if props.get("op") == "delete":
                out["accounts"].pop((rec.keys,), None)
            else:
                out["accounts"][(rec.keys,)] = (json.loads(rec.body)["amount"], rec.commit_log_offset)
        elif rec.topic == "Sessions":
            if not rec.body:
                out["sessions"].pop((rec.keys,), None)
            else:
                out["sessions"][(rec.keys,)] = (json.loads(rec.body)["amount"], rec.commit_log_offset)
        elif rec.topic == "Balances":
            body = json.loads(rec.body)
            key = (body["region"], body["id"])
            if "deleted" in props:
                out["balances"].pop(key, None)
            else:
                out["balances"][key] = (body["amount"], rec.commit_log_offset)
    return out


def key_of(table: str, row: dict) -> tuple:
    return (row["keys"],) if table in ("accounts", "sessions") else (row["region"], row["id"])


def read_by_deltalake(path) -> dict[tuple, tuple]:
    table = str(path).rsplit("/", 1)[-1]
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    got = {key_of(table, r): (r["amount"], r["commitLogOffset"]) for r in rows}
    assert len(got) == len(rows), "one row per key"
    return got


def read_by_spark(spark, path) -> dict[tuple, tuple]:
    table = str(path).rsplit("/", 1)[-1]
    rows = [r.asDict() for r in spark.read.format("delta").load(str(path)).collect()]
    got = {key_of(table, r): (r["amount"], r["commitLogOffset"]) for r in rows}
    assert len(got) == len(rows), "one row per key"
    return got


def commits_per_batch(path, app_id: str) -> Counter:
    """How many Delta commits of ``path`` carry each micro-batch id of ``app_id`` (the create, merges, empty
    txn commits)."""
    return Counter(h["hareplica.batchId"] for h in DeltaTable(str(path)).history()
                   if h.get("hareplica.appId") == app_id)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess.start(tmp_path_factory.mktemp("upsert-broker"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        yield b


def _run(spark, broker, workdir, declaration):
    register_data_sources(spark)
    config = AppConfig(app="tables", brokers=f"broker-a={broker.ha_addr}", workdir=workdir,
                       trigger="available-now", declaration=declaration, max_bytes_per_trigger=MAPPED_FILE_SIZE)
    return config, run_app(spark, config, max_runtime_s=APP_TIMEOUT_S)


def test_upserts_across_micro_batches_equal_the_last_value_per_key(spark, broker, tmp_path):
    from connector.client.producer import Producer

    declaration = write_declaration(tmp_path)
    rng = random.Random(52)
    with Producer(broker.remoting_addr, "upsert-test", allow_empty_body=True) as producer:
        produce_round(producer, rng, 0, 500)
    config, first = _run(spark, broker, tmp_path / "work", declaration)
    assert first.batches >= 3, "several micro-batches"
    tables = {t: config.table_path(t) for t in ("accounts", "balances", "sessions")}
    expected = expected_tables(broker.commitlog_dir)
    assert ("A-0 A-1",) in expected["accounts"]  # the KEYS string is the key
    assert sum(1 for _, r in iter_commitlog_dir(broker.commitlog_dir) if r.topic == "Sessions" and not r.body) > 10
    for name, path in tables.items():
        assert read_by_deltalake(path) == expected[name], name
    dead = DeltaTable(str(config.table_path("dead_letters"))).to_pyarrow_table().to_pylist()
    assert [(r["table"], r["error"]) for r in dead] == [
        ("accounts", "key keys is null: an upsert row needs its whole key")]

    # a second run: updates and deletes of the same keys
    with Producer(broker.remoting_addr, "upsert-test-2", allow_empty_body=True) as producer:
        produce_round(producer, rng, 1, 500)
    _, second = _run(spark, broker, tmp_path / "work", declaration)
    assert second.batches >= 2
    before, expected = expected, expected_tables(broker.commitlog_dir)
    for name in tables:
        assert set(before[name]) - set(expected[name]), f"{name}: keys of the first run deleted in the second"
        assert any(before[name][k] != v for k, v in expected[name].items() if k in before[name]), "keys updated"
    for name, path in tables.items():
        assert read_by_deltalake(path) == expected[name], name
        assert read_by_spark(spark, path) == expected[name], name
        batches = commits_per_batch(path, config.app_id())
        assert set(batches.values()) == {1} and len(batches) == first.batches + second.batches, name
        assert not list((path / "_hareplica_staged").glob("*.parquet")), "staged files removed"

    # nothing new: no micro-batch, no table changes
    versions = {name: DeltaTable(str(path)).version() for name, path in tables.items()}
    _, third = _run(spark, broker, tmp_path / "work", declaration)
    assert third.rows == 0
    assert {name: DeltaTable(str(path)).version() for name, path in tables.items()} == versions
