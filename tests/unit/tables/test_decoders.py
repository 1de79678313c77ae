"""The typed tables' body decoders (streaming_apps/tables/decode): every format's happy path and every error kind.

Bodies are made by the formats' own libraries (fastavro, the protobuf runtime, json, msgspec/msgpack), not by the
decoders; Avro and protobuf bodies of the Java reference libraries come in an interop test. Pure Python, no Spark.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import pickle
import struct
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import fastavro
import msgpack
import pyarrow as pa
import pytest
from fastavro.schema import fingerprint, to_parsing_canonical_form
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2, wrappers_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming_apps.tables.decode.base import FORMATS, BodyDecoder, BodyFormatError, Decoded, decoder_for
from streaming_apps.tables.decode.json_bodies import JsonInferDecoder, JsonSchemaDecoder, widen_schema
from streaming_apps.tables.decode.msgpack_bodies import parse_type
from streaming_apps.tables.decode.protobuf import ProtobufDecoder
from tests.support.no_pandas import refuse_pandas_prelude

UTC = dt.UTC


def bodies(values, large=False) -> pa.Array:
    return pa.array(values, pa.large_binary() if large else pa.binary())


def check_shape(decoder: BodyDecoder, out: Decoded, n: int) -> None:
    """The interface's promises: one row, error and schema per body; the batch has the decoder's schema; a failed
    row is all null; every error is one line."""
    assert isinstance(out, Decoded)
    assert out.fields.num_rows == len(out.errors) == len(out.schemas) == n
    assert out.fields.schema == decoder.schema
    out.fields.validate(full=True)
    for row, error in enumerate(out.errors):
        if error is not None:
            assert "\n" not in error and error
            assert all(v is None for v in out.fields.slice(row, 1).to_pylist()[0].values())


# --- Avro ---------------------------------------------------------------------------------------------------------

ITEM = {"type": "record", "name": "Item", "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}
V1 = {"type": "record", "name": "Payment", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"},
    {"name": "amount", "type": "long"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "atUs", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CARD", "CASH"]}},
    {"name": "items", "type": {"type": "array", "items": ITEM}},
    {"name": "first", "type": ["null", "Item"]},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 4}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "ok", "type": "boolean"}, {"name": "ratio", "type": "float"}, {"name": "score", "type": "double"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "note", "type": ["null", "string"], "default": None},
                                      {"name": "currency", "type": "string", "default": "EUR"}]}
V3 = {**V2, "fields": [{**f, "type": "string"} if f["name"] == "amount" else f for f in V2["fields"]]}
REC = {"id": "p-1", "amount": 1250, "at": dt.datetime(2025, 3, 1, 12, 0, 0, 123000, tzinfo=UTC),
       "atUs": dt.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC), "day": dt.date(2025, 3, 1),
       "price": Decimal("12.50"), "kind": "CASH", "items": [{"sku": "A", "qty": 2}, {"sku": "B", "qty": 1}],
       "first": {"sku": "A", "qty": 2}, "attrs": {"x": 1}, "tag": b"abcd",
       "uid": "6f1c2a4e-0000-4000-8000-000000000001", "ok": True, "ratio": 0.5, "score": 2.25}


def avro_raw(schema, record) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def avro_single(schema, record) -> bytes:
    """Single-object encoding (Avro spec): C3 01, the CRC-64-AVRO fingerprint little-endian, the datum."""
    key = bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))
    return b"\xc3\x01" + key + avro_raw(schema, record)


@pytest.fixture
def avsc(tmp_path):
    for name, schema in (("payment-v1.avsc", V1), ("payment-v2.avsc", V2), ("payment-v3.avsc", V3)):
        (tmp_path / name).write_text(json.dumps(schema))
    return tmp_path


def test_avro_v1_and_v2_bodies_land_as_the_v2_columns(avsc):
    decoder = decoder_for("avro", {"schema": ["payment-v1.avsc", "payment-v2.avsc"]}, avsc)
    assert decoder.format == "avro"
    assert decoder.schema.names == [f["name"] for f in V2["fields"]]
    assert decoder.schema.field("at").type == pa.timestamp("ms", tz="UTC")
    assert decoder.schema.field("atUs").type == pa.timestamp("us", tz="UTC")
    assert decoder.schema.field("price").type == pa.decimal128(9, 2)
    assert decoder.schema.field("attrs").type == pa.map_(pa.string(), pa.int64())
    assert decoder.schema.field("first").type == pa.struct([("sku", pa.string()), ("qty", pa.int32())])
    assert [decoder.schema.field(n).type for n in ("day", "kind", "tag", "uid", "ratio")] == [
        pa.date32(), pa.string(), pa.binary(), pa.string(), pa.float32()]
    v2 = {**REC, "note": "hi", "currency": "USD"}
    out = decoder.decode(bodies([avro_single(V1, REC), avro_single(V2, v2), avro_raw(V2, v2)]))
    check_shape(decoder, out, 3)
    assert out.errors == [None, None, None]
    assert out.schemas == ["payment-v1.avsc", "payment-v2.avsc", "payment-v2.avsc"]
    rows = out.fields.to_pylist()
    assert rows[0] == {**REC, "attrs": [("x", 1)], "note": None, "currency": "EUR"}  # v2's null and default
    assert rows[1] == rows[2] == {**v2, "attrs": [("x", 1)]}


def test_avro_incompatible_v3_unknown_fingerprint_and_broken_bodies_are_row_errors(avsc):
    decoder = decoder_for("avro", {"schema": ["payment-v1.avsc", "payment-v2.avsc"]}, avsc)
    good = avro_single(V2, REC | {"note": None, "currency": "EUR"})
    out = decoder.decode(bodies([avro_single(V3, {**REC, "amount": "x", "currency": "EUR"}), good[:-3],
                                 good + b"\x00", None, b"\xc3\x01\x00", good]))
    check_shape(decoder, out, 6)
    unknown = fingerprint(to_parsing_canonical_form(V3), "CRC-64-AVRO")
    assert f"unknown schema fingerprint {unknown}" in out.errors[0] and "payment-v2.avsc" in out.errors[0]
    assert "does not decode with writer schema payment-v2.avsc: EOFError" in out.errors[1]
    assert out.errors[2] == f"1 bytes left after the Avro datum of payment-v2.avsc, which ends at byte " \
                            f"{len(good)} of {len(good) + 1}"
    assert out.errors[3] == "no body"
    assert "single-object header cut short" in out.errors[4]
    assert out.errors[5] is None
    assert out.schemas[:4] == [None, "payment-v2.avsc", "payment-v2.avsc", "payment-v2.avsc"]
    # v3 declared: its bodies are known, but long -> string does not resolve to the reader (v3 is not last here)
    decoder = decoder_for("avro", {"schema": ["payment-v1.avsc", "payment-v3.avsc", "payment-v2.avsc"]}, avsc)
    out = decoder.decode(bodies([avro_single(V3, {**REC, "amount": "x", "currency": "EUR"}), good]))
    assert out.errors[0].startswith("Avro body does not resolve to the reader schema payment-v2.avsc with writer "
                                    "schema payment-v3.avsc: SchemaResolutionError")
    assert out.schemas == ["payment-v3.avsc", "payment-v2.avsc"] and out.errors[1] is None


def test_avro_raw_bodies_take_their_version_from_the_property(avsc):
    decoder = decoder_for("avro", {"schema": ["payment-v1.avsc", "payment-v2.avsc"], "version_property": "v"}, avsc)
    v1 = avro_raw(V1, REC)
    out = decoder.decode(bodies([v1, v1, v1, v1, avro_raw(V2, REC | {"note": "n", "currency": "X"})]),
                         [{"v": "1"}, {"v": "payment-v1.avsc"}, {"v": "9"}, None, {}])
    check_shape(decoder, out, 5)
    assert out.errors[:2] == [None, None] and out.fields.column("currency").to_pylist()[:2] == ["EUR", "EUR"]
    assert out.errors[2] == "property v='9' names no schema version (the files payment-v1.avsc, payment-v2.avsc " \
                            "or 1..2)"
    assert out.errors[3] is not None  # no property: the last version, which a v1 body is too short for
    assert out.errors[4] is None and out.fields.column("note").to_pylist()[4] == "n"
    assert out.schemas == ["payment-v1.avsc", "payment-v1.avsc", None, "payment-v2.avsc", "payment-v2.avsc"]


def _crc64_avro(data: bytes) -> int:
    """CRC-64-AVRO as the Avro specification's "Schema Fingerprints" gives it."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for b in data:
        fp = (fp >> 8) ^ table[(fp ^ b) & 0xFF]
    return fp


