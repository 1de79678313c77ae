"""Decoding the demo's msgpack order events (``streaming_apps.workload``) into typed Arrow columns.

Pure (pyarrow + msgpack): the silver and gold apps run :func:`decode_order_batch` in the source's own
tasks (the source's ``batchTransform``, connector.transform; silver's direct landing through its split).
Each input row is one message (bronze columns); each output row is the message's order
fields when the body is a valid order event, else nulls and a ``reason`` saying what is wrong with
the body (the silver app routes those rows to its quarantine table with their commitLogOffset).

An order event body is a msgpack map with at least (workload.order_event)::

    orderId str, customerId str, status str, amountCents int, currency str, region str,
    items [ {sku str, qty int, priceCents int}, ... ], eventTimeMs int (ms since the epoch)

Other keys (``note``) are ignored. Integers must fit the column (int64; qty int32; eventTimeMs within
years 1..9999).
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Sequence
from typing import Any

import msgpack
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute in _order_arrays

log = logging.getLogger(__name__)

#: Input columns the decoder needs (bronze names); more are passed through untouched if listed in PASS_THROUGH.
PASS_THROUGH = ("broker", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "tags", "keys",
                "storeTimestamp")
_TS = pa.timestamp("us", tz="UTC")
ITEM_TYPE = pa.struct([pa.field("sku", pa.string()), pa.field("qty", pa.int32()), pa.field("priceCents", pa.int64())])
#: Order columns the decoder adds, in output order.
ORDER_FIELDS = (
    pa.field("orderId", pa.string()),
    pa.field("customerId", pa.string()),
    pa.field("status", pa.string()),
    pa.field("amountCents", pa.int64()),
    pa.field("currency", pa.string()),
    pa.field("region", pa.string()),
    pa.field("items", pa.list_(ITEM_TYPE)),
    pa.field("itemQuantity", pa.int64()),
    pa.field("eventTime", _TS),
)
_PASS_TYPES = {"broker": pa.string(), "topic": pa.string(), "queueId": pa.int32(), "queueOffset": pa.int64(),
               "commitLogOffset": pa.int64(), "msgId": pa.string(), "tags": pa.string(), "keys": pa.string(),
               "storeTimestamp": _TS}
#: Schema of every batch :func:`decode_order_batch` yields: pass-through, order fields, reason, body.
DECODED_SCHEMA = pa.schema([pa.field(n, _PASS_TYPES[n]) for n in PASS_THROUGH] + list(ORDER_FIELDS)
                           + [pa.field("reason", pa.string()), pa.field("body", pa.binary())])
_SPARK_TYPES = {pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint", _TS: "timestamp",
                pa.binary(): "binary", pa.list_(ITEM_TYPE): "array<struct<sku:string,qty:int,priceCents:bigint>>"}


def decoded_ddl(columns: Sequence[str] | None = None) -> str:
    """``columns`` of :data:`DECODED_SCHEMA` (all when None, in its order) as a Spark DDL string, the
    return type ``mapInArrow`` needs. Raises KeyError for a name not in the schema."""
    fields = DECODED_SCHEMA if columns is None else [DECODED_SCHEMA.field(name) for name in columns]
    return ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in fields)


#: :data:`DECODED_SCHEMA` as a Spark DDL string (``mapInArrow``'s return type).
DECODED_DDL = decoded_ddl()

_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)
_MIN_EVENT_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
_MAX_EVENT_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_REASON_CHARS = 300
#: The source's column naming why a record's body is kept as stored (connector.decode, docs/source.md).
DECODE_ERROR = "decodeError"


class OrderDecodeError(ValueError):
    """A body that is not a valid order event; the message is the quarantine reason."""


def _type_name(v: Any) -> str:
    return "nil" if v is None else type(v).__name__


def _str(event: dict, key: str, where: str = "") -> str:
    if key not in event:
        raise OrderDecodeError(f"field {where}{key} is missing")
    v = event[key]
    if not isinstance(v, str):
        raise OrderDecodeError(f"field {where}{key}: expected str, got {_type_name(v)}")
    return v


def _int(event: dict, key: str, bounds: tuple[int, int] = _INT64, where: str = "") -> int:
    if key not in event:
        raise OrderDecodeError(f"field {where}{key} is missing")
    v = event[key]
    if not isinstance(v, int) or isinstance(v, bool):
        raise OrderDecodeError(f"field {where}{key}: expected int, got {_type_name(v)}")
    if not bounds[0] <= v <= bounds[1]:
        raise OrderDecodeError(f"field {where}{key}: {v} is out of range [{bounds[0]}, {bounds[1]}]")
    return v


def decode_order_body(body: bytes) -> dict[str, Any]:
    """One body → the order columns (names of :data:`ORDER_FIELDS`, eventTime as an aware datetime).

    Raises:
        OrderDecodeError: not msgpack, not a map, a required field missing or of the wrong type or range.
    """
    try:
        event = msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as e:  # noqa: BLE001 - msgpack raises several unrelated types for malformed input
        raise OrderDecodeError(f"body is not msgpack ({type(e).__name__}: {e})") from None
    if not isinstance(event, dict):
        raise OrderDecodeError(f"body is msgpack {_type_name(event)}, not a map")
    raw_items = event.get("items")
    if "items" not in event:
        raise OrderDecodeError("field items is missing")
    if not isinstance(raw_items, list):
        raise OrderDecodeError(f"field items: expected list, got {_type_name(raw_items)}")
    items = []
    for i, item in enumerate(raw_items):
        where = f"items[{i}]."
        if not isinstance(item, dict):
            raise OrderDecodeError(f"field items[{i}]: expected map, got {_type_name(item)}")
        items.append({"sku": _str(item, "sku", where), "qty": _int(item, "qty", _INT32, where),
                      "priceCents": _int(item, "priceCents", where=where)})
    event_ms = _int(event, "eventTimeMs", (_MIN_EVENT_MS, _MAX_EVENT_MS))
    return {
        "orderId": _str(event, "orderId"),
        "customerId": _str(event, "customerId"),
        "status": _str(event, "status"),
        "amountCents": _int(event, "amountCents"),
        "currency": _str(event, "currency"),
        "region": _str(event, "region"),
        "items": items,
        "itemQuantity": sum(i["qty"] for i in items),
        "eventTime": _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(milliseconds=event_ms),
    }


def _fast_order(event: Any) -> tuple | None:
    """The order fields of an unpacked event as ``(orderId, customerId, status, amountCents, currency, region,
    [(sku, qty, priceCents), ...], eventTimeMs)`` when every check of :func:`decode_order_body` passes, else
    None (the caller then asks decode_order_body for the reason). Exact types only: msgpack yields plain
    str/int/dict/list, and bool is not int here."""
    if type(event) is not dict:
        return None
    get = event.get
    order_id, customer, status, currency, region = (get("orderId"), get("customerId"), get("status"),
                                                   get("currency"), get("region"))
    amount, event_ms, raw_items = get("amountCents"), get("eventTimeMs"), get("items")
    if not (type(order_id) is str and type(customer) is str and type(status) is str and type(currency) is str
            and type(region) is str and type(amount) is int and _INT64[0] <= amount <= _INT64[1]
            and type(event_ms) is int and _MIN_EVENT_MS <= event_ms <= _MAX_EVENT_MS and type(raw_items) is list):
        return None
    items = []
    for item in raw_items:
        if type(item) is not dict:
            return None
        sku, qty, price = item.get("sku"), item.get("qty"), item.get("priceCents")
        if not (type(sku) is str and type(qty) is int and _INT32[0] <= qty <= _INT32[1] and type(price) is int
                and _INT64[0] <= price <= _INT64[1]):
            return None
        items.append((sku, qty, price))
    return order_id, customer, status, amount, currency, region, items, event_ms


def _as_tuple(order: dict[str, Any]) -> tuple:
    """decode_order_body's dict in _fast_order's tuple shape."""
    items = [(i["sku"], i["qty"], i["priceCents"]) for i in order["items"]]
    ms = (order["eventTime"] - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)) // _dt.timedelta(milliseconds=1)
    return (order["orderId"], order["customerId"], order["status"], order["amountCents"], order["currency"],
            order["region"], items, ms)


def decode_order_batch(batch: pa.RecordBatch, columns: Sequence[str] | None = None) -> pa.RecordBatch:
    """Decode the ``body`` column of a batch of messages into :data:`DECODED_SCHEMA`, or into only its
    ``columns`` in that order (gold needs neither the pass-through columns nor the items).

    Valid orders: order columns set, ``reason`` and ``body`` null. Invalid: order columns null, the
    reason (at most MAX_REASON_CHARS characters) and the raw body kept. A record the source could not
    decode (its ``decodeError`` column, when the input has it, is set: BODYCRC mismatch, a body that does
    not decompress) is invalid with reason ``bad record: <decodeError>`` and its stored body. The
    pass-through columns (:data:`PASS_THROUGH`) are copied; the input must have ``body`` and the
    pass-through columns asked for.

    The rows are the ones :func:`decode_order_body` gives, built column-wise: the items as flat sku/qty/price
    arrays with list offsets, eventTime as int64 milliseconds cast to a timestamp.
    """
    bodies = batch.column(batch.schema.get_field_index("body")).to_pylist()
    error_index = batch.schema.get_field_index(DECODE_ERROR)
    decode_errors = batch.column(error_index).to_pylist() if error_index >= 0 else None
    n = len(bodies)
    scalars: list[list] = [[None] * n for _ in range(6)]  # orderId .. region, in ORDER_FIELDS order
    quantity: list[int | None] = [None] * n
    event_ms: list[int | None] = [None] * n
    offsets = [0] * (n + 1)
    skus: list[str] = []
    qtys: list[int] = []
    prices: list[int] = []
    reasons: list[str | None] = [None] * n
    bad_bodies: list[bytes | None] = [None] * n
    unpackb = msgpack.unpackb
    for row, body in enumerate(bodies):
        order = None
        if decode_errors is None or decode_errors[row] is None:
            try:
                order = _fast_order(unpackb(body, raw=False, strict_map_key=False))
            except Exception:  # noqa: BLE001 - decode_order_body names what msgpack rejected
                order = None
        if order is None:
            try:
                if decode_errors is not None and decode_errors[row] is not None:
                    raise OrderDecodeError(f"bad record: {decode_errors[row]}")
                order = _as_tuple(decode_order_body(body if body is not None else b""))
            except OrderDecodeError as e:
                reasons[row] = str(e)[:MAX_REASON_CHARS]
                bad_bodies[row] = body
                offsets[row + 1] = len(skus)
                continue
        for column, value in zip(scalars, order, strict=False):
            column[row] = value
        total = 0
        for sku, qty, price in order[6]:
            skus.append(sku)
            qtys.append(qty)
            prices.append(price)
            total += qty
        quantity[row] = total
        event_ms[row] = order[7]
        offsets[row + 1] = len(skus)
    return _order_arrays(batch, scalars, quantity, event_ms, (offsets, skus, qtys, prices), reasons, bad_bodies,
                         columns)


def _order_arrays(batch: pa.RecordBatch, scalars: list[list], quantity: list, event_ms: list,
                  items: tuple[list, list, list, list], reasons: list, bad_bodies: list,
                  columns: Sequence[str] | None) -> pa.RecordBatch:
    """The output RecordBatch of decode_order_batch from its column lists (only ``columns`` when given)."""
    schema = DECODED_SCHEMA if columns is None else pa.schema([DECODED_SCHEMA.field(name) for name in columns])
    built = {f.name: pa.array(col, f.type) for f, col in zip(ORDER_FIELDS[:6], scalars, strict=True)}
    if "items" in schema.names:
        offsets, skus, qtys, prices = items
        valid = pa.array([r is None for r in reasons], pa.bool_())
        values = pa.StructArray.from_arrays([pa.array(skus, pa.string()), pa.array(qtys, pa.int32()),
                                             pa.array(prices, pa.int64())], fields=list(ITEM_TYPE))
        built["items"] = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, type=pa.list_(ITEM_TYPE),
                                                  mask=pa.compute.invert(valid))
    built["itemQuantity"] = pa.array(quantity, pa.int64())
    built["eventTime"] = pa.compute.multiply(pa.array(event_ms, pa.int64()), 1000).cast(_TS)
    built["reason"] = pa.array(reasons, pa.string())
    built["body"] = pa.array(bad_bodies, pa.binary())
    arrays = [batch.column(batch.schema.get_field_index(f.name)).cast(f.type) if f.name in _PASS_TYPES
              else built[f.name] for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
