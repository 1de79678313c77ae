"""Delta path problems name the path (issue 9 item 6): a garbage ``_delta_log``, a plain folder as a table.

A ``_delta_log`` holding random bytes must give one line naming the table and the log file, from the
library (``open_delta_table``), the sink (``write_batch``, the streaming writer's check), the apps and the
``query``/``maintain`` commands — never delta-rs's multi-line backtrace. A non-empty folder that is not a
Delta table is not turned into one unless the writer asks (``createTableInNonEmptyPath``); a missing or
empty folder, or one holding only this sink's own never-committed files (a first batch killed before its
commit), is created as before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deltalake import DeltaTable

from connector.delta.file_names import batch_file_prefix
from connector.delta.foreach_batch import write_batch
from connector.delta.location import open_delta_table
from connector.delta.options import DeltaSinkOptions
from connector.delta.sink import checked_stream_writer
from connector.errors import DeltaTablePathError
from streaming_apps.cli import main as cli_main

GARBAGE = bytes(range(256)) * 3


def _garbage_table(root: Path) -> Path:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_bytes(GARBAGE)
    return root


def _one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{text}"
    assert "<unknown>" not in text and "Traceback" not in text
    return lines[0]


def test_garbage_delta_log_is_one_error_line_naming_the_table_and_the_file(tmp_path):
    table = _garbage_table(tmp_path / "bronze")
    with pytest.raises(DeltaTablePathError) as e:
        open_delta_table(str(table))
    line = _one_line(str(e.value))
    assert str(table) in line
    assert "_delta_log/00000000000000000000.json" in line and "line 1" in line


def test_garbage_delta_log_in_query_and_maintain_prints_one_line(tmp_path, capsys):
    table = _garbage_table(tmp_path / "tables" / "bronze")
    assert cli_main(["query", "--tables-root", str(tmp_path / "tables"), "SELECT count(*) FROM bronze"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert str(table) in line and "00000000000000000000.json" in line
    assert cli_main(["maintain", str(table)]) == 1
    line = _one_line(capsys.readouterr().err)
    assert str(table) in line and "00000000000000000000.json" in line


def _sink_options(path: Path, **extra: str) -> DeltaSinkOptions:
    return DeltaSinkOptions.from_options({"path": str(path), "appId": "paths-test", **extra})


def test_stream_writer_refuses_a_garbage_log_and_a_plain_non_empty_folder(spark, tmp_path):
    schema = spark.range(1).schema
    with pytest.raises(DeltaTablePathError, match="_delta_log/00000000000000000000.json"):
        checked_stream_writer(_sink_options(_garbage_table(tmp_path / "garbage")), schema)

    plain = tmp_path / "plain"
    (plain / "reports").mkdir(parents=True)
    (plain / "reports" / "2026.csv").write_text("a,b\n1,2\n")
    (plain / "notes.txt").write_text("not a table")
    with pytest.raises(DeltaTablePathError) as e:
        checked_stream_writer(_sink_options(plain), schema)
    line = _one_line(str(e.value))
    assert str(plain) in line and "not a Delta table" in line and "notes.txt" in line
    assert "createTableInNonEmptyPath" in line
    assert not (plain / "_delta_log").exists()


def test_write_batch_creates_a_table_only_in_an_empty_folder_unless_asked(spark, tmp_path):
    df = spark.range(5).selectExpr("id", "cast(id AS string) AS name")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "keep.me").write_text("someone's file")
    with pytest.raises(DeltaTablePathError, match="not a Delta table"):
        write_batch(df, str(plain), "paths-test", 0)
    assert not (plain / "_delta_log").exists() and (plain / "keep.me").exists()
    assert sorted(os.listdir(plain)) == ["keep.me"], "nothing was written into the refused folder"

    result = write_batch(df, str(plain), "paths-test", 0, create_in_non_empty_path=True)
    assert result.rows == 5 and (plain / "keep.me").read_text() == "someone's file"
    assert DeltaTable(str(plain)).version() == 0

    empty = tmp_path / "empty"
    empty.mkdir()
    assert write_batch(df, str(empty), "paths-test", 0).rows == 5


def test_a_folder_holding_only_this_sinks_uncommitted_files_is_created(spark, tmp_path):
    """A first batch killed before its commit leaves only its own files: the restart must create the table."""
    table = tmp_path / "bronze"
    leftover = table / f"{batch_file_prefix('paths-test', 0)}p00000-a0-x.snappy.parquet"
    (table / "storeDate=2026-01-01").mkdir(parents=True)  # an empty partition folder of the dead attempt
    leftover.write_bytes(b"PAR1 torn")
    df = spark.range(3).selectExpr("id")
    assert write_batch(df, str(table), "paths-test", 0).rows == 3
    assert not leftover.exists(), "the dead attempt's file was removed by the commit"


def test_apps_refuse_a_garbage_table_before_starting_any_query(spark, tmp_path):
    from streaming_apps.apps import AppConfig, AppError, start

    for sink in ("deltalake", "delta"):
        cfg = AppConfig(app="bronze", brokers="broker-a=127.0.0.1:1", workdir=tmp_path / sink, sink=sink,
                        trigger="available-now")
        _garbage_table(cfg.table_path("bronze"))
        active = len(spark.streams.active)
        with pytest.raises(AppError) as e:
            start(spark, cfg)
        line = _one_line(str(e.value))
        assert str(cfg.table_path("bronze")) in line and "00000000000000000000.json" in line
        assert len(spark.streams.active) == active and not cfg.status_file.exists()