def test_avro_fingerprints_are_the_spec_crc64_little_endian(avsc):
    decoder = decoder_for("avro", {"schema": ["payment-v1.avsc", "payment-v2.avsc"]}, avsc)
    for name, schema in (("payment-v1.avsc", V1), ("payment-v2.avsc", V2)):
        canonical = to_parsing_canonical_form(schema).encode()
        assert decoder.fingerprints()[name] == struct.pack("<Q", _crc64_avro(canonical)).hex()
    # Java's SchemaNormalization.parsingFingerprint64 of "null" (Avro's test data), as BinaryMessageEncoder writes it
    assert struct.pack("<q", 7195948357588979594) == struct.pack("<Q", _crc64_avro(b'"null"'))


@pytest.mark.parametrize(("settings_", "files", "message"), [
    ({"schema": "nope.avsc"}, {}, "setting schema: nope.avsc: no such file"),
    ({"schema": 3}, {}, "setting schema: expected an .avsc path or a list of them, got 3"),
    ({"schema": "a.avsc"}, {"a.avsc": "{"}, "setting schema: a.avsc is not JSON"),
    ({"schema": "a.avsc"}, {"a.avsc": '{"type": "record", "name": "A", "fields": [{"name": "x", "type": "nope"}]}'},
     "setting schema: a.avsc is not an Avro schema: UnknownType: nope"),
    ({"schema": "a.avsc"}, {"a.avsc": '"string"'}, "the last version a.avsc is not a record schema"),
    ({"schema": "a.avsc"}, {"a.avsc": json.dumps({"type": "record", "name": "A", "fields": [
        {"name": "x", "type": {"type": "record", "name": "B", "fields": [
            {"name": "y", "type": ["int", "string"]}]}}]})},
     'setting schema: a.avsc: field x.y is the union ["int", "string"]; only a union of one type with "null"'),
    ({"schema": "a.avsc"}, {"a.avsc": json.dumps({"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]})}, "field next is the recursive or unknown type 'Node'"),
    ({"schema": "a.avsc", "version_property": 5}, {"a.avsc": json.dumps(ITEM)}, "setting version_property"),
])
def test_avro_bad_schemas_are_one_line_errors_naming_setting_and_file(tmp_path, settings_, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(BodyFormatError) as caught:
        decoder_for("avro", settings_, tmp_path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, ValueError)


_AVRO_VALUES = st.fixed_dictionaries({
    "id": st.text(), "amount": st.integers(-(2 ** 63), 2 ** 63 - 1),
    "items": st.lists(st.fixed_dictionaries({"sku": st.text(max_size=5), "qty": st.integers(-(2 ** 31), 2 ** 31 - 1)}),
                      max_size=3),
    "note": st.none() | st.text(max_size=10), "score": st.floats(allow_nan=False),
    "day": st.integers(-100_000, 100_000)})
_SMALL = {"type": "record", "name": "S", "fields": [
    {"name": "id", "type": "string"}, {"name": "amount", "type": "long"}, {"name": "items", "type": {
        "type": "array", "items": ITEM}}, {"name": "note", "type": ["null", "string"]},
    {"name": "score", "type": "double"}, {"name": "day", "type": "int"}]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(_AVRO_VALUES, max_size=6))
def test_avro_round_trip(tmp_path, records):
    (tmp_path / "s.avsc").write_text(json.dumps(_SMALL))
    decoder = decoder_for("avro", {"schema": "s.avsc"}, tmp_path)
    out = decoder.decode(bodies([avro_raw(_SMALL, r) for r in records]))
    check_shape(decoder, out, len(records))
    assert out.fields.to_pylist() == records


# --- Protobuf -----------------------------------------------------------------------------------------------------

F = descriptor_pb2.FieldDescriptorProto


def _field(message, name, number, kind, *, repeated=False, type_name=None, optional=False):
    field = message.field.add(name=name, number=number, type=kind,
                              label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = type_name
    if optional:  # proto3 `optional`: a synthetic oneof
        field.proto3_optional = True
        field.oneof_index = len(message.oneof_decl)
        message.oneof_decl.add(name=f"_{name}")
    return field


def shop_proto(extra_field: bool = False) -> descriptor_pb2.FileDescriptorProto:
    """shop.proto: message Payment with every kind of field the mapping covers (built without protoc)."""
    file = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3", dependency=[
        "google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"])
    file.enum_type.add(name="Kind").value.extend([descriptor_pb2.EnumValueDescriptorProto(name="CARD", number=0),
                                                  descriptor_pb2.EnumValueDescriptorProto(name="CASH", number=1)])
    item = file.message_type.add(name="Item")
    _field(item, "sku", 1, F.TYPE_STRING)
    _field(item, "qty", 2, F.TYPE_INT32)
    pay = file.message_type.add(name="Payment")
    entry = pay.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    _field(entry, "key", 1, F.TYPE_STRING)
    _field(entry, "value", 2, F.TYPE_INT64)
    _field(pay, "id", 1, F.TYPE_STRING)
    _field(pay, "amount", 2, F.TYPE_INT64, optional=True)
    _field(pay, "at", 3, F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
    _field(pay, "tags", 4, F.TYPE_STRING, repeated=True)
    _field(pay, "attrs", 5, F.TYPE_MESSAGE, repeated=True, type_name=".shop.Payment.AttrsEntry")
    _field(pay, "kind", 6, F.TYPE_ENUM, type_name=".shop.Kind")
    _field(pay, "first", 7, F.TYPE_MESSAGE, type_name=".shop.Item")
    _field(pay, "items", 8, F.TYPE_MESSAGE, repeated=True, type_name=".shop.Item")
    _field(pay, "big", 9, F.TYPE_UINT64)
    _field(pay, "blob", 10, F.TYPE_BYTES)
    _field(pay, "score", 11, F.TYPE_DOUBLE)
    _field(pay, "ok", 12, F.TYPE_BOOL)
    _field(pay, "fee", 13, F.TYPE_MESSAGE, type_name=".google.protobuf.Int64Value")
    _field(pay, "count", 14, F.TYPE_SINT32)
    _field(pay, "ratio", 15, F.TYPE_FLOAT)
    if extra_field:
        _field(pay, "added", 16, F.TYPE_STRING)
    return file


def descriptor_set(*files, imports=True) -> bytes:
    out = descriptor_pb2.FileDescriptorSet()
    if imports:
        for module in (timestamp_pb2, wrappers_pb2):
            module.DESCRIPTOR.CopyToProto(out.file.add())
    out.file.extend(files)
    return out.SerializeToString()


def payment_class(file: descriptor_pb2.FileDescriptorProto):
    pool = descriptor_pool.DescriptorPool()
    for module in (timestamp_pb2, wrappers_pb2):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb))
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Payment"))


@pytest.fixture
def pb(tmp_path):
    (tmp_path / "shop.desc").write_bytes(descriptor_set(shop_proto()))
    return decoder_for("protobuf", {"schema": "shop.desc", "message": "shop.Payment"}, tmp_path)


def test_protobuf_fields_map_to_columns_with_protobufs_presence_rules(pb):
    assert pb.format == "protobuf"
    assert pb.schema == pa.schema([
        ("id", pa.string()), ("amount", pa.int64()), ("at", pa.timestamp("us", tz="UTC")),
        ("tags", pa.list_(pa.string())), ("attrs", pa.map_(pa.string(), pa.int64())), ("kind", pa.string()),
        ("first", pa.struct([("sku", pa.string()), ("qty", pa.int32())])),
        ("items", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
        ("big", pa.decimal128(20, 0)), ("blob", pa.binary()), ("score", pa.float64()), ("ok", pa.bool_()),
        ("fee", pa.int64()), ("count", pa.int32()), ("ratio", pa.float32())])
    Payment = payment_class(shop_proto())
    full = Payment(id="p-1", amount=0, tags=["a", "b"], attrs={"x": 3}, kind=1, items=[{"sku": "A", "qty": 2}],
                   big=2 ** 64 - 1, blob=b"\x00\x01", score=1.5, ok=True, count=-7, ratio=0.25)
    full.at.FromDatetime(dt.datetime(2025, 3, 1, 12, 0, 0, 123456))
    full.first.sku = "F"
    full.fee.value = 9
    out = pb.decode(bodies([full.SerializeToString(), Payment().SerializeToString()]))
    check_shape(pb, out, 2)
    assert out.errors == [None, None] and out.schemas == ["shop.Payment", "shop.Payment"]
    assert out.fields.to_pylist() == [
        {"id": "p-1", "amount": 0, "at": dt.datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC), "tags": ["a", "b"],
         "attrs": [("x", 3)], "kind": "CASH", "first": {"sku": "F", "qty": 0}, "items": [{"sku": "A", "qty": 2}],
         "big": Decimal(2 ** 64 - 1), "blob": b"\x00\x01", "score": 1.5, "ok": True, "fee": 9, "count": -7,
         "ratio": 0.25},
        # absent: proto3 scalars their default, optional / message / wrapper fields null, repeated empty
        {"id": "", "amount": None, "at": None, "tags": [], "attrs": [], "kind": "CARD", "first": None, "items": [],
         "big": Decimal(0), "blob": b"", "score": 0.0, "ok": False, "fee": None, "count": 0, "ratio": 0.0}]


def test_protobuf_unknown_fields_and_enum_values_and_bad_bodies(pb):
    Newer = payment_class(shop_proto(extra_field=True))
    newer = Newer(id="n", added="ignored", kind=7).SerializeToString()  # 7: a number the enum does not declare
    out = pb.decode(bodies([newer, b"\xff\xff\xff", None, b""], large=True))
    check_shape(pb, out, 4)
    assert out.errors[0] is None and out.fields.column("kind")[0].as_py() == "7"
    assert out.fields.column("id")[0].as_py() == "n"
    assert out.errors[1].startswith("not a protobuf shop.Payment: DecodeError: Error parsing message")
    assert out.errors[2] == "no body"
    assert out.errors[3] is None  # an empty body is a message with every field absent (protobuf's rule)


def test_protobuf_takes_a_well_known_import_the_set_lacks_from_the_runtime(tmp_path):
    (tmp_path / "shop.desc").write_bytes(descriptor_set(shop_proto(), imports=False))
    decoder = decoder_for("protobuf", {"schema": "shop.desc", "message": "shop.Payment"}, tmp_path)
    assert decoder.schema.field("at").type == pa.timestamp("us", tz="UTC")


def _recursive_set() -> bytes:
    file = descriptor_pb2.FileDescriptorProto(name="tree.proto", package="t", syntax="proto3")
    node = file.message_type.add(name="Node")
    _field(node, "children", 1, F.TYPE_MESSAGE, repeated=True, type_name=".t.Node")
    return descriptor_set(file, imports=False)


def _missing_import_set() -> bytes:
    file = descriptor_pb2.FileDescriptorProto(name="a.proto", package="a", syntax="proto3", dependency=["b.proto"])
    file.message_type.add(name="A")
    return descriptor_set(file, imports=False)


@pytest.mark.parametrize(("settings_", "content", "message"), [
    ({"schema": "x.desc", "message": "shop.Nope"}, descriptor_set(shop_proto()),
     "setting message: the descriptor set x.desc has no message shop.Nope (its messages: "),
    ({"schema": "x.desc"}, descriptor_set(shop_proto()), "setting message: protobuf needs the message's full name"),
    ({"schema": "x.desc", "message": "a.A"}, b"\xff\x00garbage", "setting schema: x.desc is not a serialized "
                                                                 "FileDescriptorSet"),
    ({"schema": "x.desc", "message": "t.Node"}, _recursive_set(),
     "field children[] is of the message type t.Node, which contains itself"),
    ({"schema": "x.desc", "message": "a.A"}, _missing_import_set(),
     "setting schema: x.desc lacks b.proto, imported by a.proto (compile it with protoc --include_imports)"),
    ({"schema": "missing.desc", "message": "a.A"}, None, "setting schema: missing.desc: no such file"),
])
def test_protobuf_bad_declarations_are_one_line_errors(tmp_path, settings_, content, message):
    if content is not None:
        (tmp_path / "x.desc").write_bytes(content)
    with pytest.raises(BodyFormatError) as caught:
        decoder_for("protobuf", settings_, tmp_path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({
    "id": st.text(), "amount": st.none() | st.integers(-(2 ** 63), 2 ** 63 - 1),
    "tags": st.lists(st.text(max_size=4), max_size=3), "big": st.integers(0, 2 ** 64 - 1),
    "count": st.integers(-(2 ** 31), 2 ** 31 - 1), "score": st.floats(allow_nan=False)}), max_size=5))
def test_protobuf_round_trip(rows):
    Payment = payment_class(shop_proto())
    decoder = ProtobufDecoder(descriptor_set(shop_proto()), "shop.Payment")
    messages = [Payment(**{k: v for k, v in r.items() if v is not None}).SerializeToString() for r in rows]
    out = decoder.decode(bodies(messages))
    check_shape(decoder, out, len(rows))
    got = out.fields.select(["id", "amount", "tags", "big", "count", "score"]).to_pylist()
    assert got == [{**r, "big": Decimal(r["big"])} for r in rows]


# --- JSON ---------------------------------------------------------------------------------------------------------

JSON_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "required": ["id", "amount"],
    "properties": {
        "id": {"type": "string"}, "amount": {"type": "integer"}, "score": {"type": ["number", "null"]},
        "ok": {"type": "boolean"}, "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"}, "status": {"enum": ["NEW", "PAID"]},
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
        "customer": {"type": "object", "properties": {"name": {"type": "string"}, "vip": {"type": "boolean"}}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "extra": {}, "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "$defs": {"item": {"type": "object", "required": ["sku"], "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer"}}}}}


@pytest.fixture
def js(tmp_path):
    (tmp_path / "payment.schema.json").write_text(json.dumps(JSON_SCHEMA))
    return decoder_for("json", {"schema": "payment.schema.json"}, tmp_path)


def test_json_schema_bodies_land_typed_and_undeclared_fields_are_skipped(js):
    assert js.format == "json"
    item = pa.struct([("sku", pa.string()), ("qty", pa.int64())])
    assert js.schema == pa.schema([
        ("id", pa.string()), ("amount", pa.int64()), ("score", pa.float64()), ("ok", pa.bool_()),
        ("at", pa.timestamp("us", tz="UTC")), ("day", pa.date32()), ("status", pa.string()),
        ("items", pa.list_(item)), ("customer", pa.struct([("name", pa.string()), ("vip", pa.bool_())])),
        ("attrs", pa.map_(pa.string(), pa.int64())), ("extra", pa.string()), ("maybe", pa.string())])
    body = {"id": "p", "amount": 5, "score": 3, "ok": True, "at": "2025-03-01T13:00:00.5+01:00",
            "day": "2025-03-01", "status": "PAID", "items": [{"sku": "A", "qty": 1}, {"sku": "B"}],
            "customer": {"name": "Ann"}, "attrs": {"a": 1}, "extra": {"any": [1, "x"]}, "undeclared": 1}
    out = js.decode(bodies([json.dumps(body).encode(), b'{"id": "q", "amount": -1, "score": null}']))
    check_shape(js, out, 2)
    assert out.errors == [None, None] and out.schemas == ["payment.schema.json"] * 2
    first, second = out.fields.to_pylist()
    assert first == {**{k: v for k, v in body.items() if k != "undeclared"}, "score": 3.0,
                     "at": dt.datetime(2025, 3, 1, 12, 0, 0, 500000, tzinfo=UTC), "day": dt.date(2025, 3, 1),
                     "items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": None}],
                     "customer": {"name": "Ann", "vip": None}, "attrs": [("a", 1)], "extra": '{"any": [1, "x"]}',
                     "maybe": None}
    assert second["id"] == "q" and second["amount"] == -1 and second["items"] is None


@pytest.mark.parametrize(("body", "error"), [
    (b'{"id": "p", "amount": 1', "body is not JSON: Input data was truncated"),
    (b'{"id": "p", x}', "body is not JSON: JSON is malformed: object keys must be strings (byte 12)"),
    (b'[1, 2]', "JSON body does not fit payment.schema.json: Expected `object`, got `array`"),
    (b'{"id": "p"}', "JSON body does not fit payment.schema.json: Object missing required field `amount`"),
    (b'{"id": "p", "amount": "5"}', "Expected `int`, got `str` - at `$.amount`"),
    (b'{"id": "p", "amount": 1, "items": [{"sku": "A", "qty": 1.5}]}', "got `float` - at `$.items[0].qty`"),
    (b'{"id": "p", "amount": 1, "status": "LOST"}', "at `$.status`"),
    (b'{"id": "p", "amount": 1, "at": "2025-03-01T13:00:00"}', "with a timezone component - at `$.at`"),
    (b'{"id": "p", "amount": 99999999999999999999}', "at `$.amount`"),
    (b'{"id": "p", "amount": null}', "Expected `int`, got `null` - at `$.amount`"),
])
def test_json_schema_errors_name_the_field_path_or_byte(js, body, error):
    out = js.decode(bodies([body, None, b'{"id": "ok", "amount": 1}']))
    check_shape(js, out, 3)
    assert error in out.errors[0], out.errors[0]
    assert out.errors[1:] == ["no body", None]


@pytest.mark.parametrize(("schema", "message"), [
    ("{", "setting schema: s.json is not JSON"),
    ('{"type": "array", "items": {"type": "string"}}', "the root must be an object schema with properties"),
    ('{"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}', "setting schema: s.json: a: type "),
    ('{"type": "object", "properties": {"a": {"type": "null"}}}', 's.json: a: type "null" has no column type'),
    ('{"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}', "a schema must be an object"),
    ('{"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}',
     "oneOf of more than one type"),
])
def test_json_schema_bad_files_are_one_line_errors(tmp_path, schema, message):
    (tmp_path / "s.json").write_text(schema)
    with pytest.raises(BodyFormatError) as caught:
        decoder_for("json", {"schema": "s.json"}, tmp_path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_json_infer_widens_the_schema_batch_by_batch(tmp_path):
    decoder = decoder_for("json", {"schema": "infer"}, tmp_path)
    assert isinstance(decoder, JsonInferDecoder) and decoder.schema == pa.schema([])
    out = decoder.decode(bodies([b'{"a": 1, "n": null, "e": [], "o": {"x": true}}', b'{"a": 2, "l": [1]}']))
    check_shape(decoder, out, 2)
    assert decoder.schema == pa.schema([("a", pa.int64()), ("o", pa.struct([("x", pa.bool_())])),
                                        ("l", pa.list_(pa.int64()))])  # n and e: no type known yet
    assert out.fields.to_pylist() == [{"a": 1, "o": {"x": True}, "l": None}, {"a": 2, "o": None, "l": [1]}]
    assert out.schemas == ["infer", "infer"]
    out = decoder.decode(bodies([b'{"a": 1.5, "b": "new", "o": {"y": 2}, "l": [2.5], "n": 3}', b"[1]", b"{", None]))
    check_shape(decoder, out, 4)
    assert decoder.schema == pa.schema([
        ("a", pa.float64()), ("o", pa.struct([("x", pa.bool_()), ("y", pa.int64())])), ("l", pa.list_(pa.float64())),
        ("b", pa.string()), ("n", pa.int64())])
    assert out.fields.to_pylist()[0] == {"a": 1.5, "o": {"x": None, "y": 2}, "l": [2.5], "b": "new", "n": 3}
    assert out.errors[1:] == ["body is JSON list, not an object", "body is not JSON: Input data was truncated",
                              "no body"]
    out = decoder.decode(bodies([b'{"a": "text", "o": 5, "b": {"k": [1]}, "n": true}', b'{"a": 2}']))
    assert decoder.schema == pa.schema([("a", pa.string()), ("o", pa.string()), ("l", pa.list_(pa.float64())),
                                        ("b", pa.string()), ("n", pa.string())])
    assert out.fields.to_pylist() == [{"a": "text", "o": "5", "l": None, "b": '{"k":[1]}', "n": "true"},
                                      {"a": "2", "o": None, "l": None, "b": None, "n": None}]
    assert widen_schema(pa.schema([("a", pa.int64())]), pa.schema([("b", pa.bool_()), ("a", pa.float64())])) == \
        pa.schema([("a", pa.float64()), ("b", pa.bool_())])
    assert pickle.loads(pickle.dumps(decoder)).schema == decoder.schema


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({"id": st.text(), "amount": st.integers(-(2 ** 63), 2 ** 63 - 1)}, optional={
    "score": st.floats(allow_nan=False, allow_infinity=False), "items": st.lists(st.fixed_dictionaries(
        {"sku": st.text(max_size=4)}, optional={"qty": st.integers(-(2 ** 63), 2 ** 63 - 1)}), max_size=3)}),
    max_size=6))
