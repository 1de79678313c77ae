"""`hareplica demo` end to end in a subprocess (it builds and stops its own Spark session)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from connector.delta.metadata_tables import METADATA_TABLES
from streaming_apps.progress_listener import read_events
from streaming_apps.query import discover_tables, query_tables

pytestmark = pytest.mark.spark

DEMO_TIMEOUT_S = 300


def test_demo_runs_bronze_and_the_typed_tables_and_reports_exactly_once(tmp_path):
    workdir = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING", "demo", "--workdir",
                           str(workdir), "--messages", "3000"], capture_output=True, text=True,
                          timeout=DEMO_TIMEOUT_S, env={"COLUMNS": "160", **_env()})
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    for line in ("messages produced", "rows landed in Delta", "missing", "duplicated", "every message landed "
                 "exactly once, in bronze and in the typed table", "hareplica query --workdir",
                 "hareplica status --workdir", "storeDate",
                 "from the typed table (3000 rows, 0 dead letters)", "amount_cents"):
        assert line in out, line
    tables = discover_tables(workdir / "tables")
    # bronze, the broker metadata tables, the typed table of the demo's declaration and its dead-letter table
    assert set(tables) == {"bronze", *(t.name for t in METADATA_TABLES), "orders", "dead_letters"}
    assert query_tables("SELECT count(DISTINCT commitLogOffset) AS n FROM bronze", tables).to_pylist() == [{"n": 3000}]
    typed = query_tables("SELECT count(DISTINCT commitLogOffset) AS n, count(orderId) AS ids, "
                         "sum(CASE WHEN tags = status THEN 1 ELSE 0 END) AS tagged FROM orders", tables)
    assert typed.to_pylist() == [{"n": 3000, "ids": 3000, "tagged": 3000}]  # decoded fields beside the kept columns
    assert (workdir / "orders.toml").is_file()
    events = list(read_events(workdir / "status" / "bronze.jsonl"))
    assert events[0]["event"] == "started" and events[-1]["event"] == "terminated"
    assert sum(e["numInputRows"] for e in events if e["event"] == "progress") == 3000


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "COLUMNS"}
