"""Issue 52, upserts: ``hareplica run tables`` with two upsert tables SIGKILLed at the merge's named points
(``HAREPLICA_DELTA_FAULT``, connector.delta.faults) and restarted: killed with batch 1 staged but not merged, then
with batch 1 merged into both tables but Spark's checkpoint not committed. The restart replays batch 1 without
changing either table (one commit per micro-batch), lands the rest, and each table equals the last value per key
computed from the CommitLog, as deltalake and Spark's ``format("delta")`` read it (docs/tables.md "Upserts")."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from connector.delta.faults import FAULT_INJECTION_ENV, FAULT_MARKER_ENV, FAULT_PAUSE_ENV
from connector.landing.upsert import STAGED_FOLDER
from streaming_apps.apps import AppConfig
from tests.integration.tables.test_run_tables_upsert import (
    MAPPED_FILE_SIZE,
    commits_per_batch,
    expected_tables,
    produce_round,
    read_by_deltalake,
    read_by_spark,
    write_declaration,
)
from tests.support.processes import kill_at_marker, kill_session, log_tail

MARKER_TIMEOUT_S = 240
RUN_TIMEOUT_S = 300
TABLES = ("accounts", "balances")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("upsert-crash-broker"),
                             mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "upsert-crash", allow_empty_body=True) as producer:
            rng = random.Random(7)
            for round_no in range(2):
                produce_round(producer, rng, round_no, 300)
        yield b


def _command(broker, workdir: Path, declaration: str) -> list[str]:
    return [sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING", "run", "tables", "--config",
            declaration, "--brokers", f"broker-a={broker.ha_addr}", "--workdir", str(workdir), "--trigger",
            "available-now", "--max-bytes-per-trigger", str(MAPPED_FILE_SIZE), "--maintenance-every", "0"]


def run_tables(broker, workdir: Path, declaration: str, fault: str | None) -> dict | None:
    """Run ``hareplica run tables`` with ``declaration``; with ``fault``, SIGKILL its whole session at the fault's
    marker and return the marker."""
    marker = workdir / "fault-marker.json"
    marker.unlink(missing_ok=True)
    log_path = workdir / f"tables-{fault or 'restart'}.log".replace(":", "-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAREPLICA_DELTA_FAULT")}
    if fault:
        env.update({FAULT_INJECTION_ENV: fault, FAULT_MARKER_ENV: str(marker), FAULT_PAUSE_ENV: "600"})
    workdir.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(_command(broker, workdir, declaration), env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    if fault:
        return json.loads(kill_at_marker(proc, marker, log_path, what=fault, timeout_s=MARKER_TIMEOUT_S))
    try:
        code = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        kill_session(proc)
    assert code == 0, f"run exited {code}:\n{log_tail(log_path)}"
    return None


def _staged(path: Path) -> list[Path]:
    return sorted((path / STAGED_FOLDER).glob("*.parquet"))


def test_upsert_tables_killed_before_and_after_the_merge_replay_to_the_last_value_per_key(broker, spark, tmp_path):
    declaration = write_declaration(tmp_path)
    cfg = AppConfig(app="tables", brokers="unused", workdir=tmp_path, declaration=declaration)
    paths = {t: cfg.table_path(t) for t in TABLES}

    # run 1: killed with batch 1 staged, before its merge into accounts
    marker = run_tables(broker, tmp_path, declaration, "before-delta-commit:1:accounts")
    assert marker["batchId"] == 1 and marker["table"].endswith("accounts")
    assert DeltaTable(str(paths["accounts"])).transaction_version(cfg.app_id()) == 0
    assert _staged(paths["accounts"]), "batch 1's rows were staged"

    # run 2: batch 1 again, merged into both tables; killed before Spark's checkpoint commits it
    run_tables(broker, tmp_path, declaration, "after-delta-commit:1:balances")
    after_merge = {}
    for name, path in paths.items():
        assert DeltaTable(str(path)).transaction_version(cfg.app_id()) == 1, name
        after_merge[name] = (DeltaTable(str(path)).version(), read_by_deltalake(path))
    assert not (cfg.checkpoint() / "commits" / "1").exists(), "Spark does not know batch 1 is done"
    assert _staged(paths["balances"]), "killed before the staged rows were removed"

    # run 3: batch 1 replayed (each table unchanged by it), then the rest
    run_tables(broker, tmp_path, declaration, None)
    expected = expected_tables(broker.commitlog_dir)
    for name, path in paths.items():
        batches = commits_per_batch(path, cfg.app_id())
        assert batches[1] == 1 and set(batches.values()) == {1}, f"{name}: one commit per micro-batch {batches}"
        assert max(batches) >= 2, "batches after the replayed one"
        version_of_batch_1 = after_merge[name][0]
        assert DeltaTable(str(path), version=version_of_batch_1).to_pyarrow_table().num_rows == \
            len(after_merge[name][1])
        assert read_by_deltalake(path) == expected[name], name
        assert read_by_spark(spark, path) == expected[name], name
        assert not _staged(path), f"{name}: staged files removed"
