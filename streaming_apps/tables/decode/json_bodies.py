"""JSON bodies (msgspec.json, C): checked against a JSON Schema, or typed by what the data holds (``infer``).

Settings: ``schema`` = a JSON Schema file, or ``"infer"``.

With a JSON Schema (json-schema.org draft 2020-12, "Validation", the common subset): the root is ``type: object``
with ``properties``; a property's ``type`` is one name or a list of one name and ``"null"``; ``required`` lists
the properties a body must have (one it does not list may also be null, taken as absent, as serializers that
write every field give it). string -> string (``format: date-time`` -> timestamp(us, UTC), an RFC 3339 time
with its offset; ``format: date`` -> date32), ``enum`` of strings -> string (a value outside -> error), integer ->
int64, number -> float64, boolean -> bool, ``array`` with ``items`` -> list, ``object`` with ``properties`` ->
struct, ``object`` with only ``additionalProperties: {schema}`` -> map<string, T>, any other object or a schema
without a type -> string holding the value's JSON text. ``anyOf``/``oneOf`` of a type and ``{"type": "null"}`` ->
the nullable type; local ``$ref`` (``#/$defs/x``) is followed. Anything else -> :class:`BodyFormatError` at load.
The schema becomes a msgspec Struct type (:meth:`_SchemaReader.types`), so msgspec checks each body in native
code: a body that is not JSON (the byte offset), not an object, without a required property or with a value of
another type (the path, ``$.items[0].qty``) -> the row's error. Properties the schema does not declare are skipped.

``infer`` (:class:`JsonInferDecoder`): each body decoded to Python values; each field's type is what its values
hold, widened over batches by :func:`connector.delta.schema_evolution.widen_type`: int64 -> float64 -> string
on conflict (bool with anything else, a scalar with an object or array, also -> string: the value's JSON text),
objects -> struct (fields merged), arrays -> list (items widened). A field joins the schema, at the end, with its
first value that is not null (nor an empty array or object). :attr:`schema` is the widened schema after each
:meth:`decode`; only a body that is not JSON or not an object is an error. Pinned to a table's columns
(:meth:`JsonInferDecoder.pin`), those keep their types and a value that does not fit one is its row's error.
"""

from __future__ import annotations

import datetime as _dt
import json
from itertools import chain
from operator import itemgetter
from pathlib import PurePath
from typing import Annotated, Any, Literal

import msgspec
import pyarrow as pa

from connector.delta.schema_evolution import keep_schema, widen_schema
from streaming_apps.tables.decode.builder import ArrowBuilder
from streaming_apps.tables.decode.contract import (
    BodyDecoder,
    BodyFormatError,
    Decoded,
    body_list,
    decode_rows,
    finish,
)

INFER = "infer"
_INT64 = Annotated[int, msgspec.Meta(ge=-(2 ** 63), le=2 ** 63 - 1)]
_AWARE = Annotated[_dt.datetime, msgspec.Meta(tz=True)]
_SCALARS = {"integer": (_INT64, pa.int64()), "number": (float, pa.float64()), "boolean": (bool, pa.bool_()),
            "string": (str, pa.string())}
_FORMATS = {"date-time": (_AWARE, pa.timestamp("us", tz="UTC")), "date": (_dt.date, pa.date32())}


