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


def arrow_file_source():
    """``format("arrowfiles")``: a Python streaming source replaying Arrow IPC files, ``filesPerBatch`` per batch.

    The ceiling of what Spark's Python data source path can carry (no network, no decoding): option
    ``paths`` (comma-separated IPC files, one InputPartition each, in order) and ``filesPerBatch``
    (micro-batch size in files; with one file per mapped file and ``maxBytesPerTrigger`` = two mapped
    files this plans the same partitions and micro-batches as ``hareplica``). Supports Trigger.AvailableNow.
    Defined in a function so cloudpickle ships the classes by value (``bench`` is not installed).
    """
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    from connector.decode.schema import RESTORE_COLUMNS, spark_schema

    class ArrowFilePartition(InputPartition):
        def __init__(self, path: str):
            self.path = path

    class ArrowFileStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, paths: list[str], files_per_batch: int):
            self.paths = paths
            self.files_per_batch = files_per_batch

        def initialOffset(self):
            return {"file": 0}

        def latestOffset(self, start, limit):
            return {"file": min(len(self.paths), start["file"] + self.files_per_batch)}

        def prepareForTriggerAvailableNow(self):
            pass

        def partitions(self, start, end):
            return [ArrowFilePartition(p) for p in self.paths[start["file"]:end["file"]]]

        def read(self, partition):
            with pa.memory_map(partition.path) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

        def commit(self, end):
            pass

    class ArrowFileDataSource(DataSource):
        @classmethod
        def name(cls):
            return "arrowfiles"

        def schema(self):
            # the files' own columns: the source's default ones, or bronze's (restore columns included)
            with pa.memory_map(self.options["paths"].split(",")[0]) as source:
                names = pa.ipc.open_file(source).schema.names
            return spark_schema(restore_columns={name for name, _, _ in RESTORE_COLUMNS} <= set(names))

        def streamReader(self, schema):
            return ArrowFileStreamReader(self.options["paths"].split(","), int(self.options.get("filesPerBatch", 2)))

    return ArrowFileDataSource