def test_json_schema_round_trip(rows):
    decoder = JsonSchemaDecoder(json.dumps(JSON_SCHEMA), "payment.schema.json")
    out = decoder.decode(bodies([json.dumps(r).encode() for r in rows]))
    check_shape(decoder, out, len(rows))
    got = out.fields.select(["id", "amount", "score", "items"]).to_pylist()
    assert got == [{"score": None, "items": None, **r,
                    **({"items": [{"qty": None, **i} for i in r["items"]]} if "items" in r else {})} for r in rows]


# --- msgpack ------------------------------------------------------------------------------------------------------

ORDER_FIELDS = {"orderId": "string", "customerId": "string", "status": "string", "amountCents": "int64",
                "currency": "string", "region": "string",
                "items": "list<struct<sku: string, qty: int32, priceCents: int64>>", "eventTimeMs": "timestamp[ms]"}


def test_msgpack_declares_the_demos_order_events():
    from streaming_apps.apps.orders import decode_order_body
    from streaming_apps.workload import order_events

    decoder = decoder_for("msgpack", {"fields": ORDER_FIELDS}, Path("."))
    assert decoder.format == "msgpack"
    assert decoder.schema.field("eventTimeMs").type == pa.timestamp("ms", tz="UTC")
    events = [m.body for m in order_events(50, seed=5)]
    out = decoder.decode(bodies(events))
    check_shape(decoder, out, 50)
    assert out.errors == [None] * 50 and out.schemas == ["fields"] * 50
    for row, body in zip(out.fields.to_pylist(), events, strict=True):
        want = decode_order_body(body)
        assert {k: v for k, v in row.items() if k != "eventTimeMs"} == {
            k: want[k] for k in ORDER_FIELDS if k != "eventTimeMs"}
        assert row["eventTimeMs"] == want["eventTime"]


