"""Decoding the demo's msgpack order events (``streaming_apps.workload``) into typed Arrow columns, in the source's
own tasks (gold's ``batchTransform``; silver declares the same fields for the tables app instead,
:mod:`streaming_apps.apps.silver`). Pure: pyarrow, NumPy, msgspec,
msgpack; no pandas. Each output row holds the message's order fields, or nulls and a ``reason`` naming what is
wrong with the body.

Two decoders, one verdict: msgspec decodes and type-checks a body in native code into :class:`_FastOrder`; a body
it refuses goes to :func:`decode_order_body` (msgpack), which accepts it or names the reason. The fast path
accepts a subset of what the slow one accepts, with the same values (tests/unit/apps/test_orders_decode.py). The
event's fields: docs/delta.md "4. The apps", "gold → table `gold_orders_per_minute`".
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Sequence
from itertools import chain
from typing import Annotated, Any

import msgpack
import msgspec
import numpy as np
import pyarrow as pa
from msgspec.structs import astuple

from connector.arrow_numpy import binary_array, from_numpy, indices_or_null

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


_Int64 = Annotated[int, msgspec.Meta(ge=_INT64[0], le=_INT64[1])]
_Int32 = Annotated[int, msgspec.Meta(ge=_INT32[0], le=_INT32[1])]
_EventMs = Annotated[int, msgspec.Meta(ge=_MIN_EVENT_MS, le=_MAX_EVENT_MS)]


class _FastItem(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    sku: str
    qty: _Int32
    priceCents: _Int64


class _FastOrder(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The fast path's shape of an order event: exactly the fields :func:`decode_order_body` checks, with the
    same types and ranges, plus the workload's optional ``note`` as a string. msgspec checks them in native
    code while it decodes; a body it refuses (any other key, a ``note`` that is not a string, anything
    :func:`decode_order_body` would refuse) goes to decode_order_body, which decides and names the reason.
    Only keys named here are accepted, because msgspec skips the bytes of an unknown key unread, where
    ``msgpack.unpackb`` would refuse, say, a string in it that is not UTF-8."""

    orderId: str
    customerId: str
    status: str
    amountCents: _Int64
    currency: str
    region: str
    items: list[_FastItem]
    eventTimeMs: _EventMs
    note: str = ""


_FAST_DECODER = msgspec.msgpack.Decoder(_FastOrder)


def _slow_order(body: bytes) -> _FastOrder:
    """:func:`decode_order_body`'s result in the fast path's shape. Raises OrderDecodeError as it does."""
    order = decode_order_body(body)
    ms = (order["eventTime"] - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)) // _dt.timedelta(milliseconds=1)
    items = [_FastItem(i["sku"], i["qty"], i["priceCents"]) for i in order["items"]]
    return _FastOrder(order["orderId"], order["customerId"], order["status"], order["amountCents"],
                      order["currency"], order["region"], items, ms)


