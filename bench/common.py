"""Shared output of the benchmarks: one table on stdout and one JSON file per benchmark.

Each benchmark measures its subject *and* its baseline in the same run, so the ratios it reports are
comparable on any machine; absolute numbers are printed alongside for context.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """Where the numbers were taken: CPU count, platform, Python version."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}


def report(name: str, results: dict, rows: list[tuple[str, object, str]], *, notes: str = "") -> Path:
    """Print ``rows`` (metric, value, comment) as a table and save ``results`` to bench/results/NAME.json.

    ``results`` holds the machine-readable figures (the keys the issues name); it is written together
    with the machine description and the time of the run. Returns the JSON path.
    """
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench/{name}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("note")
    for metric, value, note in rows:
        shown = f"{value:,.2f}" if isinstance(value, float) else str(value)
        table.add_row(metric, shown, note)
    Console().print(table)
    if notes:
        Console().print(notes)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {"benchmark": name, "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "machine": machine(), "results": results}
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path
