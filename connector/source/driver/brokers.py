"""The driver's picture of each broker set: what it knows (:class:`BrokerSetView`), how it learns it
(:class:`BrokerSets`), and its small HA reads (:class:`DriverReads`).

* :class:`BrokerSetView` and :class:`ServerOffsets` are plain Python over offsets (bytes), no I/O: the record
  boundaries known without reading data, slave samples and reput offsets, the SYNC_MASTER acknowledgement window,
  and the pure rules that turn them into batch ends and the server of each slice.
* :class:`BrokerSets` (one per stream reader) asks the brokers over remoting (GET_BROKER_CONFIG,
  GET_BROKER_RUNTIME_INFO) and keeps their answers in the views, with the outage clocks (``max_outage_ms``,
  :mod:`connector.client.reconnect`), each set's HA protocol and, for 5.x controller-mode sets, the
  :class:`connector.source.driver.controller_mode.ControllerModeSet` that follows master switches.
* :class:`DriverReads` fetches the few CommitLog bytes the history checks of :mod:`connector.source.driver.offsets`
  need, from the server a task would read the same slice from.

The rules: docs/source.md "Offsets, batches, partitions", "Full history, reading from slaves", "Acknowledgements
(safe on a SYNC_MASTER)", "Rewritten history" and "RocketMQ 5.x controller mode"; the RocketMQ facts behind them
docs/protocol.md §1.9, §2.3, §2.8.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from connector.client.admin import BrokerAdminClient
from connector.client.ha import HARangeFetcher
from connector.client.reconnect import OutageWait
from connector.errors import BrokerAdminError, BrokerUnreachableError, HAReplicaOptionError
from connector.options.declaration import OPTIONS, READ_FROM_SLAVE
from connector.options.parse import BrokerEndpoint, SourceOptions
from connector.options.settings import FetchSettings
from connector.protocol.ha import HA_PROTOCOL_CLASSIC
from connector.protocol.ha_autoswitch import HA_PROTOCOL_AUTOSWITCH
from connector.protocol.mapped_files import ceil_file_start, file_start, next_file_start
from connector.source.driver.controller_mode import ControllerModeSet
from connector.source.driver.route import Route

log = logging.getLogger(__name__)

MAX_KNOWN_BOUNDARIES_PER_BROKER = 4096
ACK_WINDOW_MARGIN_MS = 1000  # clock and scheduling slack on top of the master's replica wait


@dataclass
class ServerOffsets:
    """One server's (commitLogMinOffset, commitLogMaxOffset) in bytes, or why it could not be asked."""

    endpoint: BrokerEndpoint
    role: str  # "master" or "slave"
    min_offset: int | None = None
    max_offset: int | None = None
    error: str | None = None
    dispatch_behind: int | None = None  # dispatchBehindBytes, when the broker reports it
    down: bool = False  # the error is an outage (refused, reset, timed out) that may end, not a wrong peer

    @property
    def reachable(self) -> bool:
        return self.max_offset is not None

    def holds(self, lo: int, hi: int) -> bool:
        """True when the server answered and holds every byte of ``[lo, hi)``."""
        return self.reachable and self.min_offset <= lo and hi <= self.max_offset


