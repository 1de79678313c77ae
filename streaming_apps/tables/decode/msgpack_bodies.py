"""MessagePack bodies (msgspec.msgpack, C): a map per body, its fields declared in the declaration file.

Settings: ``fields`` = a table of field name -> type text, in column order, e.g. ``{orderId = "string",
amountCents = "int64", eventTimeMs = "timestamp[ms]", items = "list<struct<sku: string, qty: int32>>"}``.

Type texts (:func:`parse_type`; Arrow's type names): ``string``, ``binary``,
``bool``, ``int32``, ``int64``, ``float32``, ``float64``, ``date32``, ``timestamp[ms]``, ``timestamp[us]`` (UTC),
``decimal(p, s)`` (p <= 38), ``list<T>``, ``struct<a: T, b: U>``, ``map<string, T>``.

Values (msgpack.org spec, and msgspec's rules for it): string a str, binary a bin, ints in their range, floats an
int or a float, timestamp an int counting its unit since the epoch (the demo's ``eventTimeMs``) or a msgpack
timestamp (extension -1), date32 an int of days or a ``YYYY-MM-DD`` str, decimal a str, int or float that fits
(p, s), struct a map. The declaration becomes a msgspec Struct type (every field optional), so msgspec checks each
body in native code: a body that is not msgpack or not a map, or a value of another type (error names the path,
``$.items[0].qty``) -> the row's error; a field the body lacks, or nil -> null; keys not declared are skipped.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any

import msgspec
import pyarrow as pa

from streaming_apps.tables.decode.builder import ArrowBuilder
from streaming_apps.tables.decode.contract import (
    BodyDecoder,
    BodyFormatError,
    Decoded,
    body_list,
    decode_rows,
    finish,
)

#: :attr:`Decoded.schemas` of every row: the declaration's ``fields``
SCHEMA_NAME = "fields"


def _ints(bits: int) -> Any:
    return Annotated[int, msgspec.Meta(ge=-(2 ** (bits - 1)), le=2 ** (bits - 1) - 1)]


_LEAVES = {"string": (str, pa.string()), "binary": (bytes, pa.binary()), "bool": (bool, pa.bool_()),
           "int32": (_ints(32), pa.int32()), "int64": (_ints(64), pa.int64()), "float32": (float, pa.float32()),
           "float64": (float, pa.float64()), "date32": (_ints(32) | _dt.date, pa.date32()),
           "timestamp[ms]": (_ints(64) | _dt.datetime, pa.timestamp("ms", tz="UTC")),
           "timestamp[us]": (_ints(64) | _dt.datetime, pa.timestamp("us", tz="UTC"))}
_TOKEN = re.compile(r"\s*(timestamp\[\w*\]|\w+|[<>(),:])")


class _TypeText:
    """A recursive-descent reader of one type text; ``where`` prefixes its errors."""

    def __init__(self, text: str, where: str):
        self.text, self.where, self.at, self.structs = text, where, 0, 0

    def fail(self, what: str) -> BodyFormatError:
        return BodyFormatError(f"{self.where}: {what} at character {self.at + 1} of {self.text!r}")

    def peek(self) -> str:
        match = _TOKEN.match(self.text, self.at)
        return match.group(1) if match else ""

    def take(self, expected: str | None = None) -> str:
        match = _TOKEN.match(self.text, self.at)
        token = match.group(1) if match else ""
        if not token or (expected is not None and token != expected):
            found = token or self.text[self.at:].strip() or "the end"
            raise self.fail(f"expected {expected or 'a type'}, found {found!r}")
        self.at = match.end()
        return token

    def whole(self) -> tuple[Any, pa.DataType]:
        parsed = self.type()
        if self.text[self.at:].strip():
            raise self.fail(f"unexpected {self.text[self.at:].strip()!r}")
        return parsed

    def type(self) -> tuple[Any, pa.DataType]:
        """(msgspec type, Arrow type) of the type text at the cursor."""
        name = self.take()
        if name in _LEAVES:
            return _LEAVES[name]
        if name == "decimal":
            self.take("(")
            precision, _, scale = self.take(), self.take(","), self.take()
            self.take(")")
            if not (precision.isdigit() and scale.isdigit() and 0 <= int(scale) <= int(precision)
                    and 1 <= int(precision) <= 38):
                raise self.fail(f"decimal({precision}, {scale}) needs 0 <= scale <= precision, 1 <= precision <= 38")
            return Decimal, pa.decimal128(int(precision), int(scale))
        if name == "list":
            self.take("<")
            item, arrow = self.type()
            self.take(">")
            return list[item | None], pa.list_(arrow)
        if name == "map":
            self.take("<")
            if self.take() != "string":
                raise self.fail("a map's keys must be string")
            self.take(",")
            value, arrow = self.type()
            self.take(">")
            return dict[str, value | None], pa.map_(pa.string(), arrow)
        if name == "struct":
            self.take("<")
            fields: dict[str, tuple[Any, pa.DataType]] = {}
            while self.peek() != ">":
                if fields:
                    self.take(",")
                field = self.take()
                self.take(":")
                fields[field] = self.type()
            self.take(">")
            if not fields:
                raise self.fail("a struct needs at least one field")
            self.structs += 1
            return _struct(f"MsgpackStruct{self.structs}", fields)
        raise self.fail(f"unknown type {name!r} (known: {', '.join(_LEAVES)}, decimal(p, s), list<T>, "
                        "struct<a: T, ...>, map<string, T>)")


def _struct(name: str, fields: Mapping[str, tuple[Any, pa.DataType]]) -> tuple[type, pa.StructType]:
    """A msgspec Struct of ``fields`` (attributes f0, f1, ... renamed to the field names; each optional, None when
    absent) and its Arrow struct."""
    specs = [(f"f{i}", t | None, None) for i, (t, _) in enumerate(fields.values())]
    rename = {f"f{i}": field for i, field in enumerate(fields)}
    struct = msgspec.defstruct(name, specs, rename=rename, gc=False)
    return struct, pa.struct([pa.field(field, arrow) for field, (_, arrow) in fields.items()])


def parse_type(text: str, where: str = "type") -> pa.DataType:
    """The Arrow type of a type text (module doc). Raises BodyFormatError naming ``where``, the text and the
    character at fault."""
    return _TypeText(text, where).whole()[1]


class MsgpackDecoder(BodyDecoder):
    """MessagePack map bodies with declared fields (see the module's doc).

    Args:
        fields: field name -> type text, in column order.

    Raises:
        BodyFormatError: no fields, or a type text that does not parse (naming the field and the text).
    """

    format = "msgpack"

    def __init__(self, fields: Mapping[str, str]):
        if not isinstance(fields, Mapping) or not fields:
            raise BodyFormatError(f"setting fields: expected a table of field name -> type text, got {fields!r}")
        self._args = (dict(fields),)
        parsed = {}
        for name, text in fields.items():
            if not isinstance(text, str):
                raise BodyFormatError(f"setting fields: field {name}: expected a type text, got {text!r}")
            parsed[name] = _TypeText(text, f"setting fields: field {name}").whole()
        struct, arrow = _struct("MsgpackBody", parsed)
        self._schema = pa.schema(list(arrow))
        self._decoder = msgspec.msgpack.Decoder(struct)
        self._columns = ArrowBuilder()

    def __reduce__(self):
        return type(self), self._args

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def decode(self, bodies: pa.Array, properties: list[dict[str, str]] | None = None) -> Decoded:
        """Each body decoded and checked by msgspec (the module's doc); ``properties`` are not used."""
        values = body_list(bodies)
        n = len(values)
        errors: list[str | None] = [None] * n
        rows = decode_rows(self._decoder.decode, values, errors, lambda e: (
            f"msgpack body does not fit the declared fields: {e}" if isinstance(e, msgspec.ValidationError)
            else f"body is not msgpack: {e}"), (msgspec.DecodeError,))
        return finish(self._columns, self._schema, rows, errors, [SCHEMA_NAME] * n)
