"""streaming_apps.apps.orders: gold's decoder of the workload's msgpack order events; silver's declaration of them."""

from __future__ import annotations

import datetime as dt

import msgpack
import pyarrow as pa
import pytest

from streaming_apps.apps.orders import (
    DECODED_SCHEMA,
    MAX_REASON_CHARS,
    OrderDecodeError,
    decode_order_batch,
    decode_order_body,
)
from streaming_apps.workload import order_events
from tests.support.no_pandas import refuse_pandas_prelude

GOOD = {"orderId": "ORD-1", "customerId": "C-1", "status": "PAID", "amountCents": 1500, "currency": "EUR",
        "region": "eu-west", "items": [{"sku": "SKU-1", "qty": 2, "priceCents": 500},
                                       {"sku": "SKU-2", "qty": 1, "priceCents": 500}],
        "eventTimeMs": 1_790_000_000_123, "note": "ignored"}


def test_a_workload_event_decodes_to_typed_fields():
    msg = next(order_events(1, seed=3))
    order = decode_order_body(msg.body)
    raw = msgpack.unpackb(msg.body)
    assert order["orderId"] == raw["orderId"] == "ORD-000000000"
    assert order["status"] == msg.tags
    assert order["amountCents"] == sum(i["qty"] * i["priceCents"] for i in raw["items"])
    assert order["itemQuantity"] == sum(i["qty"] for i in raw["items"])
    assert order["eventTime"] == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=raw["eventTimeMs"])
    assert set(order) == {f.name for f in DECODED_SCHEMA} - {"broker", "topic", "queueId", "queueOffset",
                                                             "commitLogOffset", "msgId", "tags", "keys",
                                                             "storeTimestamp", "reason", "body"}


@pytest.mark.parametrize(("body", "reason"), [
    (b"\x01\x02 not msgpack", "body is not msgpack (ExtraData"),
    (b"\xc1", "body is not msgpack"),
    (msgpack.packb({"orderId": "x"})[:-1], "body is not msgpack"),
    (b"", "body is not msgpack"),
    (msgpack.packb([1, 2, 3]), "body is msgpack list, not a map"),
    (msgpack.packb({**GOOD, "amountCents": "12"}), "field amountCents: expected int, got str"),
    (msgpack.packb({**GOOD, "amountCents": True}), "field amountCents: expected int, got bool"),
    (msgpack.packb({**GOOD, "amountCents": 2**63}), "field amountCents: 9223372036854775808 is out of range"),
    (msgpack.packb({k: v for k, v in GOOD.items() if k != "orderId"}), "field orderId is missing"),
    (msgpack.packb({**GOOD, "customerId": None}), "field customerId: expected str, got nil"),
    (msgpack.packb({**GOOD, "items": "none"}), "field items: expected list, got str"),
    (msgpack.packb({**GOOD, "items": [GOOD["items"][0], 7]}), "field items[1]: expected map, got int"),
    (msgpack.packb({**GOOD, "items": [{"sku": "a", "qty": 2**40, "priceCents": 1}]}),
     "field items[0].qty: 1099511627776 is out of range"),
    (msgpack.packb({**GOOD, "eventTimeMs": 10**17}), "field eventTimeMs: 100000000000000000 is out of range"),
])
def test_invalid_bodies_name_what_is_wrong(body, reason):
    with pytest.raises(OrderDecodeError) as e:
        decode_order_body(body)
    assert str(e.value).startswith(reason)


def _messages(bodies: list[bytes]) -> pa.RecordBatch:
    n = len(bodies)
    ts = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    return pa.record_batch({
        "broker": ["broker-a"] * n, "topic": ["OrderPaid"] * n, "queueId": pa.array(range(n), pa.int32()),
        "queueOffset": pa.array(range(n), pa.int64()), "commitLogOffset": pa.array([100 * i for i in range(n)],
                                                                                   pa.int64()),
        "msgId": [f"id{i}" for i in range(n)], "tags": ["PAID"] * n, "keys": [None] * n,
        "storeTimestamp": pa.array([ts] * n, pa.timestamp("us", tz="UTC")), "body": pa.array(bodies, pa.binary()),
    })


