"""Issue 52: typed tables of bodies made by the reference implementations, sent by the real RocketMQ 4.9.8 producer.

``TypedBodiesProducer`` (tests/java) builds Avro records with Apache Avro's Java library (GenericRecordBuilder,
``BinaryMessageEncoder``: single-object encoding) and Protobuf messages with protobuf-java (``DynamicMessage`` of a
descriptor set this module writes with ``descriptor_pb2``), sends them with ``DefaultMQProducer`` through a stub name
server to a stub master, and prints per message the values the same library reads back from the bytes it sent
(``BinaryMessageDecoder`` with Avro's logical-type conversions, ``DynamicMessage.parseFrom``). ``hareplica run
tables`` on the shared Spark session lands them; every row must equal its reference value, field by field.

Three traffic phases, one Java run and one ``run tables`` each, one checkpoint throughout:

1. Avro v1 and Protobuf; the declaration lists ``[v1]``: typed rows equal the reference.
2. Avro v1 and v2 interleaved (v2 adds ``method``, optional, and ``channel``, default "web"); the declaration lists
   ``[v1, v2]``: both columns appear, the rows of phase 1 read them as null, the v1 bodies of phase 2 as the
   defaults (Avro's schema resolution, as Java's decoder resolves them), the v2 bodies as sent.
3. Avro v2 interleaved with an incompatible v3 (``paymentId`` string -> record); the declaration still lists
   ``[v1, v2]``: every v3 body is a dead letter naming the fingerprint Java wrote, the v2 bodies after them land,
   the run ends normally; Java's own decoder cannot read the v3 bodies either.

Every third record holds extremes (MIN/MAX ints, NaN, infinities, -0.0, subnormals, the widest decimals, dates and
timestamps at 0001-01-01 and at the last millisecond of 9999, an undeclared enum number, NUL and astral characters,
256-byte binaries), every third zeros, empties, nulls and schema defaults, the rest random values. Two more checks:
local-timestamp columns must be zone-less (``timestamp_ntz``) as Avro's local-timestamp is; and timestamps in the last
microsecond of 9999, valid in both libraries, must land too (their own Java run, declaration and workdir).

The reference values (see TypedBodiesProducer's doc): tagged JSON for bytes, timestamps, dates, decimals and maps;
floats as their exact double (compared bit for bit, NaN with NaN). Columns compared with the project's documented
mappings (docs/tables.md): timestamps as microseconds since the epoch (a google.protobuf.Timestamp's nanos truncated
to micros), protobuf's unsigned ints as their unsigned value, an enum number the enum lacks as its number in text.
"""

from __future__ import annotations

import json
import math
import struct
import textwrap
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from streaming_apps.apps import AppConfig, run_app
from streaming_apps.query import query_tables
from streaming_apps.spark_session import register_data_sources
from streaming_apps.tables.decode.avro import AvroDecoder
from tests.interop.java_fixtures import wait_for_route
from tests.support.brokers import BrokerProcess, NameServerProcess
from tests.support.java_tools import run_java

pytestmark = pytest.mark.spark

APP_TIMEOUT_S = 240
AVRO_TOPIC = "TypedAvroPayments"
PROTO_TOPIC = "TypedProtoOrders"
PHASE_1 = {"send": "1:45", "proto": 45}
PHASE_2 = {"send": "1:15,2:45"}
PHASE_3 = {"send": "2:15,3:15"}
KEPT = ["msgId", "commitLogOffset", "tags"]

_DECIMAL = {"type": "bytes", "logicalType": "decimal"}
PAYMENT_V1 = {
    "type": "record", "name": "Payment", "namespace": "shop",
    "fields": [
        {"name": "paymentId", "type": "string"},
        {"name": "amount", "type": "long"},
        {"name": "quantity", "type": "int"},
        {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD", "JPY", "CNY"]}},
        {"name": "captured", "type": "boolean"},
        {"name": "score", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "paidAt", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "bookedAt", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "localAt", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "localMicros", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {**_DECIMAL, "precision": 12, "scale": 2}},
        {"name": "fee", "type": {"type": "fixed", "name": "Fee", "size": 8, "logicalType": "decimal",
                                 "precision": 18, "scale": 4}},
        {"name": "traceId", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "raw", "type": "bytes"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "discount", "type": ["null", {**_DECIMAL, "precision": 9, "scale": 3}], "default": None},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line", "fields": [
                {"name": "sku", "type": "string"},
                {"name": "qty", "type": "int"},
                {"name": "unit", "type": ["null", {**_DECIMAL, "precision": 10, "scale": 2}]}]}}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "counters", "type": {"type": "map", "values": "long"}},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
            {"name": "since", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None}]}},
        {"name": "expiresAt", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
        {"name": "ratios", "type": {"type": "array", "items": "float"}},
    ]}