def test_msgpack_values_missing_fields_and_errors():
    fields = {"s": "string", "b": "binary", "ok": "bool", "i": "int32", "f": "float32", "day": "date32",
              "us": "timestamp[us]", "price": "decimal(5, 2)", "m": "map<string, list<int64>>",
              "st": "struct<a: int64, b: struct<c: string>>"}
    decoder = decoder_for("msgpack", {"fields": fields}, Path("."))
    good = {"s": "x", "b": b"\x00", "ok": False, "i": -5, "f": 2, "day": "2025-03-01", "us": 5,
            "price": "123.45", "m": {"k": [1, 2]}, "st": {"a": 1, "b": {"c": "z"}}, "other": [1]}
    maps = [good, {"i": None, "day": 3}, {"i": 2 ** 40}, {"st": {"b": {"c": 1}}}, {"price": "1234.5"},
            {"price": "1.234"}]
    out = decoder.decode(bodies([*map(msgpack.packb, maps), b"\xc1", msgpack.packb("text"),
                                 msgpack.packb({}) + b"\x01", None]))
    check_shape(decoder, out, 10)
    rows = out.fields.to_pylist()
    assert rows[0] == {**{k: v for k, v in good.items() if k != "other"}, "f": 2.0, "day": dt.date(2025, 3, 1),
                       "us": dt.datetime(1970, 1, 1, 0, 0, 0, 5, tzinfo=UTC), "price": Decimal("123.45"),
                       "m": [("k", [1, 2])]}
    assert rows[1] == dict.fromkeys(fields) | {"day": dt.date(1970, 1, 4)}
    assert out.errors[:2] == [None, None]
    assert out.errors[2] == "msgpack body does not fit the declared fields: Expected `int` <= 2147483647 - at `$.i`"
    assert out.errors[3].endswith("Expected `str | null`, got `int` - at `$.st.b.c`")
    assert out.errors[4] == "field price: 1234.5 has more than 5 digits (column type decimal128(5, 2))"
    assert out.errors[5] == "field price: 1.234 has more than 2 fractional digits (column type decimal128(5, 2))"
    assert out.errors[6].startswith("body is not msgpack: MessagePack data is malformed: invalid opcode")
    assert out.errors[7] == "msgpack body does not fit the declared fields: Expected `object`, got `str`"
    assert "trailing characters (byte 1)" in out.errors[8]
    assert out.errors[9] == "no body"