def test_a_batch_keeps_good_rows_typed_and_bad_rows_with_reason_and_body():
    bad = b"\xff" * 5
    out = decode_order_batch(_messages([msgpack.packb(GOOD), bad, msgpack.packb({"x": 1})]))
    assert out.schema == DECODED_SCHEMA
    rows = out.to_pylist()
    assert rows[0]["orderId"] == "ORD-1" and rows[0]["reason"] is None and rows[0]["body"] is None
    assert rows[0]["items"] == GOOD["items"] and rows[0]["itemQuantity"] == 3
    assert rows[0]["eventTime"] == dt.datetime(2026, 9, 21, 14, 13, 20, 123000, tzinfo=dt.UTC)
    assert rows[1]["orderId"] is None and rows[1]["body"] == bad and rows[1]["reason"].startswith("body is not")
    assert rows[2]["reason"] == "field items is missing"
    assert [r["commitLogOffset"] for r in rows] == [0, 100, 200]
    assert all(r["storeTimestamp"] == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC) for r in rows)


def test_reasons_are_bounded():
    huge_key = {"k" * 1000: 1}
    out = decode_order_batch(_messages([msgpack.packb([huge_key])]))
    assert len(out.column("reason")[0].as_py()) <= MAX_REASON_CHARS



def test_records_the_source_could_not_decode_are_quarantined_with_the_decode_error():
    batch = _messages([msgpack.packb(GOOD), b"stored \x78\x9c bytes", msgpack.packb(GOOD)])
    errors = pa.array([None, "BODY: ZLIB body does not inflate (Error -3)", "BODYCRC: mismatch: stored 0x1"])
    out = decode_order_batch(batch.append_column("decodeError", errors)).to_pylist()
    assert out[0]["orderId"] == "ORD-1" and out[0]["reason"] is None
    assert (out[1]["orderId"], out[1]["body"]) == (None, b"stored \x78\x9c bytes")
    assert out[1]["reason"] == "bad record: BODY: ZLIB body does not inflate (Error -3)"
    # a body that happens to be a valid order is still quarantined when its BODYCRC does not match
    assert (out[2]["orderId"], out[2]["reason"]) == (None, "bad record: BODYCRC: mismatch: stored 0x1")
    assert out[2]["body"] == msgpack.packb(GOOD)


def _mutated(bodies: list[bytes], rng) -> list[bytes | None]:
    """Workload bodies cut short, with flipped bytes, or with one field of another type or out of range."""
    out: list[bytes | None] = [None]
    odd_values = [None, True, -1, 2**64 - 1, "s", [], {}, 1.5, b"x", 10**17, [7], [{"sku": 1}],
                  [{"sku": "a", "qty": 2**31, "priceCents": 1}], [{"sku": "a", "qty": 1, "priceCents": 2**63}]]
    for body in bodies:
        kind = rng.randrange(3)
        if kind == 0:
            out.append(body[:rng.randrange(len(body))])
        elif kind == 1:
            flipped = bytearray(body)
            for _ in range(3):
                flipped[rng.randrange(len(flipped))] = rng.randrange(256)
            out.append(bytes(flipped))
        else:
            event = msgpack.unpackb(body)
            event[rng.choice(sorted(event))] = rng.choice(odd_values)
            out.append(msgpack.packb(event))
    return out


def test_the_batch_decoder_gives_row_by_row_what_decode_order_body_says():
    import random

    rng = random.Random(7)
    good = [m.body for m in order_events(300, seed=11)]
    bodies = good + _mutated(good, rng)
    out = decode_order_batch(_messages(bodies)).to_pylist()
    for body, row in zip(bodies, out, strict=True):
        try:
            order = decode_order_body(body if body is not None else b"")
        except OrderDecodeError as e:
            assert (row["reason"], row["body"], row["orderId"], row["items"]) == (str(e)[:MAX_REASON_CHARS], body,
                                                                                  None, None)
            continue
        assert row["reason"] is None and row["body"] is None
        assert {k: row[k] for k in order} == order
    assert sum(r["reason"] is None for r in out) > 300  # the good ones, and some mutations that stay valid