#: v2 adds an optional field and one with a default: compatible, two new nullable columns
PAYMENT_V2 = {**PAYMENT_V1, "fields": [*PAYMENT_V1["fields"],
                                       {"name": "method", "type": ["null", "string"], "default": None},
                                       {"name": "channel", "type": "string", "default": "web"}]}
#: v3 turns paymentId from a string into a record: it cannot resolve to v2
PAYMENT_V3 = {**PAYMENT_V2, "fields": [
    {"name": "paymentId", "type": {"type": "record", "name": "PaymentRef", "fields": [
        {"name": "bank", "type": "string"}, {"name": "serial", "type": "long"}]}},
    *PAYMENT_V2["fields"][1:]]}
AVSC = {1: "payment-v1.avsc", 2: "payment-v2.avsc", 3: "payment-v3.avsc"}


def order_descriptor_set() -> bytes:
    """A FileDescriptorSet (what ``protoc --include_imports --descriptor_set_out`` writes) of shop/order.proto:

    message Order {  // proto3
      string id = 1; int32 i32 = 2; int64 i64 = 3; uint32 u32 = 4; uint64 u64 = 5; sint32 s32 = 6;
      sint64 s64 = 7; fixed32 f32 = 8; fixed64 f64 = 9; sfixed32 sf32 = 10; sfixed64 sf64 = 11;
      float price = 12; double total = 13; bool paid = 14; bytes blob = 15; Status status = 16;
      optional string note = 17; Customer customer = 18; repeated string tags = 19; repeated sint64 nums = 20;
      repeated Item items = 21; map<string, int64> counts = 22; map<int32, string> labels = 23;
      google.protobuf.Timestamp created_at = 24; google.protobuf.Int64Value discount = 25;
      google.protobuf.StringValue comment = 26; oneof payment { string card = 27; int64 cash = 28; }
      repeated Status history = 29; repeated double weights = 30; map<string, Item> by_sku = 31;
      enum Status { STATUS_UNSPECIFIED = 0; NEW = 1; PAID = 2; SHIPPED = 3; }
      message Customer { int64 id = 1; string name = 2; repeated string emails = 3; }
      message Item { string sku = 1; int32 qty = 2; }
    }
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2, wrappers_pb2  # noqa: F401

    t = descriptor_pb2.FieldDescriptorProto
    imports = ["google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"]
    order_file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3",
                                                    dependency=imports)
    order = order_file.message_type.add(name="Order")
    status = order.enum_type.add(name="Status")
    for number, name in enumerate(["STATUS_UNSPECIFIED", "NEW", "PAID", "SHIPPED"]):
        status.value.add(name=name, number=number)

    def add(message, name, number, kind, *, repeated=False, type_name=None, **more):
        label = t.LABEL_REPEATED if repeated else t.LABEL_OPTIONAL
        f = message.field.add(name=name, number=number, type=kind, label=label, **more)
        if type_name:
            f.type_name = type_name
        return f

    customer = order.nested_type.add(name="Customer")
    add(customer, "id", 1, t.TYPE_INT64)
    add(customer, "name", 2, t.TYPE_STRING)
    add(customer, "emails", 3, t.TYPE_STRING, repeated=True)
    item = order.nested_type.add(name="Item")
    add(item, "sku", 1, t.TYPE_STRING)
    add(item, "qty", 2, t.TYPE_INT32)
    for entry_name, key, value, value_type in (("CountsEntry", t.TYPE_STRING, t.TYPE_INT64, None),
                                               ("LabelsEntry", t.TYPE_INT32, t.TYPE_STRING, None),
                                               ("BySkuEntry", t.TYPE_STRING, t.TYPE_MESSAGE, ".shop.Order.Item")):
        entry = order.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        add(entry, "key", 1, key)
        add(entry, "value", 2, value, type_name=value_type)
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_note")  # proto3 `optional`: a synthetic oneof, after the real ones
    for number, (name, kind) in enumerate([("id", t.TYPE_STRING), ("i32", t.TYPE_INT32), ("i64", t.TYPE_INT64),
                                           ("u32", t.TYPE_UINT32), ("u64", t.TYPE_UINT64), ("s32", t.TYPE_SINT32),
                                           ("s64", t.TYPE_SINT64), ("f32", t.TYPE_FIXED32), ("f64", t.TYPE_FIXED64),
                                           ("sf32", t.TYPE_SFIXED32), ("sf64", t.TYPE_SFIXED64),
                                           ("price", t.TYPE_FLOAT), ("total", t.TYPE_DOUBLE), ("paid", t.TYPE_BOOL),
                                           ("blob", t.TYPE_BYTES)], 1):
        add(order, name, number, kind)
    add(order, "status", 16, t.TYPE_ENUM, type_name=".shop.Order.Status")
    add(order, "note", 17, t.TYPE_STRING, proto3_optional=True, oneof_index=1)
    add(order, "customer", 18, t.TYPE_MESSAGE, type_name=".shop.Order.Customer")
    add(order, "tags", 19, t.TYPE_STRING, repeated=True)
    add(order, "nums", 20, t.TYPE_SINT64, repeated=True)
    add(order, "items", 21, t.TYPE_MESSAGE, repeated=True, type_name=".shop.Order.Item")
    add(order, "counts", 22, t.TYPE_MESSAGE, repeated=True, type_name=".shop.Order.CountsEntry")
    add(order, "labels", 23, t.TYPE_MESSAGE, repeated=True, type_name=".shop.Order.LabelsEntry")
    add(order, "created_at", 24, t.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
    add(order, "discount", 25, t.TYPE_MESSAGE, type_name=".google.protobuf.Int64Value")
    add(order, "comment", 26, t.TYPE_MESSAGE, type_name=".google.protobuf.StringValue")
    add(order, "card", 27, t.TYPE_STRING, oneof_index=0)
    add(order, "cash", 28, t.TYPE_INT64, oneof_index=0)
    add(order, "history", 29, t.TYPE_ENUM, repeated=True, type_name=".shop.Order.Status")
    add(order, "weights", 30, t.TYPE_DOUBLE, repeated=True)
    add(order, "by_sku", 31, t.TYPE_MESSAGE, repeated=True, type_name=".shop.Order.BySkuEntry")
    files = []
    for name in imports:
        proto = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(name).CopyToProto(proto)
        files.append(proto)
    return descriptor_pb2.FileDescriptorSet(file=[*files, order_file]).SerializeToString()


# ---------------------------------------------------------------- comparing a row with its reference value

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAY = date(1970, 1, 1)


def _micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(microseconds=1)


def _tagged(java: dict, ours, path: str, out: list) -> None:
    (tag, value), = java.items()
    if tag == "$bytes":
        ok = isinstance(ours, bytes) and ours.hex() == value
    elif tag == "$instant":  # an instant: a UTC timestamp column
        ok = isinstance(ours, datetime) and ours.tzinfo is not None and _micros(ours) == value
    elif tag == "$local":  # the wall-clock value (the column's zone semantics: test_avro_timestamps_keep_...)
        ok = isinstance(ours, datetime) and _micros(ours) == value
    elif tag == "$date":
        ok = isinstance(ours, date) and not isinstance(ours, datetime) and (ours - _EPOCH_DAY).days == value
    elif tag == "$time":
        ok = isinstance(ours, time) and ((ours.hour * 60 + ours.minute) * 60 + ours.second) * 10**9 \
            + ours.microsecond * 1000 == value
    elif tag == "$decimal":
        want = Decimal(value)
        ok = isinstance(ours, Decimal) and ours == want and ours.as_tuple().exponent == want.as_tuple().exponent
    elif tag == "$entries":
        if not isinstance(ours, list) or not all(isinstance(e, tuple) and len(e) == 2 for e in ours):
            out.append((path, java, ours))
            return
        theirs = {json.dumps(k, sort_keys=True): v for k, v in value}
        mine = {json.dumps(k, sort_keys=True): v for k, v in ours}
        if theirs.keys() != mine.keys() or len(mine) != len(ours):
            out.append((path, java, ours))
            return
        for key, v in theirs.items():
            _compare(v, mine[key], f"{path}[{key}]", out)
        return
    else:
        raise AssertionError(f"unknown reference tag {tag} at {path}")
    if not ok:
        out.append((path, java, ours))


def _compare(java, ours, path: str, out: list) -> None:
    """Append ``(path, reference, ours)`` to ``out`` for every value of ``ours`` that is not ``java``."""
    if isinstance(java, dict) and len(java) == 1 and next(iter(java)).startswith("$"):
        _tagged(java, ours, path, out)
    elif isinstance(java, dict) and set(java) == {"$seconds", "$nanos"}:  # google.protobuf.Timestamp: micros
        micros = java["$seconds"] * 10**6 + java["$nanos"] // 1000
        if not (isinstance(ours, datetime) and ours.tzinfo is not None and _micros(ours) == micros):
            out.append((path, java, ours))
    elif isinstance(java, dict):
        if not isinstance(ours, dict) or set(ours) != set(java):
            out.append((path, sorted(java), sorted(ours) if isinstance(ours, dict) else ours))
            return
        for name, value in java.items():
            _compare(value, ours[name], f"{path}.{name}".lstrip("."), out)
    elif isinstance(java, list):
        if not isinstance(ours, list) or len(ours) != len(java):
            out.append((path, java, ours))
            return
        for i, (a, b) in enumerate(zip(java, ours, strict=True)):
            _compare(a, b, f"{path}[{i}]", out)
    elif java is None or isinstance(java, bool):
        if ours is not java:
            out.append((path, java, ours))
    elif isinstance(java, int):
        integral = isinstance(ours, Decimal) and ours.as_tuple().exponent == 0  # uint64 as decimal(20, 0)
        if not ((isinstance(ours, int) and not isinstance(ours, bool)) or integral) or ours != java:
            out.append((path, java, ours))
    elif isinstance(java, float):
        same = isinstance(ours, float) and (
            (math.isnan(java) and math.isnan(ours)) or struct.pack("<d", java) == struct.pack("<d", ours))
        if not same:
            out.append((path, java, ours))
    elif java != ours:
        out.append((path, java, ours))


def _assert_rows_equal_reference(sends: list[dict], rows: dict[str, dict], *, fields: list[str]) -> None:
    """Each send's row (by offset msgId) has exactly the reference's fields with its values; every difference is
    listed (first 12) with the message's index, the field path, Java's value and ours."""
    missing = [s["offsetMsgId"] for s in sends if s["offsetMsgId"] not in rows]
    assert not missing, f"{len(missing)} of {len(sends)} sends have no row, e.g. {missing[:3]}"
    diffs: list = []
    for s in sends:
        row = rows[s["offsetMsgId"]]
        assert s["referenceError"] is None and s["reference"] is not None, s
        assert list(s["reference"]) == fields, (list(s["reference"]), fields)
        found: list = []
        _compare(s["reference"], {name: row[name] for name in fields}, "", found)
        diffs += [(s["kind"], s["version"], s["index"], *d) for d in found]
    shown = "\n".join(f"  {kind} {version} #{index} {path}: Java {java!r}, table {ours!r}"
                      for kind, version, index, path, java, ours in diffs[:12])
    assert not diffs, f"{len(diffs)} values differ from the reference decoder's:\n{shown}"


# ---------------------------------------------------------------- peers, Java runs, runs of `run tables`


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    """(stub name server, stub master registered with it) of the module."""
    root = tmp_path_factory.mktemp("typed-bodies")
    with NameServerProcess.start(root / "namesrv") as ns, \
            BrokerProcess.start(root / "master", namesrvAddr=ns.addr) as master:
        wait_for_route(ns.addr)
        yield ns, master


@pytest.fixture(scope="module")
def schemas(tmp_path_factory) -> Path:
    """The folder of the .avsc versions, the descriptor set and the declarations."""
    folder = tmp_path_factory.mktemp("typed-schemas")
    for version, schema in ((1, PAYMENT_V1), (2, PAYMENT_V2), (3, PAYMENT_V3)):
        (folder / AVSC[version]).write_text(json.dumps(schema, indent=1), encoding="utf-8")
    (folder / "order.desc").write_bytes(order_descriptor_set())
    return folder


def _java(peers, schemas: Path, log_dir: Path, *, start: int, reader: int, known: str, send: str, proto: int = 0,
          avro_topic: str = AVRO_TOPIC, proto_topic: str = PROTO_TOPIC, max_time: str = "millis",
          ) -> tuple[dict, list[dict]]:
    """One TypedBodiesProducer run: (its fingerprints line, its send lines), every send SEND_OK."""
    ns, _ = peers
    args = [f"namesrv={ns.addr}", f"group=typed_{start}", f"start={start}", f"avroTopic={avro_topic}",
            f"maxTime={max_time}",
            "avro=" + ",".join(str(schemas / AVSC[v]) for v in (1, 2, 3)), f"send={send}", f"reader={reader}",
            f"known={known}"]
    if proto:
        args += [f"protoTopic={proto_topic}", f"desc={schemas / 'order.desc'}", "message=shop.Order",
                 f"proto={proto}"]
    run = run_java("TypedBodiesProducer", args, log_dir=log_dir, timeout_s=120)
    fingerprints, *sends = run.lines
    assert fingerprints["kind"] == "fingerprints", fingerprints
    bad = [s for s in sends if s["status"] != "SEND_OK"]
    assert not bad, f"{len(bad)} sends failed, e.g. {bad[0]}\n{run.describe()}"
    return fingerprints, sends


def _declaration(schemas: Path, versions: list[int], *, avro_topic: str = AVRO_TOPIC,
                 proto_topic: str = PROTO_TOPIC, name: str | None = None) -> str:
    path = schemas / (name or f"tables-v{max(versions)}.toml")
    path.write_text(textwrap.dedent(f"""
        [[table]]
        name = "payments"
        topics = ["{avro_topic}"]
        format = "avro"
        schema = {json.dumps([AVSC[v] for v in versions])}
        columns = {json.dumps(KEPT)}

        [[table]]
        name = "orders"
        topics = ["{proto_topic}"]
        format = "protobuf"
        schema = "order.desc"
        message = "shop.Order"
        columns = ["msgId"]
    """), encoding="utf-8")
    return str(path)


def _run_tables(spark, peers, workdir: Path, declaration: str) -> tuple[AppConfig, dict[str, list[dict]]]:
    """``run tables`` (available-now) to the end of the log; then every table's rows."""
    register_data_sources(spark)
    _, master = peers
    config = AppConfig(app="tables", brokers=f"broker-a={master.ha_addr}", workdir=workdir,
                       trigger="available-now", declaration=declaration)
    run_app(spark, config, max_runtime_s=APP_TIMEOUT_S)
    tables = {}
    for name in ("payments", "orders", "dead_letters"):
        path = config.table_path(name)
        tables[name] = query_tables("SELECT * FROM t", {"t": str(path)}).to_pylist() if path.exists() else []
    return config, tables


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("typed-work")


