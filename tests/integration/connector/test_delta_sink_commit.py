"""The Delta sink's writer driven directly (no Spark): real Parquet files, real Delta tables in tmp_path.

Spark calls ``write`` on executors and ``commit``/``abort`` on the driver; here the test plays both roles,
which lets it replay, abort and race batches exactly as a crash or a second query would.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql.types import (
    BinaryType,
    DateType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connector.delta.faults import FAULT_INJECTION_ENV, FAULT_MARKER_ENV, FAULT_PAUSE_ENV
from connector.delta.file_names import batch_file_prefix
from connector.delta.maintenance import (
    MaintenancePolicy,
    TableMaintainer,
    find_orphan_files,
    remove_orphan_files,
    run_maintenance,
)
from connector.delta.messages import DeltaLakeCommitMessage
from connector.delta.sink import DeltaLakeDataSource, DeltaLakeStreamWriter
from connector.errors import DeltaSchemaMismatchError, DeltaSinkConfigError, InjectedFaultError

SCHEMA = StructType([StructField("id", LongType()), StructField("topic", StringType()),
                     StructField("day", DateType()), StructField("body", BinaryType())])
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("topic", pa.string()), ("day", pa.date32()), ("body", pa.binary())])
TOPICS = ["TopicA", "Topic/B c%", None]


def make_writer(path: Path, app_id: str = "app", schema: StructType = SCHEMA, **options) -> DeltaLakeStreamWriter:
    """What Spark does on the driver: DataSource(options).streamWriter(schema, overwrite=False)."""
    return DeltaLakeDataSource({"path": str(path), "appId": app_id, **options}).streamWriter(schema, False)


def rows(start: int, n: int, body_bytes: int = 16) -> pa.RecordBatch:
    ids = list(range(start, start + n))
    return pa.record_batch([
        pa.array(ids, pa.int64()),
        pa.array([TOPICS[i % 3] for i in ids]),
        pa.array([dt.date(2024, 1, 1 + i % 2) for i in ids]),
        pa.array([i.to_bytes(8, "big") * (body_bytes // 8) for i in ids], pa.binary()),
    ], schema=ARROW_SCHEMA)


def task(writer: DeltaLakeStreamWriter, *batches: pa.RecordBatch) -> DeltaLakeCommitMessage:
    """What one executor task does."""
    return writer.write(iter(batches))


def read_delta(path: Path, version: int | None = None) -> pa.Table:
    """The table's rows via delta-rs' own query engine, sorted by id."""
    table = DeltaTable(str(path), version=version)
    reader = QueryBuilder().register("t", table).execute("SELECT * FROM t ORDER BY id")
    return pa.RecordBatchReader.from_stream(reader).read_all()


def ids_of(path: Path, version: int | None = None) -> list[int]:
    return read_delta(path, version).column("id").to_pylist()


def parquet_on_disk(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_delta_log" not in p.parts}


def table_files(path: Path) -> set[str]:
    return {os.path.relpath(u, path) for u in DeltaTable(str(path)).file_uris()}


def message_files(*messages: DeltaLakeCommitMessage) -> set[str]:
    return {f.path for m in messages for f in m.files}


# --- commit and replay -----------------------------------------------------------------------------
def test_first_commit_creates_table_with_txn_files_and_stats(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    m1, m2 = task(w, rows(0, 50), rows(50, 50)), task(w, rows(100, 20))
    w.commit([m1, m2], 0)
    table = DeltaTable(str(path))
    assert table.version() == 0
    assert table.transaction_version("app") == 0
    assert ids_of(path) == list(range(120))
    assert table_files(path) == message_files(m1, m2) == parquet_on_disk(path)
    got = read_delta(path).to_pylist()[7]
    assert got == {"id": 7, "topic": "Topic/B c%", "day": dt.date(2024, 1, 2), "body": (7).to_bytes(8, "big") * 2}
    # Per-file stats in the log describe exactly the rows of each file.
    for info in m1.files + m2.files:
        data = pq.read_table(path / info.path)
        stats = json.loads(info.stats)
        assert stats["numRecords"] == data.num_rows == info.num_records
        assert stats["minValues"]["id"] == min(data.column("id").to_pylist())
        assert stats["maxValues"]["id"] == max(data.column("id").to_pylist())
        assert stats["nullCount"]["topic"] == data.column("topic").null_count
        assert info.size == (path / info.path).stat().st_size
    w.commit([task(w, rows(120, 5))], 1)
    assert DeltaTable(str(path)).transaction_version("app") == 1
    assert ids_of(path) == list(range(125))


def test_replayed_batch_is_skipped_and_its_fresh_files_removed(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    first = task(w, rows(0, 30))
    w.commit([first], 0)
    committed = table_files(path)
    # The process died after the Delta commit and before Spark's commit log: Spark re-runs batch 0.
    replay = task(make_writer(path), rows(0, 30))
    assert message_files(replay) <= parquet_on_disk(path)
    make_writer(path).commit([replay], 0)
    assert DeltaTable(str(path)).version() == 0
    assert ids_of(path) == list(range(30))
    assert parquet_on_disk(path) == committed == message_files(first)


def test_recommitting_the_same_messages_never_deletes_committed_files(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    m = task(w, rows(0, 10))
    w.commit([m], 0)
    w.commit([m], 0)
    assert parquet_on_disk(path) == message_files(m)
    assert ids_of(path) == list(range(10))


def test_older_batch_ids_are_replays_too(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    for b in range(3):
        w.commit([task(w, rows(10 * b, 10))], b)
    stale = task(w, rows(10, 10))
    w.commit([stale], 1)
    assert ids_of(path) == list(range(30))
    assert not message_files(stale) & parquet_on_disk(path)


def test_empty_batches_record_the_txn_and_can_create_the_table(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    w.commit([task(w), None], 0)
    table = DeltaTable(str(path))
    assert table.transaction_version("app") == 0 and table.file_uris() == []
    assert [f.name for f in table.schema().fields] == ["id", "topic", "day", "body"]
    w.commit([task(w, rows(0, 3))], 1)
    w.commit([], 2)
    assert DeltaTable(str(path)).transaction_version("app") == 2
    assert ids_of(path) == [0, 1, 2]


# --- abort and failed tasks ------------------------------------------------------------------------
def test_abort_after_commit_keeps_committed_files(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    m = task(w, rows(0, 10))
    w.commit([m], 0)
    w.abort([m, None], 0)
    assert parquet_on_disk(path) == message_files(m)
    assert ids_of(path) == list(range(10))


def test_abort_of_uncommitted_batch_removes_only_its_files(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    kept = task(w, rows(0, 10))
    w.commit([kept], 0)
    failed = task(w, rows(10, 10))
    assert message_files(failed) <= parquet_on_disk(path)
    w.abort([failed, None], 1)
    assert parquet_on_disk(path) == message_files(kept)
    assert DeltaTable(str(path)).transaction_version("app") == 0
    # Aborting before the table exists removes the files too.
    other = tmp_path / "other"
    w2 = make_writer(other)
    m = task(w2, rows(0, 5))
    w2.abort([m], 0)
    assert parquet_on_disk(other) == set()


def test_failed_write_task_removes_its_own_files(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path, targetFileSize="1024", partitionBy="topic")

    def failing():
        yield rows(0, 200, body_bytes=64)
        yield rows(200, 200, body_bytes=64)
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        w.write(failing())
    assert parquet_on_disk(path) == set()


# --- files: size, partitions -----------------------------------------------------------------------
def test_target_file_size_rolls_files(tmp_path):
    path = tmp_path / "t"
    target = 64 * 1024
    w = make_writer(path, targetFileSize=str(target), compression="none")
    m = task(w, *[rows(i * 500, 500, body_bytes=256) for i in range(8)])  # ~1 MiB of bodies
    w.commit([m], 0)
    sizes = sorted(f.size for f in m.files)
    assert len(sizes) >= 8
    assert all(s <= 3 * target for s in sizes), sizes
    assert all(s >= target * 0.5 for s in sizes[1:]), sizes  # only the last file may be small
    assert ids_of(path) == list(range(4000))


def test_partition_by_writes_hive_folders_and_partition_values(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path, partitionBy="topic,day")
    m = task(w, rows(0, 60), rows(60, 60))
    w.commit([m], 0)
    folders = {str(Path(p).parent) for p in parquet_on_disk(path)}
    assert folders == {f"topic={t}/day=2024-01-0{d}" for t in ("TopicA", "Topic%2FB c%25", "__HIVE_DEFAULT_PARTITION__")
                       for d in (1, 2)}
    table = DeltaTable(str(path))
    assert table.metadata().partition_columns == ["topic", "day"]
    got = read_delta(path)
    assert got.column("id").to_pylist() == list(range(120))
    assert got.column("topic").to_pylist() == [TOPICS[i % 3] for i in range(120)]
    assert got.column("day").to_pylist() == [dt.date(2024, 1, 1 + i % 2) for i in range(120)]
    for info in m.files:
        data = pq.read_table(path / info.path)
        assert data.column_names == ["id", "body"]  # partition columns are not stored in the files
        first = data.column("id")[0].as_py()
        expected_topic = TOPICS[first % 3]
        assert info.partition_values == {"topic": expected_topic, "day": f"2024-01-0{1 + first % 2}"}
    # A later writer without partitionBy adopts the table's partitioning.
    w2 = make_writer(path, app_id="app")
    assert w2.partition_by == ("topic", "day")
    w2.commit([task(w2, rows(120, 3))], 1)
    assert ids_of(path) == list(range(123))


def test_timestamp_partition_values_read_back(tmp_path):
    schema = StructType([StructField("minute", TimestampType()), StructField("n", LongType())])
    path = tmp_path / "t"
    w = make_writer(path, schema=schema, partitionBy="minute")
    minutes = [dt.datetime(2024, 3, 1, 12, m, tzinfo=dt.UTC) for m in (0, 1)]
    batch = pa.record_batch([pa.array([minutes[i % 2] for i in range(6)], pa.timestamp("us", "UTC")),
                             pa.array(range(6), pa.int64())], names=["minute", "n"])
    w.commit([task(w, batch)], 0)
    table = DeltaTable(str(path))
    reader = QueryBuilder().register("t", table).execute("SELECT n, minute FROM t ORDER BY n")
    got = pa.RecordBatchReader.from_stream(reader).read_all().to_pylist()
    assert [r["minute"] for r in got] == [minutes[i % 2] for i in range(6)]


# --- schema ----------------------------------------------------------------------------------------
def test_stream_writer_rejects_a_table_with_another_schema(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    w.commit([task(w, rows(0, 3))], 0)
    other = StructType([StructField("id", StringType()), StructField("topic", StringType()),
                        StructField("queueId", LongType())])
    with pytest.raises(DeltaSchemaMismatchError) as e:
        make_writer(path, app_id="other", schema=other)
    msg = str(e.value)
    assert str(path) in msg and "day" in msg and "body" in msg and "queueId" in msg
    assert "column id is long in the table but string in the stream" in msg
    with pytest.raises(DeltaSchemaMismatchError, match="partitionBy"):
        make_writer(path, partitionBy="topic")


def test_schema_change_under_a_running_stream_fails_the_commit_and_removes_files(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)  # planned while the table did not exist
    other_schema = StructType([StructField("id", LongType()), StructField("note", StringType())])
    other = make_writer(path, app_id="other", schema=other_schema)
    other.commit([task(other, pa.record_batch([pa.array([1], pa.int64()), pa.array(["x"])], names=["id", "note"]))], 0)
    m = task(w, rows(0, 5))
    with pytest.raises(DeltaSchemaMismatchError, match="note"):
        w.commit([m], 0)
    assert not message_files(m) & parquet_on_disk(path)
    assert DeltaTable(str(path)).transaction_version("app") is None


# --- concurrency -----------------------------------------------------------------------------------
def _run_threads(*targets):
    errors: list[BaseException] = []

    def guard(fn):
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=guard, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "commit thread hung"
    assert not errors, errors


def test_two_queries_with_different_app_ids_both_commit(tmp_path):
    path = tmp_path / "t"
    batches = 4
    barrier = threading.Barrier(2, timeout=60)

    def query(app_id: str, first_id: int):
        def run():
            w = make_writer(path, app_id=app_id)
            for b in range(batches):
                m = task(w, rows(first_id + 10 * b, 10))
                barrier.wait()  # both commit at once, the first time both try to create the table
                w.commit([m], b)
        return run

    _run_threads(query("query-a", 0), query("query-b", 1000))
    table = DeltaTable(str(path))
    assert table.transaction_version("query-a") == table.transaction_version("query-b") == batches - 1
    assert ids_of(path) == list(range(40)) + list(range(1000, 1040))
    assert table_files(path) == parquet_on_disk(path)


def test_the_same_batch_committed_twice_at_once_lands_once(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    w.commit([task(w, rows(0, 5))], 0)
    barrier = threading.Barrier(2, timeout=60)
    messages = [task(w, rows(5, 5)), task(w, rows(5, 5))]

    def committer(m):
        def run():
            barrier.wait()
            make_writer(path).commit([m], 1)
        return run

    _run_threads(committer(messages[0]), committer(messages[1]))
    assert ids_of(path) == list(range(10))
    assert DeltaTable(str(path)).transaction_version("app") == 1
    assert table_files(path) == parquet_on_disk(path)
    assert len(message_files(*messages) & parquet_on_disk(path)) == 1


# --- maintenance -----------------------------------------------------------------------------------
def test_compaction_keeps_the_data_identical(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path, partitionBy="day")
    for b in range(6):
        w.commit([task(w, rows(20 * b, 10)), task(w, rows(20 * b + 10, 10))], b)
    before = read_delta(path)
    files_before = len(table_files(path))
    result = run_maintenance(str(path), compact=True, checkpoint=True)
    assert files_before == 24 and len(table_files(path)) == 2  # one file per day
    assert result["compaction"]["numFilesRemoved"] == 24
    assert read_delta(path).equals(before)
    assert DeltaTable(str(path)).transaction_version("app") == 5
    assert any(p.name.endswith(".checkpoint.parquet") for p in (path / "_delta_log").iterdir())
    w.commit([task(w, rows(1000, 1))], 6)  # the stream goes on after maintenance
    assert ids_of(path)[-1] == 1000


def test_orphan_files_are_found_and_removed_but_live_and_tombstoned_files_kept(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    for b in range(3):
        w.commit([task(w, rows(10 * b, 10))], b)
    run_maintenance(str(path), compact=True, checkpoint=True)  # batch files become tombstones
    w.commit([task(w, rows(30, 10))], 3)  # a commit after the checkpoint
    orphan = task(w, rows(40, 10))  # written, then the process died before commit
    foreign = path / "part-00000-foreign.snappy.parquet"
    pq.write_table(pa.table({"x": [1]}), foreign)
    later = 10**13
    assert find_orphan_files(str(path), grace_period_ms=3_600_000) == []  # all files are younger than 1 h
    assert find_orphan_files(str(path), grace_period_ms=3_600_000, now_ms=later) == sorted(message_files(orphan))
    removed = remove_orphan_files(str(path), grace_period_ms=0, now_ms=later)
    assert removed == sorted(message_files(orphan))
    assert not message_files(orphan) & parquet_on_disk(path)
    assert foreign.exists()
    assert ids_of(path) == list(range(40))
    assert ids_of(path, version=2) == list(range(30))  # time travel still finds the tombstoned files


# --- fault-injection points --------------------------------------------------------------------------
def batch_writer(path: Path, batch_id: int) -> DeltaLakeStreamWriter:
    """A writer whose tasks name their files for ``batch_id``, as Spark's task property does."""
    w = make_writer(path)
    w.batch_id = batch_id
    return w


