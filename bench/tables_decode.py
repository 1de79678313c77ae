"""Body decoders of the typed tables (streaming_apps/tables/decode): rows/s on one core per format, 1 KiB bodies.

``.venv/bin/python -m bench.tables_decode [--rows N] [--batch N] [--passes N]``: the same payment event (14
fields, three order items, a note that pads the body to about 1 KiB) encoded per format by the format's own library,
then
``decoder.decode`` timed over batches of ``--batch`` bodies: each batch's least CPU time (of this one-threaded
process, so rows per CPU-second) over ``--passes`` passes over ``--rows`` bodies, summed.
Prints one JSON object: rows/s and body bytes per format. Decoding only: no Spark, no Delta.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import tempfile
import time
from pathlib import Path

import fastavro
import msgspec
import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from streaming_apps.tables.decode.base import decoder_for

F = descriptor_pb2.FieldDescriptorProto
FIELDS = [("id", "string"), ("customer", "string"), ("status", "string"), ("currency", "string"),
          ("region", "string"), ("amount", "long"), ("fee", "long"), ("createdMs", "long"), ("paid", "boolean"),
          ("score", "double"), ("attempt", "int"), ("channel", "string"), ("country", "string"), ("note", "string")]
ITEM = [("sku", "string"), ("qty", "int"), ("priceCents", "long")]
_PB = {"string": F.TYPE_STRING, "long": F.TYPE_INT64, "int": F.TYPE_INT32, "boolean": F.TYPE_BOOL,
       "double": F.TYPE_DOUBLE}
_TEXT = {"string": "string", "long": "int64", "int": "int32", "boolean": "bool", "double": "float64"}
_JSON = {"string": "string", "long": "integer", "int": "integer", "boolean": "boolean", "double": "number"}


def event(rng: random.Random, i: int, note: int) -> dict:
    return {"id": f"PAY-{i:09d}", "customer": f"C-{rng.randrange(10**6):06d}", "status": "PAID", "currency": "EUR",
            "region": "eu-west", "amount": rng.randrange(10**7), "fee": rng.randrange(1000),
            "createdMs": 1_790_000_000_000 + i, "paid": True, "score": rng.random(), "attempt": 1,
            "channel": "web", "country": "DE", "note": "x" * note,
            "items": [{"sku": f"SKU-{rng.randrange(200):04d}", "qty": rng.randrange(1, 5),
                       "priceCents": rng.randrange(10**5)} for _ in range(3)]}


def files(folder: Path) -> dict[str, dict]:
    """The schema files and settings of each format."""
    item = {"type": "record", "name": "Item", "fields": [{"name": n, "type": t} for n, t in ITEM]}
    avro = {"type": "record", "name": "Payment", "namespace": "bench", "fields": [
        *({"name": n, "type": t} for n, t in FIELDS), {"name": "items", "type": {"type": "array", "items": item}}]}
    (folder / "payment.avsc").write_text(json.dumps(avro))
    proto = descriptor_pb2.FileDescriptorProto(name="bench.proto", package="bench", syntax="proto3")
    item_pb = proto.message_type.add(name="Item")
    for number, (n, t) in enumerate(ITEM, 1):
        item_pb.field.add(name=n, number=number, type=_PB[t], label=F.LABEL_OPTIONAL)
    pay = proto.message_type.add(name="Payment")
    for number, (n, t) in enumerate(FIELDS, 1):
        pay.field.add(name=n, number=number, type=_PB[t], label=F.LABEL_OPTIONAL)
    pay.field.add(name="items", number=len(FIELDS) + 1, type=F.TYPE_MESSAGE, type_name=".bench.Item",
                  label=F.LABEL_REPEATED)
    (folder / "payment.desc").write_bytes(descriptor_pb2.FileDescriptorSet(file=[proto]).SerializeToString())
    item_js = {"type": "object", "properties": {n: {"type": _JSON[t]} for n, t in ITEM}}
    schema = {"type": "object", "required": [n for n, _ in FIELDS],
              "properties": {**{n: {"type": _JSON[t]} for n, t in FIELDS}, "items": {"type": "array",
                                                                                     "items": item_js}}}
    (folder / "payment.schema.json").write_text(json.dumps(schema))
    struct = ", ".join(f"{n}: {_TEXT[t]}" for n, t in ITEM)
    fields = {**{n: _TEXT[t] for n, t in FIELDS}, "items": f"list<struct<{struct}>>"}
    return {"avro": {"schema": "payment.avsc"}, "protobuf": {"schema": "payment.desc", "message": "bench.Payment"},
            "json": {"schema": "payment.schema.json"}, "json infer": {"schema": "infer"},
            "msgpack": {"fields": fields}, "string": {}, "bytes": {}}, avro, proto


def encoders(avro: dict, proto) -> dict:
    parsed = fastavro.parse_schema(avro)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    payment = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Payment"))

    def avro_body(e):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, e)
        return out.getvalue()

    def text_body(e):
        return f"{e['id']} {e['customer']} {e['note']}".encode()

    return {"avro": avro_body, "protobuf": lambda e: payment(**e).SerializeToString(), "json": msgspec.json.encode,
            "json infer": msgspec.json.encode, "msgpack": msgspec.msgpack.encode, "string": text_body,
            "bytes": text_body}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings, avro, proto = files(Path(tmp))
        for name, encode in encoders(avro, proto).items():
            fmt = name.split()[0]
            pad = 1024 - len(encode(event(rng, 0, 0)))
            column = [encode(event(rng, i, pad)) for i in range(args.rows)]
            batches = [pa.array(column[i:i + args.batch], pa.binary()) for i in range(0, args.rows, args.batch)]
            decoder = decoder_for(fmt, settings[name], Path(tmp))
            best = [float("inf")] * len(batches)  # each batch's least CPU time over the passes
            for _ in range(args.passes):
                for index, batch in enumerate(batches):
                    start = time.process_time()
                    decoded = decoder.decode(batch)
                    best[index] = min(best[index], time.process_time() - start)
            assert all(e is None for e in decoded.errors), decoded.errors[:3]
            out[name] = {"rows_per_s": round(args.rows / sum(best)),
                         "body_bytes": round(sum(map(len, column)) / args.rows)}
    print(json.dumps({"rows": args.rows, "batch": args.batch, "results": out}, indent=1))


if __name__ == "__main__":
    main()
