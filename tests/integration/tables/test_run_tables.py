"""Issue 52: ``run tables`` with a real broker stub, the shared Spark session and real Delta tables. A declaration of
three tables — JSON with a JSON Schema (bodies made by Python's ``json``), the demo's msgpack order events, plain
text — lands every matching record once as typed columns equal to what a reference decoder reads, the bodies that
do not decode in the dead-letter table (rows + dead letters = records matched), a second declaration that adds a
field adds a nullable column, and ``on_error = "fail"`` stops the query with one line (docs/tables.md)."""

from __future__ import annotations

import json
import textwrap

import msgpack
import pytest

from broker_stub.launcher import BrokerProcess
from streaming_apps.apps import AppConfig, AppError, run_app
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.query import query_tables
from streaming_apps.spark_session import register_data_sources
from streaming_apps.workload import ORDER_TOPICS, order_events

pytestmark = pytest.mark.spark

APP_TIMEOUT_S = 240
PAYMENTS = 60
ORDERS = 40
SCHEMA_V1 = {"type": "object", "properties": {"paymentId": {"type": "string"}, "amount": {"type": "integer"},
                                              "paidAt": {"type": "string", "format": "date-time"}}}
SCHEMA_V2 = {**SCHEMA_V1, "properties": {**SCHEMA_V1["properties"], "method": {"type": "string"}}}
BAD_PAYMENTS = [b"not json", b'{"paymentId": "P-x", "amount": "ten"}', b"[1, 2]"]


def _payment(i: int) -> dict:
    return {"paymentId": f"P-{i}", "amount": 100 + i, "paidAt": f"2026-12-07T10:{i % 60:02d}:00Z",
            "method": "card" if i % 2 else "cash"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("tables-broker")) as b:
        with Producer(b.remoting_addr, "tables-test") as producer:
            sends = [producer.send_async("PaymentEvents", json.dumps(_payment(i)).encode(), tags="Paid",
                                         keys=[f"P-{i}"], properties={"region": ["eu", "us"][i % 2]})
                     for i in range(PAYMENTS)]
            sends += [producer.send_async("PaymentEvents", body, tags="Paid") for body in BAD_PAYMENTS]
            sends += [producer.send_async("PaymentEvents", b'{"paymentId": "R-1"}', tags="Refunded")]  # no table
            sends += [producer.send_async(m.topic, m.body, tags=m.tags, keys=m.keys, properties=m.properties)
                      for m in order_events(ORDERS, seed=5)]
            sends += [producer.send_async("Audit", f"audit line {i}".encode()) for i in range(10)]
            sends += [producer.send_async("Audit", b"\xff\xfe not utf-8")]
            assert {s.result(timeout=60).send_status for s in sends} == {"SEND_OK"}
        yield b


@pytest.fixture(scope="module")
def records(broker) -> list:
    return [rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)]


def _declaration(tmp_path, schema: dict, *, on_error: str = "dead-letter") -> str:
    (tmp_path / "payment.schema.json").write_text(json.dumps(schema), encoding="utf-8")
    path = tmp_path / "tables.toml"
    path.write_text(textwrap.dedent(f"""
        [[table]]
        name = "payments"
        topics = ["PaymentEvents"]
        tags = "Paid"
        format = "json"
        schema = "payment.schema.json"
        columns = ["keys", "commitLogOffset", "property:region"]
        partition_by = ["storeDate"]
        on_error = "{on_error}"

        [[table]]
        name = "orders"
        topics = {json.dumps(list(ORDER_TOPICS))}
        format = "msgpack"
        fields = {{ orderId = "string", amountCents = "int64", status = "string" }}
        columns = ["commitLogOffset", "tags"]

        [[table]]
        name = "audit"
        topics = ["Audit"]
        format = "string"
        columns = ["commitLogOffset"]
    """), encoding="utf-8")
    return str(path)


def _run(spark, broker, workdir, declaration):
    register_data_sources(spark)
    config = AppConfig(app="tables", brokers=f"broker-a={broker.ha_addr}", workdir=workdir,
                       trigger="available-now", declaration=declaration)
    return config, run_app(spark, config, max_runtime_s=APP_TIMEOUT_S)


