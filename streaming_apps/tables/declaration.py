"""The declaration file of ``hareplica run tables``: which topics become which typed Delta tables (docs/tables.md).
Every key is declared once here (:data:`FILE_KEYS`, :data:`TABLE_KEYS`: type, default, meaning); the file is read
and checked on the driver before Spark starts, each problem one line naming the file, the table and the key.
"""

from __future__ import annotations

import base64
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connector.errors import HAReplicaError, HAReplicaOptionError
from connector.options.parse import parse_tag_expression
from connector.protocol.topics import validate_topic
from streaming_apps.tables.columns import PROPERTY_COLUMN_PREFIX, ROCKETMQ_COLUMNS, STORE_DATE

FORMATS = ("avro", "protobuf", "json", "msgpack", "string", "bytes")
MODES = ("append", "upsert")
ON_ERROR = ("dead-letter", "fail")
#: Upsert key that means the message's KEYS property (the whole string: several space-separated keys are one key).
KEYS_KEY = "keys"
#: ``tombstone`` values: a record with an empty body, or one carrying a user property (``property:NAME``, any
#: value; ``property:NAME=VALUE``, that value) deletes its key.
EMPTY_BODY = "empty-body"
#: A table name: a Delta table folder under the tables root.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True)
class Key:
    """One declaration key: its TOML type name, default (None: required or absent) and meaning."""

    type: str
    default: Any
    doc: str


#: Keys at the top of the file.
FILE_KEYS: dict[str, Key] = {
    "dead_letter_table": Key("string", "dead_letters", "the table of the records that did not decode (one per "
                             "declaration)"),
    "table": Key("array of tables", None, "the tables, each a [[table]] section"),
}
#: Keys of a ``[[table]]`` section.
TABLE_KEYS: dict[str, Key] = {
    "name": Key("string", None, "the Delta table's name: a folder under the tables root (required)"),
    "topics": Key("array of strings", None, "the topics whose messages the table holds (required)"),
    "tags": Key("string", "*", "a tag expression, TagA || TagB, as the source's subscribe takes; * for every tag"),
    "format": Key("string", None, f"the body format: {', '.join(FORMATS)} (required)"),
    "schema": Key("string or array", None, "avro: an .avsc file or a list of versions, oldest first; protobuf: a "
                  "descriptor set; json: a JSON Schema file or \"infer\"; paths relative to the declaration"),
    "message": Key("string", None, "protobuf: the message's full name in the descriptor set"),
    "fields": Key("table", None, "msgpack: field name = type, e.g. amountCents = \"int64\""),
    "version_property": Key("string", None, "avro without single-object encoding: the user property naming the "
                            "writer schema version (file name or 1-based index)"),
    "columns": Key("array of strings", [], "RocketMQ columns kept beside the fields: "
                   f"{', '.join(ROCKETMQ_COLUMNS)}, or property:NAME"),
    "dates": Key("table", {}, "date columns: column name = a timestamp field, the column holding that field's UTC "
                 "day, e.g. eventDate = \"eventTimeMs\""),
    "partition_by": Key("array of strings", [], f"partition columns: fields, kept columns, date columns, or "
                        f"{STORE_DATE}"),
    "mode": Key("string", "append", f"the write mode: {', '.join(MODES)}"),
    "key": Key("array of strings", None, f"upsert: the key columns: fields or kept columns; [\"{KEYS_KEY}\"] is the "
               "message's KEYS string (kept as the keys column)"),
    "tombstone": Key("string", None, f"upsert: the records that delete their key: \"{EMPTY_BODY}\", "
                     "\"property:NAME\" (the message has the user property) or \"property:NAME=VALUE\"; none: "
                     "no record deletes"),
    "on_error": Key("string", "dead-letter", f"a record that does not decode: {', '.join(ON_ERROR)}"),
}


class DeclarationError(HAReplicaError, ValueError):
    """A declaration file that cannot be used: one line naming the file, the table and the key."""


