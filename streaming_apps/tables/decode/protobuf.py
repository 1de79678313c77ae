"""Protobuf bodies (google.protobuf's upb runtime, C): parsed into the declared message, its fields taken as columns.

Settings: ``schema`` = a compiled descriptor set (``protoc --descriptor_set_out``, a serialized FileDescriptorSet;
``--include_imports`` to carry the imported files: a well-known type's file that the set lacks is taken from the
protobuf runtime) and ``message`` = the message's full name (``shop.Payment``).

Per body: ``ParseFromString`` of the message class that ``message_factory.GetMessageClass`` makes from the set's
``DescriptorPool``. Protobuf's own rules (protobuf.dev "Language Guide (proto 3)", "Field Presence"): unknown fields
are skipped; a field without presence (a proto3 scalar not declared ``optional``) gives its default when absent, a
field with presence (``optional``, proto2, oneof members, message fields) gives null; a repeated field or map is
never null, only empty. A body that does not parse -> the row's error (upb does not say at which byte).

Columns (:meth:`ProtobufDecoder._arrow`; unsigned ints as Spark's ``from_protobuf`` with upcast.unsigned.ints): int32,
sint32, sfixed32 -> int32; int64, sint64, sfixed64 -> int64; uint32, fixed32 -> int64; uint64, fixed64 ->
decimal128(20, 0); float -> float32; double -> float64; bool; string; bytes -> binary; enum -> string (the value's
name, the number as text for a value the enum does not declare); message -> struct; repeated -> list; map<K, V> ->
map<K, V>; google.protobuf.Timestamp -> timestamp(us, UTC); the wrappers (google.protobuf.Int64Value, ...) -> their
value, null when absent. A message that contains itself (google.protobuf.Struct, a tree) has no column type:
:class:`BodyFormatError` at load, naming the field.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import pyarrow as pa
from google.protobuf import (  # noqa: F401 - the well-known types' files, in the default pool for _pool()
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    message_factory,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from streaming_apps.tables.decode.builder import ArrowBuilder
from streaming_apps.tables.decode.contract import (
    BodyDecoder,
    BodyFormatError,
    Decoded,
    body_list,
    decode_rows,
    error_text,
    finish,
)

_F = FieldDescriptor
_SCALAR = {_F.TYPE_INT32: pa.int32(), _F.TYPE_SINT32: pa.int32(), _F.TYPE_SFIXED32: pa.int32(),
           _F.TYPE_INT64: pa.int64(), _F.TYPE_SINT64: pa.int64(), _F.TYPE_SFIXED64: pa.int64(),
           _F.TYPE_UINT32: pa.int64(), _F.TYPE_FIXED32: pa.int64(), _F.TYPE_UINT64: pa.decimal128(20, 0),
           _F.TYPE_FIXED64: pa.decimal128(20, 0), _F.TYPE_FLOAT: pa.float32(), _F.TYPE_DOUBLE: pa.float64(),
           _F.TYPE_BOOL: pa.bool_(), _F.TYPE_STRING: pa.string(), _F.TYPE_BYTES: pa.binary()}
_WRAPPERS = {f"google.protobuf.{name}Value" for name in
             ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")}
_TIMESTAMP = "google.protobuf.Timestamp"


def _columns(names: list[str], presence: list[int]):
    """The getter (:class:`ArrowBuilder`) of a message's fields ``names``: every field read in one ``attrgetter``
    call per message, then the fields with presence (``presence``: their indexes) null where ``HasField`` is
    False."""
    if not names:
        return lambda messages: []
    one = attrgetter(names[0])
    get = attrgetter(*names) if len(names) > 1 else (lambda m: (one(m),))
    nones = (None,) * len(names)

    def columns(messages):
        rows = [nones if m is None else get(m) for m in messages]
        out = list(zip(*rows, strict=True)) if rows else [() for _ in names]
        for i in presence:
            name = names[i]
            out[i] = [v if m is not None and m.HasField(name) else None for m, v in zip(messages, out[i], strict=True)]
        return out

    return columns


def _timestamps(values: list) -> list:
    return [None if m is None else m.seconds * 1_000_000 + m.nanos // 1000 for m in values]


def _wrapped(values: list) -> list:
    return [None if m is None else m.value for m in values]


def _enum_names(field: FieldDescriptor):
    names = {v.number: v.name for v in field.enum_type.values}
    return lambda values: [None if v is None else names.get(v) or str(v) for v in values]


def _is_repeated(field: FieldDescriptor) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 6.31; ``label`` before
    return repeated if repeated is not None else field.label == _F.LABEL_REPEATED


def _pool(data: bytes, source: str) -> tuple[descriptor_pool.DescriptorPool, list[str]]:
    """A DescriptorPool of the descriptor set ``data`` (files added after their imports) and the full names of
    its top-level messages.

    Raises:
        BodyFormatError: not a FileDescriptorSet, an import missing from it, a file protobuf refuses.
    """
    where = f"setting schema: {source}"
    try:
        files = {f.name: f for f in descriptor_pb2.FileDescriptorSet.FromString(data).file}
    except Exception as e:  # noqa: BLE001 - DecodeError, or a RuntimeWarning-like upb error
        raise BodyFormatError(f"{where} is not a serialized FileDescriptorSet (protoc --descriptor_set_out): "
                              f"{error_text(e)}") from None
    if not files:
        raise BodyFormatError(f"{where} holds no .proto file")
    pool, added = descriptor_pool.DescriptorPool(), set()

    def add(name: str, importer: str | None) -> None:
        if name in added:
            return
        added.add(name)
        proto = files.get(name)
        if proto is None:  # a well-known type's file, when the set was compiled without --include_imports
            try:
                proto = descriptor_pb2.FileDescriptorProto()
                descriptor_pool.Default().FindFileByName(name).CopyToProto(proto)
            except KeyError:
                raise BodyFormatError(f"{where} lacks {name}, imported by {importer} (compile it with protoc "
                                      f"--include_imports)") from None
        for dependency in proto.dependency:
            add(dependency, name)
        try:
            pool.Add(proto)
        except Exception as e:  # noqa: BLE001 - TypeError for a file that does not build
            raise BodyFormatError(f"{where}: {name} does not build: {error_text(e)}") from None

    for name in files:
        add(name, None)
    messages = [f"{f.package}.{m.name}".lstrip(".") for f in files.values() for m in f.message_type]
    return pool, messages


class ProtobufDecoder(BodyDecoder):
    """Protobuf bodies of one message type (see the module's doc).

    Args:
        descriptor_set: the bytes of a serialized FileDescriptorSet.
        message: the message's full name.
        source: the descriptor set's name for the errors (the file as declared).

    Raises:
        BodyFormatError: not a descriptor set, one without the message, a recursive message.
    """

    format = "protobuf"

    def __init__(self, descriptor_set: bytes, message: str, source: str = "the descriptor set"):
        self._args = (descriptor_set, message, source)
        self.message = message
        if not isinstance(message, str) or not message:
            raise BodyFormatError(f"setting message: expected the message's full name (e.g. shop.Payment), "
                                  f"got {message!r}")
        pool, messages = _pool(descriptor_set, source)
        try:
            descriptor = pool.FindMessageTypeByName(message)
        except KeyError:
            listed = ", ".join(messages[:20]) + (", ..." if len(messages) > 20 else "")
            raise BodyFormatError(f"setting message: the descriptor set {source} has no message {message} "
                                  f"(its messages: {listed})") from None
        self._class = message_factory.GetMessageClass(descriptor)
        self._getters: dict[str, Any] = {}
        self._converters: dict[str, Any] = {}
        self._schema = pa.schema(list(self._arrow(descriptor, "", (message,))))
        self._columns = ArrowBuilder(self._getters, self._converters)

    def __reduce__(self):
        return type(self), self._args

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def _arrow(self, descriptor: Descriptor, path: str, seen: tuple[str, ...]) -> pa.StructType:
        """The struct type of ``descriptor`` at ``path``; records the getters of its fields and the converters
        of the enum and well-known-type columns under it."""
        fields, presence = [], []
        for index, field in enumerate(descriptor.fields):
            name = f"{path}.{field.name}" if path else field.name
            repeated = _is_repeated(field)
            if field.has_presence and not repeated:
                presence.append(index)
            entry = field.message_type
            if repeated and entry is not None and entry.GetOptions().map_entry:
                key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
                arrow = pa.map_(self._type(key, f"{name}.key", seen), self._type(value, f"{name}.value", seen))
            elif repeated:
                arrow = pa.list_(self._type(field, f"{name}[]", seen))
            else:
                arrow = self._type(field, name, seen)
            fields.append(pa.field(field.name, arrow))
        self._getters[path] = _columns([f.name for f in descriptor.fields], presence)
        return pa.struct(fields)

    def _type(self, field: FieldDescriptor, path: str, seen: tuple[str, ...]) -> pa.DataType:
        """The Arrow type of one value of ``field`` at ``path`` (a list's item, a map's key or value)."""
        if field.type == _F.TYPE_ENUM:
            self._converters[path] = _enum_names(field)
            return pa.string()
        if field.type not in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
            return _SCALAR[field.type]
        full_name = field.message_type.full_name
        if full_name == _TIMESTAMP:
            self._converters[path] = _timestamps
            return pa.timestamp("us", tz="UTC")
        if full_name in _WRAPPERS:
            self._converters[path] = _wrapped
            return _SCALAR[field.message_type.fields_by_name["value"].type]
        if full_name in seen:
            raise BodyFormatError(f"setting message: {self.message}: field {path} is of the message type "
                                  f"{full_name}, which contains itself and so has no column type")
        return self._arrow(field.message_type, path, (*seen, full_name))

    def decode(self, bodies: pa.Array, properties: list[dict[str, str]] | None = None) -> Decoded:
        """Each body parsed as the message (the module's doc); ``properties`` are not used."""
        values = body_list(bodies)
        n = len(values)
        errors: list[str | None] = [None] * n
        # DecodeError; upb may raise others for odd input
        rows = decode_rows(self._class.FromString, values, errors,
                           lambda e: f"not a protobuf {self.message}: {error_text(e)}", (Exception,))
        return finish(self._columns, self._schema, rows, errors, [self.message] * n)