def test_fault_before_delta_commit_leaves_written_files_uncommitted_and_the_rerun_removes_them(tmp_path, monkeypatch):
    path = tmp_path / "t"
    w = batch_writer(path, 0)
    w.commit([task(w, rows(0, 10))], 0)
    monkeypatch.setenv(FAULT_INJECTION_ENV, "before-delta-commit:1")
    w = batch_writer(path, 1)
    died = task(w, rows(10, 10))
    with pytest.raises(InjectedFaultError, match="before-delta-commit reached in batch 1"):
        w.commit([died], 1)
    assert DeltaTable(str(path)).transaction_version("app") == 0
    assert message_files(died) <= parquet_on_disk(path)  # written, not committed
    monkeypatch.delenv(FAULT_INJECTION_ENV)
    # Spark re-runs batch 1 after the restart: fresh files; the dead attempt's files go.
    rerun = task(batch_writer(path, 1), rows(10, 10))
    batch_writer(path, 1).commit([rerun], 1)
    assert ids_of(path) == list(range(20))
    assert parquet_on_disk(path) == table_files(path)
    assert not message_files(died) & parquet_on_disk(path)


def test_fault_after_delta_commit_then_replay_is_skipped_and_every_stale_attempt_removed(tmp_path, monkeypatch):
    path = tmp_path / "t"
    w = batch_writer(path, 0)
    w.commit([task(w, rows(0, 10))], 0)
    w = batch_writer(path, 1)
    dead_attempt = task(w, rows(10, 10))  # batch 1, attempt 1: written, died before the Delta commit
    # batch 1, attempt 2: committed, then the process died before removing attempt 1's files
    monkeypatch.setenv(FAULT_INJECTION_ENV, "after-delta-commit:1")
    committed = task(w, rows(10, 10))
    with pytest.raises(InjectedFaultError, match="after-delta-commit"):
        w.commit([committed], 1)
    monkeypatch.delenv(FAULT_INJECTION_ENV)
    assert DeltaTable(str(path)).transaction_version("app") == 1
    assert message_files(dead_attempt) <= parquet_on_disk(path)
    # batch 1 again (Spark had no commit log entry): skipped; its fresh files and the dead attempt's removed
    replay = task(batch_writer(path, 1), rows(10, 10))
    batch_writer(path, 1).commit([replay], 1)
    assert DeltaTable(str(path)).version() == 1
    assert ids_of(path) == list(range(20))
    assert parquet_on_disk(path) == table_files(path)
    assert message_files(committed) <= table_files(path)
    assert not (message_files(dead_attempt) | message_files(replay)) & parquet_on_disk(path)