@dataclass
class BrokerSetView:
    """What the driver knows about one broker set: its mapped-file size, the master's and slaves'
    offsets from the latest samples, and the record boundaries it has seen (master max offsets)."""

    name: str
    mapped_file_size: int
    master: ServerOffsets | None = None
    slaves: list[ServerOffsets] = field(default_factory=list)
    #: how long (ms) a SYNC_MASTER producer may still wait for a replica ack; 0 when acks have no effect
    ack_window_ms: int = 0
    _boundaries: list[int] = field(default_factory=list)  # sorted master commitLogMaxOffset samples
    _recent: deque = field(default_factory=deque)  # (commitLogMaxOffset, monotonic s) within the ack window
    _settled: int = -1  # every byte below this was in a master sample at least ack_window_ms ago

    # --- boundaries --------------------------------------------------------------------------------
    def add_boundary(self, offset: int) -> None:
        """Remember a record boundary (a master's commitLogMaxOffset); keeps the newest
        :data:`MAX_KNOWN_BOUNDARIES_PER_BROKER` (the smallest are dropped first)."""
        at = bisect.bisect_left(self._boundaries, offset)
        if at < len(self._boundaries) and self._boundaries[at] == offset:
            return
        self._boundaries.insert(at, offset)
        if len(self._boundaries) > MAX_KNOWN_BOUNDARIES_PER_BROKER:
            del self._boundaries[0]

    def forget_boundaries(self, below: int | None = None) -> None:
        """Drop every boundary (``below`` None: the log went backwards) or those below an offset."""
        if below is None:
            self._boundaries.clear()
        else:
            del self._boundaries[:bisect.bisect_left(self._boundaries, below)]

    @property
    def boundaries(self) -> list[int]:
        """The sampled boundaries, ascending."""
        return list(self._boundaries)

    def file_start(self, offset: int) -> int:
        """Start of the mapped file holding ``offset``."""
        return file_start(offset, self.mapped_file_size)

    def floor_boundary(self, offset: int, at_least: int) -> int:
        """The largest known record boundary <= ``offset``, but not below ``at_least`` (a boundary itself,
        e.g. the batch start)."""
        best = max(at_least, self.file_start(offset))
        at = bisect.bisect_right(self._boundaries, offset)
        if at:
            best = max(best, self._boundaries[at - 1])
        return min(best, max(offset, at_least))

    def ceil_boundary(self, wanted: int, end: int) -> int:
        """The smallest known boundary >= ``wanted`` (next file start or a sample), capped at ``end``."""
        if wanted >= end:
            return end
        best = min(end, ceil_file_start(wanted, self.mapped_file_size))
        at = bisect.bisect_left(self._boundaries, wanted)
        if at < len(self._boundaries):
            best = min(best, self._boundaries[at])
        return best

    def note_slave_sample(self, previous: ServerOffsets | None, current: ServerOffsets) -> None:
        """Learn the slave's reput offset as a boundary when two consecutive samples agree."""
        if (previous is None or not previous.reachable or not current.reachable or current.dispatch_behind is None
                or (previous.max_offset, previous.dispatch_behind) != (current.max_offset, current.dispatch_behind)):
            return
        reput = current.max_offset - current.dispatch_behind
        if current.min_offset <= reput <= current.max_offset:
            self.add_boundary(reput)

    # --- acknowledgements on a SYNC_MASTER -----------------------------------------------------------
    def note_master_max(self, max_offset: int, now_s: float) -> None:
        """Record a master commitLogMaxOffset sample taken at monotonic time ``now_s``."""
        if self._recent and max_offset < self._recent[-1][0]:
            self._recent.clear()  # the log went backwards: nothing recent is trustworthy
            self._settled = min(self._settled, max_offset)
        self._recent.append((max_offset, now_s))

    def settled_offset(self, now_s: float) -> int:
        """Every byte below the returned offset was appended at least ``ack_window_ms`` ago, so no
        SYNC_MASTER producer can still be waiting for its ack (-1 when nothing is known yet)."""
        if not self.ack_window_ms:
            return 1 << 62
        horizon = now_s - self.ack_window_ms / 1000
        while self._recent and self._recent[0][1] <= horizon:
            self._settled = max(self._settled, self._recent.popleft()[0])
        return self._settled

    def ack_safe_end(self, begin: int, end: int, now_s: float) -> int:
        """``end``, or the first mapped-file start inside ``(begin, end)`` whose partition's first report
        would acknowledge bytes that may still have a producer waiting (see the module doc)."""
        size = self.mapped_file_size
        settled = self.settled_offset(now_s)
        first_inner = next_file_start(begin, size)
        first_unsettled = next_file_start(settled, size) if settled >= 0 else 0
        unsafe = max(first_inner, first_unsettled)
        return unsafe if unsafe < end else end

    # --- replicas and servers ----------------------------------------------------------------------
    def replicated_offset(self, slaves: int) -> int | None:
        """The commitLogMaxOffset that at least ``slaves`` reachable slaves hold (the N-th highest), or None
        when fewer slaves answered (``slaves``: the query's ``min_in_sync_slaves``)."""
        held = sorted((s.max_offset for s in self.slaves if s.reachable), reverse=True)
        if len(held) < slaves:
            return None
        return held[slaves - 1]

    def best_slave(self) -> ServerOffsets | None:
        """The reachable slave holding the most bytes (None when no slave answered)."""
        live = [s for s in self.slaves if s.reachable]
        return max(live, key=lambda s: s.max_offset) if live else None

    def server_for(self, lo: int, hi: int, prefer_slave: bool) -> ServerOffsets:
        """The server an executor reads ``[lo, hi)`` from: with ``prefer_slave`` the slave holding the
        most among those holding the whole range, else (or when none does) the master."""
        if prefer_slave:
            for slave in sorted((s for s in self.slaves if s.reachable), key=lambda s: -s.max_offset):
                if slave.holds(lo, hi):
                    return slave
        if self.master is None:
            raise ValueError(f"broker {self.name}: no master known")
        return self.master


