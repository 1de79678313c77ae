"""The Spark classes of the source: ``HAReplicaDataSource`` and its ``HAReplicaStreamReader`` (driver).

The reader answers Spark's calls (initialOffset, latestOffset, partitions, commit, ...) by sampling the
brokers (:class:`connector.source.brokers.BrokerSets`), applying the batch-end rules
(:mod:`connector.source.batch_ends`), checking and writing the ``"@lastRecord"`` fingerprints
(:mod:`connector.history`, over the driver's HA reads :class:`connector.source.read.DriverReads`) and building
partitions (:mod:`connector.source.partitions`); executors run
:meth:`HAReplicaStreamReader.read` (:func:`connector.source.read.read_partition`). See the package doc.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from connector.controller_mode import SWITCH_KEY
from connector.data_loss import on_data_loss
from connector.decode.schema import column_subset, spark_schema
from connector.history import FINGERPRINT_KEY, check_start, end_fingerprint
from connector.options import (
    EARLIEST_OFFSET_SENTINEL,
    LATEST_OFFSET_SENTINEL,
    READ_FROM_SLAVE,
    STARTING_OFFSETS_EARLIEST,
    STARTING_OFFSETS_LATEST,
    BrokerEndpoint,
    HAReplicaOptionError,
    SourceOptions,
)
from connector.planning import BrokerSetView
from connector.protocol.errors import HAReplicaError
from connector.source.batch_ends import apply_byte_limit, batch_target, check_min, start_of
from connector.source.brokers import BrokerSets, bounds
from connector.source.offsets import SourceOffset
from connector.source.partitions import HAReplicaInputPartition, build_partitions, file_slices
from connector.source.read import DriverReads, read_partition
from connector.spark_compat import (
    ADMISSION_CONTROL,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
    available_now_problem,
)
from connector.transform import transform_batches, transform_source_columns

log = logging.getLogger(__name__)


class HAReplicaDataSource(DataSource):
    """``format("hareplica")``: replicate RocketMQ 4.9 CommitLogs over the classic HA protocol.

    Options: see :mod:`connector.options` (``brokers`` is required). They are validated when the
    source is created, so a bad option fails ``load()`` with an HAReplicaOptionError naming it.
    Schema: :func:`connector.decode.schema.spark_schema`; a schema given with ``.schema(...)`` may name a
    subset of its columns (same names and types, any order): only those are decoded and sent to Spark, which
    then converts no column the query does not read (docs/source.md "Rows", "Speed and memory").
    """

    def __init__(self, options):
        super().__init__(options)
        self.source_options = SourceOptions.from_options(options)

    @classmethod
    def name(cls) -> str:
        return "hareplica"

    def schema(self):
        return spark_schema()

    def streamReader(self, schema) -> HAReplicaStreamReader:
        warn_without_admission_control(self.source_options)
        if self.source_options.batch_transform is not None:  # the schema is the transform's output
            columns = tuple(f.name for f in schema.fields)
            transform_source_columns(self.source_options.batch_transform, columns)  # a bad declaration fails here
            return HAReplicaStreamReader(self.source_options, columns=columns)
        try:
            columns = column_subset(schema)
        except ValueError as exc:
            raise HAReplicaOptionError("schema", schema.simpleString(), str(exc)) from None
        return HAReplicaStreamReader(self.source_options, columns=columns)


class HAReplicaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans CommitLog byte ranges per micro-batch (driver) and reads them (executors).

    Offsets: ``{broker_name: next_commitlog_offset}``. Broker errors raise
    :class:`connector.client.remoting.BrokerAdminError` (or UnsupportedBrokerModeError for DLedger / controller
    mode); lost data raises :class:`connector.data_loss.DataLossError` when ``failOnDataLoss`` is true.
    """

    def __init__(self, options: SourceOptions, columns: tuple[str, ...] | None = None):
        self.options = options
        self.columns = columns
        self._brokers = BrokerSets(options)  # the driver's broker state: views, remoting clients, controller-mode sets
        self._trigger_target: dict[str, int] | None = None
        # Spark < 4.2 (connector.spark_compat): the last end offset Spark showed this reader, and the initial offset
        self._last_seen: dict | None = None
        self._initial: dict | None = None
        self._verified: dict[tuple, int] = {}  # (broker, start, fingerprint) -> where reading really starts

    def __getstate__(self) -> dict:
        # the reader is pickled to executors for read(); connections and caches stay on the driver
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"])

    # --- Spark API (driver) ------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        """Per broker: commitLogMinOffset (earliest), commitLogMaxOffset (latest) or the JSON offset.

        Raises HAReplicaOptionError for a JSON offset past the broker's commitLogMaxOffset. Computed once per
        reader: a second call (Spark < 4.2, where :meth:`latestOffset` may need it first) returns the same offsets.
        """
        if self._initial is not None:
            return dict(self._initial)
        starting = self.options.starting_offsets
        out = {}
        for broker in self.options.brokers:
            min_offset, max_offset = bounds(self._brokers.refresh(broker))
            if starting == STARTING_OFFSETS_EARLIEST:
                value = min_offset
            elif starting == STARTING_OFFSETS_LATEST:
                value = max_offset
            else:
                value = starting[broker.name]
                if value == EARLIEST_OFFSET_SENTINEL:
                    value = min_offset
                elif value == LATEST_OFFSET_SENTINEL:
                    value = max_offset
                elif value > max_offset:
                    raise HAReplicaOptionError("startingOffsets", starting,
                                               f"offset {value} of broker {broker.name} is past its "
                                               f"commitLogMaxOffset {max_offset}")
            out[broker.name] = value
        log.info("initial offsets %s", out)
        self._initial = dict(out)
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        """ReadMaxBytes(maxBytesPerTrigger) when set, else ReadAllAvailable."""
        if self.options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Record every broker's current commitLogMaxOffset as the AvailableNow target."""
        self._trigger_target = {b.name: bounds(self._brokers.refresh(b))[1] for b in self.options.brokers}
        log.info("Trigger.AvailableNow target offsets %s", self._trigger_target)

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """End offset of the next micro-batch (see the package doc for how the read limit cuts it).

        Spark 4.2+ passes the batch's start and read limit. Spark 4.0/4.1 pass neither
        (:mod:`connector.spark_compat`): the batch then starts at the last end offset Spark showed this reader
        (:meth:`partitions`, also called with an empty range when a query resumes from its checkpoint) or at the
        initial offset, and :meth:`getDefaultReadLimit` applies, so ``maxBytesPerTrigger`` bounds it the same way.
        """
        if start is None:
            start = self._last_seen if self._last_seen is not None else self.initialOffset()
        if limit is None:
            limit = self.getDefaultReadLimit()
        fail = self.options.fail_on_data_loss
        spans: dict[str, tuple[int, int]] = {}
        for broker in self.options.brokers:
            view = self._brokers.refresh(broker)
            min_offset, max_offset = bounds(view)
            begin = check_min(broker, start_of(broker, start, min_offset), min_offset, fail)
            cset = self._brokers.sets.get(broker.name)
            if cset is not None:
                cset.check_landed(begin, fail)
            begin = self._verified_begin(broker, view, start, begin, min_offset, max_offset)
            if begin > max_offset:
                message = (f"broker {broker.name}: the query is at CommitLog offset {begin} but the broker's "
                           f"commitLogMaxOffset is {max_offset}: the broker lost bytes [{max_offset}, {begin}) it "
                           "had served (e.g. a crash before flushing)")
                on_data_loss(fail, message, instead="wait until it passes the offset", logger=log)
            trigger = None if self._trigger_target is None else self._trigger_target.get(broker.name)
            spans[broker.name] = (begin, batch_target(self.options, view, begin, max_offset, trigger_target=trigger,
                                                      cset=cset))
        if isinstance(limit, ReadMaxBytes):
            ends = apply_byte_limit(self.options.brokers, self._brokers.views, spans, limit.max_bytes)
        else:
            if not isinstance(limit, ReadAllAvailable):
                log.warning("read limit %r is not supported by hareplica; reading all available bytes", limit)
            ends = {name: end for name, (_, end) in spans.items()}
        out = SourceOffset.from_json(self._with_fingerprints(start, spans, ends))
        switches = {name: cset.records() for name, cset in self._brokers.sets.items() if cset.switches}
        if switches:  # recorded in the batch's end offset (and so in the query progress)
            out.extras[SWITCH_KEY] = switches
        return out.to_json()

    # --- rewritten history (connector.history, docs/source.md "Rewritten history") -------------------
    def _reads(self, view: BrokerSetView) -> DriverReads:
        """The driver's HA reads of ``view``'s broker set for the history checks."""
        return DriverReads(self.options.fetch, view, self._brokers.protocol(view.name),
                           self.options.read_from == READ_FROM_SLAVE)

    def _verified_begin(self, broker: BrokerEndpoint, view: BrokerSetView, start: dict | None, begin: int,
                        min_offset: int, max_offset: int) -> int:
        """``begin``, checked against the fingerprint the offset carries (connector.history.check_start)
        unless this reader computed it itself with no regression since. A rewritten history raises
        DataLossError (``failOnDataLoss``) or is logged and skipped to the next real record boundary."""
        if begin > max_offset:
            return begin
        fingerprint = SourceOffset.from_json(start).fingerprints.get(broker.name)
        key = (broker.name, begin, fingerprint)
        if self._brokers.trusted.get(broker.name) == begin:
            self._verified[key] = begin
        elif key not in self._verified:
            rewrite = check_start(self._reads(view), begin, fingerprint, min_offset, max_offset,
                                  view.mapped_file_size)
            result = begin
            if rewrite is not None:
                on_data_loss(self.options.fail_on_data_loss, rewrite.describe(broker.name),
                             instead=f"continue at the next record boundary ({rewrite.resume})", logger=log)
                result = rewrite.resume
            if len(self._verified) > 64:
                self._verified.clear()
            self._verified[key] = result
        return self._verified[key]

    def _with_fingerprints(self, start: dict | None, spans: dict[str, tuple[int, int]], ends: dict[str, int]) -> dict:
        """``ends`` plus, under :data:`FINGERPRINT_KEY`, the fingerprint of the last record before each end."""
        previous = SourceOffset.from_json(start).fingerprints
        prints = {}
        for broker in self.options.brokers:
            begin, end = spans[broker.name][0], ends[broker.name]
            view = self._brokers.views[broker.name]
            fingerprint = previous.get(broker.name)
            if end > begin:
                lowest = view.settled_offset(time.monotonic()) if view.ack_window_ms else end
                try:
                    fingerprint = end_fingerprint(self._reads(view), begin, end, view.mapped_file_size, lowest)
                except HAReplicaError as exc:
                    log.warning("broker %s: no fingerprint of the record before offset %d (%s)", broker.name, end, exc)
                    fingerprint = None
            if fingerprint is not None and fingerprint.end == end:
                prints[broker.name] = fingerprint.to_json()
            if end <= bounds(view)[1]:  # not while waiting for a broker that lost its tail to pass `end`
                self._brokers.trusted[broker.name] = end
        return SourceOffset(dict(ends), {FINGERPRINT_KEY: prints} if prints else {}).to_json()

    def reportLatestOffset(self) -> dict:
        """The brokers' latest commitLogMaxOffset seen (StreamingQueryProgress ``latestOffset``): with the
        batch's ``endOffset`` it shows, per broker, how many CommitLog bytes the query is behind."""
        out = {}
        for broker in self.options.brokers:
            view = self._brokers.views.get(broker.name)
            if view is None or view.master is None:
                view = self._brokers.refresh(broker, slaves=False)
            out[broker.name] = bounds(view)[1]
        return out

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One HAReplicaInputPartition per (broker, mapped-file slice) of ``[start, end)``, slices split further at
        ConsumeQueue-given record boundaries when ``minPartitions`` / ``maxBytesPerPartition`` ask for it
        (:mod:`connector.source.partitions`); each is read from the master, or with ``readFrom=slave`` from a
        slave that holds it."""
        self._last_seen = dict(end)
        prefer_slave = self.options.read_from == READ_FROM_SLAVE
        slices: list[tuple[BrokerSetView, int, int]] = []
        for broker in self.options.brokers:
            stop = end.get(broker.name)
            if stop is None:
                continue
            stop = int(stop)
            view = self._brokers.views.get(broker.name)
            if view is None or view.master is None or (prefer_slave and not view.slaves):
                view = self._brokers.refresh(broker, slaves=prefer_slave)
            min_offset = bounds(view)[0]
            begin = start_of(broker, start, min_offset)
            if begin >= stop:
                continue
            begin = min(check_min(broker, begin, min_offset, self.options.fail_on_data_loss), stop)
            begin = min(self._verified_begin(broker, view, start, begin, min_offset, bounds(view)[1]), stop)
            slices.extend(file_slices(view, begin, stop))
        parts = build_partitions(slices, self.options, columns=self.columns, protocols=self._brokers.protocols,
                                 sets=self._brokers.sets)
        log.info("planned %d partition(s) for %s -> %s", len(parts), start, end)
        return parts

    def read(self, partition: HAReplicaInputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: fetch the partition's bytes over HA and yield RecordBatches (see read_partition), only
        the partition's ``columns`` when the query gave a schema, and only those are decoded. With a
        ``batchTransform``, the columns it says it reads (:func:`connector.transform.transform_source_columns`)
        are decoded and handed to it."""
        if partition.transform is not None:
            read = transform_source_columns(partition.transform, partition.columns)
            return transform_batches(read_partition(partition, read), partition.transform, partition.columns)
        if partition.columns is None:
            return read_partition(partition)
        return (batch.select(list(partition.columns)) for batch in read_partition(partition, partition.columns))

    def commit(self, end: dict) -> None:
        """Forget boundaries below the committed offsets (and, once recorded, pending master switches)."""
        offset = SourceOffset.from_json(end)
        if offset.has_switches:
            for cset in self._brokers.sets.values():
                cset.committed()
        for name, position in offset.positions.items():
            view = self._brokers.views.get(name)
            if view is not None:
                view.forget_boundaries(below=position)

    def stop(self) -> None:
        """Close the driver's remoting connections."""
        self._brokers.close()


def warn_without_admission_control(options: SourceOptions) -> None:
    """On Spark < 4.2, one WARNING when ``maxBytesPerTrigger`` is set: it bounds processing-time micro-batches,
    but Trigger.AvailableNow there is a single micro-batch that would stop at the first cut
    (:func:`connector.spark_compat.available_now_problem`)."""
    problem = None if ADMISSION_CONTROL else available_now_problem(options.max_bytes_per_trigger)
    if problem:
        log.warning("%s (processing-time triggers are bounded as on Spark 4.2+)", problem)