@pytest.fixture(scope="module")
def phase1(spark, peers, schemas, workdir, tmp_path_factory):
    """Avro v1 and Protobuf traffic, landed with the declaration ``[v1]``."""
    fingerprints, sends = _java(peers, schemas, tmp_path_factory.mktemp("java-1"), start=0, reader=1, known="1",
                                **PHASE_1)
    config, tables = _run_tables(spark, peers, workdir, _declaration(schemas, [1]))
    return fingerprints, sends, tables, config


@pytest.fixture(scope="module")
def phase2(spark, peers, schemas, workdir, phase1, tmp_path_factory):
    """Avro v1 and v2 traffic interleaved, landed with the declaration ``[v1, v2]``."""
    _, sends = _java(peers, schemas, tmp_path_factory.mktemp("java-2"), start=1000, reader=2, known="1,2",
                     **PHASE_2)
    _, tables = _run_tables(spark, peers, workdir, _declaration(schemas, [1, 2]))
    return sends, tables


@pytest.fixture(scope="module")
def phase3(spark, peers, schemas, workdir, phase2, tmp_path_factory):
    """Avro v2 traffic interleaved with the incompatible v3, landed with the same declaration ``[v1, v2]``."""
    fingerprints, sends = _java(peers, schemas, tmp_path_factory.mktemp("java-3"), start=2000, reader=2,
                                known="1,2", **PHASE_3)
    _, tables = _run_tables(spark, peers, workdir, _declaration(schemas, [1, 2]))
    return fingerprints, sends, tables


