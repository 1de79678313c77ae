"""The columns of the declared tables beside their decoded fields — RocketMQ's (``keys``, ``tags``,
``storeTimestamp``...), one user property, ``storeDate`` — and of the dead-letter table; the same rules on the
driver (the tables' schemas) and in the tasks (the rows). docs/tables.md "Columns".
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.arrow_numpy import binary_array, from_numpy, to_numpy
from connector.decode.schema import ARROW_SCHEMA
from connector.landing.rows import STORE_DATE, US_PER_DAY

#: RocketMQ columns a table may keep beside its fields (the source's names and types, docs/columns.md); plus
#: ``property:NAME`` for one user property (a string column named NAME).
ROCKETMQ_COLUMNS = ("keys", "tags", "storeTimestamp", "bornTimestamp", "msgId", "broker", "queueId", "queueOffset",
                    "commitLogOffset", "topic", "properties")
PROPERTY_COLUMN_PREFIX = "property:"
#: The dead-letter table: where each record came from, its raw body, the schema it was tried against, the error.
DEAD_LETTER_SCHEMA = pa.schema([
    pa.field("table", pa.string()), pa.field("topic", pa.string()), pa.field("broker", pa.string()),
    pa.field("queueId", pa.int32()), pa.field("queueOffset", pa.int64()), pa.field("commitLogOffset", pa.int64()),
    pa.field("msgId", pa.string()), pa.field("storeTimestamp", pa.timestamp("us", tz="UTC")),
    pa.field("body", pa.binary()), pa.field("schema", pa.string()), pa.field("error", pa.string()),
])

__all__ = ["DEAD_LETTER_SCHEMA", "PROPERTY_COLUMN_PREFIX", "ROCKETMQ_COLUMNS", "STORE_DATE", "column_field",
           "day_of", "kept_column", "store_date", "table_schema"]


def column_field(column: str) -> pa.Field:
    """The Arrow field of a kept column (a :data:`ROCKETMQ_COLUMNS` name or ``property:NAME``), nullable."""
    if column.startswith(PROPERTY_COLUMN_PREFIX):
        return pa.field(column[len(PROPERTY_COLUMN_PREFIX):], pa.string())
    return pa.field(column, ARROW_SCHEMA.field(column).type)


def kept_column(records: pa.RecordBatch, column: str) -> pa.Array:
    """The values of a kept column for ``records`` (source rows): the source's column, or one user property
    (null where the record lacks it)."""
    if not column.startswith(PROPERTY_COLUMN_PREFIX):
        return records.column(column)
    name = column[len(PROPERTY_COLUMN_PREFIX):]
    return pc.map_lookup(records.column("properties"), binary_array([name], pa.string())[0], "first")


def day_of(timestamps: pa.Array) -> pa.Array:
    """The UTC day (date32) of each timestamp, floored (a time before 1970 is in its own day), null where it is
    null: a ``dates`` column of a declared table."""
    return timestamps.cast(pa.date32())


def store_date(records: pa.RecordBatch) -> pa.Array:
    """floor(storeTimestamp / 1 day) as date32 (UTC), bronze's ``storeDate``."""
    micros = to_numpy(records.column("storeTimestamp"))
    return from_numpy(np.floor_divide(micros, US_PER_DAY), pa.date32())


def _normalized(t: pa.DataType) -> pa.DataType:
    """The type a Delta table stores for ``t``: timestamps in µs — UTC for an instant, none for a zone-less local
    time (Delta's ``timestamp_ntz``, Spark's TimestampNTZType) — large strings and binaries as plain ones."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=None if t.tz is None else "UTC")
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_normalized(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _normalized(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_normalized(t.key_type), _normalized(t.item_type))
    return t


def _no_delta_type(t: pa.DataType) -> str | None:
    """Why a Delta table cannot hold ``t`` (a time of day: Delta has no such type), or None."""
    if pa.types.is_time(t):
        return f"{t} (a time of day, e.g. Avro's time-millis / time-micros) has no Delta type"
    for child in (t.value_type,) if (pa.types.is_list(t) or pa.types.is_large_list(t)) else \
            [f.type for f in t] if pa.types.is_struct(t) else (t.key_type, t.item_type) if pa.types.is_map(t) else ():
        problem = _no_delta_type(child)
        if problem:
            return problem
    return None


def table_schema(fields: pa.Schema, columns: tuple[str, ...], partition_by: tuple[str, ...],
                 dates: tuple[tuple[str, str], ...] = ()) -> pa.Schema:
    """A declared table's Arrow schema: the decoded ``fields``, the kept ``columns``, the ``dates`` columns
    ((column, timestamp field) pairs: date32, the field's UTC day), then ``storeDate`` when it partitions the table;
    every field nullable, types as Delta stores them.

    Raises:
        ValueError: a field of a type Delta has not (a time of day), a date column whose field is not a timestamp
            field of the body, two columns of one name (a field, a kept column, a date column), or a partition
            column that is none of them.
    """
    for f in fields:
        problem = _no_delta_type(f.type)
        if problem:
            raise ValueError(f"field {f.name}: {problem}")
    out = [pa.field(f.name, _normalized(f.type)) for f in fields]
    out += [column_field(c) for c in columns]
    for column, field in dates:
        if field not in fields.names or not pa.types.is_timestamp(fields.field(field).type):
            found = f"of type {fields.field(field).type}" if field in fields.names else "not a field of the body"
            raise ValueError(f"dates: {column}: {field!r} is {found}: a date column needs a timestamp field")
        out.append(pa.field(column, pa.date32()))
    if STORE_DATE in partition_by:
        out.append(pa.field(STORE_DATE, pa.date32()))
    names = [f.name for f in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"column {twice[0]} is named twice (a field of the body, a kept column, a date column)")
    missing = [p for p in partition_by if p not in names]
    if missing:
        raise ValueError(f"partition_by {missing[0]!r} is neither a field nor a kept column nor a date column nor "
                         f"{STORE_DATE}")
    return pa.schema(out)