def test_values_that_do_not_fit_their_column_fail_only_their_rows():
    decoder = decoder_for("msgpack", {"fields": {"id": "int64", "price": "decimal(4, 1)"}}, Path("."))
    maps = [{"id": i, "price": "999.9" if i not in (17, 80) else "1000"} for i in range(100)]
    out = decoder.decode(bodies([msgpack.packb(m) for m in maps]))
    check_shape(decoder, out, 100)
    assert {i: e for i, e in enumerate(out.errors) if e} == dict.fromkeys(
        (17, 80), "field price: 1000 has more than 4 digits (column type decimal128(4, 1))")
    assert out.fields.column("id").to_pylist() == [None if i in (17, 80) else i for i in range(100)]


@pytest.mark.parametrize(("fields", "message"), [
    ({"a": "strin"}, "setting fields: field a: unknown type 'strin' (known: string, binary"),
    ({"a": "list<int64"}, "setting fields: field a: expected >, found 'the end' at character 11 of 'list<int64'"),
    ({"a": "map<int64, string>"}, "a map's keys must be string"),
    ({"a": "decimal(2, 5)"}, "decimal(2, 5) needs 0 <= scale <= precision"),
    ({"a": "struct<>"}, "a struct needs at least one field"),
    ({"a": "int64 x"}, "unexpected 'x'"),
    ({"a": 5}, "setting fields: field a: expected a type text, got 5"),
    ({}, "setting fields: expected a table of field name -> type text"),
    (None, "setting fields: expected a table"),
])
def test_msgpack_bad_type_texts_name_the_field_and_the_text(fields, message):
    with pytest.raises(BodyFormatError) as caught:
        decoder_for("msgpack", {"fields": fields}, Path("."))
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "arrow"), [
    ("list<struct<sku: string, qty: int32>>", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
    (" map< string , float64 > ", pa.map_(pa.string(), pa.float64())), ("timestamp[ms]", pa.timestamp("ms", tz="UTC")),
    ("timestamp[us]", pa.timestamp("us", tz="UTC")), ("decimal(38, 10)", pa.decimal128(38, 10)),
    ("date32", pa.date32()), ("binary", pa.binary()), ("bool", pa.bool_()), ("float32", pa.float32()),
    ("struct<a: list<map<string, int64>>, b: decimal(5,0)>",
     pa.struct([("a", pa.list_(pa.map_(pa.string(), pa.int64()))), ("b", pa.decimal128(5, 0))])),
])
def test_msgpack_type_texts(text, arrow):
    assert parse_type(text) == arrow


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({}, optional={
    "orderId": st.text(), "amountCents": st.integers(-(2 ** 63), 2 ** 63 - 1),
    "items": st.lists(st.fixed_dictionaries({"sku": st.text(max_size=4), "qty": st.integers(-(2 ** 31), 2 ** 31 - 1),
                                             "priceCents": st.integers(0, 10 ** 9)}), max_size=3)}), max_size=6))
