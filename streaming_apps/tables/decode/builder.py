"""Arrow arrays of a declared type from decoded Python values, built column by column from buffers.

Why not ``pa.array(values, type=...)``: it asks pyarrow's pandas shim whether ``values`` is a pandas object, which
imports pandas into the Python worker (0.15 CPU-s, 40 MiB; connector/arrow_numpy.py). Here each column is one list
comprehension over the batch, then NumPy and ``pa.Array.from_buffers``: a struct's fields are taken out of the
records (dicts, tuples, msgspec Structs, protobuf messages) field by field, a list's items flattened with offsets, a
leaf made from one NumPy array (numbers, booleans, temporal values) or one joined buffer (strings, binaries).

Values a leaf takes (the decoders have checked the types, so this only converts):
integers and floats as Python numbers; ``timestamp(unit)`` an int in that unit or a ``datetime`` (naive = UTC);
``date32`` an int of days or a ``date``; ``decimal128(p, s)`` a ``Decimal``, an int, or ``bytes`` holding the
unscaled value big-endian in two's complement (Avro's decimal, spec "Decimal"); ``string`` a ``str`` (or a
``msgspec.Raw`` JSON text; with ``stringify`` any value, as JSON text); ``binary`` bytes-like. A value that does not
fit (an int out of range, a decimal too wide) raises :class:`_Mismatch` naming the field path, and
:meth:`ArrowBuilder.batch` then finds the rows at fault by halves.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from itertools import chain
from operator import itemgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
from msgspec.structs import astuple

from connector.arrow_numpy import binary_array, numpy_dtype

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EPOCH_DAY = _dt.date(1970, 1, 1).toordinal()
_TICK = {"s": _dt.timedelta(seconds=1), "ms": _dt.timedelta(milliseconds=1), "us": _dt.timedelta(microseconds=1)}
_json_encode = msgspec.json.Encoder().encode


class _Mismatch(ValueError):
    """A value that does not fit its column; the message names the field path."""


def _ticks(value: _dt.datetime, unit: str) -> int:
    """A datetime (naive: UTC) as a count of ``unit`` since the epoch."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    if unit == "ns":
        return (value - _EPOCH) // _TICK["us"] * 1000
    return (value - _EPOCH) // _TICK[unit]


def _unscaled(value: Any, precision: int, scale: int) -> int:
    """``value`` as the unscaled integer of ``decimal(precision, scale)``.

    Raises:
        ValueError: it has more fractional digits than ``scale`` or more digits than ``precision``.
    """
    if type(value) is int:
        unscaled = value * 10 ** scale
    elif isinstance(value, bytes | bytearray):
        unscaled = int.from_bytes(value, "big", signed=True)
    else:
        sign, digits, exponent = Decimal(value).as_tuple()
        if not isinstance(exponent, int):
            raise ValueError(f"{value} is not a finite number")
        unscaled = int("".join(map(str, digits)) or "0")
        shift = exponent + scale
        if shift >= 0:
            unscaled *= 10 ** shift
        else:
            unscaled, rest = divmod(unscaled, 10 ** -shift)
            if rest:
                raise ValueError(f"{value} has more than {scale} fractional digits")
        unscaled = -unscaled if sign else unscaled
    if abs(unscaled) >= 10 ** precision:
        raise ValueError(f"{value} has more than {precision} digits")
    return unscaled


def _transpose(records: Sequence[Any], get: Callable[[Any], Any], n: int, single: bool = True
               ) -> list[Sequence[Any]]:
    """The ``n`` columns of ``records``: ``get`` gives a record's ``n`` values (with ``single``, one value
    when ``n`` is 1, as ``itemgetter`` does); a None record gives ``n`` nulls."""
    if n == 1 and single:
        return [[None if r is None else get(r) for r in records]]
    nones = (None,) * n
    rows = [nones if r is None else get(r) for r in records]
    return list(zip(*rows, strict=True)) if rows else [() for _ in range(n)]


def _validity(valid: np.ndarray | None) -> pa.Buffer | None:
    return None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))


