"""Issue 52: the task side of ``run tables`` — records routed to the tables whose topics and tags they match,
decoded, the rest to the dead-letter table (rows + dead letters = records matched), ``on_error = "fail"`` as one
line, and no pandas imported on the way (docs/tables.md "How it lands")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from connector.decode.schema import ARROW_SCHEMA
from streaming_apps.tables.app import TablesApp
from streaming_apps.tables.declaration import load_declaration
from streaming_apps.tables.split import TableDecodeError, make_split
from tests.support.no_pandas import refuse_pandas_prelude

DECLARATION = """
    [[table]]
    name = "payments"
    topics = ["Pay"]
    tags = "Paid"
    format = "json"
    schema = "payment.schema.json"
    columns = ["commitLogOffset", "property:region"]
    partition_by = ["storeDate"]
    on_error = "{on_error}"

    [[table]]
    name = "audit"
    topics = ["Audit", "Pay"]
    format = "string"
"""


def _app(tmp_path, on_error="dead-letter") -> TablesApp:
    (tmp_path / "payment.schema.json").write_text(json.dumps(
        {"type": "object", "properties": {"id": {"type": "string"}, "amount": {"type": "integer"}}}))
    path = tmp_path / "tables.toml"
    path.write_text(textwrap.dedent(DECLARATION.format(on_error=on_error)))
    return TablesApp(load_declaration(path))


def _records(rows: list[tuple[str, str | None, bytes, dict]]) -> pa.RecordBatch:
    """Source rows (the source's schema) of (topic, tags, body, properties)."""
    n = len(rows)
    columns = {f.name: pa.nulls(n, f.type) for f in ARROW_SCHEMA}
    columns.update(topic=pa.array([r[0] for r in rows]), tags=pa.array([r[1] for r in rows], pa.string()),
                   body=pa.array([r[2] for r in rows], pa.binary()),
                   properties=pa.array([list(r[3].items()) for r in rows], pa.map_(pa.string(), pa.string())),
                   commitLogOffset=pa.array(range(0, 100 * n, 100), pa.int64()),
                   broker=pa.array(["broker-a"] * n), storeTimestamp=pa.array([1_765_000_000_000_000] * n,
                                                                               pa.timestamp("us", tz="UTC")))
    return pa.RecordBatch.from_arrays([columns[f.name] for f in ARROW_SCHEMA], names=ARROW_SCHEMA.names)


ROWS = [("Pay", "Paid", b'{"id": "a", "amount": 1}', {"region": "eu"}),
        ("Pay", "Refunded", b'{"id": "b", "amount": 2}', {}),
        ("Pay", "Paid", b"not json", {}),
        ("Audit", None, b"line", {}),
        ("Other", None, b"x", {})]


def test_records_go_to_their_tables_or_the_dead_letters(tmp_path):
    split = make_split(_app(tmp_path).split_config())
    payments, audit, dead = split(_records(ROWS))
    assert payments.to_pylist() == [{"id": "a", "amount": 1, "commitLogOffset": 0, "region": "eu",
                                     "storeDate": payments.column("storeDate")[0].as_py()}]
    assert sorted(audit.column("body").to_pylist()) == sorted(['{"id": "a", "amount": 1}', '{"id": "b", "amount": 2}',
                                                                "line", "not json"])
    assert dead.num_rows == 1 and dead.column("table")[0].as_py() == "payments"
    assert dead.column("commitLogOffset")[0].as_py() == 200 and dead.column("body")[0].as_py() == b"not json"
    matched = 2 + 4  # Pay:Paid for payments, Pay and Audit for audit
    assert payments.num_rows + audit.num_rows + dead.num_rows == matched


def test_a_batch_is_decoded_in_slices_with_the_same_rows_and_dead_letters(tmp_path, monkeypatch):
    """A batch of more than DECODE_CHUNK_ROWS records: each decode call gets at most that many bodies (a worker
    holds the Python objects of one slice), and the rows, their order and the dead letters are those of one call."""
    from streaming_apps.tables import split as split_module

    rows = [("Pay", "Paid", b"not json" if i % 7 == 3 else json.dumps({"id": f"p{i}", "amount": i}).encode(), {})
            for i in range(50)]
    whole = make_split(_app(tmp_path).split_config())(_records(rows))
    monkeypatch.setattr(split_module, "DECODE_CHUNK_ROWS", 8)
    monkeypatch.setattr(split_module, "_SPLITS", {})
    sizes = []
    split = make_split(_app(tmp_path).split_config())
    for table in split.tables:
        decode = table.decoder.decode
        table.decoder.decode = lambda bodies, props=None, decode=decode: sizes.append(len(bodies)) or decode(bodies,
                                                                                                              props)
    sliced = split(_records(rows))
    assert [b.to_pylist() for b in sliced] == [b.to_pylist() for b in whole]
    assert sliced[0].num_rows == 50 - 7 and sliced[2].num_rows == 7  # payments, dead letters
    assert max(sizes) == 8 and sum(sizes) == 2 * 50  # both tables decode every record, 8 at a time


def test_on_error_fail_raises_one_line_naming_table_broker_offset(tmp_path):
    split = make_split(_app(tmp_path, on_error="fail").split_config())
    with pytest.raises(TableDecodeError) as info:
        split(_records(ROWS))
    assert str(info.value).startswith("table payments: broker broker-a commitLogOffset 200: ")
    assert "\n" not in str(info.value)


def test_the_split_imports_no_pandas(tmp_path):
    config = _app(tmp_path).split_config()
    batch = _records(ROWS)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    (tmp_path / "batch.arrow").write_bytes(sink.getvalue().to_pybytes())
    (tmp_path / "config.json").write_text(config)
    script = refuse_pandas_prelude("streaming_apps") + textwrap.dedent(f"""
        import pyarrow as pa
        from streaming_apps.tables.split import make_split
        batch = pa.ipc.open_stream(open({str(tmp_path / 'batch.arrow')!r}, 'rb').read()).read_next_batch()
        parts = make_split(open({str(tmp_path / 'config.json')!r}).read())(batch)
        print(json.dumps({{"rows": [p.num_rows for p in parts], "attempts": attempts}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"rows": [1, 4, 1], "attempts": []}


def test_a_time_of_day_field_is_refused_at_start_naming_the_field(tmp_path):
    from streaming_apps.tables.declaration import DeclarationError

    (tmp_path / "t.avsc").write_text(json.dumps({"type": "record", "name": "T", "fields": [
        {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}}]}))
    path = tmp_path / "tables.toml"
    path.write_text('[[table]]\nname = "t"\ntopics = ["T"]\nformat = "avro"\nschema = "t.avsc"\n')
    with pytest.raises(DeclarationError, match=r"table t: field at: time32\[ms\] .* has no Delta type"):
        TablesApp(load_declaration(path))



ORDERS_DECLARATION = """
    [[table]]
    name = "orders"
    topics = ["Orders"]
    format = "msgpack"
    fields = { orderId = "string", eventTimeMs = "timestamp[ms]" }
    columns = ["commitLogOffset"]
    dates = { eventDate = "eventTimeMs" }
    partition_by = ["eventDate"]
"""


def _orders_app(tmp_path, text: str = ORDERS_DECLARATION) -> TablesApp:
    path = tmp_path / "orders.toml"
    path.write_text(textwrap.dedent(text))
    return TablesApp(load_declaration(path))


def test_a_date_column_is_the_utc_day_of_its_timestamp_field_floored_before_1970(tmp_path):
    import datetime as dt

    import msgpack

    app = _orders_app(tmp_path)
    assert app.schemas["orders"].field("eventDate").type == pa.date32()
    assert app.partition_by("orders") == ("eventDate",)
    bodies = [msgpack.packb({"orderId": "a", "eventTimeMs": 1_790_000_000_000}),
              msgpack.packb({"orderId": "b", "eventTimeMs": -1}), msgpack.packb({"orderId": "c"})]
    orders, dead = make_split(app.split_config())(_records([("Orders", None, b, {}) for b in bodies]))
    assert dead.num_rows == 0
    assert orders.schema.names == ["orderId", "eventTimeMs", "commitLogOffset", "eventDate"]
    assert orders.column("eventDate").to_pylist() == [dt.date(2026, 9, 21), dt.date(1969, 12, 31), None]


@pytest.mark.parametrize(("dates", "expected"), [
    ('{ eventDate = "orderId" }', "dates: eventDate: 'orderId' is of type string: a date column needs a timestamp"),
    ('{ eventDate = "nope" }', "dates: eventDate: 'nope' is not a field of the body"),
    ('{ orderId = "eventTimeMs" }', "column orderId is named twice"),
    ('"eventTimeMs"', "dates: must be a table of column name = timestamp field"),
])
def test_a_bad_date_column_is_refused_in_one_line(tmp_path, dates, expected):
    from streaming_apps.tables.declaration import DeclarationError

    text = ORDERS_DECLARATION.replace('{ eventDate = "eventTimeMs" }', dates).replace(
        'partition_by = ["eventDate"]', "")
    with pytest.raises(DeclarationError, match=expected) as err:
        _orders_app(tmp_path, text)
    assert "\n" not in str(err.value) and "table orders" in str(err.value)


def test_a_record_the_source_could_not_decode_is_a_dead_letter_even_when_its_stored_bytes_decode(tmp_path):
    import msgpack

    good = msgpack.packb({"orderId": "a", "eventTimeMs": 0})
    records = _records([("Orders", None, good, {}), ("Orders", None, good, {})])
    errors = pa.array([None, "BODY: BODYCRC mismatch (stored 1, computed 2)"], pa.string())
    records = records.set_column(records.schema.get_field_index("decodeError"), "decodeError", errors)
    orders, dead = make_split(_orders_app(tmp_path).split_config())(records)
    assert orders.column("commitLogOffset").to_pylist() == [0]
    assert dead.to_pylist()[0] | {"storeTimestamp": None} == {
        "table": "orders", "topic": "Orders", "broker": "broker-a", "queueId": None, "queueOffset": None,
        "commitLogOffset": 100, "msgId": None, "storeTimestamp": None, "body": good, "schema": None,
        "error": "bad record: BODY: BODYCRC mismatch (stored 1, computed 2)"}