def test_msgpack_round_trip(rows):
    decoder = decoder_for("msgpack", {"fields": ORDER_FIELDS}, Path("."))
    out = decoder.decode(bodies([msgpack.packb(r) for r in rows]))
    check_shape(decoder, out, len(rows))
    got = out.fields.select(["orderId", "amountCents", "items"]).to_pylist()
    assert got == [{"orderId": None, "amountCents": None, "items": None, **r} for r in rows]


# --- string and bytes ---------------------------------------------------------------------------------------------

def test_string_bodies_are_utf8_text_and_bad_bytes_are_named():
    decoder = decoder_for("string", {}, Path("."))
    assert decoder.schema == pa.schema([("body", pa.string())])
    clean = decoder.decode(bodies(["héllo".encode(), b"", None]))
    check_shape(decoder, clean, 3)
    assert clean.fields.column("body").to_pylist() == ["héllo", "", None]
    assert clean.errors == [None, None, "no body"] and clean.schemas == [None] * 3
    array = bodies([b"skip", "ok ✓".encode(), b"ab\xffcd", None, b"\xe2\x82", b"fine"], large=True).slice(1)
    out = decoder.decode(array)
    check_shape(decoder, out, 5)
    assert out.fields.column("body").to_pylist() == ["ok ✓", None, None, None, "fine"]
    assert out.errors == [None, "not UTF-8: invalid start byte at byte 2", "no body",
                          "not UTF-8: unexpected end of data at byte 0", None]


