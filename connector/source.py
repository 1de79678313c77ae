"""``spark.readStream.format("hareplica")``: a RocketMQ CommitLog as a Spark stream (docs/source.md).

Driver (HAReplicaStreamReader in Spark's Python planner process): asks each broker for its
commitLogMinOffset/commitLogMaxOffset (GET_BROKER_RUNTIME_INFO) and mappedFileSizeCommitLog
(GET_BROKER_CONFIG) over remoting and plans byte ranges. The only message bytes it reads are a few
around batch ends, to fingerprint and check the record before each offset (:mod:`connector.history`).

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
  ``[start, end)``, split further at ConsumeQueue record boundaries for ``minPartitions`` /
  ``maxBytesPerPartition`` (:mod:`connector.splits`); executors fetch their slice over the HA port
  (:mod:`connector.ha_fetch`) and decode it into pyarrow RecordBatches (:mod:`connector.decode`).
* **Data loss** (``failOnDataLoss``, as in Spark's Kafka source): when the broker's min offset has
  passed the offset a batch must start at (retention deleted files), or its max offset fell below the
  checkpoint (it lost its tail), the query fails naming the lost range; with ``false`` it logs the
  lost bytes and continues at the broker's min offset (or waits for the broker to pass the
  checkpoint again).
* **Rewritten history**: offsets carry ``"@lastRecord"`` fingerprints; a start offset whose record
  changed or that is no longer a record start fails (``failOnDataLoss``) or resumes at the next real
  record boundary (docs/source.md "Rewritten history").
* **Outages**: remoting calls wait a broker outage out up to ``maxOutageMs`` (:mod:`connector.reconnect`).
* **Slaves** (``slaves``, ``readFrom``, ``minInSyncSlaves``): batches end at what enough slaves hold,
  rounded down to a known record boundary, and partitions may be read from a slave's HA port; see
  :mod:`connector.planning`, which also holds the SYNC_MASTER acknowledgement rule.
* **HA variants.** The first contact asks GET_BROKER_CONFIG: a 5.x broker in controller mode is read over
  AutoSwitch HA (:mod:`connector.ha_autoswitch_fetch`) and its batches end at or below the master's
  confirmOffset (docs/source.md "RocketMQ 5.x controller mode"); a DLedger broker fails fast with
  UnsupportedBrokerModeError.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from connector.client.admin import HA_PROTOCOL_AUTOSWITCH, HA_PROTOCOL_CLASSIC, BrokerAdminClient
from connector.client.consume_queue import ConsumeQueueReader
from connector.client.remoting import BrokerAdminError, BrokerUnreachableError
from connector.controller_mode import SWITCH_KEY, ControllerModeSet, master_locator
from connector.data_loss import on_data_loss
from connector.decode.schema import column_subset, spark_schema
from connector.decode.stream import CommitLogArrowDecoder
from connector.ha_autoswitch_fetch import AutoSwitchRangeFetcher
from connector.ha_fetch import HARangeFetcher, prefetch_chunks
from connector.history import FINGERPRINT_KEY, check_start, end_fingerprint, fetch_range, fingerprints_of
from connector.options import (
    EARLIEST_OFFSET_SENTINEL,
    LATEST_OFFSET_SENTINEL,
    READ_FROM_SLAVE,
    STARTING_OFFSETS_EARLIEST,
    STARTING_OFFSETS_LATEST,
    BrokerEndpoint,
    FetchSettings,
    HAReplicaOptionError,
    SourceOptions,
)
from connector.planning import ACK_WINDOW_MARGIN_MS, BrokerSetView, ServerOffsets
from connector.protocol.errors import HAReplicaError
from connector.protocol.mapped_files import next_file_start
from connector.reconnect import OutageWait
from connector.spark_compat import (
    ADMISSION_CONTROL,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
    available_now_problem,
)
from connector.splits import find_boundaries, partition_counts, pick_splits
from connector.transform import transform_batches

log = logging.getLogger(__name__)


@dataclass
class HAReplicaInputPartition(InputPartition):
    """One Spark task: CommitLog bytes ``[start, end)`` of one broker, inside one mapped file.

    Offsets and ``mapped_file_size`` in bytes; ``ha_addr`` / ``remoting_addr`` are those of the server
    to read (the master, or a slave with ``readFrom=slave``), ``server_role`` says which; ``fetch``
    carries the options executors need. Picklable (module-level dataclass of plain values).
    """

    broker: str
    ha_addr: str
    remoting_addr: str
    start: int
    end: int
    mapped_file_size: int
    fetch: FetchSettings
    server_role: str = "master"
    #: the columns of a user-specified schema (names of spark_schema, in that schema's order); None: all
    columns: tuple[str, ...] | None = None
    #: ``batchTransform`` (connector.transform); ``columns`` are then the query schema's, its output
    transform: str | None = None
    #: the HA protocol of ``ha_addr``: ``"classic"`` or ``"autoswitch"`` (5.x controller mode)
    ha_protocol: str = HA_PROTOCOL_CLASSIC
    #: controller mode: ``(ha_addr, remoting_addr)`` of every member (a fetch follows a master switch among
    #: them) and the master's ``(epoch, startOffset)`` entries when the batch was planned
    members: tuple[tuple[str, str], ...] = ()
    epochs: tuple[tuple[int, int], ...] = ()


class HAReplicaDataSource(DataSource):
    """``format("hareplica")``: replicate RocketMQ 4.9 CommitLogs over the classic HA protocol.

    Options: see :mod:`connector.options` (``brokers`` is required). They are validated when the
    source is created, so a bad option fails ``load()`` with an HAReplicaOptionError naming it.
    Schema: :func:`connector.decode.schema.spark_schema`; a schema given with ``.schema(...)`` may name a
    subset of its columns (same names and types, any order): only those are sent to Spark, which then
    converts no column the query does not read (docs/source.md "Rows").
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
            return HAReplicaStreamReader(self.source_options, columns=tuple(f.name for f in schema.fields))
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
        self._admins: dict[str, BrokerAdminClient] = {}  # by remoting address
        self._views: dict[str, BrokerSetView] = {}
        self._trigger_target: dict[str, int] | None = None
        # Spark < 4.2 (connector.spark_compat): the last end offset Spark showed this reader, and the initial offset
        self._last_seen: dict | None = None
        self._initial: dict | None = None
        self._outages: dict[str, OutageWait] = {}  # by broker set name
        self._trusted: dict[str, int] = {}  # batch ends this reader computed, while the log never went back
        self._verified: dict[tuple, int] = {}  # (broker, start, fingerprint) -> where reading really starts
        self._protocols: dict[str, str] = {}  # broker set name -> HA protocol of its master
        self._sets: dict[str, ControllerModeSet] = {}  # controller-mode broker sets by name

    def __getstate__(self) -> dict:
        # the reader is pickled to executors for read(); connections and caches stay on the driver
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"])

    # --- broker metadata (driver) ------------------------------------------------------------------
    def _admin(self, endpoint: BrokerEndpoint) -> BrokerAdminClient:
        client = self._admins.get(endpoint.remoting_addr)
        if client is None:
            client = BrokerAdminClient(endpoint.remoting_addr, self.options.fetch.read_timeout_ms,
                                       self.options.fetch.credentials)
            self._admins[endpoint.remoting_addr] = client
        return client

    def _outage(self, broker: BrokerEndpoint) -> OutageWait:
        """The outage clock of a broker set's remoting calls (one per set, logged once per outage)."""
        wait = self._outages.get(broker.name)
        if wait is None:
            fetch = self.options.fetch
            where = broker.remoting_addr if self.options.read_from != READ_FROM_SLAVE else "(master and slaves)"
            wait = OutageWait(f"broker {broker.name} remoting {where}", fetch.reconnect_backoff_ms,
                              fetch.reconnect_backoff_max_ms, fetch.max_outage_ms)
            self._outages[broker.name] = wait
        return wait

    def _view(self, broker: BrokerEndpoint) -> BrokerSetView:
        """The broker set's view; the first call asks the master (or with ``readFrom=slave`` a slave) for
        its config, waits out an outage (``maxOutageMs``) and fails fast when the broker is not a classic
        master/slave one or not a RocketMQ broker at all."""
        view = self._views.get(broker.name)
        if view is not None:
            return view
        candidates = [broker, *self.options.slaves_of(broker.name)]  # any of them tells the set's mode
        wait = self._outage(broker)
        while True:
            errors: list[BrokerAdminError] = []
            for endpoint in candidates:
                admin = self._admin(endpoint)
                try:
                    config = admin.broker_config()
                except BrokerAdminError as exc:
                    errors.append(exc)
                    continue
                wait.recovered()
                protocol = admin.ha_protocol(config)
                if protocol == HA_PROTOCOL_AUTOSWITCH and self.options.read_from == READ_FROM_SLAVE:
                    raise HAReplicaOptionError("readFrom", self.options.read_from,
                                               f"broker {broker.name} runs in controller mode (AutoSwitch HA): "
                                               "hareplica reads controller-mode brokers from the master only")
                if protocol == HA_PROTOCOL_AUTOSWITCH and self.options.min_in_sync_slaves:
                    raise HAReplicaOptionError("minInSyncSlaves", self.options.min_in_sync_slaves,
                                               f"broker {broker.name} runs in controller mode: batches end at the "
                                               "master's confirmOffset; set allAckInSyncStateSet=true on the brokers "
                                               "to have it held by every in-sync replica")
                self._protocols[broker.name] = protocol
                if protocol == HA_PROTOCOL_AUTOSWITCH:
                    fetch = self.options.fetch
                    members = [(e.ha_addr, e.remoting_addr) for e in (broker, *self.options.slaves_of(broker.name))]
                    self._sets[broker.name] = ControllerModeSet(
                        broker.name, members, connect_timeout_ms=fetch.connect_timeout_ms,
                        read_timeout_ms=fetch.read_timeout_ms, credentials=fetch.credentials)
                view = BrokerSetView(broker.name, admin.mapped_file_size(config), ack_window_ms=ack_window_ms(config))
                self._views[broker.name] = view
                return view
            last = errors[-1] if len(errors) == 1 else BrokerAdminError(
                f"broker {broker.name}: neither the master nor a slave answered GET_BROKER_CONFIG: "
                f"{'; '.join(map(str, errors))}")
            if not all(isinstance(e, BrokerUnreachableError) for e in errors):
                raise next(e for e in errors if not isinstance(e, BrokerUnreachableError))
            if not wait.failed(last):
                raise BrokerUnreachableError(wait.give_up_message(last)) from last

    def _sample(self, endpoint: BrokerEndpoint, role: str) -> ServerOffsets:
        try:
            min_offset, max_offset, behind = self._admin(endpoint).store_offsets()
        except BrokerAdminError as exc:
            return ServerOffsets(endpoint, role, error=str(exc), down=isinstance(exc, BrokerUnreachableError))
        return ServerOffsets(endpoint, role, min_offset, max_offset, dispatch_behind=behind)

    def _refresh(self, broker: BrokerEndpoint, *, slaves: bool | None = None) -> BrokerSetView:
        """Sample the master's (and, when they matter, the slaves') commitLogMin/MaxOffset.

        The master's max offset is remembered as a record boundary. A master that is down is waited
        for (``maxOutageMs``) unless ``readFrom=slave`` and a slave answers (then batches go on from
        the slaves); a peer that answers but is not a RocketMQ broker fails at once.
        """
        view = self._view(broker)
        wait = self._outage(broker)
        cset = self._sets.get(broker.name)
        while True:
            master = self._sample(self._master_endpoint(broker), "master")
            if cset is not None and (not master.reachable or not cset.current_is_master()):
                if cset.follow_switch(view):
                    self._trusted.pop(broker.name, None)  # the checkpoint is checked against the new master
                    continue  # sample the new master
                if master.reachable:
                    master = ServerOffsets(master.endpoint, "master", down=True,
                                           error=f"broker {broker.name}: {master.endpoint.remoting_addr} is no longer "
                                                 "master and the controller has not elected another one yet")
            if master.reachable or self.options.read_from == READ_FROM_SLAVE:
                break
            if not master.down:
                raise BrokerAdminError(master.error)
            self._trusted.pop(broker.name, None)  # after an outage the history is checked again
            if not wait.failed(master.error):
                raise BrokerUnreachableError(wait.give_up_message(master.error))
        if master.reachable:
            wait.recovered()
            previous = view.master.max_offset if view.master is not None and view.master.reachable else None
            if previous is not None and master.max_offset < previous:
                log.warning("broker %s: commitLogMaxOffset went back from %d to %d", broker.name, previous,
                            master.max_offset)
                view.forget_boundaries()
                self._trusted.pop(broker.name, None)
            view.add_boundary(master.max_offset)
            view.note_master_max(master.max_offset, time.monotonic())
        else:
            log.warning("broker %s: master unreachable, planning from its slaves: %s", broker.name, master.error)
        view.master = master
        if slaves is None:
            slaves = self.options.read_from == READ_FROM_SLAVE or bool(self.options.min_in_sync_slaves)
        if slaves:
            previous = {s.endpoint.ha_addr: s for s in view.slaves}
            view.slaves = [self._sample(s, "slave") for s in self.options.slaves_of(broker.name)]
            for s in view.slaves:
                if not s.reachable:
                    log.warning("broker %s: slave %s unreachable: %s", broker.name, s.endpoint.ha_addr, s.error)
                view.note_slave_sample(previous.get(s.endpoint.ha_addr), s)
        return view

    def _master_endpoint(self, broker: BrokerEndpoint) -> BrokerEndpoint:
        """The endpoint to ask as master: ``broker``, or for a controller-mode set its current master."""
        cset = self._sets.get(broker.name)
        return broker if cset is None else cset.endpoint((broker, *self.options.slaves_of(broker.name)))

    @staticmethod
    def _bounds(view: BrokerSetView) -> tuple[int, int]:
        """(min, max) offsets of the broker set: the master's, or the slaves' when it is unreachable."""
        if view.master is not None and view.master.reachable:
            return view.master.min_offset, view.master.max_offset
        live = [s for s in view.slaves if s.reachable]
        if not live:
            raise BrokerAdminError(f"broker {view.name}: neither the master nor any slave answered "
                                   "GET_BROKER_RUNTIME_INFO")
        return min(s.min_offset for s in live), max(s.max_offset for s in live)

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
            min_offset, max_offset = self._bounds(self._refresh(broker))
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
        self._trigger_target = {b.name: self._bounds(self._refresh(b))[1] for b in self.options.brokers}
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
        on_data_loss(self.options.fail_on_data_loss,
                     f"broker {broker.name} ({broker.remoting_addr}) no longer holds CommitLog bytes [{start}, "
                     f"{min_offset}) that the query needs (commitLogMinOffset is {min_offset}: retention deleted them)",
                     instead="continue at the broker's first byte", logger=log)
        return min_offset

    def _target(self, view: BrokerSetView, begin: int, max_offset: int) -> int:
        """Where a batch of this broker set may end at most: the max offset, cut to what ``minInSyncSlaves``
        slaves hold and (``readFrom=slave``) what the best slave holds, as known boundaries."""
        target = max_offset
        if self.options.min_in_sync_slaves:
            replicated = view.replicated_offset(self.options.min_in_sync_slaves)
            if replicated is None:
                log.warning("broker %s: fewer than minInSyncSlaves=%d slaves answered; the batch waits", view.name,
                            self.options.min_in_sync_slaves)
                return begin
            target = min(target, view.floor_boundary(replicated, begin))
        if self.options.read_from == READ_FROM_SLAVE:
            best = view.best_slave()
            if best is not None and best.max_offset > begin and best.min_offset <= begin:
                target = min(target, view.floor_boundary(best.max_offset, begin))
        if self._trigger_target is not None and view.name in self._trigger_target:
            target = min(target, self._trigger_target[view.name])
        if target > begin and view.name in self._sets:
            target = min(target, self._sets[view.name].confirmed_end(view, begin))
        target = max(begin, target)
        safe = view.ack_safe_end(begin, target, time.monotonic())
        if safe < target:
            log.info("broker %s: SYNC_MASTER bytes below %d were appended less than %d ms ago; the batch ends "
                     "there so no reader acknowledges them before they land", view.name, safe, view.ack_window_ms)
        return safe

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """End offset of the next micro-batch (see the module doc for how the read limit cuts it).

        Spark 4.2+ passes the batch's start and read limit. Spark 4.0/4.1 pass neither
        (:mod:`connector.spark_compat`): the batch then starts at the last end offset Spark showed this reader
        (:meth:`partitions`, also called with an empty range when a query resumes from its checkpoint) or at the
        initial offset, and :meth:`getDefaultReadLimit` applies, so ``maxBytesPerTrigger`` bounds it the same way.
        """
        if start is None:
            start = self._last_seen if self._last_seen is not None else self.initialOffset()
        if limit is None:
            limit = self.getDefaultReadLimit()
        spans: dict[str, tuple[int, int]] = {}
        for broker in self.options.brokers:
            view = self._refresh(broker)
            min_offset, max_offset = self._bounds(view)
            begin = self._check_min(broker, self._start_of(broker, start, min_offset), min_offset)
            if broker.name in self._sets:
                self._sets[broker.name].check_landed(begin, self.options.fail_on_data_loss)
            begin = self._verified_begin(broker, view, start, begin, min_offset, max_offset)
            if begin > max_offset:
                message = (f"broker {broker.name}: the query is at CommitLog offset {begin} but the broker's "
                           f"commitLogMaxOffset is {max_offset}: the broker lost bytes [{max_offset}, {begin}) it "
                           "had served (e.g. a crash before flushing)")
                on_data_loss(self.options.fail_on_data_loss, message, instead="wait until it passes the offset",
                             logger=log)
            spans[broker.name] = (begin, self._target(view, begin, max_offset))
        if isinstance(limit, ReadMaxBytes):
            ends = self._apply_byte_limit(spans, limit.max_bytes)
        else:
            if not isinstance(limit, ReadAllAvailable):
                log.warning("read limit %r is not supported by hareplica; reading all available bytes", limit)
            ends = {name: end for name, (_, end) in spans.items()}
        out = self._with_fingerprints(start, spans, ends)
        switches = {name: cset.records() for name, cset in self._sets.items() if cset.switches}
        if switches:  # recorded in the batch's end offset (and so in the query progress)
            out[SWITCH_KEY] = switches
        return out

    # --- rewritten history (connector.history, docs/source.md "Rewritten history") -------------------
    def _read_bytes(self, view: BrokerSetView, broker: BrokerEndpoint, lo: int, hi: int) -> bytes:
        server = view.server_for(lo, hi, self.options.read_from == READ_FROM_SLAVE)
        return fetch_range(server.endpoint.ha_addr, lo, hi, broker=broker.name, fetch=self.options.fetch,
                           server_is_slave=server.role == "slave",
                           protocol=self._protocols.get(broker.name, HA_PROTOCOL_CLASSIC))

    def _verified_begin(self, broker: BrokerEndpoint, view: BrokerSetView, start: dict | None, begin: int,
                        min_offset: int, max_offset: int) -> int:
        """``begin``, checked against the fingerprint the offset carries (connector.history.check_start)
        unless this reader computed it itself with no regression since. A rewritten history raises
        DataLossError (``failOnDataLoss``) or is logged and skipped to the next real record boundary."""
        if begin > max_offset:
            return begin
        fingerprint = fingerprints_of(start or {}).get(broker.name)
        key = (broker.name, begin, fingerprint)
        if self._trusted.get(broker.name) == begin:
            self._verified[key] = begin
        elif key not in self._verified:
            rewrite = check_start(lambda lo, hi: self._read_bytes(view, broker, lo, hi), begin, fingerprint,
                                  min_offset, max_offset, view.mapped_file_size)
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
        previous = fingerprints_of(start or {})
        prints = {}
        for broker in self.options.brokers:
            begin, end = spans[broker.name][0], ends[broker.name]
            view = self._views[broker.name]
            fingerprint = previous.get(broker.name)
            if end > begin:
                lowest = view.settled_offset(time.monotonic()) if view.ack_window_ms else end
                try:
                    fingerprint = end_fingerprint(lambda lo, hi, v=view, b=broker: self._read_bytes(v, b, lo, hi),
                                                  begin, end, view.mapped_file_size, lowest)
                except HAReplicaError as exc:
                    log.warning("broker %s: no fingerprint of the record before offset %d (%s)", broker.name, end, exc)
                    fingerprint = None
            if fingerprint is not None and fingerprint.end == end:
                prints[broker.name] = fingerprint.to_json()
            if end <= self._bounds(view)[1]:  # not while waiting for a broker that lost its tail to pass `end`
                self._trusted[broker.name] = end
        return {**ends, FINGERPRINT_KEY: prints} if prints else dict(ends)

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
            ends[broker.name] = self._view(broker).ceil_boundary(begin + share, end)
        return ends

    def reportLatestOffset(self) -> dict:
        """The brokers' latest commitLogMaxOffset seen (StreamingQueryProgress ``latestOffset``): with the
        batch's ``endOffset`` it shows, per broker, how many CommitLog bytes the query is behind."""
        out = {}
        for broker in self.options.brokers:
            view = self._views.get(broker.name)
            if view is None or view.master is None:
                view = self._refresh(broker, slaves=False)
            out[broker.name] = self._bounds(view)[1]
        return out

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """One HAReplicaInputPartition per (broker, mapped-file slice) of ``[start, end)``, slices split further at
        ConsumeQueue-given record boundaries when ``minPartitions`` / ``maxBytesPerPartition`` ask for it
        (:mod:`connector.splits`); each is read from the master, or with ``readFrom=slave`` from a slave that
        holds it."""
        self._last_seen = dict(end)
        prefer_slave = self.options.read_from == READ_FROM_SLAVE
        slices: list[tuple[BrokerSetView, int, int]] = []
        for broker in self.options.brokers:
            stop = end.get(broker.name)
            if stop is None:
                continue
            stop = int(stop)
            view = self._views.get(broker.name)
            if view is None or view.master is None or (prefer_slave and not view.slaves):
                view = self._refresh(broker, slaves=prefer_slave)
            min_offset = self._bounds(view)[0]
            begin = self._start_of(broker, start, min_offset)
            if begin >= stop:
                continue
            begin = min(self._check_min(broker, begin, min_offset), stop)
            begin = min(self._verified_begin(broker, view, start, begin, min_offset, self._bounds(view)[1]), stop)
            while begin < stop:
                slice_end = min(stop, next_file_start(begin, view.mapped_file_size))
                slices.append((view, begin, slice_end))
                begin = slice_end
        counts = partition_counts([hi - lo for _, lo, hi in slices], self.options.min_partitions,
                                  self.options.max_bytes_per_partition)
        parts: list[InputPartition] = []
        for (view, lo, hi), pieces in zip(slices, counts, strict=True):
            edges = [lo, *self._splits(view, lo, hi, pieces), hi]
            for begin, slice_end in zip(edges, edges[1:], strict=False):
                server = view.server_for(begin, slice_end, prefer_slave)
                parts.append(HAReplicaInputPartition(
                    broker=view.name, ha_addr=server.endpoint.ha_addr, remoting_addr=server.endpoint.remoting_addr,
                    start=begin, end=slice_end, mapped_file_size=view.mapped_file_size, fetch=self.options.fetch,
                    server_role=server.role, columns=self.columns, transform=self.options.batch_transform,
                    ha_protocol=self._protocols.get(view.name, HA_PROTOCOL_CLASSIC),
                    **(self._sets[view.name].partition_fields() if view.name in self._sets else {})))
        log.info("planned %d partition(s) for %s -> %s", len(parts), start, end)
        return parts

    def _splits(self, view: BrokerSetView, lo: int, hi: int, pieces: int) -> list[int]:
        """Record boundaries cutting ``[lo, hi)`` into about ``pieces`` InputPartitions (:mod:`connector.splits`);
        on a SYNC_MASTER only boundaries whose bytes below can no longer have a producer waiting for an ack
        (a partition's first HA report acknowledges them, :mod:`connector.planning`). Planning goes on without
        splits when the broker cannot say."""
        if pieces <= 1:
            return []
        server = view.server_for(lo, hi, self.options.read_from == READ_FROM_SLAVE)
        fetch = self.options.fetch
        targets = [lo + (hi - lo) * k // pieces for k in range(1, pieces)]
        try:
            with ConsumeQueueReader(server.endpoint.remoting_addr, fetch.read_timeout_ms, fetch.credentials,
                                    connect_timeout_ms=fetch.connect_timeout_ms) as reader:
                found = find_boundaries(reader, lo, hi, targets, max((hi - lo) // (8 * pieces), 64 * 1024))
        except BrokerAdminError as exc:
            log.warning("broker %s: no split of [%d, %d) into %d partitions: %s", view.name, lo, hi, pieces, exc)
            return []
        settled = view.settled_offset(time.monotonic())
        cuts = [c for c in pick_splits(lo, hi, pieces, found) if c <= settled]
        log.info("broker %s: [%d, %d) split at %s (%d wanted, %d ConsumeQueue boundaries seen)", view.name, lo, hi,
                 cuts, pieces, len(found))
        return cuts

    def read(self, partition: HAReplicaInputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: fetch the partition's bytes over HA and yield RecordBatches (see read_partition), only
        the partition's ``columns`` when the query gave a schema."""
        if partition.transform is not None:
            return transform_batches(read_partition(partition), partition.transform, partition.columns)
        if partition.columns is None:
            return read_partition(partition)
        return (batch.select(list(partition.columns)) for batch in read_partition(partition))

    def commit(self, end: dict) -> None:
        """Forget boundaries below the committed offsets."""
        if SWITCH_KEY in (end or {}):
            for cset in self._sets.values():
                cset.committed()
        for name, offset in (end or {}).items():
            if name.startswith("@"):  # FINGERPRINT_KEY, SWITCH_KEY
                continue
            view = self._views.get(name)
            if view is not None:
                view.forget_boundaries(below=int(offset))

    def stop(self) -> None:
        """Close the driver's remoting connections."""
        for client in self._admins.values():
            client.close()
        self._admins.clear()


def warn_without_admission_control(options: SourceOptions) -> None:
    """On Spark < 4.2, one WARNING when ``maxBytesPerTrigger`` is set: it bounds processing-time micro-batches,
    but Trigger.AvailableNow there is a single micro-batch that would stop at the first cut
    (:func:`connector.spark_compat.available_now_problem`)."""
    problem = None if ADMISSION_CONTROL else available_now_problem(options.max_bytes_per_trigger)
    if problem:
        log.warning("%s (processing-time triggers are bounded as on Spark 4.2+)", problem)


def ack_window_ms(config: dict[str, str]) -> int:
    """How long (ms) a producer may wait for a replica ack on this broker (GET_BROKER_CONFIG): on a
    SYNC_MASTER ``max(slaveTimeout, syncFlushTimeout)`` (3000 / 5000 upstream) plus
    ACK_WINDOW_MARGIN_MS; 0 on any other role (acks release no producer there)."""
    if config.get("brokerRole", "ASYNC_MASTER").strip().upper() != "SYNC_MASTER":
        return 0
    waits = []
    for key, default in (("slaveTimeout", 3000), ("syncFlushTimeout", 5000)):
        try:
            waits.append(int(config.get(key, default)))
        except ValueError:
            waits.append(default)
    return max(waits) + ACK_WINDOW_MARGIN_MS


def read_partition(partition: HAReplicaInputPartition) -> Iterator[pa.RecordBatch]:
    """Fetch ``[partition.start, partition.end)`` over the HA port and decode it into RecordBatches.

    Bytes are received on a background thread (:func:`connector.ha_fetch.prefetch_chunks`) while the
    previous ones are decoded, unless ``fetchPrefetchChunks`` is 0. Memory stays bounded by one batch
    plus ``fetchPrefetchChunks`` + 2 receive buffers (1 MiB each) whatever the partition size. Records
    whose topic the query's filter drops are skipped before their columns are built. Raises
    DataLossError, HAFetchError, HAProtocolError or CommitLogFormatError (each naming offsets).
    """
    fetch = partition.fetch
    admin = BrokerAdminClient(partition.remoting_addr, fetch.read_timeout_ms, fetch.credentials)
    decoder = CommitLogArrowDecoder(
        partition.start, partition.end, partition.mapped_file_size, broker=partition.broker,
        decompress_body=fetch.decompress_body, max_records_per_batch=fetch.max_records_per_batch,
        max_bytes_per_batch=fetch.max_bytes_per_batch, topic_filter=fetch.topic_filter, mode=fetch.mode,
        verify_body_crc=fetch.verify_body_crc, max_inflated_body_bytes=fetch.max_inflated_body_bytes)
    fetcher_class = AutoSwitchRangeFetcher if partition.ha_protocol == HA_PROTOCOL_AUTOSWITCH else HARangeFetcher
    extra = {} if not partition.members else {
        "locate_master": master_locator(partition.members, fetch.connect_timeout_ms, fetch.read_timeout_ms,
                                        fetch.credentials),
        "planned_epochs": partition.epochs, "credentials": fetch.credentials}
    fetcher = fetcher_class(
        partition.ha_addr, partition.start, partition.end, broker=partition.broker,
        connect_timeout_ms=fetch.connect_timeout_ms, read_timeout_ms=fetch.read_timeout_ms,
        fetch_retries=fetch.fetch_retries, heartbeat_interval_ms=fetch.heartbeat_interval_ms,
        offsets_probe=admin.commit_log_offsets, fail_on_data_loss=fetch.fail_on_data_loss,
        server_is_slave=partition.server_role == "slave", copy_chunks=fetch.prefetch_chunks > 0,
        reconnect_backoff_ms=fetch.reconnect_backoff_ms, reconnect_backoff_max_ms=fetch.reconnect_backoff_max_ms,
        max_outage_ms=fetch.max_outage_ms, **extra)
    chunks = prefetch_chunks(fetcher, fetch.prefetch_chunks) if fetch.prefetch_chunks else fetcher
    try:
        for offset, data in chunks:
            if offset != decoder.stream_offset:
                yield from decoder.jump(offset, "lost on the broker")
            if data:
                yield from decoder.feed(offset, data)
        yield from decoder.finish()
        log.info("broker %s (%s %s): read [%d, %d): %d records kept, %d filtered out by topic, %d END_FILE "
                 "blanks, %d HA connection(s)", partition.broker, partition.server_role, partition.ha_addr,
                 partition.start, partition.end, decoder.records_emitted, decoder.records_filtered,
                 decoder.blanks_skipped, fetcher.connections)
    finally:
        fetcher.close()
        admin.close()
