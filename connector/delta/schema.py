"""Schema checks of the Delta writers: a stream appends to a table only with the same columns and types.

No schema evolution: column names and types must be equal (order and nullability are not compared,
Parquet columns are resolved by name), and partition columns must be top-level atomic columns. Types
are compared in Delta's schema JSON, which is Spark's (Delta protocol "Schema Serialization Format").
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyspark.sql.types import StructType

from connector.errors import DeltaSchemaMismatchError, DeltaSinkConfigError


def _normalize_type(t):
    """A Delta/Spark JSON type without nullability and metadata, for comparisons."""
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "struct":
        return {"type": "struct", "fields": [(f["name"], _normalize_type(f["type"])) for f in t["fields"]]}
    if kind == "array":
        return {"type": "array", "elementType": _normalize_type(t["elementType"])}
    if kind == "map":
        return {"type": "map", "keyType": _normalize_type(t["keyType"]), "valueType": _normalize_type(t["valueType"])}
    return t


def _type_name(t) -> str:
    """Spark SQL spelling of a normalized type (``struct<a:long>``, ``array<string>``...)."""
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "struct":
        return "struct<" + ",".join(f"{n}:{_type_name(ft)}" for n, ft in t["fields"]) + ">"
    if kind == "array":
        return f"array<{_type_name(t['elementType'])}>"
    if kind == "map":
        return f"map<{_type_name(t['keyType'])},{_type_name(t['valueType'])}>"
    return json.dumps(t)


def delta_schema_of(schema: StructType):
    """The deltalake Schema of a Spark StructType (Delta's schema JSON is Spark's).

    Raises:
        DeltaSinkConfigError: a Spark type Delta cannot store (e.g. intervals).
    """
    from deltalake import Schema

    try:
        return Schema.from_json(schema.json())
    except Exception as e:  # delta-rs raises plain exceptions for unknown types
        raise DeltaSinkConfigError(
            f"the stream's schema cannot be stored in Delta: {e}; schema {schema.simpleString()}") from e


def check_schema_matches(table_uri: str, table_schema_json: str, table_partition_by: Sequence[str],
                         schema: StructType, partition_by: Sequence[str] | None) -> None:
    """Check that a stream may append to an existing table (no schema evolution).

    Column names and types must be equal (order and nullability are not compared; Parquet columns are
    resolved by name); ``partition_by``, when given, must equal the table's partition columns.

    Raises:
        DeltaSchemaMismatchError: naming the missing/extra columns and the differing types.
    """
    table_fields = {f["name"]: _normalize_type(f["type"]) for f in json.loads(table_schema_json)["fields"]}
    stream_fields = {f["name"]: _normalize_type(f["type"]) for f in json.loads(schema.json())["fields"]}
    missing_in_stream = [n for n in table_fields if n not in stream_fields]
    missing_in_table = [n for n in stream_fields if n not in table_fields]
    mismatches = {n: (_type_name(table_fields[n]), _type_name(stream_fields[n]))
                  for n in table_fields if n in stream_fields and table_fields[n] != stream_fields[n]}
    problems = []
    if missing_in_stream:
        problems.append(f"table columns missing in the stream: {', '.join(missing_in_stream)}")
    if missing_in_table:
        problems.append(f"stream columns not in the table: {', '.join(missing_in_table)}")
    for n, (tt, st) in mismatches.items():
        problems.append(f"column {n} is {tt} in the table but {st} in the stream")
    if partition_by is not None and list(partition_by) != list(table_partition_by):
        problems.append(f"partitionBy {list(partition_by)} differs from the table's partition columns "
                        f"{list(table_partition_by)}")
    if problems:
        raise DeltaSchemaMismatchError(
            f"the stream's schema does not match Delta table {table_uri}: " + "; ".join(problems),
            missing_in_stream=missing_in_stream, missing_in_table=missing_in_table, type_mismatches=mismatches)


_PARTITION_TYPES = ("string", "long", "integer", "short", "byte", "boolean", "date", "timestamp", "timestamp_ntz",
                    "float", "double")


def check_partition_columns(table_uri: str, schema: StructType, partition_by: Sequence[str]) -> None:
    """Partition columns must be top-level columns of an atomic, non-binary type, and not all columns.

    Raises:
        DeltaSinkConfigError: naming the offending column.
    """
    fields = {f["name"]: f["type"] for f in json.loads(schema.json())["fields"]}
    for name in partition_by:
        if name not in fields:
            raise DeltaSinkConfigError(
                f"partition column {name} of table {table_uri} is not a column of the stream ({', '.join(fields)})")
        t = fields[name]
        if not (isinstance(t, str) and (t in _PARTITION_TYPES or t.startswith("decimal"))):
            raise DeltaSinkConfigError(
                f"partition column {name} of table {table_uri} has type {_type_name(_normalize_type(t))}, "
                "which cannot be a partition column")
    if partition_by and len(partition_by) >= len(fields):
        raise DeltaSinkConfigError(f"table {table_uri} cannot be partitioned by every column {list(partition_by)}")

