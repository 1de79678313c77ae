"""The stream reader of ``format("hareplica")``: ``HAReplicaStreamReader``, which
:class:`connector.source.datasource.HAReplicaDataSource` creates.

Each driver call goes to :class:`connector.source.driver.batches.BatchPlanner`; ``read`` runs in a task, where
the reader is a :class:`connector.source.task.partition_reader.PartitionReader`. See docs/source.md "Offsets,
batches, partitions".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from connector.options.parse import SourceOptions
from connector.source.driver.batches import BatchPlanner
from connector.source.driver.offsets import SourceOffset
from connector.source.driver.ranges import check_starting_records
from connector.source.task.partition_reader import PartitionReader
from connector.spark_compat import (
    ADMISSION_CONTROL,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
    available_now_problem,
)

log = logging.getLogger(__name__)


class HAReplicaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans CommitLog byte ranges per micro-batch (driver, :attr:`planner`) and reads them (tasks).

    Offsets: Spark hands and takes JSON objects as dicts, ``{broker_name: next_commitlog_offset, "@...": ...}``
    (:class:`connector.source.driver.offsets.SourceOffset` describes them); each call converts them to
    ``SourceOffset`` once on the way in and once on the way out, and the planner works on the object in between.
    Broker errors raise
    :class:`connector.client.remoting.BrokerAdminError` (or UnsupportedBrokerModeError for DLedger / controller
    mode); lost data raises :class:`connector.data_loss.DataLossError` when ``fail_on_data_loss`` is true.
    """

    def __init__(self, options: SourceOptions, columns: tuple[str, ...] | None = None):
        self.options = options
        self.columns = columns
        self.planner = BatchPlanner(options)  # the driver's broker state and planning
        # Spark < 4.2 (connector.spark_compat): the last end offset Spark showed this reader, and the initial offset
        self._last_seen: SourceOffset | None = None
        self._initial: dict | None = None

    def __reduce__(self):
        """Spark pickles the reader into its tasks' read function and calls only ``read`` there: it arrives as a
        :class:`connector.source.task.partition_reader.PartitionReader`, so a worker imports neither the options
        parser nor the driver's modules; connections and caches stay on the driver."""
        return (PartitionReader, ())

    # --- Spark API (driver) ------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        """Per broker: commitLogMinOffset (earliest), commitLogMaxOffset (latest) or the JSON offset.

        Raises HAReplicaOptionError for a JSON offset past the broker's commitLogMaxOffset or not at the start of a
        record (:func:`connector.source.driver.ranges.check_starting_records`). Computed once per reader: a second
        call (Spark < 4.2, where :meth:`latestOffset` may need it first) returns the same offsets.
        """
        if self._initial is None:
            initial = self.planner.initial_offsets()
            check_starting_records(self.planner, initial)
            self._initial = initial
        return dict(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        """ReadMaxBytes(``max_bytes_per_trigger``) when set, else ReadAllAvailable."""
        if self.options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Record every broker's current commitLogMaxOffset as the AvailableNow target."""
        self.planner.prepare_available_now()

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """End offset of the next micro-batch (docs/source.md "Offsets, batches, partitions" for how the read
        limit cuts it).

        Spark 4.2+ passes the batch's start and read limit. Spark 4.0/4.1 pass neither
        (:mod:`connector.spark_compat`): the batch then starts at the last end offset Spark showed this reader
        (:meth:`partitions`, also called with an empty range when a query resumes from its checkpoint) or at the
        initial offset, and :meth:`getDefaultReadLimit` applies, so ``max_bytes_per_trigger`` bounds it the same way.
        On every Spark, ``min_bytes_per_trigger`` may return ``start`` itself: no batch yet
        (:meth:`connector.source.driver.batches.BatchPlanner.next_end`).
        """
        if start is not None:
            begin = SourceOffset.from_json(start)
        elif self._last_seen is not None:
            begin = self._last_seen
        else:
            begin = SourceOffset.from_json(self.initialOffset())
        if limit is None:
            limit = self.getDefaultReadLimit()
        max_bytes = None
        if isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        elif not isinstance(limit, ReadAllAvailable):
            log.warning("read limit %r is not supported by hareplica; reading all available bytes", limit)
        return self.planner.next_end(begin, max_bytes).to_json()

    def reportLatestOffset(self) -> dict:
        """The brokers' latest commitLogMaxOffset seen (StreamingQueryProgress ``latestOffset``): with the
        batch's ``endOffset`` it shows, per broker, how many CommitLog bytes the query is behind."""
        return self.planner.latest_offsets()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One HAReplicaInputPartition per (broker, mapped-file slice) of ``[start, end)``, slices split further at
        ConsumeQueue-given record boundaries when ``min_partitions`` / ``max_bytes_per_partition`` ask for it
        (:mod:`connector.source.driver.partitions`); each is read from the master, or with ``read_from='slave'``
        from a slave that holds it."""
        self._last_seen = SourceOffset.from_json(end)
        return self.planner.partitions(SourceOffset.from_json(start), self._last_seen, self.columns)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Task: fetch the partition's bytes over HA and yield RecordBatches (:class:`PartitionReader`'s ``read``,
        which is what a task holds: :meth:`__reduce__`)."""
        return PartitionReader().read(partition)

    def commit(self, end: dict) -> None:
        """Forget boundaries below the committed offsets (and, once recorded, pending master switches)."""
        self.planner.commit(SourceOffset.from_json(end))

    def stop(self) -> None:
        """Close the driver's remoting connections."""
        self.planner.close()


def warn_without_admission_control(options: SourceOptions) -> None:
    """On Spark < 4.2, one WARNING when ``max_bytes_per_trigger`` is set: it bounds processing-time micro-batches,
    but Trigger.AvailableNow there is a single micro-batch that would stop at the first cut
    (:func:`connector.spark_compat.available_now_problem`)."""
    problem = None if ADMISSION_CONTROL else available_now_problem(options.max_bytes_per_trigger)
    if problem:
        log.warning("%s (processing-time triggers are bounded as on Spark 4.2+)", problem)
