"""Decoding the demo's msgpack order events (``streaming_apps.workload``) into typed Arrow columns.

Pure (pyarrow + msgpack): the silver and gold apps run :func:`decode_order_batch` on executors through
``mapInArrow``. Each input row is one message (bronze columns); each output row is the message's order
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
from collections.abc import Iterator
from typing import Any

import msgpack
import pyarrow as pa

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
#: The same schema as a Spark DDL string (``mapInArrow``'s return type).
DECODED_DDL = (
    "broker string, topic string, queueId int, queueOffset bigint, commitLogOffset bigint, msgId string, "
    "tags string, keys string, storeTimestamp timestamp, orderId string, customerId string, status string, "
    "amountCents bigint, currency string, region string, "
    "items array<struct<sku:string,qty:int,priceCents:bigint>>, itemQuantity bigint, eventTime timestamp, "
    "reason string, body binary")

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


def decode_order_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Decode the ``body`` column of a batch of messages into :data:`DECODED_SCHEMA`.

    Valid orders: order columns set, ``reason`` and ``body`` null. Invalid: order columns null, the
    reason (at most MAX_REASON_CHARS characters) and the raw body kept. A record the source could not
    decode (its ``decodeError`` column, when the input has it, is set: BODYCRC mismatch, a body that does
    not decompress) is invalid with reason ``bad record: <decodeError>`` and its stored body. The
    pass-through columns (:data:`PASS_THROUGH`) are copied; the input must have them and ``body``.
    """
    bodies = batch.column(batch.schema.get_field_index("body")).to_pylist()
    error_index = batch.schema.get_field_index(DECODE_ERROR)
    decode_errors = batch.column(error_index).to_pylist() if error_index >= 0 else [None] * len(bodies)
    columns: dict[str, list] = {f.name: [] for f in ORDER_FIELDS}
    reasons: list[str | None] = []
    bad_bodies: list[bytes | None] = []
    for body, decode_error in zip(bodies, decode_errors, strict=True):
        try:
            if decode_error is not None:
                raise OrderDecodeError(f"bad record: {decode_error}")
            order = decode_order_body(body if body is not None else b"")
        except OrderDecodeError as e:
            for name in columns:
                columns[name].append(None)
            reasons.append(str(e)[:MAX_REASON_CHARS])
            bad_bodies.append(body)
            continue
        for name in columns:
            columns[name].append(order[name])
        reasons.append(None)
        bad_bodies.append(None)
    arrays = []
    for f in DECODED_SCHEMA:
        if f.name in _PASS_TYPES:
            arrays.append(batch.column(batch.schema.get_field_index(f.name)).cast(f.type))
        elif f.name == "reason":
            arrays.append(pa.array(reasons, pa.string()))
        elif f.name == "body":
            arrays.append(pa.array(bad_bodies, pa.binary()))
        else:
            arrays.append(pa.array(columns[f.name], f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=DECODED_SCHEMA)


def decode_order_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: :func:`decode_order_batch` over every batch of a partition."""
    for batch in batches:
        if batch.num_rows:
            yield decode_order_batch(batch)