def test_replay_after_compaction_keeps_tombstoned_files_of_the_batch(tmp_path):
    path = tmp_path / "t"
    for b in range(3):
        w = batch_writer(path, b)
        w.commit([task(w, rows(10 * b, 10))], b)
    run_maintenance(str(path), compact=True, checkpoint=True)
    tombstoned = parquet_on_disk(path) - table_files(path)
    assert len(tombstoned) == 3  # the batch files, now named only by remove actions
    w = batch_writer(path, 2)
    w.commit([task(w, rows(20, 10))], 2)  # replay of batch 2
    assert tombstoned <= parquet_on_disk(path), "time travel needs the tombstoned files"
    assert ids_of(path, version=2) == list(range(30))
    assert ids_of(path) == list(range(30))


def test_fault_point_with_a_marker_writes_it_and_waits_to_be_killed(tmp_path, monkeypatch):
    path = tmp_path / "t"
    marker = tmp_path / "marker.json"
    monkeypatch.setenv(FAULT_INJECTION_ENV, "after-task-write:3:t")
    monkeypatch.setenv(FAULT_MARKER_ENV, str(marker))
    monkeypatch.setenv(FAULT_PAUSE_ENV, "0.2")
    w = DeltaLakeDataSource({"path": str(path), "appId": "app"}).streamWriter(SCHEMA, False)
    w.write(iter([rows(0, 3)]))  # no batch id from Spark here: the point does not match
    w.batch_id = 3
    with pytest.raises(InjectedFaultError, match="not killed within 0.2 s"):
        w.write(iter([rows(0, 3)]))
    info = json.loads(marker.read_text())
    assert info["point"] == "after-task-write" and info["batchId"] == 3 and info["pid"] == os.getpid()
    assert info["table"] == str(path)
    assert all(not Path(f).name.startswith(batch_file_prefix("app", 3)) for f in parquet_on_disk(path)), \
        "the failed task removes its files"
    monkeypatch.setenv(FAULT_INJECTION_ENV, "after-task-write:3:other-table")
    assert w.write(iter([rows(0, 3)])).files  # another table: no fault
    monkeypatch.setenv(FAULT_INJECTION_ENV, "somewhere:3")
    with pytest.raises(DeltaSinkConfigError, match="POINT:BATCH"):
        w.write(iter([rows(0, 3)]))


