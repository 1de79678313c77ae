"""Issue 52, upserts: the declaration's upsert keys refused before Spark (one line naming file, table and key), the
task's staged rows (order = commitLogOffset, tombstones by an empty body or a property, a null key a dead letter),
and the driver's latest row per key (docs/tables.md "Upserts")."""

from __future__ import annotations

import json
import textwrap

import pyarrow as pa
import pytest

from connector.landing.upsert import DELETE_COLUMN, ORDER_COLUMN, latest_per_key
from streaming_apps.tables.app import TablesApp
from streaming_apps.tables.declaration import DeclarationError, load_declaration
from streaming_apps.tables.split import TableDecodeError, make_split
from tests.unit.tables.test_split import _records

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}, "amount": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}}}}
BASE = """
    [[table]]
    name = "accounts"
    topics = ["Acc"]
    format = "json"
    schema = "account.schema.json"
    mode = "upsert"
"""


def _app(tmp_path, extra: str) -> TablesApp:
    (tmp_path / "account.schema.json").write_text(json.dumps(SCHEMA))
    path = tmp_path / "tables.toml"
    path.write_text(textwrap.dedent(BASE) + textwrap.dedent(extra))
    return TablesApp(load_declaration(path))


@pytest.mark.parametrize(("extra", "expected"), [
    ('key = ["nope"]\n', "table accounts: key: 'nope' is not a column of the table"),
    ('key = ["tags"]\n', "table accounts: key: 'tags' is of type list<item: string>: a key column must be"),
    ('key = ["id"]\ntombstone = "empty-body"\n', "table accounts: tombstone: an empty body holds no key field 'id'"),
    ('key = ["id"]\ntombstone = "deleted"\n', "table accounts: tombstone: 'deleted' is not \"empty-body\""),
    ('key = ["id"]\ntombstone = "property:"\n', "table accounts: tombstone: 'property:' is not"),
    ('key = ["id"]\npartition_by = ["storeDate"]\n', "table accounts: partition_by: 'storeDate' is not in key"),
    ('key = ["id"]\ncolumns = ["property:_hareplicaOrder"]\n',
     "table accounts: column _hareplicaOrder is reserved"),
])
def test_bad_upsert_declarations_are_refused_in_one_line(tmp_path, extra, expected):
    with pytest.raises(DeclarationError) as info:
        _app(tmp_path, extra)
    line = str(info.value)
    assert line.startswith(str(tmp_path / "tables.toml")) and expected in line and "\n" not in line, line


def test_a_tombstone_needs_upsert(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'bytes'\ntombstone = 'empty-body'\n")
    with pytest.raises(DeclarationError, match="table a: tombstone: only an upsert table has tombstones"):
        load_declaration(path)


def test_keyed_by_the_message_keys_keeps_the_keys_column(tmp_path):
    app = _app(tmp_path, 'key = ["keys"]\ntombstone = "empty-body"\n')
    assert app.declaration.tables[0].columns == ("keys",) and app.upsert_keys("accounts") == ("keys",)
    assert app.upsert_keys("dead_letters") is None


def _staged(app, rows):
    split = make_split(app.split_config())
    batch = _records(rows)
    keys = [r[3].pop("KEYS", None) for r in rows]
    batch = batch.set_column(batch.schema.get_field_index("keys"), "keys", pa.array(keys, pa.string()))
    return split(batch)


def test_staged_rows_of_empty_body_tombstones_keyed_by_keys(tmp_path):
    app = _app(tmp_path, 'key = ["keys"]\ntombstone = "empty-body"\n')
    staged, dead = _staged(app, [("Acc", None, b'{"id": "x", "amount": 1}', {"KEYS": "k1"}),
                                 ("Acc", None, b"", {"KEYS": "k1"}),
                                 ("Acc", None, b"not json", {"KEYS": "k2"}),
                                 ("Acc", None, b'{"amount": 3}', {})])
    assert staged.column(ORDER_COLUMN).to_pylist() == [0, 100]
    assert staged.column(DELETE_COLUMN).to_pylist() == [False, True]
    assert staged.column("keys").to_pylist() == ["k1", "k1"] and staged.column("amount").to_pylist() == [1, None]
    assert sorted(dead.column("commitLogOffset").to_pylist()) == [200, 300]  # not JSON; no key
    assert "key keys is null" in dead.column("error")[1].as_py()


def test_property_tombstones_keyed_by_a_field_are_decoded(tmp_path):
    app = _app(tmp_path, 'key = ["id"]\ntombstone = "property:op=delete"\n')
    staged, dead = _staged(app, [("Acc", None, b'{"id": "x", "amount": 1}', {"op": "upsert"}),
                                 ("Acc", None, b'{"id": "x"}', {"op": "delete"}),
                                 ("Acc", None, b"", {"op": "delete"})])
    assert staged.column("id").to_pylist() == ["x", "x"]
    assert staged.column(DELETE_COLUMN).to_pylist() == [False, True]
    assert dead.column("commitLogOffset").to_pylist() == [200]


def test_a_null_key_stops_an_on_error_fail_table(tmp_path):
    app = _app(tmp_path, 'key = ["id"]\non_error = "fail"\n')
    with pytest.raises(TableDecodeError, match="table accounts: broker broker-a commitLogOffset 0: key id is null"):
        _staged(app, [("Acc", None, b'{"amount": 1}', {})])


def test_latest_per_key_keeps_the_largest_order():
    rows = pa.table({"k": ["a", "b", "a", "c", "b"], "v": [1, 2, 3, 4, 5],
                     ORDER_COLUMN: pa.array([50, 10, 70, 5, 40], pa.int64()),
                     DELETE_COLUMN: [False, False, True, False, False]})
    got = {r["k"]: (r["v"], r[DELETE_COLUMN]) for r in latest_per_key(rows, ["k"]).to_pylist()}
    assert got == {"a": (3, True), "b": (5, False), "c": (4, False)}


@pytest.mark.parametrize(("extra", "expected"), [
    ('key = ["nope"]\n', "table accounts: key: 'nope' is not a column of the table"),
    ('key = ["id"]\npartition_by = ["storeDate"]\n', "table accounts: partition_by: 'storeDate' is not in key"),
])
def test_the_cli_refuses_a_bad_upsert_declaration_with_exit_2_before_spark(tmp_path, extra, expected):
    from tests.faults.test_cli_errors import hareplica, one_line

    (tmp_path / "account.schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "tables.toml").write_text(textwrap.dedent(BASE) + extra)
    result = hareplica("run", "tables", "--config", str(tmp_path / "tables.toml"), "--workdir", str(tmp_path / "w"),
                       "--brokers", "broker-a=127.0.0.1:10912", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert expected in one_line(result)
    assert not (tmp_path / "w").exists()  # nothing was started, nothing written


def test_an_inferred_table_is_not_upserted(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text("[[table]]\nname = 'a'\ntopics = ['T']\nformat = 'json'\nschema = 'infer'\nmode = 'upsert'\n"
                    "key = ['keys']\n")
    with pytest.raises(DeclarationError) as info:
        TablesApp(load_declaration(path))
    assert str(info.value) == f"{path}: table a: mode: \"upsert\" needs a declared schema; a table with schema = " \
                              "\"infer\" appends"
