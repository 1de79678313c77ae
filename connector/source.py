"""``spark.readStream.format("hareplica")``: a RocketMQ CommitLog as a Spark stream (DESIGN §3).

Driver (HAReplicaStreamReader in Spark's Python planner process): asks each broker for its
commitLogMinOffset/commitLogMaxOffset (GET_BROKER_RUNTIME_INFO) and mappedFileSizeCommitLog
(GET_BROKER_CONFIG) over remoting and plans byte ranges; it never touches message bytes.

* **Offsets** are JSON objects ``{"broker-a": 12345, ...}``: per broker the *next* CommitLog offset to
  read (Spark's Kafka convention). Every offset the source returns is a record boundary: a mapped-file
  start, or a commitLogMaxOffset the master reported (the master's write position only ever stops
  between records).
* **Read limit.** ``maxBytesPerTrigger`` becomes ``ReadMaxBytes``; the budget is shared between
  brokers in proportion to their backlog (as Kafka's ``maxOffsetsPerTrigger``), and each broker's
  batch is cut at the *first known boundary at or past its share*: the next mapped-file start or an
  earlier commitLogMaxOffset sample, whichever comes first, never past the current max offset. The
  driver cannot know record boundaries inside a file without reading it, so the limit is **soft**: a
  batch can overshoot by up to one mapped file (1 GiB by default) when the backlog lies inside files
  the driver never saw being written.
* **Trigger.AvailableNow.** ``prepareForTriggerAvailableNow`` records each broker's max offset; no
  batch goes past it.
* **Partitions.** One :class:`HAReplicaInputPartition` per (broker, mapped-file slice) of
  ``[start, end)``; executors fetch their slice over the HA port (:mod:`connector.ha_fetch`) and
  decode it into pyarrow RecordBatches (:mod:`connector.arrow_decode`).
* **Data loss** (``failOnDataLoss``, as in Spark's Kafka source): when the broker's min offset has
  passed the offset a batch must start at (retention deleted files), or its max offset fell below the
  checkpoint (it lost its tail), the query fails naming the lost range; with ``false`` it logs the
  lost bytes and continues at the broker's min offset (or waits for the broker to pass the
  checkpoint again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxBytes, SupportsTriggerAvailableNow

from connector.admin import BrokerAdminClient
from connector.arrow_decode import CommitLogArrowDecoder, spark_schema
from connector.ha_fetch import HARangeFetcher
from connector.options import (
    EARLIEST_OFFSET_SENTINEL,
    LATEST_OFFSET_SENTINEL,
    STARTING_OFFSETS_EARLIEST,
    STARTING_OFFSETS_LATEST,
    BrokerEndpoint,
    FetchSettings,
    HAReplicaOptionError,
    SourceOptions,
)
from connector.protocol.errors import DataLossError

log = logging.getLogger(__name__)

MAX_KNOWN_BOUNDARIES_PER_BROKER = 4096


@dataclass
class HAReplicaInputPartition(InputPartition):
    """One Spark task: CommitLog bytes ``[start, end)`` of one broker, inside one mapped file.

    Offsets and ``mapped_file_size`` in bytes; ``fetch`` carries the options executors need.
    Picklable (module-level dataclass of plain values).
    """

    broker: str
    ha_addr: str
    remoting_addr: str
    start: int
    end: int
    mapped_file_size: int
    fetch: FetchSettings


class HAReplicaDataSource(DataSource):
    """``format("hareplica")``: replicate RocketMQ 4.9 CommitLogs over the classic HA protocol.

    Options: see :mod:`connector.options` (``brokers`` is required). They are validated when the
    source is created, so a bad option fails ``load()`` with an HAReplicaOptionError naming it.
    Schema: :func:`connector.arrow_decode.spark_schema` (fixed).
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
        if schema is not None and schema != spark_schema():
            raise HAReplicaOptionError("schema", schema.simpleString(),
                                       "format(\"hareplica\") has a fixed schema; do not call .schema() on the reader")
        return HAReplicaStreamReader(self.source_options)


class HAReplicaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans CommitLog byte ranges per micro-batch (driver) and reads them (executors).

    Offsets: ``{broker_name: next_commitlog_offset}``. Broker errors raise
    :class:`connector.admin.BrokerAdminError`; lost data raises :class:`DataLossError` when
    ``failOnDataLoss`` is true.
    """

    def __init__(self, options: SourceOptions):
        self.options = options
        self._admins: dict[str, BrokerAdminClient] = {}
        self._file_sizes: dict[str, int] = {}
        self._min_offsets: dict[str, int] = {}
        self._latest: dict[str, int] = {}
        self._boundaries: dict[str, set[int]] = {}
        self._trigger_target: dict[str, int] | None = None

    def __getstate__(self) -> dict:
        # the reader is pickled to executors for read(); connections and caches stay on the driver
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"])

    # --- broker metadata (driver) ------------------------------------------------------------------
    def _admin(self, broker: BrokerEndpoint) -> BrokerAdminClient:
        client = self._admins.get(broker.name)
        if client is None:
            client = BrokerAdminClient(broker.remoting_addr, self.options.fetch.read_timeout_ms)
            self._admins[broker.name] = client
        return client

    def _mapped_file_size(self, broker: BrokerEndpoint) -> int:
        size = self._file_sizes.get(broker.name)
        if size is None:
            admin = self._admin(broker)
            config = admin.broker_config()
            admin.check_classic_ha(config)
            size = admin.mapped_file_size()
            self._file_sizes[broker.name] = size
        return size

    def _offsets(self, broker: BrokerEndpoint) -> tuple[int, int]:
        """(commitLogMinOffset, commitLogMaxOffset) now; remembers the max as a record boundary."""
        self._mapped_file_size(broker)
        min_offset, max_offset = self._admin(broker).commit_log_offsets()
        known = self._boundaries.setdefault(broker.name, set())
        previous = self._latest.get(broker.name)
        if previous is not None and max_offset < previous:
            log.warning("broker %s: commitLogMaxOffset went back from %d to %d", broker.name, previous, max_offset)
            known.clear()
        if len(known) < MAX_KNOWN_BOUNDARIES_PER_BROKER:
            known.add(max_offset)
        self._min_offsets[broker.name] = min_offset
        self._latest[broker.name] = max_offset
        return min_offset, max_offset

    # --- Spark API (driver) ------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        """Per broker: commitLogMinOffset (earliest), commitLogMaxOffset (latest) or the JSON offset.

        Raises HAReplicaOptionError for a JSON offset past the broker's commitLogMaxOffset.
        """
        starting = self.options.starting_offsets
        out = {}
        for broker in self.options.brokers:
            min_offset, max_offset = self._offsets(broker)
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
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        """ReadMaxBytes(maxBytesPerTrigger) when set, else ReadAllAvailable."""
        if self.options.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.options.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Record every broker's current commitLogMaxOffset as the AvailableNow target."""
        self._trigger_target = {b.name: self._offsets(b)[1] for b in self.options.brokers}
        log.info("Trigger.AvailableNow target offsets %s", self._trigger_target)

    def _start_of(self, broker: BrokerEndpoint, start: dict, min_offset: int) -> int:
        value = start.get(broker.name) if start else None
        if value is None:
            log.warning("broker %s has no offset in the checkpoint; starting at its commitLogMinOffset %d",
                        broker.name, min_offset)
            return min_offset
        return int(value)

    def _check_min(self, broker: BrokerEndpoint, start: int, min_offset: int) -> int:
        """The offset a batch of ``broker`` can really start at, given commitLogMinOffset."""
        if start >= min_offset:
            return start
        if self.options.fail_on_data_loss:
            raise DataLossError(
                f"broker {broker.name} ({broker.remoting_addr}) no longer holds CommitLog bytes [{start}, "
                f"{min_offset}) that the query needs (commitLogMinOffset is {min_offset}: retention deleted them). "
                "Set failOnDataLoss=false to continue at the broker's first byte.")
        log.warning("broker %s: CommitLog bytes [%d, %d) are lost (commitLogMinOffset %d); continuing at %d",
                    broker.name, start, min_offset, min_offset, min_offset)
        return min_offset

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """End offset of the next micro-batch (see the module doc for how the read limit cuts it)."""
        ends: dict[str, int] = {}
        spans: dict[str, tuple[int, int]] = {}
        for broker in self.options.brokers:
            min_offset, max_offset = self._offsets(broker)
            begin = self._check_min(broker, self._start_of(broker, start, min_offset), min_offset)
            target = max_offset
            if self._trigger_target is not None and broker.name in self._trigger_target:
                target = min(target, self._trigger_target[broker.name])
            if begin > max_offset:
                message = (f"broker {broker.name}: the query is at CommitLog offset {begin} but the broker's "
                           f"commitLogMaxOffset is {max_offset}: the broker lost bytes [{max_offset}, {begin}) it "
                           "had served (e.g. a crash before flushing)")
                if self.options.fail_on_data_loss:
                    raise DataLossError(message + ". Set failOnDataLoss=false to wait until it passes the offset.")
                log.warning("%s; waiting until it passes the offset", message)
            spans[broker.name] = (begin, max(begin, target))
        if isinstance(limit, ReadMaxBytes):
            ends = self._apply_byte_limit(spans, limit.max_bytes)
        else:
            if not isinstance(limit, ReadAllAvailable):
                log.warning("read limit %r is not supported by hareplica; reading all available bytes", limit)
            ends = {name: end for name, (_, end) in spans.items()}
        return ends

    def _apply_byte_limit(self, spans: dict[str, tuple[int, int]], max_bytes: int) -> dict[str, int]:
        backlog = {name: end - begin for name, (begin, end) in spans.items()}
        total = sum(backlog.values())
        if total <= max_bytes:
            return {name: end for name, (_, end) in spans.items()}
        ends = {}
        for broker in self.options.brokers:
            begin, end = spans[broker.name]
            if backlog[broker.name] == 0:
                ends[broker.name] = end
                continue
            share = max(1, max_bytes * backlog[broker.name] // total)
            ends[broker.name] = self._first_boundary_at_or_after(broker, begin + share, end)
        return ends

    def _first_boundary_at_or_after(self, broker: BrokerEndpoint, wanted: int, end: int) -> int:
        """The smallest known record boundary >= ``wanted``, capped at ``end`` (a boundary itself)."""
        if wanted >= end:
            return end
        size = self._mapped_file_size(broker)
        best = min(end, -(-wanted // size) * size)
        for b in self._boundaries.get(broker.name, ()):
            if wanted <= b < best:
                best = b
        return best

    def reportLatestOffset(self) -> dict:
        """The brokers' latest commitLogMaxOffset seen (for StreamingQueryProgress.latestOffset)."""
        if len(self._latest) < len(self.options.brokers):
            for broker in self.options.brokers:
                self._offsets(broker)
        return {b.name: self._latest[b.name] for b in self.options.brokers}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One HAReplicaInputPartition per (broker, mapped-file slice) of ``[start, end)``."""
        parts: list[InputPartition] = []
        for broker in self.options.brokers:
            stop = end.get(broker.name)
            if stop is None:
                continue
            stop = int(stop)
            min_offset = self._min_offsets.get(broker.name)
            if min_offset is None:
                min_offset = self._offsets(broker)[0]
            begin = self._start_of(broker, start, min_offset)
            if begin >= stop:
                continue
            begin = min(self._check_min(broker, begin, min_offset), stop)
            size = self._mapped_file_size(broker)
            while begin < stop:
                slice_end = min(stop, begin - begin % size + size)
                parts.append(HAReplicaInputPartition(
                    broker=broker.name, ha_addr=broker.ha_addr, remoting_addr=broker.remoting_addr, start=begin,
                    end=slice_end, mapped_file_size=size, fetch=self.options.fetch))
                begin = slice_end
        log.info("planned %d partition(s) for %s -> %s", len(parts), start, end)
        return parts

    def read(self, partition: HAReplicaInputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: fetch the partition's bytes over HA and yield RecordBatches (see read_partition)."""
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        """Forget boundaries below the committed offsets."""
        for name, offset in (end or {}).items():
            known = self._boundaries.get(name)
            if known:
                self._boundaries[name] = {b for b in known if b >= int(offset)}

    def stop(self) -> None:
        """Close the driver's remoting connections."""
        for client in self._admins.values():
            client.close()
        self._admins.clear()


def read_partition(partition: HAReplicaInputPartition) -> Iterator[pa.RecordBatch]:
    """Fetch ``[partition.start, partition.end)`` over the HA port and decode it into RecordBatches.

    Memory stays bounded by one batch plus one HA frame whatever the partition size. Raises
    DataLossError, HAFetchError, HAProtocolError or CommitLogFormatError (each naming offsets).
    """
    fetch = partition.fetch
    admin = BrokerAdminClient(partition.remoting_addr, fetch.read_timeout_ms)
    decoder = CommitLogArrowDecoder(
        partition.start, partition.end, partition.mapped_file_size, broker=partition.broker,
        decompress_body=fetch.decompress_body, max_records_per_batch=fetch.max_records_per_batch,
        max_bytes_per_batch=fetch.max_bytes_per_batch)
    fetcher = HARangeFetcher(
        partition.ha_addr, partition.start, partition.end, broker=partition.broker,
        connect_timeout_ms=fetch.connect_timeout_ms, read_timeout_ms=fetch.read_timeout_ms,
        fetch_retries=fetch.fetch_retries, heartbeat_interval_ms=fetch.heartbeat_interval_ms,
        offsets_probe=admin.commit_log_offsets, fail_on_data_loss=fetch.fail_on_data_loss)
    try:
        for offset, data in fetcher:
            if offset != decoder.stream_offset:
                yield from decoder.jump(offset, "lost on the broker")
            if data:
                yield from decoder.feed(offset, data)
        yield from decoder.finish()
        log.info("broker %s: read [%d, %d): %d records, %d END_FILE blanks, %d HA connection(s)", partition.broker,
                 partition.start, partition.end, decoder.records_emitted, decoder.blanks_skipped,
                 fetcher.connections)
    finally:
        fetcher.close()
        admin.close()
