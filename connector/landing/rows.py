"""The rows of a landed raw-replica table: the ``hareplica`` columns plus ``storeDate`` (docs/delta.md
"``--landing direct``").
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from connector.arrow_numpy import from_numpy, to_numpy
from connector.decode.schema import ALL_ARROW_SCHEMA, spark_schema

STORE_DATE = "storeDate"
DEFAULT_PARTITION_BY = (STORE_DATE,)
US_PER_DAY = 86_400_000_000
#: The source columns a landed raw-replica table holds: the default ones and the restore columns.
LANDED_SOURCE_COLUMNS = tuple(ALL_ARROW_SCHEMA.names)

def landed_source_schema():
    """Spark schema of the source columns a raw-replica table holds: the ``hareplica`` columns and the restore
    columns (:data:`LANDED_SOURCE_COLUMNS`); what bronze reads with ``.schema(...)``."""
    return spark_schema(restore_columns=True)


def landed_schema():
    """Spark schema of the landed table: the ``hareplica`` columns, the restore columns
    (:data:`connector.decode.schema.RESTORE_COLUMNS`, docs/restore.md "The columns bronze keeps") and ``storeDate``
    (DateType, nullable as Spark types ``date_from_unix_date`` although never null), the same as ``bronze_frame``'s."""
    from pyspark.sql.types import DateType, StructField, StructType

    return StructType([*landed_source_schema().fields, StructField(STORE_DATE, DateType(), True)])


def with_store_date(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` plus ``storeDate``: floor(storeTimestamp / 1 day) as a date32 (UTC, as Spark's
    ``date_from_unix_date(floor(unix_millis(ts) / 86400000))``). The decoder never leaves storeTimestamp null."""
    micros = to_numpy(batch.column("storeTimestamp"))
    days = from_numpy(np.floor_divide(micros, US_PER_DAY), pa.date32())
    return pa.RecordBatch.from_arrays([*batch.columns, days],
                                      names=[*batch.schema.names, STORE_DATE])
