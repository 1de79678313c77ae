"""connector.delta.merge with delta-rs: upserts keyed by columns, rows marked final, txn(appId, batchId) once."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql.types import BooleanType, DateType, LongType, StringType, StructField, StructType, TimestampType

from connector.delta.faults import FAULT_INJECTION_ENV
from connector.delta.merge import FinalizeRows, key_condition, merge_batch
from connector.errors import InjectedFaultError

SCHEMA = StructType([StructField("windowDate", DateType()), StructField("windowStart", TimestampType()),
                     StructField("windowEnd", TimestampType()), StructField("status", StringType()),
                     StructField("orders", LongType(), False), StructField("final", BooleanType())])
KEYS = ("windowDate", "windowStart", "status")
BASE = dt.datetime(2026, 9, 21, 14, 14, tzinfo=dt.UTC)
APP = "gold-app"


def _us(t: dt.datetime) -> int:
    return int(t.timestamp() * 1_000_000)


def _rows(*rows: tuple[int, str | None, int], final_up_to: dt.datetime | None = None) -> pa.Table:
    """(minute after BASE, status, orders) rows; final when windowEnd <= final_up_to. Timestamps arrive in the
    session time zone's Arrow type (here +02:00), as Spark's toArrow gives them."""
    starts = [BASE + dt.timedelta(minutes=m) for m, _, _ in rows]
    ends = [s + dt.timedelta(minutes=1) for s in starts]
    tz = pa.timestamp("us", tz="+02:00")
    return pa.table({
        "windowDate": pa.array([s.date() for s in starts], pa.date32()),
        "windowStart": pa.array(starts, tz), "windowEnd": pa.array(ends, tz),
        "status": pa.array([r[1] for r in rows], pa.string()),
        "orders": pa.array([r[2] for r in rows], pa.int64()),
        "final": pa.array([final_up_to is not None and e <= final_up_to for e in ends], pa.bool_())})


def _table(path) -> dict[tuple, tuple]:
    out = {}
    for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist():
        key = (int((r["windowStart"] - BASE).total_seconds() // 60), r["status"])
        assert key not in out, "one row per key"
        out[key] = (r["orders"], r["final"])
    return out


def _merge(path, batch_id, rows, up_to: dt.datetime | None):
    finalize = FinalizeRows("final", "windowEnd", _us(up_to)) if up_to else None
    return merge_batch(rows, SCHEMA, str(path), APP, batch_id, keys=KEYS, partition_by=("windowDate",),
                       finalize=finalize)


def test_upserts_by_key_marks_passed_rows_final_and_skips_a_replayed_batch(tmp_path):
    path = tmp_path / "gold"
    first = _merge(path, 0, _rows((0, "PAID", 2), (1, "PAID", 1), (1, None, 4)), None)
    assert first.created and DeltaTable(str(path)).transaction_version(APP) == 0
    assert DeltaTable(str(path)).metadata().partition_columns == ["windowDate"]
    assert _table(path) == {(0, "PAID"): (2, False), (1, "PAID"): (1, False), (1, None): (4, False)}

    # batch 1: window 1 grows (the null status too), window 2 appears; the watermark passed window 0's end
    up_to = BASE + dt.timedelta(minutes=1, seconds=30)
    second = _merge(path, 1, _rows((1, "PAID", 3), (1, None, 5), (2, "NEW", 1), final_up_to=up_to), up_to)
    assert not second.skipped and second.metrics["num_target_rows_updated"] == 3  # two upserts + window 0 closed
    want = {(0, "PAID"): (2, True), (1, "PAID"): (3, False), (1, None): (5, False), (2, "NEW"): (1, False)}
    assert _table(path) == want
    version = DeltaTable(str(path)).version()

    # batch 1 again (a replay after a crash between the Delta commit and Spark's commit log): skipped
    again = _merge(path, 1, _rows((1, "PAID", 99), final_up_to=up_to), up_to)
    assert again.skipped and DeltaTable(str(path)).version() == version and _table(path) == want

    # batch 2 only moves the watermark past window 1 (no rows): those rows become final, nothing else changes
    up_to = BASE + dt.timedelta(minutes=2)
    _merge(path, 2, _rows(), up_to)
    assert _table(path) == {**want, (1, "PAID"): (3, True), (1, None): (5, True)}
    # batch 3 changes nothing: delta-rs's MERGE makes no commit, the txn is committed alone
    rows_before = _table(path)
    _merge(path, 3, _rows(), up_to)
    assert _table(path) == rows_before
    commits = [h for h in DeltaTable(str(path)).history() if "hareplica.batchId" in h]
    assert sorted(h["hareplica.batchId"] for h in commits) == [0, 1, 2, 3]
    assert DeltaTable(str(path)).transaction_version(APP) == 3


@pytest.mark.parametrize("point", ["before-delta-commit", "after-delta-commit"])
def test_a_batch_failing_at_a_commit_point_lands_once_when_run_again(tmp_path, monkeypatch, point):
    path = tmp_path / "gold"
    _merge(path, 0, _rows((0, "PAID", 2)), None)
    up_to = BASE + dt.timedelta(minutes=1)
    monkeypatch.setenv(FAULT_INJECTION_ENV, f"{point}:1")
    with pytest.raises(InjectedFaultError):
        _merge(path, 1, _rows((0, "PAID", 3), final_up_to=up_to), up_to)
    committed = DeltaTable(str(path)).transaction_version(APP)
    assert committed == (1 if point == "after-delta-commit" else 0)
    monkeypatch.delenv(FAULT_INJECTION_ENV)
    result = _merge(path, 1, _rows((0, "PAID", 3), final_up_to=up_to), up_to)
    assert result.skipped == (point == "after-delta-commit")
    assert _table(path) == {(0, "PAID"): (3, True)}
    assert [h["hareplica.batchId"] for h in DeltaTable(str(path)).history() if "hareplica.batchId" in h] == [1, 0]


def test_key_condition_compares_partition_columns_with_equals_and_the_rest_null_safely():
    assert key_condition(("d", "k"), partition_by=("d",)) == "(t.d = s.d) AND (t.k IS NOT DISTINCT FROM s.k)"
    assert key_condition(("k",), quote="`") == "(t.`k` IS NOT DISTINCT FROM s.`k`)"
    with pytest.raises(ValueError):
        key_condition(())


def test_a_delete_column_deletes_matched_keys_and_inserts_no_tombstone(tmp_path):
    schema = StructType([StructField("accountId", StringType()), StructField("amountCents", LongType())])
    path = str(tmp_path / "accounts")

    def rows(ids, amounts, deletes):
        return pa.table({"accountId": ids, "amountCents": pa.array(amounts, pa.int64()), "gone": deletes})

    def merge(batch_id, table):
        return merge_batch(table, schema, path, APP, batch_id, keys=("accountId",), delete="gone")

    def content():
        return {r["accountId"]: r["amountCents"] for r in DeltaTable(path).to_pyarrow_table().to_pylist()}

    assert merge(0, rows(["a", "b", "c"], [1, 2, 3], [False, True, False])).created
    assert content() == {"a": 1, "c": 3} and "gone" not in DeltaTable(path).schema().to_arrow().names
    merge(1, rows(["a", "c", "d", "e"], [10, None, 4, None], [False, True, False, True]))
    assert content() == {"a": 10, "d": 4}
    assert merge(1, rows(["a"], [99], [True])).skipped and content() == {"a": 10, "d": 4}
    merge(2, rows(["z"], [None], [True]))  # nothing to delete: still one commit with the txn
    assert DeltaTable(path).transaction_version(APP) == 2 and content() == {"a": 10, "d": 4}