def decode_order_batch(batch: pa.RecordBatch, columns: Sequence[str] | None = None) -> pa.RecordBatch:
    """Decode the ``body`` column of a batch of messages into :data:`DECODED_SCHEMA`, or into only its
    ``columns`` in that order (gold needs neither the pass-through columns nor the items).

    Valid orders: order columns set, ``reason`` and ``body`` null. Invalid: order columns null, the
    reason (at most MAX_REASON_CHARS characters) and the raw body kept. A record the source could not
    decode (its ``decodeError`` column, when the input has it, is set: BODYCRC mismatch, a body that does
    not decompress) is invalid with reason ``bad record: <decodeError>`` and its stored body. The
    pass-through columns (:data:`PASS_THROUGH`) are copied; the input must have ``body`` and the
    pass-through columns asked for.

    The rows are the ones :func:`decode_order_body` gives. Each body is first decoded by the fast path
    (:class:`_FastOrder`, checked in native code); only a body it refuses goes to decode_order_body, which
    gives the same fields or the reason. The columns are then built column-wise from the valid orders only
    (their fields transposed in one pass, strings joined into one buffer, the items as flat sku/qty/price
    arrays with list offsets, eventTime as microseconds), and spread over the batch's rows with one ``take``
    when some rows are invalid. No pandas and no per-row ``pa.array`` (connector.arrow_numpy).
    """
    body_array = batch.column(batch.schema.get_field_index("body"))
    bodies = body_array.to_pylist()
    error_index = batch.schema.get_field_index(DECODE_ERROR)
    errors = batch.column(error_index) if error_index >= 0 else None
    decode_errors = errors.to_pylist() if errors is not None and errors.null_count < len(errors) else None
    orders = _decode_all(bodies) if decode_errors is None else None
    reasons: dict[int, str] = {}  # row -> why its body is not a valid order event
    if orders is None:
        orders = _decode_each(bodies, decode_errors or [None] * len(bodies), reasons)
    schema = DECODED_SCHEMA if columns is None else pa.schema([DECODED_SCHEMA.field(name) for name in columns])
    built = _OrderColumns(orders, reasons, body_array)
    arrays = [batch.column(batch.schema.get_field_index(f.name)).cast(f.type) if f.name in _PASS_TYPES
              else built.column(f.name) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _source_columns(columns: Sequence[str]) -> tuple[str, ...]:
    """The source columns :func:`decode_order_batch` reads to build ``columns``: the body, the source's
    decodeError and the pass-through columns asked for (connector.source.task.transform, ``source_columns``)."""
    return ("body", DECODE_ERROR, *(name for name in PASS_THROUGH if name in columns))


decode_order_batch.source_columns = _source_columns


# ValidationError is a DecodeError; ValueError: a string that is not UTF-8; TypeError: no body at all
_FAST_REFUSALS = (msgspec.DecodeError, ValueError, TypeError)


def _decode_all(bodies: list[bytes | None]) -> list[_FastOrder] | None:
    """Every body decoded by the fast path in one native loop, or None when it refuses one of them."""
    try:
        return list(map(_FAST_DECODER.decode, bodies))
    except _FAST_REFUSALS:
        return None


def _decode_each(bodies: list[bytes | None], decode_errors: list[str | None], reasons: dict[int, str]
                 ) -> list[_FastOrder]:
    """The valid orders among ``bodies``, in row order: the fast path first, then :func:`decode_order_body` for a
    body it refuses. Each invalid row (a body neither accepts, or a ``decode_errors`` entry set) gets its reason
    in ``reasons`` (row -> text of at most MAX_REASON_CHARS characters) instead."""
    orders = []
    fast = _FAST_DECODER.decode
    for row, (body, decode_error) in enumerate(zip(bodies, decode_errors, strict=True)):
        if decode_error is None:
            try:
                orders.append(fast(body))
                continue
            except _FAST_REFUSALS:
                pass
        try:
            if decode_error is not None:
                raise OrderDecodeError(f"bad record: {decode_error}")
            orders.append(_slow_order(body if body is not None else b""))
        except OrderDecodeError as e:
            reasons[row] = str(e)[:MAX_REASON_CHARS]
    return orders


_ORDER_NAMES = _FastOrder.__struct_fields__


class _OrderColumns:
    """The order columns of one batch: built from its valid ``orders`` (in row order) and spread over the rows,
    null where ``reasons`` names why a row's body is not an order event (``body_array``: the input's bodies)."""

    def __init__(self, orders: list[_FastOrder], reasons: dict[int, str], body_array: pa.Array):
        self.rows = len(orders) + len(reasons)
        self.reasons = reasons
        self.invalid = np.fromiter(reasons, np.int64, len(reasons))  # the invalid rows, ascending
        self.body_array = body_array
        fields = list(zip(*map(astuple, orders), strict=True)) or [()] * len(_ORDER_NAMES)
        self.fields = dict(zip(_ORDER_NAMES, fields, strict=True))
        self._spread: pa.Array | None = None
        self._items: tuple[np.ndarray, dict[str, Any]] | None = None

    def column(self, name: str) -> pa.Array:
        """Column ``name`` of :data:`DECODED_SCHEMA` (not a pass-through one), one entry per row."""
        if name == "reason":
            return self._invalid_rows(binary_array(list(self.reasons.values()), pa.string()))
        if name == "body":
            return self._invalid_rows(self.body_array.take(from_numpy(self.invalid, pa.int64())))
        return self._valid_rows(self._valid_column(name))

    def _valid_column(self, name: str) -> pa.Array:
        """Column ``name`` over the valid orders only."""
        if name == "eventTime":  # ms within years 1..9999 (checked): the microseconds fit int64
            return from_numpy(np.array(self.fields["eventTimeMs"], np.int64) * 1000, _TS)
        if name == "amountCents":
            return from_numpy(np.array(self.fields[name], np.int64), pa.int64())
        if name in ("items", "itemQuantity"):
            offsets, item_fields = self._flat_items()
            qtys = item_fields["qty"]
            if name == "itemQuantity":  # the sum of each row's quantities, from the running total
                running = np.zeros(len(qtys) + 1, dtype=np.int64)
                np.cumsum(qtys, out=running[1:])
                return from_numpy(running[offsets[1:]] - running[offsets[:-1]], pa.int64())
            values = pa.StructArray.from_arrays(
                [binary_array(item_fields["sku"], pa.string()), from_numpy(qtys, pa.int32()),
                 from_numpy(item_fields["priceCents"], pa.int64())], fields=list(ITEM_TYPE))
            return pa.ListArray.from_arrays(from_numpy(offsets.astype(np.int32), pa.int32()), values,
                                            type=pa.list_(ITEM_TYPE))
        return binary_array(self.fields[name], pa.string())

    def _flat_items(self) -> tuple[np.ndarray, dict[str, Any]]:
        """(list offsets of each valid order's items, the items' fields: ``sku`` a list of str, ``qty`` and
        ``priceCents`` int64 arrays, every item in order), computed once per batch."""
        if self._items is None:
            items = self.fields["items"]
            offsets = np.zeros(len(items) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, items), np.int64, len(items)), out=offsets[1:])
            flat = list(chain.from_iterable(items))
            fields = {"sku": [item.sku for item in flat],
                      "qty": np.fromiter([item.qty for item in flat], np.int64, len(flat)),
                      "priceCents": np.fromiter([item.priceCents for item in flat], np.int64, len(flat))}
            self._items = offsets, fields
        return self._items

    def _valid_rows(self, column: pa.Array) -> pa.Array:
        """``column`` (one entry per valid order) spread over the batch's rows, null at the invalid ones."""
        if not self.reasons:
            return column
        if self._spread is None:
            index = np.full(self.rows, -1, dtype=np.int64)
            valid = np.ones(self.rows, dtype=bool)
            valid[self.invalid] = False
            index[valid] = np.arange(self.rows - len(self.invalid), dtype=np.int64)
            self._spread = indices_or_null(index)
        return column.take(self._spread)

    def _invalid_rows(self, column: pa.Array) -> pa.Array:
        """``column`` (one entry per invalid row, in row order) spread over the batch's rows, null elsewhere."""
        if not self.reasons:
            return pa.nulls(self.rows, column.type)
        index = np.full(self.rows, -1, dtype=np.int64)
        index[self.invalid] = np.arange(len(self.invalid), dtype=np.int64)
        return column.take(indices_or_null(index))