def _by_msg_id(rows: list[dict]) -> dict[str, dict]:
    out = {r["msgId"]: r for r in rows}
    assert len(out) == len(rows), "two rows with one msgId"
    return out


def _field_names(schema: dict) -> list[str]:
    return [f["name"] for f in schema["fields"]]


# ---------------------------------------------------------------- the tests


def test_fingerprints_are_the_ones_java_computes(phase1, schemas):
    """The CRC-64-AVRO fingerprints the decoder selects versions by are Avro Java's parsingFingerprint64."""
    fingerprints, *_ = phase1
    ours = AvroDecoder([(AVSC[v], (schemas / AVSC[v]).read_text(encoding="utf-8")) for v in (1, 2, 3)])
    assert ours.fingerprints() == {k: v for k, v in fingerprints.items() if k != "kind"}


def test_avro_v1_rows_equal_javas_reading(phase1):
    """Every Avro v1 body Java wrote and sent is one row whose typed columns equal what BinaryMessageDecoder
    reads from it; no dead letters."""
    _, sends, tables, _ = phase1
    avro = [s for s in sends if s["kind"] == "avro"]
    assert len(avro) == 45 and {s["version"] for s in avro} == {"v1"}
    assert len(tables["payments"]) == len(avro)
    assert tables["dead_letters"] == []
    rows = _by_msg_id(tables["payments"])
    assert set(tables["payments"][0]) == {*_field_names(PAYMENT_V1), *KEPT}
    _assert_rows_equal_reference(avro, rows, fields=_field_names(PAYMENT_V1))
    assert {rows[s["offsetMsgId"]]["tags"] for s in avro} == {"v1"}


