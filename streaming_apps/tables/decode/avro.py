"""Avro bodies (fastavro, Cython): each body read with its writer schema, resolved to the reader schema.

Settings: ``schema`` = the ``.avsc`` files of the writer schema versions, oldest first; the LAST is the reader
schema, whose fields are the table's columns. ``version_property`` (optional) = a user property naming the writer
version of a raw body: the file as declared, its file name, or the 1-based version number.

Which writer schema (Avro specification 1.11, "Single-object encoding"): a body that starts with the marker
``C3 01`` is single-object encoded -- the marker, the 8-byte little-endian CRC-64-AVRO fingerprint of the writer
schema's Parsing Canonical Form, then the binary datum, as Java's ``BinaryMessageEncoder`` writes it -- and the
fingerprint selects the version (unknown: the row's error names it). Any other body is a raw binary datum of the
version ``version_property`` names, or of the last version when the property is not declared or not set on the
message. As in Java's ``BinaryMessageDecoder``, a raw body whose first bytes happen to be ``C3 01`` is taken as
single-object encoded.

Per body (spec "Schema Resolution"): ``fastavro.schemaless_reader(body, writer, reader)``: a v1 body gets the
default or null for the fields v2 added; a writer schema that does not resolve to the reader (an incompatible type
change), a truncated datum or bytes left after it (the reader must consume the whole body) -> the row's error, with
the byte offset the reader had reached.

Columns (spec "Logical Types"; :func:`_arrow`): record -> struct, array -> list, map -> map<string, T>,
union ``[null, T]`` -> nullable T (any other union: :class:`BodyFormatError` at load, naming the field), enum ->
string, fixed and bytes -> binary, boolean/int/long/float/double -> bool/int32/int64/float32/float64; logical types
date -> date32, time-millis/-micros -> time32(ms)/time64(us), timestamp-millis/-micros -> timestamp(ms/us, UTC),
local-timestamp-millis/-micros -> timestamp(ms/us), decimal(p <= 38, s) -> decimal128(p, s), uuid -> string; an
unknown or invalid logical type is its underlying type (the spec's rule). fastavro reads the schemas with their
logical types taken off, so it gives the raw ints, strings and bytes that the columns are built from.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

import fastavro
import pyarrow as pa
from fastavro.schema import expand_schema, fingerprint, to_parsing_canonical_form

from streaming_apps.tables.decode.builder import ArrowBuilder
from streaming_apps.tables.decode.contract import (
    NO_BODY,
    BodyDecoder,
    BodyFormatError,
    Decoded,
    body_list,
    error_text,
    finish,
    row_properties,
)

#: the two bytes that open a single-object encoded body (spec "Single-object encoding")
MAGIC = b"\xc3\x01"
_HEADER = len(MAGIC) + 8
_PRIMITIVE = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
              "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
_LOGICAL = {("int", "date"): pa.date32(), ("int", "time-millis"): pa.time32("ms"),
            ("long", "time-micros"): pa.time64("us"), ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
            ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
            ("long", "local-timestamp-millis"): pa.timestamp("ms"),
            ("long", "local-timestamp-micros"): pa.timestamp("us"), ("string", "uuid"): pa.string()}


def _arrow(schema: Any, path: str, where: str) -> pa.DataType:
    """The Arrow type of an expanded Avro ``schema`` (named types inlined) at field ``path``.

    Raises:
        BodyFormatError: a union other than ``[null, T]``, a recursive or unknown named type, a lone null.
    """
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            names = [b if isinstance(b, str) else b.get("name", b.get("type")) for b in schema]
            raise BodyFormatError(f"{where}: field {path or '(root)'} is the union {json.dumps(names)}; only a "
                                  f'union of one type with "null" maps to a column')
        return _arrow(branches[0], path, where)
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return _PRIMITIVE[schema]
        what = "a lone null" if schema == "null" else f"the recursive or unknown type {schema!r}"
        raise BodyFormatError(f"{where}: field {path or '(root)'} is {what}, which has no column type")
    kind, logical = schema.get("type"), schema.get("logicalType")
    if not isinstance(kind, str):  # {"type": {...}} or {"type": [...]}: a wrapped type
        return _arrow(kind, path, where)
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if isinstance(precision, int) and isinstance(scale, int) and 0 <= scale <= precision <= 38:
            return pa.decimal128(precision, scale)
    if (kind, logical) in _LOGICAL:
        return _LOGICAL[kind, logical]
    if kind == "record":
        return pa.struct([pa.field(f["name"], _arrow(f["type"], f"{path}.{f['name']}".lstrip("."), where))
                          for f in schema["fields"]])
    if kind == "array":
        return pa.list_(_arrow(schema["items"], f"{path}[]", where))
    if kind == "map":
        return pa.map_(pa.string(), _arrow(schema["values"], f"{path}.value", where))
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    return _arrow(kind, path, where)


def _without_logical_types(schema: Any) -> Any:
    """``schema`` with every ``logicalType`` taken off, for fastavro to give the underlying values."""
    if isinstance(schema, list):
        return [_without_logical_types(s) for s in schema]
    if isinstance(schema, dict):
        return {k: _without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    return schema


class AvroDecoder(BodyDecoder):
    """Avro bodies of one or more writer schema versions, read as the last version (see the module's doc).

    Args:
        versions: ``(name as declared, the .avsc text)`` per version, oldest first.
        version_property: the user property naming a raw body's version, or None.

    Raises:
        BodyFormatError: a file that is not JSON or not an Avro schema, a last version that is not a record, a
            reader field with no column type.
    """

    format = "avro"

    def __init__(self, versions: Sequence[tuple[str, str]], version_property: str | None = None):
        if not versions:
            raise BodyFormatError("setting schema: no .avsc file given")
        self._args = (tuple(versions), version_property)
        self.version_property = version_property
        self.names = [PurePath(name).name for name, _ in versions]
        self._writers, self._by_fingerprint, self._by_label = [], {}, {}
        for number, (name, text) in enumerate(versions, 1):
            where = f"setting schema: {name}"
            try:
                raw = json.loads(text)
                self._writers.append(fastavro.parse_schema(_without_logical_types(raw)))
                expanded = expand_schema(raw)
                key = bytes.fromhex(fingerprint(to_parsing_canonical_form(raw), "CRC-64-AVRO"))
            except json.JSONDecodeError as e:
                raise BodyFormatError(f"{where} is not JSON: {e}") from None
            except Exception as e:  # noqa: BLE001 - fastavro raises several unrelated types for a bad schema
                raise BodyFormatError(f"{where} is not an Avro schema: {error_text(e)}") from None
            self._by_fingerprint[key] = number - 1
            for label in (name, PurePath(name).name, str(number)):
                self._by_label[label] = number - 1
        if not isinstance(expanded, dict) or expanded.get("type") != "record":
            raise BodyFormatError(f"setting schema: the last version {versions[-1][0]} is not a record schema")
        self._schema = pa.schema(_arrow(expanded, "", f"setting schema: {versions[-1][0]}"))
        self._reader = self._writers[-1]
        self._columns = ArrowBuilder()

    def __reduce__(self):
        return type(self), self._args

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def fingerprints(self) -> dict[str, str]:
        """Each version's file name -> its CRC-64-AVRO fingerprint as the hex of the 8 header bytes."""
        return {self.names[v]: key.hex() for key, v in self._by_fingerprint.items()}

    def _version(self, body: bytes, properties: Mapping[str, str]) -> tuple[int, int] | str:
        """(version index, where the datum starts) of ``body``, or the error."""
        if body[:2] == MAGIC:
            if len(body) < _HEADER:
                return f"single-object header cut short: {len(body)} bytes, the header has {_HEADER}"
            version = self._by_fingerprint.get(body[2:_HEADER])
            if version is None:
                known = ", ".join(f"{k.hex()} ({self.names[v]})" for k, v in self._by_fingerprint.items())
                return (f"single-object body with unknown schema fingerprint {body[2:_HEADER].hex()} "
                        f"(CRC-64-AVRO, bytes 2-9); known: {known}")
            return version, _HEADER
        label = properties.get(self.version_property) if self.version_property else None
        if label is None:
            return len(self._writers) - 1, 0
        version = self._by_label.get(label)
        if version is None:
            return (f"property {self.version_property}={label!r} names no schema version "
                    f"(the files {', '.join(self.names)} or 1..{len(self.names)})")
        return version, 0

    def decode(self, bodies: pa.Array, properties: list[dict[str, str]] | None = None) -> Decoded:
        """Each body read with its writer version resolved to the reader schema (the module's doc)."""
        values = body_list(bodies)
        n = len(values)
        props = row_properties(properties, n)
        rows: list[Any] = [None] * n
        errors: list[str | None] = [None] * n
        schemas: list[str | None] = [self.names[-1]] * n
        last, writers, reader, read = len(self._writers) - 1, self._writers, self._reader, fastavro.schemaless_reader
        plain = self.version_property is None
        for row, body in enumerate(values):
            if body is None:
                errors[row] = NO_BODY
                continue
            stream = io.BytesIO(body)
            if plain and not body.startswith(MAGIC):  # the common case: a raw datum of the last version
                version = last
            else:
                found = self._version(body, props[row])
                if isinstance(found, str):
                    errors[row], schemas[row] = found, None
                    continue
                version, start = found
                schemas[row] = self.names[version]
                stream.seek(start)
            try:
                record = read(stream, writers[version], None if version == last else reader)
            except Exception as e:  # noqa: BLE001 - EOFError, SchemaResolutionError, UnicodeDecodeError, ...
                what = ("does not resolve to the reader schema " + self.names[-1]
                        if type(e).__name__ == "SchemaResolutionError" else "does not decode")
                errors[row] = f"Avro body {what} with writer schema {self.names[version]}: {error_text(e)} " \
                              f"(read to byte {stream.tell()} of {len(body)})"
                continue
            end = stream.tell()
            if end != len(body):
                errors[row] = f"{len(body) - end} bytes left after the Avro datum of {self.names[version]}, " \
                              f"which ends at byte {end} of {len(body)}"
                continue
            rows[row] = record
        return finish(self._columns, self._schema, rows, errors, schemas)