@dataclass(frozen=True)
class TableSpec:
    """One ``[[table]]`` of a declaration, checked; ``settings``: what the body decoder of ``format`` takes
    (``schema``, ``message``, ``fields``, ``version_property``), with schema paths made absolute."""

    name: str
    topics: tuple[str, ...]
    tags: frozenset[str] | None
    format: str
    settings: Mapping[str, Any]
    columns: tuple[str, ...]
    partition_by: tuple[str, ...]
    mode: str
    key: tuple[str, ...]
    on_error: str
    tombstone: str | None = None
    dates: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Declaration:
    """A declaration file, checked: its path, the dead-letter table's name and the tables in file order."""

    path: Path
    dead_letter_table: str
    tables: tuple[TableSpec, ...]

    @property
    def table_names(self) -> tuple[str, ...]:
        """Every table the declaration writes: its tables, then the dead-letter table."""
        return (*(t.name for t in self.tables), self.dead_letter_table)

    @property
    def subscribe(self) -> str:
        """The source's ``subscribe`` value that reads only what the tables need (one entry per topic; a topic two
        tables read with different tags gets every tag, ``*``)."""
        wanted: dict[str, set[str] | None] = {}
        for table in self.tables:
            for topic in table.topics:
                if table.tags is None or (topic in wanted and wanted[topic] is None):
                    wanted[topic] = None
                else:
                    wanted[topic] = set(wanted.get(topic) or ()) | set(table.tags)
        return ",".join(f"{t}:{' || '.join(sorted(tags))}" if tags else t for t, tags in wanted.items())

    def to_json(self) -> str:
        """The declaration as the tasks get it (``landingSplitConfig``): each table's settings with the schema
        files' bytes inside (base64), since executors do not see the driver's files."""
        tables = []
        for t in self.tables:
            settings = dict(t.settings)
            files = {}
            for path in _schema_paths(settings.get("schema")):
                files[Path(path).name] = base64.b64encode(Path(path).read_bytes()).decode("ascii")
            if "schema" in settings and settings["schema"] != "infer":
                schema = settings["schema"]
                settings["schema"] = [Path(p).name for p in schema] if isinstance(schema, list) else Path(schema).name
            tables.append({"name": t.name, "topics": list(t.topics), "tags": sorted(t.tags) if t.tags else None,
                           "format": t.format, "settings": settings, "files": files, "columns": list(t.columns),
                           "partitionBy": list(t.partition_by), "mode": t.mode, "key": list(t.key),
                           "tombstone": t.tombstone, "onError": t.on_error, "dates": [list(d) for d in t.dates]})
        return json.dumps({"deadLetterTable": self.dead_letter_table, "tables": tables})


def _schema_paths(schema: Any) -> list[str]:
    if schema is None or schema == "infer":
        return []
    return list(schema) if isinstance(schema, list) else [schema]