def test_protobuf_rows_equal_javas_reading(phase1):
    """Every Protobuf body protobuf-java wrote and sent is one row equal to what DynamicMessage.parseFrom reads."""
    _, sends, tables, _ = phase1
    proto = [s for s in sends if s["kind"] == "protobuf"]
    assert len(proto) == 45 and len(tables["orders"]) == len(proto)
    rows = _by_msg_id(tables["orders"])
    _assert_rows_equal_reference(proto, rows, fields=list(proto[0]["reference"]))


def test_avro_timestamps_keep_avros_zone_semantics(phase1):
    """Avro's timestamp-millis/-micros are instants (Java: Instant) and land as Delta ``timestamp`` (UTC);
    local-timestamp-millis/-micros are zone-less (Java: LocalDateTime; Spark's from_avro: TimestampNTZType) and must
    land as ``timestamp_ntz``, else a session in another time zone shows other wall-clock values than Java reads."""
    *_, config = phase1
    schema = query_tables("SELECT * FROM t LIMIT 0", {"t": str(config.table_path("payments"))}).schema
    types = {name: schema.field(name).type for name in ("paidAt", "bookedAt", "localAt", "localMicros")}
    assert types == {"paidAt": pa.timestamp("us", tz="UTC"), "bookedAt": pa.timestamp("us", tz="UTC"),
                     "localAt": pa.timestamp("us"), "localMicros": pa.timestamp("us")}, types


