"""``writeStream.format("deltalake")`` in a real Spark session: exactly-once across restarts and replays.

The input is Spark's own Parquet file source with ``maxFilesPerTrigger=1``, so every input file is one
micro-batch and the batch ids are known in advance; queries run with Trigger.AvailableNow.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from connector.delta.file_names import SINK_FILE_NAME, batch_file_prefix
from connector.delta.sink import DeltaLakeDataSource

pytestmark = pytest.mark.spark

QUERY_TIMEOUT_S = 120
ROWS_PER_FILE = 40
SOURCE_SCHEMA = "id long, topic string, queueOffset long, body binary"


@pytest.fixture(scope="module")
def sink_spark(spark):
    spark.dataSource.register(DeltaLakeDataSource)
    return spark


def add_input_files(src: Path, first: int, count: int) -> None:
    """Input files ``first``..``first+count-1``, each ROWS_PER_FILE rows with ids following on."""
    src.mkdir(parents=True, exist_ok=True)
    for f in range(first, first + count):
        ids = list(range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
        pq.write_table(pa.table({
            "id": pa.array(ids, pa.int64()),
            "topic": pa.array([f"Topic{i % 3}" for i in ids]),
            "queueOffset": pa.array([i // 3 for i in ids], pa.int64()),
            "body": pa.array([i.to_bytes(4, "big") * 8 for i in ids], pa.binary()),
        }), src / f"input-{f:04d}.parquet")


def run_available_now(spark, src: Path, table: Path, checkpoint: Path, **options) -> None:
    """Run one AvailableNow query over everything in ``src``; fail the test if it errs or does not finish."""
    df = spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))
    writer = df.writeStream.format("deltalake").option("checkpointLocation", str(checkpoint))
    for k, v in options.items():
        writer = writer.option(k, v)
    query = writer.trigger(availableNow=True).start(str(table))
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), f"query did not finish within {QUERY_TIMEOUT_S} s"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()


def read_delta(table: Path) -> pa.Table:
    dt = DeltaTable(str(table))
    reader = QueryBuilder().register("t", dt).execute("SELECT * FROM t ORDER BY id")
    return pa.RecordBatchReader.from_stream(reader).read_all()


def parquet_on_disk(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet") if "_delta_log" not in p.parts}


def table_files(table: Path) -> set[str]:
    return {os.path.relpath(u, table) for u in DeltaTable(str(table)).file_uris()}


def test_stream_lands_every_row_once_and_a_restart_continues(sink_spark, tmp_path):
    src, table, cp = tmp_path / "src", tmp_path / "bronze", tmp_path / "cp"
    add_input_files(src, 0, 3)
    run_available_now(sink_spark, src, table, cp, appId="bronze", partitionBy="topic")
    dt = DeltaTable(str(table))
    assert dt.transaction_version("bronze") == 2  # batches 0, 1, 2
    assert dt.metadata().partition_columns == ["topic"]
    got = read_delta(table)
    assert got.column("id").to_pylist() == list(range(3 * ROWS_PER_FILE))
    row = got.slice(41, 1).to_pylist()[0]
    assert row == {"id": 41, "topic": "Topic2", "queueOffset": 13, "body": (41).to_bytes(4, "big") * 8}
    assert {Path(p).parent.name for p in parquet_on_disk(table)} == {"topic=Topic0", "topic=Topic1", "topic=Topic2"}
    prefixes = tuple(batch_file_prefix("bronze", b) for b in range(3))
    assert all(Path(p).name.startswith(prefixes) for p in parquet_on_disk(table))

    assert all(SINK_FILE_NAME.match(Path(p).name) for p in parquet_on_disk(table))

    # A run that died before committing batch 3 left a file of it behind; the rerun of batch 3 removes it.
    leftover = table / "topic=Topic0" / f"{batch_file_prefix('bronze', 3)}p00000-a0-{uuid.uuid4()}.snappy.parquet"
    shutil.copy(next((table / "topic=Topic0").glob("*.parquet")), leftover)
    add_input_files(src, 3, 2)
    run_available_now(sink_spark, src, table, cp, appId="bronze")  # partitionBy comes from the table
    assert not leftover.exists()
    dt = DeltaTable(str(table))
    assert dt.transaction_version("bronze") == 4
    assert read_delta(table).column("id").to_pylist() == list(range(5 * ROWS_PER_FILE))
    assert table_files(table) == parquet_on_disk(table)


def test_batch_replayed_after_a_crash_between_delta_and_spark_commits_is_skipped(sink_spark, tmp_path):
    src, table, cp = tmp_path / "src", tmp_path / "t", tmp_path / "cp"
    add_input_files(src, 0, 2)
    run_available_now(sink_spark, src, table, cp, appId="replay")
    version = DeltaTable(str(table)).version()
    committed_files = parquet_on_disk(table)
    # As if the driver died after the Delta commit of batch 1 and before Spark's commit log entry for it.
    (cp / "commits" / "1").unlink()
    crc = cp / "commits" / ".1.crc"
    if crc.exists():
        crc.unlink()
    run_available_now(sink_spark, src, table, cp, appId="replay")
    assert (cp / "commits" / "1").exists(), "Spark did not re-run batch 1"
    dt = DeltaTable(str(table))
    assert dt.version() == version  # nothing committed for the replay
    assert dt.transaction_version("replay") == 1
    assert read_delta(table).column("id").to_pylist() == list(range(2 * ROWS_PER_FILE))
    assert parquet_on_disk(table) == committed_files  # the replay's fresh files were removed

    add_input_files(src, 2, 1)
    run_available_now(sink_spark, src, table, cp, appId="replay")
    assert DeltaTable(str(table)).transaction_version("replay") == 2
    assert read_delta(table).column("id").to_pylist() == list(range(3 * ROWS_PER_FILE))


def test_failed_batch_is_aborted_and_its_rerun_lands_once(sink_spark, tmp_path):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    src, table, cp = tmp_path / "src", tmp_path / "t", tmp_path / "cp"
    add_input_files(src, 0, 1)
    table_dir = str(table)

    def fail_in_second_partition(i):
        """Task 1 fails once task 0 has started its file, so the abort has files to clean."""
        import glob
        import time

        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 1:
            deadline = time.monotonic() + 60
            while not glob.glob(f"{table_dir}/part-*-p00000-*.parquet") and time.monotonic() < deadline:
                time.sleep(0.05)
            raise RuntimeError("injected task failure")
        return i

    failing = F.udf(fail_in_second_partition, LongType())
    df = sink_spark.readStream.schema(SOURCE_SCHEMA).parquet(str(src)).repartition(2)
    query = (df.withColumn("id", failing("id")).writeStream.format("deltalake").option("appId", "aborts")
             .option("checkpointLocation", str(cp)).trigger(availableNow=True).start(table_dir))
    with pytest.raises(Exception, match="injected task failure"):
        try:
            query.awaitTermination(QUERY_TIMEOUT_S)
        finally:
            query.stop()
    assert parquet_on_disk(table) == set(), "abort left files of the failed batch"
    assert not (table / "_delta_log").exists()

    run_available_now(sink_spark, src, table, cp, appId="aborts")  # the same batch 0, now without the failure
    assert DeltaTable(table_dir).transaction_version("aborts") == 0
    assert read_delta(table).column("id").to_pylist() == list(range(ROWS_PER_FILE))
    assert table_files(table) == parquet_on_disk(table)


def _failure_message(spark, src: Path, table: Path, cp: Path, **options) -> str:
    with pytest.raises(Exception) as e:  # noqa: B017 - Spark wraps the sink's error; its text is what matters
        run_available_now(spark, src, table, cp, **options)
    return str(e.value)


def test_missing_app_id_or_path_fails_the_query_with_a_clear_message(sink_spark, tmp_path):
    src = tmp_path / "src"
    add_input_files(src, 0, 1)
    msg = _failure_message(sink_spark, src, tmp_path / "t", tmp_path / "cp")
    assert 'needs option "appId"' in msg
    assert not (tmp_path / "t" / "_delta_log").exists()
    df = sink_spark.readStream.schema(SOURCE_SCHEMA).parquet(str(src))
    with pytest.raises(Exception, match="needs the table location"):  # noqa: B017 - Spark wraps the error
        query = (df.writeStream.format("deltalake").option("appId", "a")
                 .option("checkpointLocation", str(tmp_path / "cp2")).trigger(availableNow=True).start())
        try:
            query.awaitTermination(QUERY_TIMEOUT_S)
        finally:
            query.stop()


def test_stream_into_a_table_with_another_schema_fails_naming_the_columns(sink_spark, tmp_path):
    src, table = tmp_path / "src", tmp_path / "t"
    add_input_files(src, 0, 1)
    run_available_now(sink_spark, src, table, tmp_path / "cp1", appId="first")
    other_src = tmp_path / "other"
    other_src.mkdir()
    pq.write_table(pa.table({"id": pa.array(["x"]), "topic": pa.array(["T"]), "queueOffset": pa.array([1]),
                             "queueId": pa.array([0], pa.int32())}), other_src / "x.parquet")
    df = sink_spark.readStream.schema("id string, topic string, queueOffset long, queueId int").parquet(str(other_src))
    with pytest.raises(Exception) as e:  # noqa: B017 - Spark wraps the sink's error
        query = (df.writeStream.format("deltalake").option("appId", "second")
                 .option("checkpointLocation", str(tmp_path / "cp2")).trigger(availableNow=True).start(str(table)))
        try:
            assert query.awaitTermination(QUERY_TIMEOUT_S), "query did not finish"
        finally:
            query.stop()
        raise AssertionError(f"no error, exception() = {query.exception()}")
    msg = str(e.value)
    assert "does not match Delta table" in msg
    assert "stream columns not in the table: queueId" in msg
    assert "table columns missing in the stream: body" in msg
    assert "column id is long in the table but string in the stream" in msg
    assert DeltaTable(str(table)).transaction_version("second") is None
