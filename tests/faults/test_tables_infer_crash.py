"""Issue 52, JSON ``infer``: ``hareplica run tables`` with an inferred table SIGKILLed at the driver's append's named
points (``HAREPLICA_DELTA_FAULT``, connector.delta.faults) and restarted: killed with batch 1 staged but not
appended, then with batch 1 appended (its new column with it) but Spark's checkpoint not committed. The restart
replays batch 1 without changing the table, lands the rest, and every record is in the table once with its
columns, each micro-batch one commit (docs/tables.md "Inferred columns")."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from connector.landing.staging import STAGED_FOLDER
from streaming_apps.apps import AppConfig
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from tests.faults.test_tables_upsert_crash import run_tables
from tests.integration.tables.test_run_tables_infer import MAPPED_FILE_SIZE, TOPIC, declaration_file


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("infer-crash-broker"),
                             mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "infer-crash") as producer:
            bodies = [{"id": i, "amount": i * 10} for i in range(150)]
            bodies += [{"id": 150 + i, "amount": i, "note": f"n{i}"} for i in range(250)]
            sends = [producer.send_async(TOPIC, json.dumps(body).encode()) for body in bodies]
            assert {s.result(timeout=60).send_status for s in sends} == {"SEND_OK"}
        yield b


def test_an_inferred_table_killed_around_its_append_replays_to_every_record_once(broker, tmp_path):
    declaration = declaration_file(tmp_path)
    cfg = AppConfig(app="tables", brokers="unused", workdir=tmp_path, declaration=declaration)
    path = cfg.table_path("events")

    marker = run_tables(broker, tmp_path, declaration, "before-delta-commit:1:events")
    assert marker["batchId"] == 1 and marker["table"].endswith("events")
    assert DeltaTable(str(path)).transaction_version(cfg.app_id()) == 0
    assert list((path / STAGED_FOLDER).glob("*.parquet")), "batch 1's rows were staged"

    run_tables(broker, tmp_path, declaration, "after-delta-commit:1:events")
    table = DeltaTable(str(path))
    assert table.transaction_version(cfg.app_id()) == 1
    after_batch_1 = table.version(), table.to_pyarrow_table().num_rows
    assert not (cfg.checkpoint() / "commits" / "1").exists(), "Spark does not know batch 1 is done"

    run_tables(broker, tmp_path, declaration, None)
    table = DeltaTable(str(path))
    batches = Counter(h["hareplica.batchId"] for h in table.history() if h.get("hareplica.appId") == cfg.app_id())
    assert set(batches.values()) == {1} and max(batches) >= 2, f"one commit per micro-batch {batches}"
    assert DeltaTable(str(path), version=after_batch_1[0]).to_pyarrow_table().num_rows == after_batch_1[1]
    rows = table.to_pyarrow_table().to_pylist()
    expected = {rec.commit_log_offset: json.loads(rec.body) for _, rec in iter_commitlog_dir(broker.commitlog_dir)
                if rec.topic == TOPIC}
    assert {r["commitLogOffset"]: {k: r[k] for k in ("id", "amount", "note") if r[k] is not None} for r in rows} \
        == expected
    assert len(rows) == len(expected)
    assert not list((path / STAGED_FOLDER).glob("*.parquet")), "staged files removed"
