"""The body decoders' interface and :func:`decoder_for`, which makes a table's decoder from its declaration.

Interface (defined in :mod:`streaming_apps.tables.decode.contract`, re-exported here):

* :class:`BodyDecoder` -- ``format``; ``schema`` (the decoded fields' Arrow schema, every field nullable);
  ``decode(bodies, properties=None) -> Decoded`` (bodies: ``pa.binary()`` or ``pa.large_binary()``, nulls
  allowed; properties: the rows' RocketMQ user properties).
* :class:`Decoded` -- ``fields`` (one row per body, a failed row all null), ``errors`` (None or one line per row),
  ``schemas`` (the schema each row was tried against).
* :class:`BodyFormatError` -- a declaration the decoders cannot set up, one line naming the setting and the file.

Formats and their settings (the declaration's keys; docs/tables.md): ``avro`` -- ``schema`` (one ``.avsc`` path or
a list, oldest version first), ``version_property``; ``protobuf`` -- ``schema`` (a descriptor set), ``message``;
``json`` -- ``schema`` (a JSON Schema file or ``"infer"``); ``msgpack`` -- ``fields``; ``string``, ``bytes`` --
none. Each format's rules: its module's doc.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streaming_apps.tables.decode.avro import AvroDecoder
from streaming_apps.tables.decode.contract import (
    BodyDecoder,
    BodyFormatError,
    Decoded,
    read_bytes,
    read_text,
    schema_file,
)
from streaming_apps.tables.decode.json_bodies import INFER, JsonInferDecoder, JsonSchemaDecoder
from streaming_apps.tables.decode.msgpack_bodies import MsgpackDecoder
from streaming_apps.tables.decode.plain import BytesDecoder, StringDecoder
from streaming_apps.tables.decode.protobuf import ProtobufDecoder

__all__ = ["FORMATS", "BodyDecoder", "BodyFormatError", "Decoded", "decoder_for"]

#: every body format a table can declare
FORMATS = ("avro", "protobuf", "json", "msgpack", "string", "bytes")


def _avro(settings: Mapping[str, Any], base_dir: Path) -> AvroDecoder:
    paths = settings.get("schema")
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths:
        raise BodyFormatError(f"setting schema: expected an .avsc path or a list of them, got {paths!r}")
    versions = [(p, read_text("schema", schema_file("schema", p, base_dir))) for p in paths]
    prop = settings.get("version_property")
    if prop is not None and (not isinstance(prop, str) or not prop):
        raise BodyFormatError(f"setting version_property: expected a property name, got {prop!r}")
    return AvroDecoder(versions, prop)


def _protobuf(settings: Mapping[str, Any], base_dir: Path) -> ProtobufDecoder:
    path = schema_file("schema", settings.get("schema"), base_dir)
    message = settings.get("message")
    if not isinstance(message, str) or not message:
        raise BodyFormatError(f"setting message: protobuf needs the message's full name (e.g. shop.Payment), "
                              f"got {message!r}")
    return ProtobufDecoder(read_bytes("schema", path), message, settings["schema"])


def _json(settings: Mapping[str, Any], base_dir: Path) -> JsonSchemaDecoder | JsonInferDecoder:
    schema = settings.get("schema")
    if schema == INFER:
        return JsonInferDecoder()
    return JsonSchemaDecoder(read_text("schema", schema_file("schema", schema, base_dir)), schema)


_MAKERS = {
    "avro": _avro,
    "protobuf": _protobuf,
    "json": _json,
    "msgpack": lambda settings, base_dir: MsgpackDecoder(settings.get("fields")),
    "string": lambda settings, base_dir: StringDecoder(),
    "bytes": lambda settings, base_dir: BytesDecoder(),
}


def decoder_for(format: str, settings: Mapping[str, Any], base_dir: Path) -> BodyDecoder:
    """The decoder of a table whose body ``format`` and ``settings`` (the table's keys; keys other than the
    format's are ignored) are declared in a file in ``base_dir`` (relative schema paths are relative to it).

    Raises:
        BodyFormatError: an unknown format, a missing or unreadable schema file, a descriptor set without the
            message, a bad Avro schema or JSON Schema, a bad type text: one line naming the setting and the file.
    """
    make = _MAKERS.get(format) if isinstance(format, str) else None
    if make is None:
        raise BodyFormatError(f"setting format: unknown body format {format!r} (one of {', '.join(FORMATS)})")
    return make(settings, Path(base_dir))
