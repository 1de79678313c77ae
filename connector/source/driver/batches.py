"""The driver's planning of micro-batches: :class:`BatchPlanner` and the batch-end rules it applies.

The stream reader (:mod:`connector.source.reader`) hands each Spark call to a :class:`BatchPlanner`, which samples
the brokers (:mod:`connector.source.driver.brokers`), checks and writes the ``"@lastRecord"`` fingerprints
(:mod:`connector.source.driver.offsets`) and builds the partitions (:mod:`connector.source.driver.partitions`).
The rules below are plain functions over offsets (bytes), no I/O: where
each broker's batch starts (the checkpoint, or commitLogMinOffset once retention deleted it: ``fail_on_data_loss``),
how far it may go (the master's max offset cut to what ``min_in_sync_slaves`` slaves or, with ``read_from='slave'``, the
best slave hold, the AvailableNow target, a controller-mode set's confirmOffset, the SYNC_MASTER ack window), and
how a ``ReadMaxBytes`` limit cuts it (docs/source.md "Offsets, batches, partitions"). The boundary knowledge and
the ack rule are :class:`connector.source.driver.brokers.BrokerSetView`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from connector.client.consume_queue import ConsumeQueueReader
from connector.data_loss import on_data_loss
from connector.errors import BrokerAdminError, HAReplicaError, HAReplicaOptionError
from connector.options.declaration import (
    EARLIEST_OFFSET_SENTINEL,
    LATEST_OFFSET_SENTINEL,
    OPTIONS,
    READ_FROM_SLAVE,
    STARTING_OFFSETS_EARLIEST,
    STARTING_OFFSETS_LATEST,
)
from connector.options.parse import BrokerEndpoint, SourceOptions
from connector.source.driver.brokers import BrokerSets, BrokerSetView, DriverReads, bounds
from connector.source.driver.controller_mode import SWITCH_KEY, ControllerModeSet
from connector.source.driver.discovery import Discovery
from connector.source.driver.offsets import FINGERPRINT_KEY, SourceOffset, check_start, end_fingerprint
from connector.source.driver.partitions import budget_end, build_partitions, file_slices
from connector.source.driver.route import Route
from connector.source.driver.timestamps import offsets_for_times
from connector.source.partition import HAReplicaInputPartition

log = logging.getLogger(__name__)


def start_of(broker: BrokerEndpoint, start: SourceOffset, min_offset: int, reported: set[str] | None = None) -> int:
    """The broker's offset in a batch's start offset, or ``min_offset`` when it has none: logged with a warning
    once per name ``reported`` does not hold yet (the name is then added; None: always logged)."""
    value = start.positions.get(broker.name)
    if value is None:
        if reported is None or broker.name not in reported:
            log.warning("broker %s has no offset in the checkpoint; starting at its commitLogMinOffset %d",
                        broker.name, min_offset)
            if reported is not None:
                reported.add(broker.name)
        return min_offset
    return value


def check_min(broker: BrokerEndpoint, start: int, min_offset: int, fail_on_data_loss: bool) -> int:
    """The offset a batch of ``broker`` can really start at, given commitLogMinOffset: ``start``, or when
    retention deleted it DataLossError (``fail_on_data_loss``) or ``min_offset`` (logged)."""
    if start >= min_offset:
        return start
    on_data_loss(fail_on_data_loss,
                 f"broker {broker.name} ({broker.remoting_addr}) no longer holds CommitLog bytes [{start}, "
                 f"{min_offset}) that the query needs (commitLogMinOffset is {min_offset}: retention deleted them)",
                 instead="continue at the broker's first byte", logger=log)
    return min_offset


def batch_target(options: SourceOptions, view: BrokerSetView, begin: int, max_offset: int, *,
                 trigger_target: int | None = None, cset: ControllerModeSet | None = None) -> int:
    """Where a batch of this broker set may end at most (bytes, >= ``begin``): the max offset, cut to what
    ``min_in_sync_slaves`` slaves hold and (``read_from='slave'``) what the best slave holds, as known boundaries;
    then to ``trigger_target`` (Trigger.AvailableNow), a controller-mode set's confirmOffset and the
    SYNC_MASTER ack window (:meth:`connector.source.driver.brokers.BrokerSetView.ack_safe_end`)."""
    target = max_offset
    if options.min_in_sync_slaves:
        replicated = view.replicated_offset(options.min_in_sync_slaves)
        if replicated is None:
            log.warning("broker %s: fewer than %s=%d slaves answered; the batch waits", view.name,
                        OPTIONS.min_in_sync_slaves.name, options.min_in_sync_slaves)
            return begin
        target = min(target, view.floor_boundary(replicated, begin))
    if options.read_from == READ_FROM_SLAVE:
        best = view.best_slave()
        if best is not None and best.max_offset > begin and best.min_offset <= begin:
            target = min(target, view.floor_boundary(best.max_offset, begin))
    if trigger_target is not None:
        target = min(target, trigger_target)
    if target > begin and cset is not None:
        target = min(target, cset.confirmed_end(view, begin))
    target = max(begin, target)
    safe = view.ack_safe_end(begin, target, time.monotonic())
    if safe < target:
        log.info("broker %s: SYNC_MASTER bytes below %d were appended less than %d ms ago; the batch ends "
                 "there so no reader acknowledges them before they land", view.name, safe, view.ack_window_ms)
    return safe


#: the end-offset entry holding each broker set's commitLogMaxOffset when the batch was planned (bytes): the
#: progress's ``endOffset`` carries it on every Spark, also where Spark never asks ``reportLatestOffset`` (4.0/4.1)
MAX_OFFSET_KEY = "@maxOffset"

#: how far past its ``max_bytes_per_trigger`` budget a batch may end, over all broker sets (bytes)
BUDGET_SLACK_BYTES = 1 << 20

#: ``(view, begin, wanted, end, slack) -> boundary or None``: a record boundary near ``wanted`` that the broker
#: names (:func:`connector.source.driver.partitions.budget_end`)
ExactEnd = Callable[[BrokerSetView, int, int, int, int], int | None]


def apply_byte_limit(brokers: Sequence[BrokerEndpoint], views: dict[str, BrokerSetView],
                     spans: dict[str, tuple[int, int]], max_bytes: int, exact_end: ExactEnd | None = None
                     ) -> dict[str, int]:
    """Batch ends under ``ReadMaxBytes(max_bytes)``: ``spans`` (set name -> (begin, end)) cut so the budget is
    shared in proportion to each set's backlog. Each set's end is a record boundary near its share, within its
    part of :data:`BUDGET_SLACK_BYTES` (shared by the sets cut): a known one (next mapped-file start, a sampled
    max offset; :class:`connector.source.driver.brokers.BrokerSetView`) at or past the share, or below it;
    else one ``exact_end`` finds in the ConsumeQueues; else (the broker names none) the next known boundary,
    logged (docs/source.md "Limits")."""
    backlog = {name: end - begin for name, (begin, end) in spans.items()}
    total = sum(backlog.values())
    if total <= max_bytes:
        return {name: end for name, (_, end) in spans.items()}
    slack = max(1, BUDGET_SLACK_BYTES // sum(1 for size in backlog.values() if size > 0))
    ends = {}
    for broker in brokers:
        begin, end = spans[broker.name]
        if backlog[broker.name] == 0:
            ends[broker.name] = end
            continue
        view = views[broker.name]
        wanted = begin + max(1, max_bytes * backlog[broker.name] // total)
        known = view.ceil_boundary(wanted, end)
        below = view.floor_boundary(wanted, begin)
        if known - wanted <= slack:
            ends[broker.name] = known
        elif below > begin and wanted - below <= slack:
            ends[broker.name] = below
        else:
            exact = exact_end(view, begin, wanted, end, slack) if exact_end is not None else None
            if exact is None:
                log.info("broker %s: no record boundary near offset %d is known; the batch ends at %d, %d bytes "
                         "past its %s share", broker.name, wanted, known, known - wanted,
                         OPTIONS.max_bytes_per_trigger.name)
            else:
                view.add_boundary(exact)
            ends[broker.name] = known if exact is None else exact
    return ends


def delays_batch(options: SourceOptions, start: SourceOffset, latest: dict[str, int], last_batch_s: float | None,
                 now_s: float) -> bool:
    """Whether ``min_bytes_per_trigger`` skips this micro-batch (Kafka source minOffsetsPerTrigger's rule): fewer
    than ``min_bytes_per_trigger`` CommitLog bytes lie between ``start`` and the brokers' ``latest`` max offsets
    (bytes, summed over the broker sets) and less than ``max_trigger_delay`` passed since the last batch that
    read bytes (``last_batch_s``, monotonic seconds; None: no such batch yet, which never waits)."""
    if options.min_bytes_per_trigger is None or last_batch_s is None:
        return False
    if (now_s - last_batch_s) * 1000 >= options.max_trigger_delay_ms:
        return False
    positions = start.positions
    new = sum(max(0, latest[name] - positions.get(name, latest[name])) for name in latest)
    return new < options.min_bytes_per_trigger


class BatchPlanner:
    """The driver's state and planning behind one :class:`connector.source.reader.HAReplicaStreamReader`.

    Offsets are :class:`connector.source.driver.offsets.SourceOffset` objects (per broker set the next CommitLog
    offset in bytes, plus the ``"@"`` entries): the reader converts Spark's JSON dicts at its boundary, once per
    call, and every method here takes and returns the object. ``brokers``: the :class:`BrokerSets` sampled over
    remoting; ``trigger_target``: the AvailableNow end per broker, or None. Broker errors raise
    BrokerAdminError (or UnsupportedBrokerModeError); lost data raises DataLossError when ``fail_on_data_loss``.
    """

    def __init__(self, options: SourceOptions):
        self.options = options
        self.brokers = BrokerSets(options)  # views, remoting clients, controller-mode sets; the route planned now
        #: with ``namesrv_addr``: the name server's route, which it updates in :attr:`route`
        self.discovery = Discovery(options) if options.namesrv_addr else None
        if self.discovery is not None:
            self.brokers.route_master = self.route_master
        self.trigger_target: dict[str, int] | None = None
        self._last_batch_s: float | None = None  # clock() of the last batch that read bytes
        self.clock = time.monotonic  # seconds, for max_trigger_delay
        self._verified: dict[tuple, int] = {}  # (broker, start, fingerprint) -> where reading really starts
        self._new_reported: set[str] = set()  # sets logged as starting without an offset
        self._paused_reported: set[str] = set()  # sets logged as paused or dropped (drop_broker_sets)

    @property
    def route(self) -> Route:
        """The broker sets planned now (:class:`connector.source.driver.route.Route`), apart from :attr:`options`,
        which stay as the user gave them."""
        return self.brokers.route

    def initial_offsets(self) -> dict:
        """Per broker: commitLogMinOffset (earliest), commitLogMaxOffset (latest) or the JSON offset; raises
        HAReplicaOptionError for a JSON offset past the broker's commitLogMaxOffset. A starting time
        (``starting_timestamp`` / ``starting_offsets_by_timestamp``) wins: each set's first record stored at or
        after it (:func:`connector.source.driver.timestamps.offsets_for_times`)."""
        self.follow_route()
        if self.discovery is not None:
            self.discovery.check_starting(self.options)
        starting = self.options.starting_offsets
        out = {}
        times = self.options.starting_times(self.route.broker_names)
        if times is not None:
            for broker in self.route.brokers:
                self.brokers.refresh(broker)
            out = offsets_for_times(self, times, past_last=self.options.starting_offsets_by_timestamp_strategy)
            log.info("initial offsets %s (first records stored at or after %s ms)", out, times)
            return out
        for broker in self.route.brokers:
            min_offset, max_offset = bounds(self.brokers.refresh(broker))
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
                    raise HAReplicaOptionError(OPTIONS.starting_offsets.name, starting,
                                               f"offset {value} of broker {broker.name} is past its "
                                               f"commitLogMaxOffset {max_offset}")
            out[broker.name] = value
        log.info("initial offsets %s", out)
        return out

    def prepare_available_now(self) -> None:
        """Record every broker's current commitLogMaxOffset as the AvailableNow target."""
        self.follow_route()
        self.trigger_target = {b.name: bounds(self.brokers.refresh(b))[1] for b in self.route.brokers}
        log.info("Trigger.AvailableNow target offsets %s", self.trigger_target)

    def next_end(self, start: SourceOffset, max_bytes: int | None) -> SourceOffset:
        """The next micro-batch's end offset (:meth:`end_offset`) with, under :data:`MAX_OFFSET_KEY`, each broker
        set's commitLogMaxOffset seen while planning it (the lag the progress shows on every Spark,
        docs/delta.md "Lag monitoring"); ``start`` itself (no batch) when nothing is new or while
        ``min_bytes_per_trigger`` holds it back (:func:`delays_batch`; never under Trigger.AvailableNow, whose
        target must be reached)."""
        if self.options.min_bytes_per_trigger is not None and self.trigger_target is None:
            latest = {b.name: bounds(self.brokers.refresh(b, slaves=False))[1] for b in self.route.brokers}
            if delays_batch(self.options, start, latest, self._last_batch_s, self.clock()):
                log.debug("fewer than %s=%d new bytes and %s not passed: no batch yet",
                          OPTIONS.min_bytes_per_trigger.name, self.options.min_bytes_per_trigger,
                          OPTIONS.max_trigger_delay.name)
                return start
        end = self.end_offset(start, max_bytes)
        if end.positions == start.positions and {**end.extras, MAX_OFFSET_KEY: None} == {
                **start.extras, MAX_OFFSET_KEY: None}:
            return start  # nothing to read: the same offset, so Spark runs no batch
        if end.positions != start.positions:
            self._last_batch_s = self.clock()
        end.extras[MAX_OFFSET_KEY] = {name: bounds(view)[1] for name, view in self.brokers.views.items()
                                      if name in end.positions}
        return end

    def _budget_end(self, view: BrokerSetView, begin: int, wanted: int, end: int, slack: int) -> int | None:
        """A record boundary near ``wanted`` from the ConsumeQueues of the server of ``[begin, end)``
        (:func:`connector.source.driver.partitions.budget_end`), None when the broker names none or cannot answer."""
        server = view.server_for(begin, end, self.options.read_from == READ_FROM_SLAVE)
        fetch = self.options.fetch
        try:
            with ConsumeQueueReader(server.endpoint.remoting_addr, fetch.read_timeout_ms, fetch.credentials,
                                    connect_timeout_ms=fetch.connect_timeout_ms) as reader:
                return budget_end(reader, begin, wanted, end, slack)
        except BrokerAdminError as exc:
            log.warning("broker %s: no ConsumeQueue boundary near offset %d for %s: %s", view.name, wanted,
                        OPTIONS.max_bytes_per_trigger.name, exc)
            return None

    def end_offset(self, start: SourceOffset, max_bytes: int | None) -> SourceOffset:
        """The next micro-batch's end offset from ``start``; ``max_bytes``: the ``ReadMaxBytes`` budget shared
        between brokers (:func:`apply_byte_limit`), None to read all available bytes."""
        self.follow_route()
        given = start
        if self.discovery is not None:
            start = self.discovery.with_new_sets(self.brokers, self.options, start)
        fail = self.options.fail_on_data_loss
        spans: dict[str, tuple[int, int]] = {}
        for broker in self.route.brokers:
            view = self.brokers.refresh(broker)
            min_offset, max_offset = bounds(view)
            begin = check_min(broker, start_of(broker, start, min_offset, self._new_reported), min_offset, fail)
            cset = self.brokers.sets.get(broker.name)
            if cset is not None:
                cset.check_landed(begin, fail)
            begin = self.verified_begin(broker, view, start, begin, min_offset, max_offset)
            if begin > max_offset:
                message = (f"broker {broker.name}: the query is at CommitLog offset {begin} but the broker's "
                           f"commitLogMaxOffset is {max_offset}: the broker lost bytes [{max_offset}, {begin}) it "
                           "had served (e.g. a crash before flushing)")
                on_data_loss(fail, message, instead="wait until it passes the offset", logger=log)
            trigger = None if self.trigger_target is None else self.trigger_target.get(broker.name)
            spans[broker.name] = (begin, batch_target(self.options, view, begin, max_offset, trigger_target=trigger,
                                                      cset=cset))
        if max_bytes is not None:
            ends = apply_byte_limit(self.route.brokers, self.brokers.views, spans, max_bytes, self._budget_end)
        else:
            ends = {name: end for name, (_, end) in spans.items()}
        out = self.with_fingerprints(start, spans, ends)
        switches = {name: cset.records() for name, cset in self.brokers.sets.items() if cset.switches}
        if switches:  # recorded in the batch's end offset (and so in the query progress)
            out.extras[SWITCH_KEY] = switches
        if self.discovery is not None:  # where new sets start, for a replay
            out.extras.update(self.discovery.new_set_starts(given, out))
        return self.carry_unplanned(start, out)

    def carry_unplanned(self, start: SourceOffset, end: SourceOffset) -> SourceOffset:
        """``end`` plus the offset and fingerprint of every set of ``start`` that no batch plans now, so a
        checkpoint never loses a set's offset as a side effect: with ``brokers``, a set it does not name is paused
        (logged once) and resumes from its offset when named again; with ``namesrv_addr``, a set out of the route
        is an outage (:meth:`connector.source.driver.discovery.Discovery.carry_absent`). Only the sets
        ``drop_broker_sets`` names are left out (logged once). Raises HAReplicaOptionError when
        ``drop_broker_sets`` names a set the query reads now (docs/source.md "Offsets, batches, partitions")."""
        dropped, planned = self.options.drop_broker_sets, set(self.route.broker_names)
        if dropped & planned:
            where = "the name server's route" if self.discovery is not None else OPTIONS.brokers.name
            raise HAReplicaOptionError(OPTIONS.drop_broker_sets.name, ",".join(sorted(dropped)),
                                       f"names {', '.join(sorted(dropped & planned))}, which {where} holds: a set "
                                       "is read or dropped, not both")
        for name, position in start.positions.items():
            if name in end.positions:
                continue
            report = name not in self._paused_reported
            self._paused_reported.add(name)
            if name in dropped:
                if report:
                    log.warning("broker set %s: its offset %d is removed from the checkpoint (%s); a query that "
                                "reads the set again starts it as a new set", name, position,
                                OPTIONS.drop_broker_sets.name)
            elif self.discovery is None:
                if report:
                    log.warning("broker set %s is in the checkpoint (offset %d) but not in %s: paused, its offset "
                                "kept; it resumes from there when %s names it again (%s removes it)", name,
                                position, OPTIONS.brokers.name, OPTIONS.brokers.name, OPTIONS.drop_broker_sets.name)
                end.carry(name, start)
        if self.discovery is not None:
            kept = SourceOffset({k: v for k, v in start.positions.items() if k not in dropped}, start.extras)
            return self.discovery.carry_absent(self.options, kept, end)
        return end

    def follow_route(self) -> None:
        """With ``namesrv_addr``: ask the name server when ``namesrv_poll_interval_ms`` passed and plan its live
        broker sets (:meth:`connector.source.driver.discovery.Discovery.follow`); nothing with ``brokers``."""
        if self.discovery is not None:
            self.discovery.follow(self.brokers)

    def route_master(self, name: str) -> BrokerEndpoint | None:
        """With ``namesrv_addr``, while broker set ``name``'s master is down: the route asked again now and
        planned (:meth:`follow_route`), and the master it names for the set (None: the set is not in it)."""
        route = self.discovery.follow(self.brokers, force=True)
        return next((b for b in route.brokers if b.name == name), None)

    # --- rewritten history (connector.source.driver.offsets, docs/source.md "Rewritten history") ----------
    def _reads(self, view: BrokerSetView) -> DriverReads:
        """The driver's HA reads of ``view``'s broker set for the history checks."""
        return DriverReads(self.options.fetch, view, self.brokers.protocol(view.name),
                           self.options.read_from == READ_FROM_SLAVE)

    def verified_begin(self, broker: BrokerEndpoint, view: BrokerSetView, start: SourceOffset, begin: int,
                       min_offset: int, max_offset: int) -> int:
        """``begin``, checked against the fingerprint the offset carries
        (:func:`connector.source.driver.offsets.check_start`) unless this planner computed it itself with no
        regression since. A rewritten history raises DataLossError (``fail_on_data_loss``) or is logged and
        skipped to the next real record boundary."""
        if begin > max_offset:
            return begin
        fingerprint = start.fingerprints.get(broker.name)
        key = (broker.name, begin, fingerprint)
        if self.brokers.trusted.get(broker.name) == begin:
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

    def with_fingerprints(self, start: SourceOffset, spans: dict[str, tuple[int, int]],
                          ends: dict[str, int]) -> SourceOffset:
        """``ends`` plus, under :data:`FINGERPRINT_KEY`, the fingerprint of the last record before each end."""
        previous = start.fingerprints
        prints = {}
        for broker in self.route.brokers:
            begin, end = spans[broker.name][0], ends[broker.name]
            view = self.brokers.views[broker.name]
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
                self.brokers.trusted[broker.name] = end
        return SourceOffset(dict(ends), {FINGERPRINT_KEY: prints} if prints else {})

    def latest_offsets(self) -> dict:
        """The brokers' latest commitLogMaxOffset seen, per broker name."""
        out = {}
        for broker in self.route.brokers:
            view = self.brokers.views.get(broker.name)
            if view is None or view.master is None:
                view = self.brokers.refresh(broker, slaves=False)
            out[broker.name] = bounds(view)[1]
        return out

    def partitions(self, start: SourceOffset, end: SourceOffset,
                   columns: tuple[str, ...] | None) -> list[HAReplicaInputPartition]:
        """The InputPartitions of ``[start, end)`` (:mod:`connector.source.driver.partitions`), each decoding
        ``columns`` (None: all)."""
        prefer_slave = self.options.read_from == READ_FROM_SLAVE
        slices: list[tuple[BrokerSetView, int, int]] = []
        planned = self.route.brokers
        if self.discovery is not None:
            if not self.discovery.started:
                self.follow_route()
            self.discovery.recall_new_starts(end)
            start = self.discovery.with_new_sets(self.brokers, self.options, start)
            planned = self.discovery.endpoints_for(self.route, start, end)
        self.check_replayable(start, end, planned)
        for broker in planned:
            stop = end.positions.get(broker.name)
            if stop is None:
                continue
            view = self.brokers.views.get(broker.name)
            if view is None or view.master is None or (prefer_slave and not view.slaves):
                view = self.brokers.refresh(broker, slaves=prefer_slave)
            min_offset = bounds(view)[0]
            begin = start_of(broker, start, min_offset, self._new_reported)
            if begin >= stop:
                continue
            begin = min(check_min(broker, begin, min_offset, self.options.fail_on_data_loss), stop)
            begin = min(self.verified_begin(broker, view, start, begin, min_offset, bounds(view)[1]), stop)
            slices.extend(file_slices(view, begin, stop))
        parts = build_partitions(slices, self.options, columns=columns, protocols=self.brokers.protocols,
                                 sets=self.brokers.sets)
        log.info("planned %d partition(s) for %s -> %s", len(parts), start, end)
        return parts

    def check_replayable(self, start: SourceOffset, end: SourceOffset, planned: Sequence[BrokerEndpoint]) -> None:
        """Every set whose offset ``[start, end)`` moves has a master to read it from in ``planned`` (a batch
        planned before a restart may move a set the query no longer names). Raises HAReplicaOptionError naming
        the set and the range with ``brokers``; with ``namesrv_addr`` (the set out of the route since) it is a
        data-loss decision (DataLossError when ``fail_on_data_loss``)."""
        names = {b.name for b in planned}
        before = start.positions
        for name, stop in end.positions.items():
            if name in names or stop <= before.get(name, 0):
                continue
            lo = before.get(name, "its first byte")  # a set new in this batch starts at its commitLogMinOffset
            message = (f"the batch being run reads broker set {name}'s CommitLog [{lo}, {stop}) (it was planned "
                       f"before a restart), but {OPTIONS.brokers.name if self.discovery is None else 'the route'} "
                       "does not name the set now")
            if self.discovery is None:
                raise HAReplicaOptionError(OPTIONS.brokers.name, ",".join(self.options.broker_names),
                                           f"{message}: name it again to run the batch, then leave it out")
            on_data_loss(self.options.fail_on_data_loss, message, instead="run the batch without those records",
                         logger=log)

    def commit(self, end: SourceOffset) -> None:
        """Forget boundaries below the committed offsets (and, once recorded, pending master switches)."""
        if end.has_switches:
            for cset in self.brokers.sets.values():
                cset.committed()
        for name, position in end.positions.items():
            view = self.brokers.views.get(name)
            if view is not None:
                view.forget_boundaries(below=position)

    def close(self) -> None:
        """Close the driver's remoting connections."""
        self.brokers.close()
        if self.discovery is not None:
            self.discovery.close()
