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


def test_demo_runs_the_bronze_app_and_reports_exactly_once(tmp_path):
    workdir = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING", "demo", "--workdir",
                           str(workdir), "--messages", "3000"], capture_output=True, text=True,
                          timeout=DEMO_TIMEOUT_S, env={"COLUMNS": "160", **_env()})
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    for line in ("messages produced", "rows landed in Delta", "missing", "duplicated", "every message landed "
                 "exactly once", "hareplica query --workdir", "hareplica status --workdir", "storeDate"):
        assert line in out, line
    tables = discover_tables(workdir / "tables")
    assert set(tables) == {"bronze", *(t.name for t in METADATA_TABLES)}  # bronze and the broker metadata tables
    assert query_tables("SELECT count(DISTINCT commitLogOffset) AS n FROM bronze", tables).to_pylist() == [{"n": 3000}]
    events = list(read_events(workdir / "status" / "bronze.jsonl"))
    assert events[0]["event"] == "started" and events[-1]["event"] == "terminated"
    assert sum(e["numInputRows"] for e in events if e["event"] == "progress") == 3000


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "COLUMNS"}