# --- scheduled maintenance -----------------------------------------------------------------------------
def test_table_maintainer_compacts_every_n_batches_and_keeps_the_data(tmp_path):
    path = tmp_path / "t"
    results: list[dict] = []
    maintainer = TableMaintainer([str(path), str(tmp_path / "not-yet")], MaintenancePolicy(every_batches=3),
                                 on_result=results.append)
    w = make_writer(path)
    started = []
    for b in range(7):
        w.commit([task(w, rows(10 * b, 5)), task(w, rows(10 * b + 5, 5))], b)
        started.append(maintainer.batch_completed(b))
        assert maintainer.wait(60)
        assert not maintainer.batch_completed(b), "a repeated batch id counts once"
    assert started == [False, False, True, False, False, True, False]
    assert maintainer.runs == 2
    assert [r["table"] for r in results] == [str(path)] * 2  # the missing table is skipped quietly
    assert results[0]["filesRemoved"] == 6 and results[0]["filesAdded"] == 1
    assert all("error" not in r for r in results)
    assert len(table_files(path)) == 1 + 2  # compacted file + batch 6's two files
    assert ids_of(path) == [i for b in range(7) for i in range(10 * b, 10 * b + 10)]
    assert DeltaTable(str(path)).transaction_version("app") == 6
    assert any(p.name.endswith(".checkpoint.parquet") for p in (path / "_delta_log").iterdir())