def test_avro_v2_adds_columns_old_rows_null_v1_bodies_resolved(phase1, phase2):
    """With ``[v1, v2]`` declared: the columns ``method`` and ``channel`` appear; the rows of phase 1 read them as
    null; the v1 and v2 bodies of phase 2 land as Java's decoder (reader v2) resolves them — a v1 body's
    ``channel`` is the default "web"."""
    _, _, before, _ = phase1
    sends, tables = phase2
    assert {s["version"] for s in sends} == {"v1", "v2"} and len(sends) == 60
    rows = _by_msg_id(tables["payments"])
    assert len(rows) == len(before["payments"]) + len(sends)
    assert tables["dead_letters"] == []
    for old in before["payments"]:
        row = rows[old["msgId"]]
        assert row["method"] is None and row["channel"] is None
        assert {k: v for k, v in row.items() if k not in ("method", "channel")}.keys() == old.keys()
    _assert_rows_equal_reference(sends, rows, fields=_field_names(PAYMENT_V2))
    assert {rows[s["offsetMsgId"]]["channel"] for s in sends if s["version"] == "v1"} == {"web"}


def test_avro_incompatible_v3_dead_letters_and_the_query_goes_on(phase2, phase3):
    """v3 bodies (paymentId: string -> record) with ``[v1, v2]`` declared: each is a dead letter of table payments
    with its body as sent and a one-line error naming the fingerprint Java wrote (no declared version has it); Java's
    decoder cannot read them either, nor resolve v3 to v2; the v2 bodies sent between and after them land equal
    to Java's reading, and rows + dead letters = records matched."""
    _, before = phase2
    fingerprints, sends, tables = phase3
    v3 = [s for s in sends if s["version"] == "v3"]
    v2 = [s for s in sends if s["version"] == "v2"]
    assert len(v3) == 15 and len(v2) == 15
    for s in v3:
        assert s["reference"] is None and "Cannot resolve schema for fingerprint" in s["referenceError"], s
        assert s["resolveError"] and "AvroTypeException" in s["resolveError"], s
    dead = _by_msg_id(tables["dead_letters"])
    assert set(dead) == {s["offsetMsgId"] for s in v3}
    for s in v3:
        letter = dead[s["offsetMsgId"]]
        assert (letter["table"], letter["topic"], letter["schema"]) == ("payments", AVRO_TOPIC, None)
        assert letter["body"].hex() == s["bodyHex"]
        assert "\n" not in letter["error"]
        assert f"unknown schema fingerprint {fingerprints[AVSC[3]]}" in letter["error"], letter["error"]
    rows = _by_msg_id(tables["payments"])
    assert len(rows) == len(before["payments"]) + len(v2)  # rows + dead letters = the 30 records matched
    _assert_rows_equal_reference(v2, rows, fields=_field_names(PAYMENT_V2))
    first_v3 = min(dead[s["offsetMsgId"]]["commitLogOffset"] for s in v3)
    after = [s for s in v2 if rows[s["offsetMsgId"]]["commitLogOffset"] > first_v3]
    assert len(after) == len(v2) - 1  # sent alternately, v2 first: all but one landed after a dead letter