def test_bytes_bodies_are_kept_as_is():
    decoder = decoder_for("bytes", {"schema": "ignored"}, Path("."))
    out = decoder.decode(bodies([b"\x00\xff", None, b""], large=True))
    check_shape(decoder, out, 3)
    assert out.fields.column("body").to_pylist() == [b"\x00\xff", None, b""]
    assert out.errors == [None, "no body", None] and out.schemas == [None] * 3


# --- every format -------------------------------------------------------------------------------------------------

@pytest.fixture
def every_decoder(tmp_path, avsc):
    (tmp_path / "shop.desc").write_bytes(descriptor_set(shop_proto()))
    (tmp_path / "payment.schema.json").write_text(json.dumps(JSON_SCHEMA))
    return {
        "avro": decoder_for("avro", {"schema": ["payment-v1.avsc", "payment-v2.avsc"]}, avsc),
        "protobuf": decoder_for("protobuf", {"schema": str(tmp_path / "shop.desc"), "message": "shop.Payment"}, "/"),
        "json": decoder_for("json", {"schema": "payment.schema.json"}, tmp_path),
        "msgpack": decoder_for("msgpack", {"fields": ORDER_FIELDS}, tmp_path),
        "string": decoder_for("string", {}, tmp_path), "bytes": decoder_for("bytes", {}, tmp_path)}


