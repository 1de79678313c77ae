"""What differs between the Spark 4.x minor versions hareplica supports, named once (README "Install into your
Spark", docs/source.md "Spark versions").

pyspark 4.0 and 4.1 have the Python streaming data source API but not two parts of it that arrived in 4.2
(SPARK-55304):

- **Admission control.** Their planner calls ``latestOffset()`` without a start offset or a read limit and
  never asks ``getDefaultReadLimit``; ``pyspark.sql.streaming.datasource`` (``ReadLimit``, ``ReadMaxBytes``,
  ``ReadAllAvailable``, ``SupportsTriggerAvailableNow``) does not exist. The stand-ins below let the source
  keep one code path: it remembers the last end offset it was shown and applies its own default read limit
  (connector.source ``latestOffset``), and its own ``min_bytes_per_trigger`` rule, as on every version.
  Nor does their planner call ``reportLatestOffset``: the progress's ``latestOffset`` is the batch end, so every
  end offset carries the brokers' max offsets itself (``connector.source.driver.batches.MAX_OFFSET_KEY``).
- **Trigger.AvailableNow for Python sources.** Spark wraps such a source (``AvailableNowDataStreamWrapper``):
  it calls ``latestOffset()`` once when the query starts and runs everything up to that offset as one
  micro-batch. Without a read limit that ends at the same offsets as on 4.2+ (each broker's commitLogMaxOffset
  when the query starts); with ``max_bytes_per_trigger`` the single batch would stop at the first cut, so the
  apps refuse that combination (:func:`available_now_problem`) and the source warns once.

pyspark 4.0 also lacks ``DataSourceStreamArrowWriter``: a stream writer there receives ``pyspark.sql.Row``
objects, which :func:`arrow_batches` turns into Arrow record batches of the sink's schema.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyspark

from connector.options.declaration import OPTIONS

#: (major, minor) of the pyspark this process runs, e.g. (4, 2).
SPARK_VERSION: tuple[int, int] = tuple(int(part) for part in pyspark.__version__.split(".")[:2])  # type: ignore[assignment]

#: The first Spark whose Python streaming sources get admission control and Trigger.AvailableNow (SPARK-55304).
ADMISSION_CONTROL_SINCE = (4, 2)

try:
    from pyspark.sql.streaming.datasource import (  # noqa: F401 - re-exported
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # pyspark 4.0 / 4.1: the planner never passes a read limit; these only serve the source itself
    ADMISSION_CONTROL = False

    class ReadLimit:  # type: ignore[no-redef]
        """Stand-in of pyspark 4.2's ReadLimit (module docstring)."""

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        """Stand-in: no limit."""

    class ReadMaxBytes(ReadLimit):  # type: ignore[no-redef]
        """Stand-in: at most ``max_bytes`` bytes per micro-batch."""

        def __init__(self, max_bytes: int) -> None:
            self.max_bytes = max_bytes

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in mixin: Spark 4.0/4.1 never call ``prepareForTriggerAvailableNow`` on a Python source."""

try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as StreamWriterBase

    ARROW_STREAM_WRITER = True
except ImportError:  # pyspark 4.0
    from pyspark.sql.datasource import DataSourceStreamWriter as StreamWriterBase  # noqa: F401 - re-exported

    ARROW_STREAM_WRITER = False

#: Rows per Arrow batch when a pyspark 4.0 stream writer converts Rows.
ROWS_PER_BATCH = 8192


def available_now_problem(max_bytes_per_trigger: int | None, version: tuple[int, int] = SPARK_VERSION) -> str | None:
    """Why Trigger.AvailableNow cannot run as asked on this Spark, or None when it can.

    On Spark < 4.2 AvailableNow is one micro-batch up to the offsets at start (module docstring), so a
    ``max_bytes_per_trigger`` would end the query early instead of splitting it. Returns one line naming the
    Spark version and what to use instead.
    """
    if max_bytes_per_trigger is None or version >= ADMISSION_CONTROL_SINCE:
        return None
    name = OPTIONS.max_bytes_per_trigger.name
    return (f"Spark {version[0]}.{version[1]} runs Trigger.AvailableNow on a Python source as one micro-batch "
            f"without read limits, so {name}={max_bytes_per_trigger} would end the query after its "
            f"first cut: drop {name}, use a processing-time trigger, or run Spark 4.2 or later")


def arrow_batches(items: Iterable, spark_schema) -> Iterator[pa.RecordBatch]:
    """The stream writer's input as Arrow record batches of the sink's ``spark_schema`` (a StructType).

    ``items`` is what Spark hands a stream writer's ``write``: pyarrow RecordBatches on pyspark 4.1+ (passed
    through unchanged) or ``pyspark.sql.Row`` objects on 4.0, gathered :data:`ROWS_PER_BATCH` at a time into
    batches of the schema's Arrow form (pyspark's ``to_arrow_schema``). A Row's naive timestamp is local time
    (how pyspark builds it) and is made timezone-aware before Arrow stores it as UTC.
    """
    arrow_schema: pa.Schema | None = None
    timestamps: list[str] = []
    rows: list[dict] = []
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield item
            continue
        if arrow_schema is None:
            from pyspark.sql.pandas.types import to_arrow_schema

            arrow_schema = to_arrow_schema(spark_schema)
            timestamps = [f.name for f in arrow_schema if pa.types.is_timestamp(f.type)]
        row = item.asDict(recursive=True)
        for name in timestamps:
            value = row.get(name)
            if isinstance(value, datetime.datetime) and value.tzinfo is None:
                row[name] = value.astimezone(datetime.UTC)
        rows.append(row)
        if len(rows) >= ROWS_PER_BATCH:
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)
            rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)