def test_declared_tables_land_typed_rows_and_dead_letters(spark, broker, records, tmp_path):
    config, result = _run(spark, broker, tmp_path / "work", _declaration(tmp_path, SCHEMA_V1))
    payments = {r["commitLogOffset"]: r for r in query_tables(
        "SELECT * FROM p", {"p": str(config.table_path("payments"))}).to_pylist()}
    expected = {}
    for rec in records:
        if rec.topic == "PaymentEvents" and rec.tags == "Paid":
            try:
                body = json.loads(rec.decompressed_body())
            except ValueError:
                continue
            if isinstance(body, dict) and isinstance(body.get("amount"), int):
                expected[rec.commit_log_offset] = body
    assert set(payments) == set(expected) and len(expected) == PAYMENTS
    for offset, row in payments.items():
        assert row["paymentId"] == expected[offset]["paymentId"] and row["amount"] == expected[offset]["amount"]
        assert row["paidAt"].isoformat().startswith(expected[offset]["paidAt"][:16])
        assert row["keys"] == expected[offset]["paymentId"] and row["region"] in ("eu", "us")
        assert "method" not in row  # not in the v1 schema

    orders = query_tables("SELECT * FROM o", {"o": str(config.table_path("orders"))}).to_pylist()
    order_records = [r for r in records if r.topic in ORDER_TOPICS]
    assert sorted(r["commitLogOffset"] for r in orders) == sorted(r.commit_log_offset for r in order_records)
    by_offset = {r.commit_log_offset: msgpack.unpackb(r.decompressed_body()) for r in order_records}
    for row in orders:
        event = by_offset[row["commitLogOffset"]]
        assert (row["orderId"], row["amountCents"], row["status"]) == (
            event["orderId"], event["amountCents"], event["status"])

    audit = query_tables("SELECT * FROM a", {"a": str(config.table_path("audit"))}).to_pylist()
    assert sorted(r["body"] for r in audit) == sorted(f"audit line {i}" for i in range(10))

    dead = query_tables("SELECT * FROM d", {"d": str(config.table_path("dead_letters"))}).to_pylist()
    assert sorted(bytes(r["body"]) for r in dead) == sorted([*BAD_PAYMENTS, b"\xff\xfe not utf-8"])
    assert all(r["error"] and "\n" not in r["error"] for r in dead)
    assert {r["table"] for r in dead} == {"payments", "audit"}
    matched = PAYMENTS + len(BAD_PAYMENTS) + ORDERS + 11
    assert len(payments) + len(orders) + len(audit) + len(dead) == matched  # nothing dropped silently

    # the same declaration again: every micro-batch was committed, nothing lands twice
    _, again = _run(spark, broker, tmp_path / "work", str(tmp_path / "tables.toml"))
    assert again.rows == 0

    # a declaration whose schema adds a field: the column appears, earlier rows read it as null
    evolved = tmp_path / "v2"
    evolved.mkdir()
    from connector.client.producer import Producer

    with Producer(broker.remoting_addr, "tables-test-v2") as producer:
        for i in range(PAYMENTS, PAYMENTS + 5):
            assert producer.send("PaymentEvents", json.dumps(_payment(i)).encode(), tags="Paid").send_status \
                == "SEND_OK"
    _run(spark, broker, tmp_path / "work", _declaration(evolved, SCHEMA_V2))
    rows = query_tables("SELECT paymentId, method FROM p", {"p": str(config.table_path("payments"))}).to_pylist()
    assert len(rows) == PAYMENTS + 5
    new = {f"P-{i}" for i in range(PAYMENTS, PAYMENTS + 5)}
    assert all((r["method"] is not None) == (r["paymentId"] in new) for r in rows)


def test_on_error_fail_stops_the_query_naming_table_broker_offset(spark, broker, records, tmp_path):
    bad = next(r for r in records if r.topic == "PaymentEvents" and r.decompressed_body() == BAD_PAYMENTS[0])
    with pytest.raises(AppError) as info:
        _run(spark, broker, tmp_path / "work", _declaration(tmp_path, SCHEMA_V1, on_error="fail"))
    line = str(info.value)
    assert f"table payments: broker broker-a commitLogOffset {bad.commit_log_offset}" in line