class ArrowBuilder:
    """Builds Arrow arrays from Python values, one column at a time.

    Args:
        getters: struct path -> a function taking that struct's records (a sequence, None for a null one) to
            its fields' value sequences (a decoder's own records, e.g. protobuf messages with field presence);
            other structs take their fields from dicts (by name), tuples or msgspec Structs (by position).
        converters: field path -> a function mapping that column's value list to the values the leaf takes
            (protobuf enum numbers to names, a Timestamp message to microseconds).
        stringify: a ``string`` column takes any value, non-strings as their JSON text (json ``infer``).

    A field path is the field names joined by ``.`` (``items.sku``), ``[]`` for a list's items (``tags[]``) and
    ``.key``/``.value`` for a map's.
    """

    def __init__(self, getters: Mapping[str, Callable[[Sequence[Any]], list[Sequence[Any]]]] | None = None,
                 converters: Mapping[str, Callable[[Sequence], Sequence]] | None = None, *, stringify: bool = False):
        self.getters = dict(getters or {})
        self.converters = dict(converters or {})
        self.stringify = stringify

    def batch(self, rows: list[Any], schema: pa.Schema) -> tuple[pa.RecordBatch, dict[int, str]]:
        """A batch of ``schema`` with one row per record of ``rows`` (None: a row of nulls), and the rows whose
        values do not fit (row -> why; those rows are null in the batch). The whole batch is built at once; only
        when a value does not fit are halves of it built, down to the rows at fault (a few builds per bad row)."""
        try:
            return self._batch(rows, schema), {}
        except _Mismatch:
            pass
        bad: dict[int, str] = {}
        self._find_bad(rows, [row for row, r in enumerate(rows) if r is not None], schema, bad)
        return self._batch([None if row in bad else r for row, r in enumerate(rows)], schema), bad

    def _find_bad(self, rows: list[Any], indexes: list[int], schema: pa.Schema, bad: dict[int, str]) -> None:
        """Adds to ``bad`` each row among ``indexes`` whose record does not fit ``schema``, and why."""
        try:
            self._batch([rows[i] for i in indexes], schema)
            return
        except _Mismatch as e:
            if len(indexes) == 1:
                bad[indexes[0]] = str(e)
                return
        middle = len(indexes) // 2
        self._find_bad(rows, indexes[:middle], schema, bad)
        self._find_bad(rows, indexes[middle:], schema, bad)

    def _batch(self, rows: list[Any], schema: pa.Schema) -> pa.RecordBatch:
        fields = list(schema)
        try:
            columns = self._fields(rows, fields, "")
        except _Mismatch:
            raise
        except (TypeError, ValueError, AttributeError, IndexError, KeyError) as e:
            raise _Mismatch(f"the records do not have the fields {schema.names}: {type(e).__name__}: {e}") from None
        arrays = [self.array(values, f.type, f.name) for values, f in zip(columns, fields, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _fields(self, records: Sequence[Any], fields: list[pa.Field], path: str) -> list[Sequence[Any]]:
        """Each field's values over ``records`` (a null record gives null fields): the records' values taken
        row-wise in one C call each (``itemgetter``/``attrgetter`` of every field) and transposed with ``zip``."""
        columns = self.getters.get(path)
        if columns is not None:
            return columns(records)
        first = next((r for r in records if r is not None), None)
        names = [f.name for f in fields]
        if first is None:
            return [[None] * len(records) for _ in fields]
        if isinstance(first, dict):
            try:
                return _transpose(records, itemgetter(*names), len(names))
            except KeyError:  # a record without some field: null there
                return [[None if r is None else r.get(name) for r in records] for name in names]
        if isinstance(first, msgspec.Struct):
            return _transpose(records, astuple, len(names), single=False)
        if isinstance(first, tuple | list):
            return _transpose(records, itemgetter(*range(len(names))), len(names))
        raise _Mismatch(f"field {path or '(the body)'}: expected a record, got {type(first).__name__}")

    def array(self, values: Sequence[Any], arrow_type: pa.DataType, path: str) -> pa.Array:
        """``values`` (None: null) as an array of ``arrow_type``; ``path``: the field path, for the errors and
        the getters and converters.

        Raises:
            _Mismatch: a value does not fit ``arrow_type``.
        """
        convert = self.converters.get(path)
        if convert is not None:
            values = convert(values)
        try:
            return self._array(values, arrow_type, path)
        except _Mismatch:
            raise
        except (TypeError, ValueError, OverflowError, AttributeError, IndexError, KeyError) as e:
            raise _Mismatch(f"field {path}: {type(e).__name__}: {e} (column type {arrow_type})") from None

    def _array(self, values: Sequence[Any], t: pa.DataType, path: str) -> pa.Array:
        n = len(values)
        nulls = values.count(None)
        valid = None if nulls == 0 else np.fromiter([v is not None for v in values], bool, n)
        if pa.types.is_struct(t):
            children = [self.array(column, f.type, f"{path}.{f.name}")
                        for column, f in zip(self._fields(values, list(t), path), list(t), strict=True)]
            return pa.Array.from_buffers(t, n, [_validity(valid)], null_count=nulls, children=children)
        if pa.types.is_map(t) or pa.types.is_list(t):
            empty = {} if pa.types.is_map(t) else ()
            filled = values if nulls == 0 else [empty if v is None else v for v in values]
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, filled), np.int64, n), out=offsets[1:])
            if offsets[-1] >= 2 ** 31:
                raise _Mismatch(f"field {path}: {int(offsets[-1])} items in one batch exceed int32 offsets")
            buffers = [_validity(valid), pa.py_buffer(offsets.astype(np.int32))]
            if pa.types.is_list(t):
                child = self.array(list(chain.from_iterable(filled)), t.value_type, f"{path}[]")
            else:
                items = list(chain.from_iterable(m.items() for m in filled))
                entries = pa.struct([t.key_field, t.item_field])
                keys = self.array(list(map(itemgetter(0), items)), t.key_type, f"{path}.key")
                child = pa.Array.from_buffers(entries, len(items), [None], null_count=0, children=[
                    keys, self.array(list(map(itemgetter(1), items)), t.item_type, f"{path}.value")])
            return pa.Array.from_buffers(t, n, buffers, null_count=nulls, children=[child])
        if pa.types.is_string(t) or pa.types.is_binary(t):
            return self._bytes_like(values, t)
        if pa.types.is_decimal(t):
            try:
                unscaled = [0 if v is None else _unscaled(v, t.precision, t.scale) for v in values]
            except ValueError as e:
                raise _Mismatch(f"field {path}: {e} (column type {t})") from None
            data = b"".join(u.to_bytes(t.byte_width, "little", signed=True) for u in unscaled)
            return pa.Array.from_buffers(t, n, [_validity(valid), pa.py_buffer(data)], null_count=nulls)
        if pa.types.is_timestamp(t) and any(isinstance(v, _dt.datetime) for v in values):
            values = [_ticks(v, t.unit) if isinstance(v, _dt.datetime) else v for v in values]
        elif pa.types.is_date32(t) and any(isinstance(v, _dt.date) for v in values):
            values = [v.toordinal() - _EPOCH_DAY if isinstance(v, _dt.date) else v for v in values]
        filled = values if nulls == 0 else [0 if v is None else v for v in values]
        if pa.types.is_boolean(t):
            data = np.packbits(np.array(filled, dtype=bool), bitorder="little")
        else:
            data = np.array(filled, dtype=numpy_dtype(t))
            if data.ndim != 1:
                raise _Mismatch(f"field {path}: expected {t} values, got sequences")
        return pa.Array.from_buffers(t, n, [_validity(valid), pa.py_buffer(data)], null_count=nulls)

    def _bytes_like(self, values: Sequence[Any], t: pa.DataType) -> pa.Array:
        if set(map(type, values)) - {str, bytes, type(None)}:  # a JSON text (msgspec.Raw), a value to stringify
            values = [v if v is None or type(v) in (str, bytes) else self._text(v) for v in values]
        return binary_array(values, t)

    def _text(self, value: Any) -> bytes:
        """A value of a ``string``/``binary`` column that is neither str nor bytes, as bytes.

        Raises:
            TypeError: it is not bytes-like, and not ``stringify``-ed.
        """
        if isinstance(value, msgspec.Raw | bytearray | memoryview):
            return bytes(value)
        if self.stringify:
            return _json_encode(value)
        raise TypeError(f"expected str or bytes, got {type(value).__name__}")
