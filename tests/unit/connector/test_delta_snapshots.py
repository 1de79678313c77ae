"""connector.delta.snapshots: a writer's table kept across micro-batches reads only the commits after it, sees other
writers' txns, and notices a table created again at the same location."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction

from connector.delta import snapshots


def _append(path, app_id: str | None = None, version: int = 0) -> None:
    props = CommitProperties(app_transactions=[Transaction(app_id, version)]) if app_id else None
    write_deltalake(str(path), pa.table({"a": [1]}), mode="append", commit_properties=props)


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "t"
    for batch in range(3):
        _append(path, "me", batch)
    yield str(path)
    snapshots.forget(str(path), "me")


def test_later_commits_only_are_read(table):
    first = snapshots.current_table(table, "me")
    assert snapshots.txn_version(table, "me", first) == 2
    _append(table, "me", 3)
    # the commits up to the cached version are never read again: without them the table cannot be opened afresh
    os.remove(os.path.join(table, "_delta_log", f"{0:020d}.json"))
    again = snapshots.current_table(table, "me")
    assert again is first and again.version() == 3
    assert snapshots.txn_version(table, "me", again) == 3


def test_other_writers_txns_are_seen(table):
    mine = snapshots.current_table(table, "me")
    assert snapshots.txn_version(table, "me", mine) == 2
    _append(table, "other", 7)
    _append(table, "me", 9)  # a second writer with the same appId (misconfigured): its txn must count
    _append(table)
    mine = snapshots.current_table(table, "me")
    assert snapshots.txn_version(table, "me", mine) == 9 == DeltaTable(table).transaction_version("me")


def test_a_table_created_again_is_opened_afresh(table):
    old = snapshots.current_table(table, "me")
    assert snapshots.txn_version(table, "me", old) == 2
    shutil.rmtree(table)
    for batch in range(3):  # the same number of versions: only the commit files' identity tells them apart
        _append(table, "new" if batch < 2 else None, batch)
    fresh = snapshots.current_table(table, "me")
    assert fresh is not old
    assert snapshots.txn_version(table, "me", fresh) is None


def test_no_table(tmp_path):
    assert snapshots.current_table(str(tmp_path / "absent"), "me") is None


def test_the_cache_is_bounded(tmp_path):
    paths = [str(tmp_path / f"t{i}") for i in range(snapshots.MAX_TABLES + 3)]
    for path in paths:
        _append(path)
        assert snapshots.current_table(path, "me") is not None
    first = snapshots.current_table(paths[0], "me")
    assert snapshots.current_table(paths[0], "me") is first  # reopened once, then kept
    assert len(snapshots._cache) <= snapshots.MAX_TABLES  # noqa: SLF001 - the bound is the claim
    for path in paths:
        snapshots.forget(path, "me")