def load_declaration(path: str | Path) -> Declaration:
    """Read and check the declaration file at ``path`` (TOML; keys in :data:`FILE_KEYS` and :data:`TABLE_KEYS`).

    Raises:
        DeclarationError: the file cannot be read or is not TOML (the line), an unknown or missing key, a value of
            the wrong type or outside its choices, a missing schema file, a tag expression in SQL92, two tables
            with one name, an upsert without a key, a tombstone or key without upsert, an upsert partitioned by a
            column outside its key — one line naming the file, the table and the key.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DeclarationError(f"{path}: cannot read the declaration: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise DeclarationError(f"{path}: not a TOML file: {e}") from None
    return parse_declaration(text, path)


def parse_declaration(text: str, path: str | Path) -> Declaration:
    """Check the declaration ``text`` (TOML) as :func:`load_declaration` checks a file; ``path`` names it in the
    errors, and relative schema paths are relative to its folder (a built-in declaration, such as the silver
    app's, has no file of its own).

    Raises:
        DeclarationError: as :func:`load_declaration`.
    """
    path = Path(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DeclarationError(f"{path}: not a TOML file: {e}") from None
    unknown = sorted(set(data) - set(FILE_KEYS))
    if unknown:
        raise DeclarationError(f"{path}: unknown key {unknown[0]} (keys: {', '.join(FILE_KEYS)}; a table's keys go "
                               "in a [[table]] section)")
    dead = data.get("dead_letter_table", FILE_KEYS["dead_letter_table"].default)
    if not isinstance(dead, str) or not _NAME.match(dead):
        raise DeclarationError(f"{path}: dead_letter_table {dead!r} must be a table name (letters, digits, _)")
    raw_tables = data.get("table")
    if not isinstance(raw_tables, list) or not raw_tables:
        raise DeclarationError(f"{path}: no [[table]] section: declare at least one table")
    tables = tuple(_table(path, i, raw) for i, raw in enumerate(raw_tables, 1))
    seen: set[str] = {dead}
    for table in tables:
        if table.name in seen:
            what = "the dead_letter_table" if table.name == dead else "another table"
            raise DeclarationError(f"{path}: table {table.name}: name is the name of {what}")
        seen.add(table.name)
    return Declaration(path=path.resolve(), dead_letter_table=dead, tables=tables)


def _table(path: Path, index: int, raw: Any) -> TableSpec:
    where = f"{path}: table #{index}"
    if not isinstance(raw, dict):
        raise DeclarationError(f"{where}: must be a [[table]] section")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise DeclarationError(f"{where}: name {name!r} must be a table name (letters, digits, _; required)")
    where = f"{path}: table {name}"

    def fail(key: str, problem: str) -> DeclarationError:
        return DeclarationError(f"{where}: {key}: {problem}")

    unknown = sorted(set(raw) - set(TABLE_KEYS))
    if unknown:
        raise fail(unknown[0], f"unknown key (keys: {', '.join(TABLE_KEYS)})")
    topics = raw.get("topics")
    if not isinstance(topics, list) or not topics or not all(isinstance(t, str) for t in topics):
        raise fail("topics", "must be a non-empty list of topic names")
    for topic in topics:
        problem = validate_topic(topic)
        if problem:
            raise fail("topics", f"{topic!r}: {problem}")
    tags_text = raw.get("tags", TABLE_KEYS["tags"].default)
    if not isinstance(tags_text, str):
        raise fail("tags", "must be a tag expression string, TagA || TagB")
    try:
        tags = parse_tag_expression(tags_text, topics[0], tags_text)
    except HAReplicaOptionError as e:
        raise fail("tags", str(e).split(": ", 2)[-1]) from None
    fmt = raw.get("format")
    if fmt not in FORMATS:
        raise fail("format", f"{fmt!r} is not one of {', '.join(FORMATS)}")
    settings = _format_settings(path, raw, fmt, fail)
    columns = _strings(raw, "columns", fail)
    for column in columns:
        if column not in ROCKETMQ_COLUMNS and not (column.startswith(PROPERTY_COLUMN_PREFIX)
                                                   and len(column) > len(PROPERTY_COLUMN_PREFIX)):
            raise fail("columns", f"{column!r} is not one of {', '.join(ROCKETMQ_COLUMNS)} or property:NAME")
    dates = _dates(raw, fail)
    partition_by = _strings(raw, "partition_by", fail)
    mode = raw.get("mode", TABLE_KEYS["mode"].default)
    if mode not in MODES:
        raise fail("mode", f"{mode!r} is not one of {', '.join(MODES)}")
    key = _strings(raw, "key", fail) if "key" in raw else ()
    if mode == "upsert" and not key:
        raise fail("key", "an upsert table needs its key: fields, or [\"keys\"] for the message keys")
    if mode == "append" and key:
        raise fail("key", "only an upsert table has a key (mode = \"upsert\")")
    tombstone = raw.get("tombstone", TABLE_KEYS["tombstone"].default)
    if tombstone is not None:
        if mode != "upsert":
            raise fail("tombstone", "only an upsert table has tombstones (mode = \"upsert\")")
        prop = tombstone[len(PROPERTY_COLUMN_PREFIX):].split("=", 1)[0] if isinstance(tombstone, str) and \
            tombstone.startswith(PROPERTY_COLUMN_PREFIX) else None
        if tombstone != EMPTY_BODY and not prop:
            raise fail("tombstone", f"{tombstone!r} is not \"{EMPTY_BODY}\", \"property:NAME\" or "
                                    "\"property:NAME=VALUE\"")
    if mode == "upsert":
        outside = [p for p in partition_by if p not in key]
        if outside:
            raise fail("partition_by", f"{outside[0]!r} is not in key: an upsert table is partitioned by key "
                                       "columns only, so that a key's rows stay in one partition")
        if KEYS_KEY in key and KEYS_KEY not in columns:
            columns.append(KEYS_KEY)  # the key is the keys column
    on_error = raw.get("on_error", TABLE_KEYS["on_error"].default)
    if on_error not in ON_ERROR:
        raise fail("on_error", f"{on_error!r} is not one of {', '.join(ON_ERROR)}")
    return TableSpec(name=name, topics=tuple(topics), tags=tags, format=fmt, settings=settings,
                     columns=tuple(columns), partition_by=tuple(partition_by), mode=mode, key=tuple(key),
                     on_error=on_error, tombstone=tombstone, dates=dates)


def _dates(raw: dict, fail) -> tuple[tuple[str, str], ...]:
    """The ``dates`` key: ((column, timestamp field), ...) in file order; whether the field is a timestamp is
    checked with the decoder's schema (:func:`streaming_apps.tables.columns.table_schema`)."""
    value = raw.get("dates", TABLE_KEYS["dates"].default)
    if not isinstance(value, dict):
        raise fail("dates", "must be a table of column name = timestamp field, e.g. { eventDate = \"eventTimeMs\" }")
    for column, field in value.items():
        if not _NAME.match(column):
            raise fail("dates", f"{column!r} must be a column name (letters, digits, _)")
        if not isinstance(field, str) or not field:
            raise fail("dates", f"{column}: {field!r} must be the name of a timestamp field of the body")
    return tuple(value.items())


def _strings(raw: dict, key: str, fail) -> list[str]:
    value = raw.get(key, TABLE_KEYS[key].default)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise fail(key, "must be a list of names")
    if len(set(value)) != len(value):
        raise fail(key, "names a column twice")
    return list(value)


def _format_settings(path: Path, raw: dict, fmt: str, fail) -> dict[str, Any]:
    """The decoder settings of one table, schema files checked to exist and made absolute."""
    needs = {"avro": ("schema",), "protobuf": ("schema", "message"), "json": ("schema",), "msgpack": ("fields",),
             "string": (), "bytes": ()}[fmt]
    allowed = set(needs) | ({"version_property"} if fmt == "avro" else set())
    for key in ("schema", "message", "fields", "version_property"):
        if key in raw and key not in allowed:
            raise fail(key, f"a {fmt} table takes no {key}")
        if key in needs and key not in raw:
            raise fail(key, f"a {fmt} table needs it")
    settings: dict[str, Any] = {k: raw[k] for k in allowed if k in raw}
    schema = settings.get("schema")
    if schema is not None and not (fmt == "json" and schema == "infer"):
        if fmt == "avro" and isinstance(schema, list) and schema and all(isinstance(s, str) for s in schema):
            files = schema
        elif isinstance(schema, str):
            files = [schema]
        else:
            raise fail("schema", "must be a file path" + (" or a list of them" if fmt == "avro" else ""))
        resolved = []
        for name in files:
            file = (path.parent / name).resolve()
            if not file.is_file():
                raise fail("schema", f"no file {file}")
            resolved.append(str(file))
        settings["schema"] = resolved if isinstance(schema, list) else resolved[0]
    if "message" in settings and not isinstance(settings["message"], str):
        raise fail("message", "must be the message's full name, e.g. shop.Payment")
    if "fields" in settings and (not isinstance(settings["fields"], dict) or not settings["fields"]):
        raise fail("fields", "must be a table of field name = type")
    return settings