def _with_extra_entries(event: dict, *entries: bytes) -> bytes:
    """``event`` packed as a msgpack map with raw ``entries`` (key and value bytes) appended to it."""
    body = msgpack.packb(event)
    assert body[0] & 0xF0 == 0x80, "a fixmap (fewer than 16 keys)"
    return bytes([body[0] + len(entries) // 2]) + body[1:] + b"".join(entries)


def test_the_native_fast_path_accepts_exactly_what_decode_order_body_accepts():
    """Bodies where msgspec's typed decoding and msgpack.unpackb could differ: bytes msgspec would skip unread
    under an unknown key, keys that are not strings, a key twice, a note of another type."""
    not_utf8 = b"\xa2\xff\xfe"  # a msgpack str whose bytes are not UTF-8
    bodies = [
        _with_extra_entries(GOOD, msgpack.packb("extra"), not_utf8),  # unpackb refuses the whole body
        _with_extra_entries(GOOD, not_utf8, msgpack.packb(1)),  # a key that is not UTF-8
        _with_extra_entries(GOOD, msgpack.packb("extra"), b"\x91" + not_utf8),  # nested in an unknown value
        _with_extra_entries(GOOD, msgpack.packb(7), msgpack.packb("int key")),  # valid for decode_order_body
        _with_extra_entries(GOOD, msgpack.packb("extra"), msgpack.packb(msgpack.ExtType(5, b"ab"))),
        _with_extra_entries(GOOD, msgpack.packb("status"), msgpack.packb("SHIPPED")),  # the last one counts
        _with_extra_entries(GOOD, msgpack.packb("status"), msgpack.packb(3)),
        msgpack.packb({**GOOD, "note": 12}), msgpack.packb({**GOOD, "note": "\u00e9t\u00e9"}),
        msgpack.packb({**GOOD, "items": [{**GOOD["items"][0], "colour": b"\xff"}]}),
        msgpack.packb(GOOD) + b"\x00", msgpack.packb({**GOOD, "orderId": b"bytes"}, use_bin_type=True),
    ]
    out = decode_order_batch(_messages(bodies)).to_pylist()
    verdicts = []
    for body, row in zip(bodies, out, strict=True):
        try:
            order = decode_order_body(body)
        except OrderDecodeError as e:
            assert (row["reason"], row["body"], row["orderId"]) == (str(e), body, None)
            verdicts.append(False)
            continue
        assert row["reason"] is None and {k: row[k] for k in order} == order
        verdicts.append(True)
    assert verdicts == [False, False, False, True, True, True, False, True, True, True, False, False]
    assert out[5]["status"] == "SHIPPED"


def test_a_column_subset_is_the_same_columns_of_the_whole_decode():
    from streaming_apps.apps.gold import DECODED_COLUMNS
    from streaming_apps.apps.orders import decoded_ddl

    bodies = [m.body for m in order_events(50, seed=5)] + [b"\xc1", msgpack.packb({**GOOD, "items": 3})]
    whole = decode_order_batch(_messages(bodies))
    body_only = pa.record_batch({"body": pa.array(bodies, pa.binary())})  # no pass-through columns needed
    part = decode_order_batch(body_only, DECODED_COLUMNS)
    assert part.schema.names == list(DECODED_COLUMNS)
    assert part.to_pylist() == whole.select(list(DECODED_COLUMNS)).to_pylist()
    assert decoded_ddl(DECODED_COLUMNS) == ("eventTime timestamp, status string, region string, currency string, "
                                            "amountCents bigint, itemQuantity bigint, reason string")


def test_silver_runs_the_demos_declaration_of_the_orders_with_its_own_table_names(tmp_path):
    """silver is the tables app of one built-in declaration; the demo's orders.toml is the same declaration."""
    from streaming_apps.apps import app_of
    from streaming_apps.apps.common import AppConfig
    from streaming_apps.apps.silver import orders_declaration
    from streaming_apps.demo import demo_declaration

    app = app_of(AppConfig(app="silver", brokers="b=127.0.0.1:1", workdir=tmp_path))
    assert (app.NAME, app.TABLES, app.QUERY_NAMES) == ("silver", ("silver_orders", "silver_quarantine"),
                                                         ("hareplica-silver",))
    assert app.schemas["silver_orders"].names == [
        "orderId", "customerId", "status", "amountCents", "currency", "region", "items", "eventTimeMs", "broker",
        "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "tags", "keys", "storeTimestamp", "eventDate"]
    assert app.partition_by("silver_orders") == ("eventDate",)
    assert demo_declaration().endswith(orders_declaration("orders", "dead_letters"))


def test_silver_refuses_the_spark_landing_and_sparks_delta_before_spark_starts(tmp_path):
    from streaming_apps.apps.common import AppConfig, AppError

    for kw in ({"sink": "delta"}, {"landing": "spark"}):
        with pytest.raises(AppError, match="^run silver lands its tables with --landing direct and --sink deltalake"):
            AppConfig(app="silver", brokers="b=127.0.0.1:1", workdir=tmp_path, **kw)


@pytest.mark.parametrize("bad_rows", [(), (0,), (4,), (1, 3), (0, 1, 2, 3, 4)])
def test_valid_and_invalid_rows_in_any_place_get_their_own_values(bad_rows):
    """The columns are built from the valid orders and spread over the rows: every row keeps its own values,
    wherever the invalid ones fall (none, first, last, several, all)."""
    events = [{**GOOD, "orderId": f"ORD-{i}", "items": GOOD["items"][: i % 3], "eventTimeMs": 1_790_000_000_000 + i}
              for i in range(5)]
    bodies = [b"\xc1" if i in bad_rows else msgpack.packb(e) for i, e in enumerate(events)]
    rows = decode_order_batch(_messages(bodies)).to_pylist()
    for i, (row, event) in enumerate(zip(rows, events, strict=True)):
        if i in bad_rows:
            assert (row["orderId"], row["items"], row["itemQuantity"], row["body"]) == (None, None, None, b"\xc1")
            assert row["reason"].startswith("body is not msgpack")
        else:
            assert (row["orderId"], row["items"], row["reason"], row["body"]) == (event["orderId"], event["items"],
                                                                                  None, None)
            assert row["itemQuantity"] == sum(item["qty"] for item in event["items"])
            assert row["eventTime"] == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
                milliseconds=event["eventTimeMs"])


#: Decodes the batch in the Arrow IPC file argv[1] as gold's tasks do, with an import hook that
#: refuses pandas and records every attempt (pyarrow's shim tries once per process, so nothing else may build
#: arrays from Python values first: the batch is read from the file).
NO_PANDAS_SCRIPT = refuse_pandas_prelude("streaming_apps") + """
import pyarrow as pa
from streaming_apps.apps.gold import DECODED_COLUMNS
from streaming_apps.apps.orders import decode_order_batch

with pa.OSFile(sys.argv[1]) as f:
    batch = pa.ipc.open_file(f).get_batch(0)
whole = decode_order_batch(batch)
gold = decode_order_batch(batch, DECODED_COLUMNS)
print(json.dumps({"orders": whole.num_rows - whole.column("reason").is_valid().true_count,
                  "rejected": whole.column("reason").is_valid().true_count, "gold": gold.num_rows,
                  "attempts": attempts}))
"""


def test_gold_decoding_never_imports_pandas(tmp_path):
    """The order decoder builds its arrays from buffers (connector.arrow_numpy), as the source does, so gold's
    workers stay without pandas too (fails on a decoder that calls ``pa.array`` on Python values)."""
    import json
    import subprocess
    import sys

    bodies = [m.body for m in order_events(40, seed=2)] + [b"\xc1", msgpack.packb([1])]
    batch = _messages(bodies).append_column("decodeError", pa.array([None] * 41 + ["BODYCRC: mismatch"]))
    path = tmp_path / "batch.arrow"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, batch.schema) as writer:
        writer.write_batch(batch)
    run = subprocess.run([sys.executable, "-c", NO_PANDAS_SCRIPT, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["attempts"] == [], f"pandas was imported by: {out['attempts']}"
    assert (out["orders"], out["rejected"], out["gold"]) == (40, 2, 42)


def test_silver_and_gold_take_their_topics_from_topics_not_from_a_source_option(tmp_path):
    from streaming_apps.apps.common import AppConfig, AppError
    from streaming_apps.apps.gold import order_source_options
    from streaming_apps.apps.silver import order_topics

    cfg = AppConfig(app="gold", brokers="b=127.0.0.1:1", workdir=tmp_path, topics=("A", "B:x || y"))
    assert order_source_options(cfg)["subscribe"] == "A,B:x || y"
    silver = AppConfig(app="silver", brokers="b=127.0.0.1:1", workdir=tmp_path, topics=("A:x || y", "B:x || y"))
    assert order_topics(silver) == (("A", "B"), "x || y")
    with pytest.raises(AppError, match=r"^--topics A,B:x: silver's one table reads its topics with one tag expr"):
        order_topics(AppConfig(app="silver", brokers="b=127.0.0.1:1", workdir=tmp_path, topics=("A", "B:x")))
    with pytest.raises(AppError, match=r"--option subscribe=A: the silver app reads the topics of --topics"):
        order_topics(AppConfig(app="silver", brokers="b=1:1", workdir=tmp_path, source_options={"subscribe": "A"}))
    bad = AppConfig(app="gold", brokers="b=127.0.0.1:1", workdir=tmp_path, source_options={"topicPattern": "Order.*"})
    with pytest.raises(AppError, match=r"--option topicPattern=Order\.\*: the gold app reads the topics of --topics"):
        order_source_options(bad)
