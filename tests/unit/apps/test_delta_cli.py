"""The apps' configuration and the `hareplica query`, `maintain` and `status` commands (no Spark, no broker).

Tables are written with the Delta sink's writer directly (the code path Spark drives), in tmp_path.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql.types import BinaryType, DateType, LongType, StringType, StructField, StructType

from connector.delta.options import app_id_from_checkpoint
from connector.delta.sink import DeltaLakeDataSource
from streaming_apps.apps.common import AppConfig, AppError, expand_jars, trigger_kwargs
from streaming_apps.cli import build_parser, main
from streaming_apps.progress_listener import ProgressFileListener
from streaming_apps.query import QueryError, discover_tables, display_value, query_tables, render

SCHEMA = StructType([StructField("commitLogOffset", LongType()), StructField("topic", StringType()),
                     StructField("storeDate", DateType()), StructField("body", BinaryType())])


def write_table(path: Path, batches: int, rows_per_batch: int = 4, partition_by: str = "storeDate") -> None:
    w = DeltaLakeDataSource({"path": str(path), "appId": "t", "partitionBy": partition_by}).streamWriter(SCHEMA, False)
    for b in range(batches):
        offs = list(range(b * rows_per_batch, (b + 1) * rows_per_batch))
        batch = pa.record_batch([pa.array([100 * o for o in offs], pa.int64()),
                                 pa.array([f"Topic{o % 2}" for o in offs]),
                                 pa.array([dt.date(2026, 1, 1 + o % 2) for o in offs]),
                                 pa.array([bytes([o]) * 20 for o in offs], pa.binary())],
                                names=["commitLogOffset", "topic", "storeDate", "body"])
        w.commit([w.write(iter([batch]))], b)


@pytest.fixture
def tables_root(tmp_path) -> Path:
    root = tmp_path / "work" / "tables"
    write_table(root / "bronze", 3)
    write_table(root / "other", 1)
    (root / "not-a-table").mkdir()
    return root


# --- configuration ---------------------------------------------------------------------------------
def test_triggers():
    assert trigger_kwargs("available-now") == {"availableNow": True}
    assert trigger_kwargs("1s") == {"processingTime": "1 seconds"}
    assert trigger_kwargs("500ms") == {"processingTime": "500 milliseconds"}
    assert trigger_kwargs("2m") == {"processingTime": "2 minutes"}
    assert trigger_kwargs("10 seconds") == {"processingTime": "10 seconds"}
    with pytest.raises(AppError, match="--trigger 'soon'"):
        trigger_kwargs("soon")


def test_config_paths_and_app_ids_follow_the_checkpoint(tmp_path):
    cfg = AppConfig(app="silver", brokers="broker-a=127.0.0.1:10912", workdir=tmp_path / "w")
    assert cfg.table_path("silver_orders") == tmp_path / "w" / "tables" / "silver_orders"
    assert cfg.checkpoint() == tmp_path / "w" / "checkpoints" / "silver"
    assert cfg.status_file == tmp_path / "w" / "status" / "silver.jsonl"
    assert cfg.app_id() == app_id_from_checkpoint(str(tmp_path / "w" / "checkpoints" / "silver"), "silver")
    moved = AppConfig(app="silver", brokers="x", workdir=tmp_path / "w", checkpoint_root=tmp_path / "cp2")
    assert moved.app_id() != cfg.app_id()  # a new checkpoint is a new writer
    assert cfg.source_option_map() == {"brokers": "broker-a=127.0.0.1:10912", "startingOffsets": "earliest",
                                       "failOnDataLoss": "true"}
    opts = AppConfig(app="bronze", brokers="b=h:2", max_bytes_per_trigger=10, fail_on_data_loss=False,
                     source_options={"readTimeoutMs": "1000"}, workdir=tmp_path).source_option_map()
    assert opts["maxBytesPerTrigger"] == "10" and opts["failOnDataLoss"] == "false" and opts["readTimeoutMs"] == "1000"
    with pytest.raises(AppError, match="--sink 'parquet'"):
        AppConfig(app="bronze", brokers="x", sink="parquet", workdir=tmp_path)
    with pytest.raises(AppError, match="--maintenance-every"):
        AppConfig(app="bronze", brokers="x", maintenance_every=-1, workdir=tmp_path)


def test_missing_jars_name_build_gradle(tmp_path):
    jar = tmp_path / "delta-spark_2.13-4.4.1.jar"
    jar.write_bytes(b"PK")
    assert expand_jars([f"{tmp_path}/*.jar"]) == [str(jar)]
    assert expand_jars([f"{jar},{jar}"]) == [str(jar), str(jar)]
    with pytest.raises(AppError) as e:
        expand_jars([str(tmp_path / "missing.jar")])
    assert "gradle stageDeltaJars" in str(e.value) and "--jars" in str(e.value)


def test_cli_parses_the_new_commands():
    args = build_parser().parse_args(["run", "gold", "--brokers", "a=h:2", "--trigger", "available-now",
                                      "--maintenance-every", "0", "--option", "readTimeoutMs=5",
                                      "--jars", "a.jar", "b.jar"])
    assert (args.app, args.maintenance_every, args.source_options, args.jars) == ("gold", 0, [("readTimeoutMs", "5")],
                                                                                  ["a.jar", "b.jar"])
    assert args.sink == "deltalake" and args.trigger == "available-now" and args.fail_on_data_loss
    args = build_parser().parse_args(["query", "SELECT 1", "--table", "x=/p", "--format", "jsonl"])
    assert args.tables == [("x", "/p")] and args.format == "jsonl"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "platinum", "--brokers", "a=h:2"])


def test_cli_run_rejects_a_bad_config_before_starting_spark(tmp_path, capsys):
    assert main(["run", "bronze", "--brokers", "a=h:2", "--workdir", str(tmp_path), "--trigger", "later"]) == 2
    assert "--trigger 'later'" in capsys.readouterr().err
    assert main(["run", "bronze", "--brokers", "a=h:2", "--workdir", str(tmp_path), "--sink", "delta",
                 "--jars", str(tmp_path / "nope.jar")]) == 2
    assert "gradle stageDeltaJars" in capsys.readouterr().err


# --- query -----------------------------------------------------------------------------------------
def test_tables_are_found_by_folder(tables_root):
    assert discover_tables(tables_root) == {"bronze": str(tables_root / "bronze"), "other": str(tables_root / "other")}
    assert discover_tables(tables_root / "bronze") == {"bronze": str(tables_root / "bronze")}
    assert discover_tables(tables_root / "missing") == {}


def test_query_returns_the_expected_rows(tables_root):
    tables = discover_tables(tables_root)
    got = query_tables("SELECT storeDate, count(*) AS n, sum(commitLogOffset) AS s FROM bronze "
                       "GROUP BY storeDate ORDER BY storeDate", tables).to_pylist()
    assert got == [{"storeDate": dt.date(2026, 1, 1), "n": 6, "s": 100 * sum(range(0, 12, 2))},
                   {"storeDate": dt.date(2026, 1, 2), "n": 6, "s": 100 * sum(range(1, 12, 2))}]
    joined = query_tables("SELECT count(*) AS n FROM bronze b JOIN other o ON b.commitLogOffset = o.commitLogOffset",
                          tables)
    assert joined.to_pylist() == [{"n": 4}]
    with pytest.raises(QueryError, match="query failed"):
        query_tables("SELECT nope FROM bronze", tables)


def test_cli_query_prints_jsonl_csv_and_a_table(tables_root, capsys):
    workdir = str(tables_root.parent)
    sql = "SELECT commitLogOffset, topic, body FROM bronze WHERE commitLogOffset < 300 ORDER BY commitLogOffset"
    assert main(["query", sql, "--workdir", workdir, "--format", "jsonl"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"commitLogOffset": 100 * i, "topic": f"Topic{i % 2}", "body": _b64(bytes([i]) * 20)}
                     for i in range(3)]
    assert main(["query", sql, "--tables-root", str(tables_root), "--format", "csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "commitLogOffset,topic,body" and out[1].startswith("0,Topic0,")
    assert main(["query", "SELECT topic, count(*) AS n FROM bronze GROUP BY topic ORDER BY topic", "--workdir",
                 workdir]) == 0
    text = capsys.readouterr().out
    assert "Topic0" in text and "Topic1" in text and "2 rows" in text
    assert main(["query", "SELECT 1", "--workdir", str(tables_root / "nowhere")]) == 1
    assert "no Delta tables" in capsys.readouterr().err


def _b64(b: bytes) -> str:
    import base64

    return base64.b64encode(b).decode()


def test_display_values():
    assert display_value(None) == "NULL"
    assert display_value(b"\x00\x01") == "0x0001 (2 B)"
    assert display_value(b"\xab" * 40).endswith("… (40 B)")
    assert display_value([("region", "eu")]) == '{"region":"eu"}'
    assert display_value("x" * 200).endswith("…")
    assert render(pa.table({"a": [1]}), "jsonl") == '{"a": 1}\n'
    with pytest.raises(QueryError):
        render(pa.table({"a": [1]}), "xml")


# --- maintain and status --------------------------------------------------------------------------
def test_cli_maintain_compacts_a_table_by_name_keeping_its_rows(tables_root, capsys):
    before = query_tables("SELECT * FROM bronze ORDER BY commitLogOffset", discover_tables(tables_root))
    assert len(DeltaTable(str(tables_root / "bronze")).file_uris()) == 6
    assert main(["maintain", "bronze", "--tables-root", str(tables_root), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["filesRemoved"] == 6 and summary["filesAdded"] == 2 and summary["table"] == str(
        tables_root / "bronze")
    assert len(DeltaTable(str(tables_root / "bronze")).file_uris()) == 2
    after = query_tables("SELECT * FROM bronze ORDER BY commitLogOffset", discover_tables(tables_root))
    assert after.equals(before)
    assert main(["maintain", str(tables_root / "other"), "--no-compact", "--no-vacuum"]) == 0
    assert "maintained" in capsys.readouterr().out
    assert main(["maintain", "missing", "--tables-root", str(tables_root)]) == 1
    assert "no Delta table" in capsys.readouterr().err


def test_cli_status_reads_the_progress_files(tmp_path, capsys):
    status_dir = tmp_path / "status"
    listener = ProgressFileListener(status_dir / "bronze.jsonl")
    listener.write_event("started", query="hareplica-bronze", id="1", runId="2")
    listener.write_event("progress", query="hareplica-bronze", batchId=4, numInputRows=10, batchDurationMs=50,
                         sources=[{"endOffset": {"broker-a": 10}, "latestOffset": {"broker-a": 25},
                                   "lagBytes": {"broker-a": 15}}])
    assert main(["status", "--workdir", str(tmp_path), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    entry = status["queries"]["hareplica-bronze"]
    assert entry["state"] == "running" and entry["last"]["batchId"] == 4
    assert main(["status", str(status_dir / "bronze.jsonl")]) == 0
    text = capsys.readouterr().out
    assert "hareplica-bronze" in text and "15 bytes" in text
    listener.write_event("terminated", query="hareplica-bronze", id="1", runId="2", exception="boom")
    assert main(["status", "--workdir", str(tmp_path)]) == 1
    assert main(["status", "--workdir", str(tmp_path / "empty")]) == 1