def test_table_maintainer_reports_errors_without_raising(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    w.commit([task(w, rows(0, 3))], 0)

    def broken(uri: str) -> dict:
        raise RuntimeError(f"disk full under {uri}")

    results: list[dict] = []
    maintainer = TableMaintainer([str(path)], MaintenancePolicy(every_batches=1), runner=broken,
                                 on_result=results.append)
    assert maintainer.batch_completed(0)
    assert maintainer.wait(60)
    assert results[0]["error"] == f"RuntimeError: disk full under {path}"
    assert maintainer.batch_completed(1) and maintainer.wait(60)
    assert results[1]["error"].startswith("RuntimeError")
    disabled = TableMaintainer([str(path)], MaintenancePolicy(every_batches=0))
    assert not any(disabled.batch_completed(b) for b in range(10))


def test_run_maintenance_vacuums_with_the_table_retention(tmp_path):
    path = tmp_path / "t"
    w = make_writer(path)
    for b in range(3):
        w.commit([task(w, rows(10 * b, 10))], b)
    result = run_maintenance(str(path), compact=True, checkpoint=True, vacuum=True, cleanup_log=True)
    assert result["vacuumed"] == []  # the compacted files are tombstones younger than 7 days
    assert result["compaction"]["numFilesRemoved"] == 3
    assert len(parquet_on_disk(path)) == 4
    assert ids_of(path) == list(range(30))
