"""The source's schema: one row per stored message, columns named as RocketMQ's MessageExt.

The columns and their meaning: docs/source.md "Rows".

Timestamps are epoch milliseconds as stored, typed as Spark's TimestampType (UTC, microsecond unit,
millisecond values). :data:`ARROW_SCHEMA` and :func:`spark_schema` derive from the same :data:`COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa

#: Arrow type of bornTimestamp / storeTimestamp (values are stored milliseconds x 1000).
TIMESTAMP = pa.timestamp("us", tz="UTC")

#: (name, arrow type, nullable) in column order; the Spark schema is derived from the same list.
COLUMNS: tuple[tuple[str, pa.DataType, bool], ...] = (
    ("topic", pa.string(), False),
    ("queueId", pa.int32(), False),
    ("queueOffset", pa.int64(), False),
    ("commitLogOffset", pa.int64(), False),
    ("storeSize", pa.int32(), False),
    ("bodyCRC", pa.int32(), False),
    ("flag", pa.int32(), False),
    ("sysFlag", pa.int32(), False),
    ("bornTimestamp", TIMESTAMP, False),
    ("bornHost", pa.string(), False),
    ("storeTimestamp", TIMESTAMP, False),
    ("storeHost", pa.string(), False),
    ("reconsumeTimes", pa.int32(), False),
    ("preparedTransactionOffset", pa.int64(), False),
    ("msgId", pa.string(), False),
    ("uniqKey", pa.string(), True),
    ("tags", pa.string(), True),
    ("keys", pa.string(), True),
    ("properties", pa.map_(pa.string(), pa.string()), False),
    ("body", pa.binary(), False),
    ("broker", pa.string(), False),
    ("decodeError", pa.string(), True),
)

#: The schema of every RecordBatch the source yields (equal to Spark's ``to_arrow_schema(spark_schema())``).
ARROW_SCHEMA = pa.schema([pa.field(name, typ, nullable=nullable) for name, typ, nullable in COLUMNS])


def spark_schema():
    """The source's Spark ``StructType`` (same names, order and nullability as :data:`ARROW_SCHEMA`)."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    spark_types = {
        pa.string(): StringType(), pa.int32(): IntegerType(), pa.int64(): LongType(), TIMESTAMP: TimestampType(),
        pa.binary(): BinaryType(), pa.map_(pa.string(), pa.string()): MapType(StringType(), StringType(), True),
    }
    return StructType([StructField(name, spark_types[typ], nullable) for name, typ, nullable in COLUMNS])


def column_subset(schema) -> tuple[str, ...] | None:
    """The column names of a user-specified schema (``.schema(...)`` on the reader): None for no schema or the
    whole :func:`spark_schema`, else its names, each a column of spark_schema with the same type.

    Raises:
        ValueError: a name that is no column of the source, or a column given another type (the message
            names it).
    """
    full = spark_schema()
    if schema is None or schema == full:
        return None
    types = {f.name: f.dataType for f in full.fields}
    for f in schema.fields:
        if f.name not in types:
            raise ValueError(f"{f.name} is not a column of format(\"hareplica\") (its columns: {', '.join(types)})")
        if f.dataType != types[f.name]:
            raise ValueError(f"column {f.name} is {types[f.name].simpleString()}, not {f.dataType.simpleString()}")
    return tuple(f.name for f in schema.fields)


def column_schema(columns: Collection[str] | None) -> pa.Schema:
    """:data:`ARROW_SCHEMA`, or only its ``columns`` (in its own order) when given.

    Raises ValueError naming a column that is not the source's (docs/source.md "Rows").
    """
    if columns is None:
        return ARROW_SCHEMA
    unknown = sorted(set(columns) - set(ARROW_SCHEMA.names))
    if unknown:
        raise ValueError(f"not a column of the source: {', '.join(unknown)} "
                         f"(the columns: {', '.join(ARROW_SCHEMA.names)})")
    return pa.schema([f for f in ARROW_SCHEMA if f.name in columns])
