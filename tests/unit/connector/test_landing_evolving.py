"""Issue 52, JSON ``infer``: the widening rules (connector.delta.schema_evolution), the decoder pinned to a table's
columns, and the driver's commit of staged files whose columns differ (connector.landing.evolving), on real local
Delta tables read back by deltalake (docs/tables.md "Schema evolution")."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from connector.delta.options import DeltaSinkOptions
from connector.delta.schema_evolution import conform, conforms, keep_type, widen_type
from connector.errors import DeltaSchemaMismatchError
from connector.landing.evolving import EvolvingCommitter, EvolvingStreamWriter, batch_schema
from connector.landing.staging import STAGED_FOLDER
from streaming_apps.tables.decode.json_bodies import JsonInferDecoder

XY = pa.struct([("x", pa.int64()), ("y", pa.string())])


@pytest.mark.parametrize(("a", "b", "widened"), [
    (pa.int64(), pa.float64(), pa.float64()),
    (pa.int64(), pa.bool_(), pa.string()),
    (pa.struct([("x", pa.int64())]), pa.struct([("y", pa.string())]), XY),
    (pa.list_(pa.int64()), pa.list_(pa.float64()), pa.list_(pa.float64())),
    (pa.list_(pa.int64()), pa.int64(), pa.string()),
    (None, pa.bool_(), pa.bool_()),
])
def test_widening(a, b, widened):
    assert widen_type(a, b) == widened
    assert conforms(a or pa.null(), widened) and conforms(b, widened)


def test_an_existing_column_keeps_its_type_and_gains_struct_fields():
    assert keep_type(pa.int64(), pa.float64()) == pa.int64()
    assert keep_type(pa.list_(pa.struct([("x", pa.int64())])), pa.list_(XY)) == pa.list_(XY)
    assert not conforms(pa.float64(), pa.int64()) and not conforms(pa.string(), pa.int64())


def test_conform_keeps_every_value():
    rows = pa.array([{"x": 1}, None, {"x": 3}], pa.struct([("x", pa.int64())]))
    assert conform(rows, pa.struct([("x", pa.float64()), ("y", pa.string())])).to_pylist() == [
        {"x": 1.0, "y": None}, None, {"x": 3.0, "y": None}]
    assert conform(pa.array([[1, 2], None, [3]]).slice(1), pa.list_(pa.float64())).to_pylist() == [None, [3.0]]
    assert conform(pa.array([{"x": 1}, None]), pa.string()).to_pylist() == ['{"x":1}', None]
    assert conform(pa.array([True, None]), pa.string()).to_pylist() == ["true", None]
    with pytest.raises(TypeError, match="cannot become"):
        conform(pa.array([1.5]), pa.int64())


def test_the_pinned_decoder_refuses_what_does_not_fit_and_widens_the_rest():
    decoder = JsonInferDecoder()
    decoder.pin(pa.schema([("a", pa.int64()), ("s", pa.struct([("x", pa.int64())]))]), reserved=frozenset({"keys"}))
    bodies = [{"a": 1, "s": {"x": 1, "y": "q"}, "n": 1}, {"a": 2.5}, {"keys": "k"}, {"s": {"x": "text"}},
              {"n": 2.5, "a": 3}, {"s": "text"}]
    decoded = decoder.decode(pa.array([json.dumps(b).encode() for b in bodies], pa.binary()))
    assert decoded.errors == [None, "field $.a: a JSON number does not fit the column's type int64",
                              "field $.keys: the name of one of the table's RocketMQ columns",
                              "field $.s.x: a JSON string does not fit the column's type int64", None,
                              "field $.s: a JSON string does not fit the column's type struct<x: int64>"]
    assert decoder.schema == pa.schema([("a", pa.int64()), ("s", XY), ("n", pa.float64())])
    assert decoded.fields.to_pylist()[4] == {"a": 3, "s": None, "n": 2.5}


def _task_files(options: DeltaSinkOptions, *batches: pa.RecordBatch):
    """One task's staged files of ``batches`` (written as the tasks write them), and its commit message."""
    task = EvolvingStreamWriter(options, None, ()).open_task()
    for batch in batches:
        task.write(batch)
    return task.close()


def test_the_commit_widens_what_two_tasks_found_and_adds_columns_in_the_same_commit(tmp_path):
    uri = str(tmp_path / "events")
    options = DeltaSinkOptions.from_options({"path": uri, "appId": "infer-test"})
    committer = EvolvingCommitter(options, ())
    assert committer.commit([], 0) == 0 and not (tmp_path / "events" / "_delta_log").exists(), "no rows, no table"
    x = pa.array([{"x": 1}], pa.struct([("x", pa.int64())]))
    first = _task_files(options, pa.record_batch({"id": [1], "v": [1]}), pa.record_batch({"id": [2], "v": [2], "s": x}))
    second = _task_files(options, pa.record_batch({"id": [3], "v": [2.5], "t": ["a"]}))
    assert len(first.files) == 2, "a batch with other columns starts a new file"
    assert committer.commit([first, second], 0) == 3
    table = DeltaTable(uri)
    assert table.version() == 0 and table.transaction_version("infer-test") == 0
    assert sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": 1.0, "s": None, "t": None}, {"id": 2, "v": 2.0, "s": {"x": 1}, "t": None},
        {"id": 3, "v": 2.5, "s": None, "t": "a"}]
    assert not list((tmp_path / "events" / STAGED_FOLDER).glob("*.parquet")), "staged files removed"

    # the next batch: a new nested field and a new column land in the commit of their rows; a replay is skipped
    third = _task_files(options, pa.record_batch({"id": [4], "s": pa.array([{"x": 2, "y": "q"}], XY), "w": [True]}))
    assert committer.commit([third], 1) == 1
    assert committer.commit([_task_files(options, pa.record_batch({"id": [5]}))], 1) == 0
    assert committer.commit([], 2) == 0, "a micro-batch without rows for the table"
    table = DeltaTable(uri)
    assert table.version() == 2 and table.transaction_version("infer-test") == 2
    assert [f.name for f in table.schema().fields] == ["id", "v", "s", "t", "w"]
    assert table.to_pyarrow_table().num_rows == 4
    assert table.history()[0]["hareplica.batchId"] == 2 and table.to_pyarrow_table().num_rows == 4
    actions = [json.loads(line) for line in (tmp_path / "events" / "_delta_log" / f"{1:020d}.json").open()]
    assert any("metaData" in a for a in actions) and any("add" in a for a in actions) and \
        any(a.get("txn", {}).get("version") == 1 for a in actions), "columns, rows and txn in one commit"


def test_a_value_that_does_not_fit_a_column_of_the_table_fails_the_commit_and_keeps_the_table(tmp_path):
    uri = str(tmp_path / "events")
    options = DeltaSinkOptions.from_options({"path": uri, "appId": "infer-test"})
    committer = EvolvingCommitter(options, ())
    committer.commit([_task_files(options, pa.record_batch({"id": [1]}))], 0)
    bad = _task_files(options, pa.record_batch({"id": ["one"]}))
    with pytest.raises(DeltaSchemaMismatchError, match="column id is int64 in the table, and the batch's rows hold "
                                                       "string"):
        committer.commit([bad], 1)
    assert DeltaTable(uri).version() == 0
    assert batch_schema(pa.schema([("id", pa.int64())]), [pa.schema([("id", pa.int64()), ("n", pa.int64())]),
                                                          pa.schema([("n", pa.string())])]) == \
        pa.schema([("id", pa.int64()), ("n", pa.string())])