def test_timestamps_in_the_last_microsecond_of_9999_land(spark, peers, schemas, tmp_path):
    """The latest extreme timestamps one microsecond before 10000-01-01 (Avro timestamp-micros and
    local-timestamp-micros 9999-12-31T23:59:59.999999, a google.protobuf.Timestamp of 253402300799 s + 999999999 ns):
    valid for both libraries and for Spark and Delta, they land equal to Java's reading like any other value."""
    avro_topic, proto_topic = "TypedAvroLastMicro", "TypedProtoLastMicro"
    _, sends = _java(peers, schemas, tmp_path / "java", start=3000, reader=1, known="1", send="1:3", proto=3,
                     avro_topic=avro_topic, proto_topic=proto_topic, max_time="micros")
    declaration = _declaration(schemas, [1], avro_topic=avro_topic, proto_topic=proto_topic, name="last-micro.toml")
    _, tables = _run_tables(spark, peers, tmp_path / "work", declaration)
    assert tables["dead_letters"] == []
    avro = [s for s in sends if s["kind"] == "avro"]
    assert avro[0]["reference"]["bookedAt"] == {"$instant": 253402300799999999}
    _assert_rows_equal_reference(avro, _by_msg_id(tables["payments"]), fields=_field_names(PAYMENT_V1))
    proto = [s for s in sends if s["kind"] == "protobuf"]
    _assert_rows_equal_reference(proto, _by_msg_id(tables["orders"]), fields=list(proto[0]["reference"]))
