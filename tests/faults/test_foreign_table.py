"""A foreign Delta table at bronze's path is refused before anything is written to it (issue 22, item 1).

bronze adds ``decodeError`` to a bronze table of an earlier version (docs/source.md "Bad records"); a table
with other columns or other partitioning must keep its Delta version and schema when the app refuses it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from connector.errors import DeltaSchemaMismatchError
from connector.landing import add_new_source_columns, with_store_date
from connector.protocol.commitlog import encode_record
from tests.support.decoding import decode_commitlog_range


def _snapshot(path: str) -> tuple[int, str, list[str]]:
    table = DeltaTable(path)
    return table.version(), table.schema().to_json(), list(table.metadata().partition_columns)


def _old_bronze_rows() -> pa.Table:
    """One row as a bronze table of an earlier version (before ``decodeError``) holds it."""
    record = encode_record(commit_log_offset=0, topic="t", body=b"old row", store_timestamp=1_790_000_000_000)
    batch = with_store_date(next(decode_commitlog_range([(0, record)], 0, len(record), 1 << 20, broker="b")))
    return pa.Table.from_batches([batch]).drop_columns(["decodeError"])


def _foreign_table_under_bronze(broker_factory, tmp_path):
    """A master holding one message, and a foreign Delta table (``id``, ``note``) at bronze's path under a workdir:
    ``(broker, workdir, bronze path, the table's snapshot)``."""
    from connector.client.producer import Producer

    broker = broker_factory("master")
    with Producer(broker.remoting_addr) as producer:
        producer.send("orders", b"one message")
    workdir = tmp_path / "w"
    path = str(workdir / "tables" / "bronze")
    write_deltalake(path, pa.table({"id": pa.array([7], pa.int64()), "note": ["not bronze"]}))
    return broker, workdir, path, _snapshot(path)


@pytest.mark.parametrize("kind", ["other columns", "bronze's columns, other partitioning"])
def test_a_table_that_is_not_an_earlier_bronze_is_refused_unchanged(tmp_path, kind):
    path = str(tmp_path / "bronze")
    if kind == "other columns":
        write_deltalake(path, pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
        expected = "table columns missing in the stream: id, name"
    else:
        write_deltalake(path, _old_bronze_rows(), partition_by=["topic"])
        expected = "differs from the table's partition columns"
    before = _snapshot(path)
    with pytest.raises(DeltaSchemaMismatchError, match=expected):
        add_new_source_columns(path)
    assert _snapshot(path) == before  # version 0, same schema: nothing was written


@pytest.mark.spark
def test_bronze_refuses_a_foreign_table_without_writing_to_it(spark, broker_factory, tmp_path):
    """The app itself (in this process, the shared session): the refusal names the schema mismatch and the
    table's version and schema are untouched."""
    from streaming_apps.apps import AppConfig, AppError, run_app
    from streaming_apps.spark_session import register_data_sources

    register_data_sources(spark)
    broker, workdir, path, before = _foreign_table_under_bronze(broker_factory, tmp_path)
    config = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}",
                       workdir=str(workdir), trigger="available-now")
    with pytest.raises((AppError, DeltaSchemaMismatchError), match="does not match Delta table"):
        run_app(spark, config, max_runtime_s=240)
    assert _snapshot(path) == before
    assert DeltaTable(path).to_pyarrow_table().to_pylist() == [{"id": 7, "note": "not bronze"}]


def test_the_cli_refuses_a_foreign_table_in_one_line_with_exit_2_before_spark(broker_factory, tmp_path):
    """``hareplica run bronze`` over a foreign table: the refusal is decided before Spark starts (the table's
    schema read with deltalake), one line on stderr, exit 2 like the other refusals; the table is untouched."""
    import subprocess
    import sys

    broker, workdir, path, before = _foreign_table_under_bronze(broker_factory, tmp_path)
    result = subprocess.run([sys.executable, "-m", "streaming_apps.cli", "run", "bronze", "--workdir", str(workdir),
                             "--brokers", f"broker-a={broker.ha_addr}", "--trigger", "available-now"],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: table bronze: "), lines
    assert "does not match Delta table" in lines[0] and "table columns missing in the stream: id, note" in lines[0]
    assert not (workdir / "checkpoints").exists()  # nothing started
    assert _snapshot(path) == before