def fetch_range(fetch: FetchSettings, ha_addr: str, start: int, end: int, *, broker: str, server_is_slave: bool,
                protocol: str = HA_PROTOCOL_CLASSIC) -> bytes:
    """CommitLog bytes ``[start, end)`` over the HA port, for the driver's history checks
    (:mod:`connector.source.driver.offsets`), reporting ``start`` (see :mod:`connector.client.ha` for why a report
    acknowledges nothing new when ``start`` is already landed); ``protocol``: ``"classic"`` or ``"autoswitch"``. Raises
    what HARangeFetcher raises."""
    if end <= start:
        return b""
    with HARangeFetcher(ha_addr, start, end, protocol=protocol, broker=broker, settings=fetch,
                        fail_on_data_loss=True, server_is_slave=server_is_slave) as fetcher:
        return b"".join(chunk for _, chunk in fetcher)


@dataclass(frozen=True, slots=True)
class DriverReads:
    """The driver's small HA reads of one broker set's CommitLog, for the history checks
    (:class:`connector.source.driver.offsets.CommitLogBytes`): each :meth:`read` fetches from the server that would read
    the same slice for an executor (:meth:`connector.source.driver.brokers.BrokerSetView.server_for`, a slave first
    when ``prefer_slave``), over the set's HA ``protocol`` (``"classic"`` or ``"autoswitch"``)."""

    fetch: FetchSettings
    view: BrokerSetView
    protocol: str = HA_PROTOCOL_CLASSIC
    prefer_slave: bool = False

    def read(self, lo: int, hi: int) -> bytes:
        """CommitLog bytes ``[lo, hi)``; raises ValueError (no master known) or what :func:`fetch_range` raises."""
        server = self.view.server_for(lo, hi, self.prefer_slave)
        return fetch_range(self.fetch, server.endpoint.ha_addr, lo, hi, broker=self.view.name,
                           server_is_slave=server.role == "slave", protocol=self.protocol)


def bounds(view: BrokerSetView) -> tuple[int, int]:
    """(min, max) offsets of the broker set: the master's, or the slaves' when it is unreachable.

    Raises BrokerAdminError when neither the master nor any slave answered."""
    if view.master is not None and view.master.reachable:
        return view.master.min_offset, view.master.max_offset
    live = [s for s in view.slaves if s.reachable]
    if not live:
        raise BrokerAdminError(f"broker {view.name}: neither the master nor any slave answered "
                               "GET_BROKER_RUNTIME_INFO")
    return min(s.min_offset for s in live), max(s.max_offset for s in live)


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