class _SchemaReader:
    """A JSON Schema document turned into (msgspec type, Arrow type) pairs; ``where`` prefixes the errors."""

    def __init__(self, document: Any, where: str):
        self.document, self.where, self.structs = document, where, 0
        self.raw_paths: list[str] = []  # the paths whose values msgspec gives as their JSON text (msgspec.Raw)

    def fail(self, path: str, what: str) -> BodyFormatError:
        return BodyFormatError(f"{self.where}: {path or '(root)'}: {what}")

    def resolve(self, node: Any, path: str, refs: tuple[str, ...] = ()) -> tuple[Any, bool]:
        """``node`` with local ``$ref``s followed and ``anyOf``/``oneOf`` of a type and null unwrapped, and
        whether null is allowed."""
        if not isinstance(node, dict):
            raise self.fail(path, f"a schema must be an object, got {json.dumps(node)}")
        if "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#") or ref in refs:
                raise self.fail(path, f"$ref {ref!r} is not a local reference or refers to itself")
            target = self.document
            for part in filter(None, ref[1:].split("/")):
                target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
            return self.resolve(target, path, (*refs, ref))
        for key in ("anyOf", "oneOf"):
            if key in node:
                options = [o for o in node[key] if o != {"type": "null"}]
                if len(options) != 1:
                    raise self.fail(path, f"{key} of more than one type besides null has no column type")
                return self.resolve(options[0], path, refs)[0], True
        kind = node.get("type")
        if isinstance(kind, list):
            named = [k for k in kind if k != "null"]
            if len(named) != 1:
                raise self.fail(path, f"type {json.dumps(kind)}: one type, optionally with \"null\", maps to "
                                      "a column")
            return {**node, "type": named[0]}, "null" in kind
        return node, kind == "null"

    def types(self, node: Any, path: str) -> tuple[Any, pa.DataType]:
        """The msgspec type (not nullable) and Arrow type of the schema ``node`` at ``path``."""
        node, _ = self.resolve(node, path)
        kind = node.get("type")
        if kind is None and "properties" in node:
            kind = "object"
        if kind is None and isinstance(node.get("enum"), list) and all(isinstance(v, str) for v in node["enum"]):
            kind = "string"
        if kind == "string" and node.get("format") in _FORMATS:
            return _FORMATS[node["format"]]
        if kind == "string" and isinstance(node.get("enum"), list) and node["enum"]:
            return Literal[tuple(node["enum"])], pa.string()
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            if "items" not in node:
                self.raw_paths.append(f"{path}[]")
                return list[msgspec.Raw], pa.list_(pa.string())
            item, arrow = self.types(node["items"], f"{path}[]")
            return list[item], pa.list_(arrow)
        if kind == "object" and isinstance(node.get("properties"), dict) and node["properties"]:
            return self.struct(node, path)
        if kind == "object" and isinstance(node.get("additionalProperties"), dict):
            value, arrow = self.types(node["additionalProperties"], f"{path}.value")
            return dict[str, value | None], pa.map_(pa.string(), arrow)
        if kind in (None, "object"):
            self.raw_paths.append(path)
            return msgspec.Raw, pa.string()
        raise self.fail(path, f"type {json.dumps(kind)} has no column type")

    def struct(self, node: dict, path: str) -> tuple[type, pa.StructType]:
        """An ``object`` with ``properties``: a msgspec Struct (fields f0, f1, ... renamed to the properties;
        required ones without a default) and the Arrow struct."""
        required = node.get("required", [])
        if not isinstance(required, list):
            raise self.fail(path, "required must be a list of property names")
        specs, fields, rename = [], [], {}
        for index, (name, child) in enumerate(node["properties"].items()):
            child_path = f"{path}.{name}" if path else name
            _, nullable = self.resolve(child, child_path)
            value, arrow = self.types(child, child_path)
            optional = nullable or name not in required
            spec = (f"f{index}", value | None if optional and value is not msgspec.Raw else value)
            specs.append(spec if name in required else (*spec, None))
            fields.append(pa.field(name, arrow))
            rename[f"f{index}"] = name
        self.structs += 1
        struct = msgspec.defstruct(f"JsonObject{self.structs}", specs, rename=rename, kw_only=True, gc=False)
        return struct, pa.struct(fields)


class JsonSchemaDecoder(BodyDecoder):
    """JSON bodies checked against a JSON Schema (see the module's doc).

    Args:
        schema_text: the JSON Schema document.
        source: its name for the errors and :attr:`Decoded.schemas` (the file as declared).

    Raises:
        BodyFormatError: not JSON, not an object schema with properties, a property with no column type.
    """

    format = "json"

    def __init__(self, schema_text: str, source: str = "schema.json"):
        self._args = (schema_text, source)
        self.name = PurePath(source).name
        where = f"setting schema: {source}"
        try:
            document = json.loads(schema_text)
        except json.JSONDecodeError as e:
            raise BodyFormatError(f"{where} is not JSON: {e}") from None
        reader = _SchemaReader(document, where)
        root, _ = reader.resolve(document, "")
        if root.get("type", "object") != "object" or not isinstance(root.get("properties"), dict) \
                or not root["properties"]:
            raise BodyFormatError(f"{where}: the root must be an object schema with properties")
        struct, arrow = reader.struct(root, "")
        self._schema = pa.schema(list(arrow))
        self._decoder = msgspec.json.Decoder(struct)
        self._columns = ArrowBuilder(converters=dict.fromkeys(reader.raw_paths, _json_texts))

    def __reduce__(self):
        return type(self), self._args

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def decode(self, bodies: pa.Array, properties: list[dict[str, str]] | None = None) -> Decoded:
        """Each body decoded and checked by msgspec (the module's doc); ``properties`` are not used."""
        values = body_list(bodies)
        errors: list[str | None] = [None] * len(values)
        rows = _decode_rows(self._decoder.decode, values, errors, f"does not fit {self.name}")
        return finish(self._columns, self._schema, rows, errors, [self.name] * len(values))


def _json_texts(values: list) -> list:
    """msgspec.Raw values as their JSON text, a JSON ``null`` as None."""
    texts = [None if v is None else bytes(v).decode() for v in values]
    return [None if t == "null" else t for t in texts]


def _decode_rows(decode, values: list[bytes | None], errors: list[str | None], what: str) -> list[Any]:
    """``decode`` of each body (:func:`decode_rows`; ``what``: the error's words for a valid JSON body of the wrong
    shape)."""
    return decode_rows(decode, values, errors, lambda e: f"JSON body {what}: {e}"
                       if isinstance(e, msgspec.ValidationError) else f"body is not JSON: {e}", (msgspec.DecodeError,))


