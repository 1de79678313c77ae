"""connector.landing.upsert with real delta-rs on a local folder: staged rows merged as each key's latest with the
batch's txn, a replayed batch leaving the table as it was, staged files of this and earlier batches removed, an
abort removing only its batch's (docs/tables.md "Upserts")."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql.types import LongType, StringType, StructField, StructType

from connector.delta.file_names import task_file_prefix
from connector.delta.options import DeltaSinkOptions
from connector.landing.upsert import DELETE_COLUMN, ORDER_COLUMN, STAGED_FOLDER, UpsertStreamWriter

SCHEMA = StructType([StructField("id", StringType()), StructField("amount", LongType())])
APP = "tables-app"


def _writer(tmp_path) -> UpsertStreamWriter:
    options = DeltaSinkOptions.from_options({"path": str(tmp_path / "accounts"), "appId": APP})
    return UpsertStreamWriter(options, SCHEMA, (), ("id",))


def _stage(writer, batch_id: int, rows: list[tuple[str, int | None, int, bool]]):
    """One task's staged file of (id, amount, order, delete) rows for ``batch_id``; its commit message."""
    staged = writer.open_task()  # outside Spark: no batch id from a TaskContext, so it is named here
    staged.batch_id = batch_id
    staged.files.name_prefix = task_file_prefix(APP, batch_id, 0, 0)
    staged.write(pa.record_batch({
        "id": pa.array([r[0] for r in rows]), "amount": pa.array([r[1] for r in rows], pa.int64()),
        ORDER_COLUMN: pa.array([r[2] for r in rows], pa.int64()),
        DELETE_COLUMN: pa.array([r[3] for r in rows], pa.bool_())}))
    return staged.close()


def _content(tmp_path) -> dict:
    return {r["id"]: r["amount"] for r in DeltaTable(str(tmp_path / "accounts")).to_pyarrow_table().to_pylist()}


def test_merges_the_latest_per_key_once_and_removes_the_staged_files(tmp_path):
    writer = _writer(tmp_path)
    first = _stage(writer, 0, [("a", 1, 10, False), ("a", 2, 30, False), ("b", 5, 20, False), ("c", 7, 5, False)])
    assert writer.committer.commit([first], 0) == 3
    assert _content(tmp_path) == {"a": 2, "b": 5, "c": 7}

    second = _stage(writer, 1, [("a", 3, 40, False), ("b", None, 50, True), ("d", 9, 45, True)])
    assert writer.committer.commit([second], 1) == 3
    assert _content(tmp_path) == {"a": 3, "c": 7}
    version = DeltaTable(str(tmp_path / "accounts")).version()

    replayed = _stage(writer, 1, [("a", 99, 40, False), ("c", None, 41, True)])  # the replay's fresh attempt
    assert writer.committer.commit([replayed], 1) == 0
    assert _content(tmp_path) == {"a": 3, "c": 7} and DeltaTable(str(tmp_path / "accounts")).version() == version
    assert not list((tmp_path / "accounts" / STAGED_FOLDER).iterdir()), "every staged file removed"


def test_an_abort_removes_its_batch_staged_files_only(tmp_path):
    writer = _writer(tmp_path)
    earlier = _stage(writer, 3, [("a", 1, 1, False)])
    failed = _stage(writer, 4, [("a", 2, 2, False)])
    writer.committer.abort([], 4)
    left = {p.name for p in (tmp_path / "accounts" / STAGED_FOLDER).iterdir()}
    assert left == {f.path for f in earlier.files}
    assert not {f.path for f in failed.files} & left
    assert not (tmp_path / "accounts" / "_delta_log").exists()