class BrokerSets:
    """The driver's remoting side of the query's broker sets (one per stream reader, never pickled).

    ``views``: set name -> BrokerSetView; ``admins``: remoting address -> BrokerAdminClient; ``protocols``:
    set name -> HA protocol of its master; ``sets``: controller-mode sets by name; ``trusted``: set name ->
    the batch end the reader computed last, dropped whenever the log may have gone back (an outage, a
    regression of commitLogMaxOffset, a master switch), so that the next start is checked again
    (:mod:`connector.source.driver.offsets`). ``route``: the sets planned now (:class:`Route`: the options'
    own, or with ``namesrv_addr`` what discovery last found; ``options`` stay as the user gave them). Broker errors
    raise BrokerAdminError / BrokerUnreachableError.
    """

    def __init__(self, options: SourceOptions):
        self.options = options
        self.route = Route.of(options)
        self.admins: dict[str, BrokerAdminClient] = {}
        self.views: dict[str, BrokerSetView] = {}
        self.outages: dict[str, OutageWait] = {}
        self.protocols: dict[str, str] = {}
        self.sets: dict[str, ControllerModeSet] = {}
        self.trusted: dict[str, int] = {}
        #: with ``namesrv_addr``: asked with a classic set's name while its master is down, before each wait; the
        #: set's master endpoint in the route asked again now, or None (set by the planner from its Discovery)
        self.route_master: Callable[[str], BrokerEndpoint | None] | None = None

    def protocol(self, name: str) -> str:
        """The HA protocol of a set's master (``"classic"`` until its config was read)."""
        return self.protocols.get(name, HA_PROTOCOL_CLASSIC)

    def admin(self, endpoint: BrokerEndpoint) -> BrokerAdminClient:
        """The remoting client of one server (one connection per address)."""
        client = self.admins.get(endpoint.remoting_addr)
        if client is None:
            client = BrokerAdminClient(endpoint.remoting_addr, self.options.fetch.read_timeout_ms,
                                       self.options.fetch.credentials)
            self.admins[endpoint.remoting_addr] = client
        return client

    def outage(self, broker: BrokerEndpoint) -> OutageWait:
        """The outage clock of a broker set's remoting calls (one per set, logged once per outage)."""
        wait = self.outages.get(broker.name)
        if wait is None:
            fetch = self.options.fetch
            where = broker.remoting_addr if self.options.read_from != READ_FROM_SLAVE else "(master and slaves)"
            wait = OutageWait(f"broker {broker.name} remoting {where}", fetch.reconnect_backoff_ms,
                              fetch.reconnect_backoff_max_ms, fetch.max_outage_ms)
            self.outages[broker.name] = wait
        return wait

    def view(self, broker: BrokerEndpoint) -> BrokerSetView:
        """The broker set's view; the first call asks the master (or with ``read_from='slave'`` a slave) for
        its config, waits out an outage (``max_outage_ms``) and fails fast when the broker is not a classic
        master/slave one or not a RocketMQ broker at all."""
        view = self.views.get(broker.name)
        if view is not None:
            return view
        candidates = [broker, *self.route.slaves_of(broker.name)]  # any of them tells the set's mode
        wait = self.outage(broker)
        while True:
            errors: list[BrokerAdminError] = []
            for endpoint in candidates:
                admin = self.admin(endpoint)
                try:
                    config = admin.broker_config()
                except BrokerAdminError as exc:
                    errors.append(exc)
                    continue
                wait.recovered()
                return self._learn(broker, admin, config)
            last = errors[-1] if len(errors) == 1 else BrokerAdminError(
                f"broker {broker.name}: neither the master nor a slave answered GET_BROKER_CONFIG: "
                f"{'; '.join(map(str, errors))}")
            if not all(isinstance(e, BrokerUnreachableError) for e in errors):
                raise next(e for e in errors if not isinstance(e, BrokerUnreachableError))
            if not wait.failed(last):
                raise BrokerUnreachableError(wait.give_up_message(last)) from last

    def _learn(self, broker: BrokerEndpoint, admin: BrokerAdminClient, config: dict[str, str]) -> BrokerSetView:
        """A set's view from the GET_BROKER_CONFIG answer of one of its servers."""
        protocol = admin.ha_protocol(config)
        if protocol == HA_PROTOCOL_AUTOSWITCH and self.options.read_from == READ_FROM_SLAVE:
            raise HAReplicaOptionError(OPTIONS.read_from.name, self.options.read_from,
                                       f"broker {broker.name} runs in controller mode (AutoSwitch HA): "
                                       "hareplica reads controller-mode brokers from the master only")
        if protocol == HA_PROTOCOL_AUTOSWITCH and self.options.min_in_sync_slaves:
            raise HAReplicaOptionError(OPTIONS.min_in_sync_slaves.name, self.options.min_in_sync_slaves,
                                       f"broker {broker.name} runs in controller mode: batches end at the "
                                       "master's confirmOffset; set allAckInSyncStateSet=true on the brokers "
                                       "to have it held by every in-sync replica")
        self.protocols[broker.name] = protocol
        if protocol == HA_PROTOCOL_AUTOSWITCH:
            fetch = self.options.fetch
            members = [(e.ha_addr, e.remoting_addr) for e in (broker, *self.route.slaves_of(broker.name))]
            self.sets[broker.name] = ControllerModeSet(
                broker.name, members, connect_timeout_ms=fetch.connect_timeout_ms,
                read_timeout_ms=fetch.read_timeout_ms, credentials=fetch.credentials)
        view = BrokerSetView(broker.name, admin.mapped_file_size(config), ack_window_ms=ack_window_ms(config))
        self.views[broker.name] = view
        return view

    def sample(self, endpoint: BrokerEndpoint, role: str) -> ServerOffsets:
        """One server's commitLogMin/MaxOffset (and dispatchBehindBytes), or why it could not be asked."""
        try:
            min_offset, max_offset, behind = self.admin(endpoint).store_offsets()
        except BrokerAdminError as exc:
            return ServerOffsets(endpoint, role, error=str(exc), down=isinstance(exc, BrokerUnreachableError))
        return ServerOffsets(endpoint, role, min_offset, max_offset, dispatch_behind=behind)

    def master_endpoint(self, broker: BrokerEndpoint) -> BrokerEndpoint:
        """The endpoint to ask as master: ``broker``, or for a controller-mode set its current master."""
        cset = self.sets.get(broker.name)
        return broker if cset is None else cset.endpoint((broker, *self.route.slaves_of(broker.name)))

    def refresh(self, broker: BrokerEndpoint, *, slaves: bool | None = None) -> BrokerSetView:
        """Sample the master's (and, when they matter, the slaves') commitLogMin/MaxOffset.

        The master's max offset is remembered as a record boundary. A master that is down is waited
        for (``max_outage_ms``) unless ``read_from='slave'`` and a slave answers (then batches go on from
        the slaves); a peer that answers but is not a RocketMQ broker fails at once.
        """
        view = self.view(broker)
        wait = self.outage(broker)
        cset = self.sets.get(broker.name)
        while True:
            master = self.sample(self.master_endpoint(broker), "master")
            if cset is not None and (not master.reachable or not cset.current_is_master()):
                if cset.follow_switch(view):
                    self.trusted.pop(broker.name, None)  # the checkpoint is checked against the new master
                    continue  # sample the new master
                if master.reachable:
                    master = ServerOffsets(master.endpoint, "master", down=True,
                                           error=f"broker {broker.name}: {master.endpoint.remoting_addr} is no longer "
                                                 "master and the controller has not elected another one yet")
            if master.reachable or self.options.read_from == READ_FROM_SLAVE:
                break
            if not master.down:
                raise BrokerAdminError(master.error)
            self.trusted.pop(broker.name, None)  # after an outage the history is checked again
            moved = self._moved_master(broker)
            if moved is not None:
                broker = moved  # the route names another master: sample it (its start is checked again)
                continue
            if not wait.failed(master.error):
                raise BrokerUnreachableError(wait.give_up_message(master.error))
        if master.reachable:
            wait.recovered()
            previous = view.master.max_offset if view.master is not None and view.master.reachable else None
            if previous is not None and master.max_offset < previous:
                log.warning("broker %s: commitLogMaxOffset went back from %d to %d", broker.name, previous,
                            master.max_offset)
                view.forget_boundaries()
                self.trusted.pop(broker.name, None)
            view.add_boundary(master.max_offset)
            view.note_master_max(master.max_offset, time.monotonic())
        else:
            log.warning("broker %s: master unreachable, planning from its slaves: %s", broker.name, master.error)
        view.master = master
        if slaves is None:
            slaves = self.options.read_from == READ_FROM_SLAVE or bool(self.options.min_in_sync_slaves)
        if slaves:
            previous = {s.endpoint.ha_addr: s for s in view.slaves}
            view.slaves = [self.sample(s, "slave") for s in self.route.slaves_of(broker.name)]
            for s in view.slaves:
                if not s.reachable:
                    log.warning("broker %s: slave %s unreachable: %s", broker.name, s.endpoint.ha_addr, s.error)
                view.note_slave_sample(previous.get(s.endpoint.ha_addr), s)
        return view

    def _moved_master(self, broker: BrokerEndpoint) -> BrokerEndpoint | None:
        """The master the route names now for a classic set whose master ``broker`` is down, when it is another
        server (None otherwise, or without a name server): docs/source.md "Discovery"."""
        if self.route_master is None or broker.name in self.sets:
            return None
        now = self.route_master(broker.name)
        if now is None or (now.ha_addr, now.remoting_addr) == (broker.ha_addr, broker.remoting_addr):
            return None
        return now

    def close(self) -> None:
        """Close the remoting connections."""
        for client in self.admins.values():
            client.close()
        self.admins.clear()