def _infer(values: list[Any]) -> pa.DataType | None:
    """The type of a column of decoded JSON values (None: only nulls, empty arrays and empty objects)."""
    present = [v for v in values if v is not None] if None in values else values
    kinds = set(map(type, present))
    if not kinds:
        return None
    if kinds <= {int, float}:
        if float in kinds or not -(2 ** 63) <= min(present) <= max(present) < 2 ** 63:
            return pa.float64()
        return pa.int64()
    if kinds == {bool}:
        return pa.bool_()
    if kinds == {dict}:
        names = list(dict.fromkeys(chain.from_iterable(present)))
        try:  # every object has every field: one C call per object, transposed
            columns = list(zip(*map(itemgetter(*names), present), strict=True)) if len(names) > 1 else None
        except KeyError:
            columns = None
        if columns is None:
            columns = [[v.get(name) for v in present] for name in names]
        fields = [pa.field(name, t) for name, column in zip(names, columns, strict=True)
                  if (t := _infer(list(column))) is not None]
        return pa.struct(fields) if fields else None
    if kinds == {list}:
        item = _infer(list(chain.from_iterable(present)))
        return None if item is None else pa.list_(item)
    return pa.string()


class JsonInferDecoder(BodyDecoder):
    """JSON object bodies typed by what they hold, the types widened over batches (see the module's doc).

    Args:
        schema: the schema inferred so far, or None to start empty.
    """

    format = "json"
    fixed_schema = False

    def __init__(self, schema: pa.Schema | None = None):
        self._schema = schema if schema is not None else pa.schema([])
        self._table: pa.Schema | None = None
        self._reserved: frozenset[str] = frozenset()
        self._decoder = msgspec.json.Decoder()
        self._columns = ArrowBuilder(stringify=True)

    def __reduce__(self):
        return type(self), (self._schema,)

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def pin(self, table: pa.Schema | None, reserved: frozenset[str] = frozenset()) -> None:
        """Start again from a table's columns (``table``, None: none): they keep their types (structs may gain
        fields), a value that does not fit one is its row's error, and other fields widen as before. A body with a
        field named in ``reserved`` (the table's other columns) is an error."""
        self._table = table
        self._reserved = reserved
        self._schema = pa.schema([]) if table is None else table

    def decode(self, bodies: pa.Array, properties: list[dict[str, str]] | None = None) -> Decoded:
        """Each body decoded; :attr:`schema` widened by what the objects hold, then the columns built with it."""
        values = body_list(bodies)
        errors: list[str | None] = [None] * len(values)
        rows = _decode_rows(self._decoder.decode, values, errors, "")
        for row, record in enumerate(rows):
            if record is not None and not isinstance(record, dict):
                errors[row], rows[row] = f"body is JSON {type(record).__name__}, not an object", None
            elif record is not None and not self._reserved.isdisjoint(record):
                name = sorted(self._reserved.intersection(record))[0]
                errors[row], rows[row] = f"field $.{name}: the name of one of the table's RocketMQ columns", None
        if self._table is not None:
            _refuse_misfits(rows, errors, self._table)
        found = _infer(rows)
        if found is not None:
            found_schema = pa.schema(list(found))
            if self._table is None:
                self._schema = widen_schema(self._schema, found_schema)
            else:
                kept = pa.schema([f for f in self._schema if f.name in self._table.names])
                other = pa.schema([f for f in self._schema if f.name not in self._table.names])
                new = pa.schema([f for f in found_schema if f.name not in self._table.names])
                self._schema = keep_schema(kept, pa.schema([f for f in found_schema if f.name in kept.names]))
                self._schema = pa.schema(list(self._schema) + list(widen_schema(other, new)))
        return finish(self._columns, self._schema, rows, errors, [INFER] * len(values))


def _refuse_misfits(rows: list[Any], errors: list[str | None], table: pa.Schema) -> None:
    """Each row holding a value that does not fit its table column's type gets that error and is dropped
    (``rows[i] = None``)."""
    for row, record in enumerate(rows):
        if record is None:
            continue
        for f in table:
            problem = _misfit(record.get(f.name), f.type, f.name)
            if problem is not None:
                errors[row], rows[row] = problem, None
                break


def _misfit(value: Any, t: pa.DataType, path: str) -> str | None:
    """Why ``value`` does not fit a column of type ``t`` (None: it fits); a string column takes any value as its
    JSON text, a float64 one takes integers."""
    if value is None or pa.types.is_string(t):
        return None
    kind = type(value)
    if pa.types.is_boolean(t):
        ok = kind is bool
    elif pa.types.is_integer(t):
        ok = kind is int and -(2 ** 63) <= value < 2 ** 63
    elif pa.types.is_floating(t):
        ok = kind in (int, float)
    elif pa.types.is_struct(t):
        if kind is not dict:
            ok = False
        else:
            return next((p for f in t if (p := _misfit(value.get(f.name), f.type, f"{path}.{f.name}")) is not None),
                        None)
    elif pa.types.is_list(t):
        if kind is not list:
            ok = False
        else:
            return next((p for item in value if (p := _misfit(item, t.value_type, f"{path}[]")) is not None), None)
    else:
        ok = True
    if ok:
        return None
    return f"field $.{path}: a JSON {_KINDS.get(kind, kind.__name__)} does not fit the column's type {t}"


_KINDS = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object", list: "array"}