def test_every_format_decodes_an_empty_column_and_pickles(every_decoder):
    assert set(every_decoder) == set(FORMATS)
    for name, decoder in every_decoder.items():
        assert decoder.format == name
        for column in (bodies([]), bodies([], large=True)):
            out = decoder.decode(column)
            check_shape(decoder, out, 0)
        copy = pickle.loads(pickle.dumps(decoder))
        assert copy.schema == decoder.schema
        out = copy.decode(bodies([b"\xc1\x00", None]))
        assert out.errors[1] == "no body" and out.fields.schema == decoder.schema


def test_an_unknown_format_is_a_one_line_error():
    with pytest.raises(BodyFormatError, match=r"^setting format: unknown body format 'xml' \(one of avro, protobuf, "
                                              r"json, msgpack, string, bytes\)$"):
        decoder_for("xml", {}, Path("."))


NO_PANDAS_SCRIPT = refuse_pandas_prelude("streaming_apps") + """
import pickle
import pyarrow as pa
decoders = pickle.loads(open(sys.argv[1], "rb").read())
with pa.OSFile(sys.argv[2]) as f:
    batch = pa.ipc.open_file(f).get_batch(0)
errors = {name: decoders[name].decode(batch.column(name)).errors for name in decoders}
print(json.dumps({"attempts": attempts, "errors": errors}))
"""


def test_decoding_never_imports_pandas(tmp_path, every_decoder):
    """The decoders run in the source's Python workers, which stay without pandas (connector/arrow_numpy.py): the
    columns are built from buffers, never with ``pa.array`` of Python values."""
    v2 = REC | {"note": "n", "currency": "EUR"}
    Payment = payment_class(shop_proto())
    columns = {
        "avro": [avro_single(V2, v2), b"\xc3\x01bad"],
        "protobuf": [Payment(id="x", tags=["t"], attrs={"a": 1}, kind=1).SerializeToString(), b"\xff"],
        "json": [json.dumps({"id": "a", "amount": 1, "at": "2025-01-01T00:00:00Z", "items": [{"sku": "s"}],
                             "attrs": {"k": 1}}).encode(), b"{"],
        "msgpack": [msgpack.packb({"orderId": "o", "eventTimeMs": 5, "items": [{"sku": "s", "qty": 1}]}), b"\xc1"],
        "string": ["ü".encode(), b"\xff"], "bytes": [b"\x00", None]}
    batch = pa.RecordBatch.from_pydict({k: bodies(v) for k, v in columns.items()})
    path = tmp_path / "bodies.arrow"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, batch.schema) as writer:
        writer.write_batch(batch)
    (tmp_path / "decoders.pickle").write_bytes(pickle.dumps(every_decoder))
    run = subprocess.run([sys.executable, "-c", NO_PANDAS_SCRIPT, str(tmp_path / "decoders.pickle"), str(path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["attempts"] == [], f"pandas was imported by: {out['attempts']}"
    assert {name: [e is None for e in errors] for name, errors in out["errors"].items()} == {
        name: [True, False] for name in columns}
