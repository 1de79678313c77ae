"""``LandingPartitionReader``: what a Spark task's Python worker receives in place of the landing's stream reader,
and the ``landingSplit`` function it looks up there.

Spark pickles the reader it planned with (:class:`connector.landing.reader.HAReplicaLandingStreamReader`) into the
read function its tasks run, and calls only ``read(partition)`` on it there (pyspark
``sql/worker/plan_data_source_read.py``, Spark 4.0-4.3). The reader pickles to this class (its ``__reduce__``)
with its Delta writers and its split, so unpickling in a worker imports the task side only: the source's read
(:func:`connector.source.task.read.read_partition`), the Delta sink's task writes, the split's lookup; not the
options parser, not the driver's modules, not the reader's ``HAReplicaStreamReader`` and its ``BatchPlanner``
(docs/architecture.md "Layers").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from connector.arrow_numpy import binary_array
from connector.arrow_pool import use_jemalloc
from connector.delta.messages import MESSAGE_COLUMN, message_bytes
from connector.landing.rows import with_store_date
from connector.options.declaration import LANDING_OPTIONS
from connector.options.functions import import_function
from connector.source.partition import HAReplicaInputPartition
from connector.source.task.read import read_partition

if TYPE_CHECKING:
    from connector.delta.sink import DeltaLakeStreamWriter

#: the one column a landing task yields: null per record read, the last row its pickled commit messages
MESSAGE_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.binary())])

SplitFunction = Callable[[pa.RecordBatch], Sequence[pa.RecordBatch]]


def resolve_split(spec: str | tuple[str, str | None]) -> SplitFunction:
    """The split function of a ``landingSplit`` value (``package.module:function``), or of ``(spec, config)``: with
    a ``landingSplitConfig`` text, what the factory ``spec`` names returns for it (docs/delta.md "``--landing
    direct``"; :mod:`connector.landing.options` calls it on the driver to fail at start, a task to split).

    Raises HAReplicaOptionError when the spec is malformed, cannot be imported or is not callable, and what the
    factory raises for a config it refuses.
    """
    spec, config = (spec, None) if isinstance(spec, str) else spec
    function = import_function(LANDING_OPTIONS.split.name, spec)
    return function if config is None else function(config)


class LandingPartitionReader:
    """The task side of the landing's reader: ``read`` only. ``writers``: one Delta writer per table (each with
    ``open_task()``: :class:`connector.delta.sink.DeltaLakeStreamWriter`, or the upsert and evolving writers of
    :mod:`connector.landing.upsert` and :mod:`connector.landing.evolving`); ``split``: a ``landingSplit`` spec
    and its ``landingSplitConfig`` (None: one table, the rows plus ``storeDate``). Pickles to itself."""

    def __init__(self, writers: Sequence[DeltaLakeStreamWriter], split: tuple[str, str | None] | None = None):
        self.writers = list(writers)
        self.split = split

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Decode the partition and write it as Parquet files of the table(s); yield one row per record read,
        null but the last, which holds the task's pickled commit messages, one per table (nothing when the
        partition kept no record, or for a placeholder InputPartition). On any error every table's files of
        this task are deleted before the error propagates. Arrow's buffers in this worker come from jemalloc from
        here on (:func:`connector.arrow_pool.use_jemalloc`)."""
        use_jemalloc()
        if not isinstance(partition, HAReplicaInputPartition):
            return
        split = resolve_split(self.split) if self.split else (lambda b: (with_store_date(b),))
        tasks = [w.open_task() for w in self.writers]
        records = 0
        try:
            for batch in read_partition(partition, partition.columns):
                records += batch.num_rows
                for task, part in zip(tasks, split(batch), strict=True):
                    if part.num_rows:
                        task.write(part)
            messages = tuple(task.close() for task in tasks)
        except BaseException:
            for task in tasks:
                task.discard()
            raise
        if records == 0:
            return
        last = binary_array([message_bytes(messages)])
        column = pa.concat_arrays([pa.nulls(records - 1, pa.binary()), last])
        yield pa.record_batch([column], schema=MESSAGE_SCHEMA)
