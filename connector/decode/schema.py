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

#: Columns built only when a schema names them (never in the default schema): what a byte-exact restore of the
#: record needs beside the default columns (docs/restore.md "The columns bronze keeps"). ``storedBody``: the
#: BODY as stored when ``body`` holds other bytes (a decompressed body), else null; ``storedProperties``: the
#: PROPERTIES as stored when re-encoding ``properties`` (in its order) would not give them, else null;
#: ``recordFormat``: :data:`RECORD_FORMAT_V2` | :data:`RECORD_FORMAT_TRAILING_SEPARATOR` bits;
#: ``mappedFileSizeCommitLog``: the broker's CommitLog file size (bytes) when the record was read.
RESTORE_COLUMNS: tuple[tuple[str, pa.DataType, bool], ...] = (
    ("storedBody", pa.binary(), True),
    ("storedProperties", pa.binary(), True),
    ("recordFormat", pa.int32(), True),
    ("mappedFileSizeCommitLog", pa.int32(), True),
)
#: recordFormat bit: the record is a MessageVersion V2 record (MAGICCODE MESSAGE_MAGIC_CODE_V2, RocketMQ 5.x).
RECORD_FORMAT_V2 = 1
#: recordFormat bit: PROPERTIES end with a PROPERTY_SEPARATOR after the last pair (the 4.9.0 client's form).
RECORD_FORMAT_TRAILING_SEPARATOR = 2
#: :data:`ARROW_SCHEMA` followed by the :data:`RESTORE_COLUMNS`: every column the decoder can build.
ALL_ARROW_SCHEMA = pa.schema([*ARROW_SCHEMA, *(pa.field(n, t, nullable=b) for n, t, b in RESTORE_COLUMNS)])


def spark_schema(*, restore_columns: bool = False):
    """The source's Spark ``StructType`` (same names, order and nullability as :data:`ARROW_SCHEMA`), followed by
    the :data:`RESTORE_COLUMNS` when ``restore_columns``."""
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
    columns = (*COLUMNS, *RESTORE_COLUMNS) if restore_columns else COLUMNS
    return StructType([StructField(name, spark_types[typ], nullable) for name, typ, nullable in columns])


def column_subset(schema) -> tuple[str, ...] | None:
    """The column names of a user-specified schema (``.schema(...)`` on the reader): None for no schema or the
    whole :func:`spark_schema`, else its names, each a column of spark_schema (or a :data:`RESTORE_COLUMNS`
    column) with the same type.

    Raises:
        ValueError: a name that is no column of the source, or a column given another type (the message
            names it).
    """
    full = spark_schema()
    if schema is None or schema == full:
        return None
    types = {f.name: f.dataType for f in spark_schema(restore_columns=True).fields}
    for f in schema.fields:
        if f.name not in types:
            raise ValueError(f"{f.name} is not a column of format(\"hareplica\") (its columns: {', '.join(types)})")
        if f.dataType != types[f.name]:
            raise ValueError(f"column {f.name} is {types[f.name].simpleString()}, not {f.dataType.simpleString()}")
    return tuple(f.name for f in schema.fields)


def column_schema(columns: Collection[str] | None) -> pa.Schema:
    """:data:`ARROW_SCHEMA`, or only its ``columns`` (in the order of :data:`ALL_ARROW_SCHEMA`) when given; the
    :data:`RESTORE_COLUMNS` only when named.

    Raises ValueError naming a column that is not the source's (docs/source.md "Rows").
    """
    if columns is None:
        return ARROW_SCHEMA
    unknown = sorted(set(columns) - set(ALL_ARROW_SCHEMA.names))
    if unknown:
        raise ValueError(f"not a column of the source: {', '.join(unknown)} "
                         f"(the columns: {', '.join(ALL_ARROW_SCHEMA.names)})")
    return pa.schema([f for f in ALL_ARROW_SCHEMA if f.name in columns])
