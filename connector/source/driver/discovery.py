"""Broker sets found through RocketMQ name servers (``SourceOptions.namesrv_addr``) and followed while the query runs
(docs/source.md "Discovery").

The driver asks a name server GET_BROKER_CLUSTER_INFO (:class:`connector.client.namesrv.NameServerClient`),
keeps the broker sets of the chosen clusters, asks each member GET_BROKER_CONFIG for its ``haListenPort`` and
mode, and turns the result into the same :class:`connector.options.parse.BrokerEndpoint` lists the ``brokers``
and ``slaves`` options give, as the :class:`connector.source.driver.route.Route` the driver plans
(:meth:`Discovery.follow`; the user's options are not touched). It asks again at most every
``namesrv_poll_interval_ms``, and only on the driver; :func:`diff` says what changed. Tasks never talk to a name server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from connector.client.admin import BrokerAdminClient, ha_protocol_of
from connector.client.namesrv import NameServerClient
from connector.data_loss import on_data_loss
from connector.errors import (
    AddressError,
    BrokerAdminError,
    HAReplicaOptionError,
    NameServerError,
)
from connector.options.declaration import OPTIONS, STARTING_OFFSETS_LATEST
from connector.options.parse import BrokerEndpoint, SourceOptions, check_slave_counts
from connector.protocol.address import split_host_port
from connector.protocol.broker import ha_listen_port
from connector.protocol.cluster_info import BrokerData, ClusterInfo
from connector.protocol.ha import HA_PROTOCOL_CLASSIC
from connector.protocol.ha_autoswitch import HA_PROTOCOL_AUTOSWITCH
from connector.source.driver.brokers import BrokerSets, bounds
from connector.source.driver.offsets import SourceOffset
from connector.source.driver.route import Route

log = logging.getLogger(__name__)

#: the key, in an end offset, of where each broker set the batch's start lacks begins under
#: ``new_broker_set_offsets='latest'`` (``{"@newSetStarts": {"broker-c": 4096}}``): a batch Spark replays after a
#: driver restart reads those sets from the same offsets, not from their commitLogMaxOffset at the replay
NEW_SET_STARTS_KEY = "@newSetStarts"


@dataclass(frozen=True, slots=True)
class DiscoveredSet:
    """One broker set as the route and its members' configs describe it.

    ``master``: the endpoint of brokerId 0 (None when the route has no master or its config could not be
    read); ``slaves``: the other members that answered, in brokerId order; ``protocol``: ``"classic"`` or
    ``"autoswitch"`` (5.x controller mode).
    """

    name: str
    cluster: str
    master: BrokerEndpoint | None
    slaves: tuple[BrokerEndpoint, ...]
    protocol: str = HA_PROTOCOL_CLASSIC


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed between two topologies, each a tuple of brokerNames: sets that ``appeared``, sets that
    ``left`` the route (or lost their master), sets whose master ``moved`` to another address."""

    appeared: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.appeared or self.left or self.moved)


def select_sets(info: ClusterInfo, clusters: tuple[str, ...] | None, namesrv: str) -> dict[str, BrokerData]:
    """The broker sets of ``clusters`` (None: every cluster), by brokerName in the route's order.

    Raises HAReplicaOptionError (``cluster_names``) naming the clusters ``namesrv`` knows when one of
    ``clusters`` is not among them.
    """
    if clusters is None:
        return dict(info.broker_addr_table)
    unknown = [c for c in clusters if c not in info.cluster_addr_table]
    if unknown:
        known = ", ".join(info.cluster_addr_table) or "none"
        raise HAReplicaOptionError(OPTIONS.cluster_names.name, ",".join(clusters),
                                   f"name server {namesrv} knows no cluster {', '.join(unknown)} (it knows: {known})")
    out = {}
    for cluster in clusters:
        for name in info.cluster_addr_table[cluster]:
            if name in info.broker_addr_table:
                out[name] = info.broker_addr_table[name]
    return out


def member_endpoint(name: str, remoting_addr: str, config: dict[str, str]) -> BrokerEndpoint:
    """The endpoint of one member: the route's remoting address and the HA port the broker reports
    (``haListenPort`` of GET_BROKER_CONFIG; ``listenPort + 1``, RocketMQ's rule, only when it reports none).
    Raises BrokerAdminError naming the broker when either is malformed."""
    try:
        host, port = split_host_port(remoting_addr, f"route address of broker set {name}", bare_ipv6=True)
    except AddressError as exc:
        raise BrokerAdminError(str(exc)) from None
    raw = config.get("haListenPort")
    try:
        ha_port = ha_listen_port(port) if raw is None else int(raw)
    except ValueError:
        raise BrokerAdminError(f"broker {remoting_addr} of set {name}: haListenPort is {raw!r}, "
                               "not a port") from None
    return BrokerEndpoint(name, host, ha_port, host, port)


def resolve(data: BrokerData, config_of: Callable[[str], dict[str, str]]) -> DiscoveredSet:
    """A route entry as endpoints: ``config_of(remoting_addr)`` gives each member's GET_BROKER_CONFIG. A
    member whose config cannot be read (BrokerAdminError) is left out (a master so left out: ``master`` None,
    an outage). Raises UnsupportedBrokerModeError for a DLedger set."""
    master = None
    slaves = []
    protocol = HA_PROTOCOL_CLASSIC
    for broker_id in sorted(data.broker_addrs):
        addr = data.broker_addrs[broker_id]
        try:
            config = config_of(addr)
            endpoint = member_endpoint(data.broker_name, addr, config)
        except BrokerAdminError as exc:
            log.warning("broker set %s: member %s (brokerId %d) left out: %s", data.broker_name, addr, broker_id, exc)
            continue
        protocol = ha_protocol_of(config, f"broker set {data.broker_name} ({addr})")
        if addr == data.master_addr:
            master = endpoint
        else:
            slaves.append(endpoint)
    return DiscoveredSet(data.broker_name, data.cluster, master, tuple(slaves), protocol)


def diff(old: dict[str, DiscoveredSet], new: dict[str, DiscoveredSet]) -> Changes:
    """What changed from ``old`` to ``new`` (see :class:`Changes`; a set without a master counts as left)."""
    def live(sets):
        return {n: s for n, s in sets.items() if s.master is not None}
    before, after = live(old), live(new)
    return Changes(appeared=tuple(n for n in after if n not in before),
                   left=tuple(n for n in before if n not in after),
                   moved=tuple(n for n in after if n in before and after[n].master != before[n].master))


class Discovery:
    """The driver's view of the route (one per stream reader).

    Args:
        options: the source's options; ``namesrv_addr``, ``cluster_names``, ``namesrv_poll_interval_ms``
            and the fetch settings (timeouts, ACL account) are used.
        clock: monotonic seconds (tests may pass their own).

    :meth:`poll` asks the name server when ``namesrv_poll_interval_ms`` passed since the last answer;
    :attr:`sets` holds the latest sets by brokerName, :attr:`seen` every set ever found (a set that left
    keeps its last endpoints there, so the query keeps its offset and waits for it).
    """

    def __init__(self, options: SourceOptions, clock: Callable[[], float] = time.monotonic):
        fetch = options.fetch
        self.options = options
        self.client = NameServerClient(options.namesrv_addr, fetch.read_timeout_ms, fetch.credentials)
        self.clock = clock
        self.sets: dict[str, DiscoveredSet] = {}
        self.seen: dict[str, DiscoveredSet] = {}
        self.answered_by: str | None = None
        self._asked_at: float | None = None
        self._configs: dict[str, dict[str, str]] = {}
        self._admins: dict[str, BrokerAdminClient] = {}
        self.left_at: dict[str, float] = {}  # set name -> when it was last seen live (clock seconds)
        self.overdue: set[str] = set()  # sets reported out past max_outage_ms (fail_on_data_loss=False), kept
        self.new_starts: dict[str, int] = {}  # sets that appeared while the query ran -> where they start
        self._planned: Route | None = None  # the live sets, as last planned

    def _config_of(self, addr: str) -> dict[str, str]:
        config = self._configs.get(addr)
        if config is None:
            admin = self._admins.get(addr)
            if admin is None:
                admin = self._admins[addr] = BrokerAdminClient(addr, self.options.fetch.read_timeout_ms,
                                                               self.options.fetch.credentials)
            config = self._configs[addr] = admin.broker_config()
        return config

    def due(self) -> bool:
        """True when the route was never asked or ``namesrv_poll_interval_ms`` passed since."""
        return (self._asked_at is None
                or (self.clock() - self._asked_at) * 1000 >= self.options.namesrv_poll_interval_ms)

    def poll(self, force: bool = False) -> Changes | None:
        """Ask the route again when :meth:`due` (or ``force``); None when not asked, else what changed (each
        change logged once). Raises NameServerError when no name server answers, or when the first route has
        no broker set; HAReplicaOptionError for an unknown cluster (``cluster_names``)."""
        if not (force or self.due()):
            return None
        addr, info = self.client.cluster_info()
        self.answered_by = addr
        chosen = select_sets(info, self.options.cluster_names, addr)
        if not chosen and not self.seen:
            clusters = ",".join(self.options.cluster_names or ()) or "any cluster"
            raise NameServerError(f"name server {addr} has no broker set in its route (clusters: {clusters})")
        for changed_addr in [a for a in self._configs if not any(a in d.broker_addrs.values()
                                                                 for d in chosen.values())]:
            self._configs.pop(changed_addr, None)  # a member that left: read its config again when it is back
        new = {name: resolve(data, self._config_of) for name, data in chosen.items()}
        changes = diff(self.sets, new)
        first = self._asked_at is None
        self._asked_at = self.clock()
        for name in changes.appeared:
            s = new[name]
            log.info("broker set %s found through name server %s: master %s (HA %s), %d slave(s)%s", name, addr,
                     s.master.remoting_addr, s.master.ha_addr, len(s.slaves), "" if first else " (new)")
        for name in changes.left:
            log.warning("broker set %s is no longer in name server %s's route (or has no master): waited on as an "
                        "outage", name, addr)
        for name in changes.moved:
            log.warning("broker set %s: the route's master moved from %s to %s", name,
                        self.sets[name].master.remoting_addr, new[name].master.remoting_addr)
        self.sets = new
        for name, s in new.items():
            previous = self.seen.get(name)
            if s.master is not None or previous is None:
                self.seen[name] = s if previous is None or s.protocol != HA_PROTOCOL_AUTOSWITCH \
                    else _merged(previous, s)
        return changes

    def live_names(self) -> list[str]:
        """The sets planned now: in the route with a master; a controller-mode set while any member is in
        the route (its own switch logic finds the master, docs/source.md "RocketMQ 5.x controller mode")."""
        out = []
        for name, s in self.sets.items():
            if s.master is not None or (s.protocol == HA_PROTOCOL_AUTOSWITCH and s.slaves and name in self.seen
                                        and self.seen[name].master is not None):
                out.append(name)
        return out

    def live_route(self) -> Route:
        """The live sets (:meth:`live_names`) as a :class:`connector.source.driver.route.Route`, as the ``brokers``
        and ``slaves`` options would give them. Raises HAReplicaOptionError when ``read_from='slave'`` or
        ``min_in_sync_slaves`` asks for more slaves than a set has."""
        brokers, slaves = [], []
        for name in self.live_names():
            s = self.seen[name] if self.sets[name].protocol == HA_PROTOCOL_AUTOSWITCH else self.sets[name]
            brokers.append(s.master)
            slaves.extend(s.slaves)
        route = Route(tuple(brokers), tuple(slaves))
        check_slave_counts(route.brokers, route.slaves, self.options.read_from, self.options.min_in_sync_slaves,
                           f"in the route of name server {self.answered_by}")
        return route

    # --- the planner's side (connector.source.driver.batches.BatchPlanner) ---------------------------------
    def follow(self, brokers: BrokerSets, force: bool = False) -> Route:
        """Ask the route when due (or ``force``) and return the live sets (:meth:`live_route`), which become
        ``brokers.route`` (the planner's :class:`connector.source.driver.brokers.BrokerSets`; the user's options
        are not touched). A classic
        set whose master moved is checked again from its fingerprint (its boundaries and trust dropped, as
        after an outage, docs/source.md "Rewritten history"); a controller-mode set follows its own switches.
        While no name server answers, the last route is kept (logged); NameServerError only before the first."""
        try:
            changes = self.poll(force)
        except NameServerError as exc:
            if self._planned is None:
                raise
            self._asked_at = self.clock()  # asked again after namesrv_poll_interval_ms, as RocketMQ's clients do
            log.warning("keeping the last route (%s): %s", ", ".join(self._planned.broker_names), exc)
            return self._planned
        if changes is None and self._planned is not None:
            return self._planned
        for name in changes.moved:
            if self.sets[name].protocol == HA_PROTOCOL_CLASSIC:
                brokers.trusted.pop(name, None)
                view = brokers.views.get(name)
                if view is not None:
                    view.forget_boundaries()
                    view.master = None
        route = self.live_route()
        now = self.clock()
        live = set(route.broker_names)
        for name in self.seen:
            if name in live:
                self.left_at.pop(name, None)
                self.overdue.discard(name)
            else:
                self.left_at.setdefault(name, now)
        brokers.route = self._planned = route
        return route

    @property
    def started(self) -> bool:
        """True once :meth:`follow` planned the route."""
        return self._planned is not None

    def check_starting(self, options: SourceOptions) -> None:
        """A JSON ``starting_offsets`` or ``starting_offsets_by_timestamp`` names exactly the sets found
        (:meth:`check_names`); asked when a query starts without a checkpoint, the only time Spark uses them."""
        self.check_names(OPTIONS.starting_offsets, options.starting_offsets)
        self.check_names(OPTIONS.starting_offsets_by_timestamp, options.starting_offsets_by_timestamp)

    def check_names(self, option, named) -> None:
        """Raise HAReplicaOptionError naming ``option`` when ``named`` (a JSON option's value, broker set ->
        offset or time) does not name exactly the sets of the route, listing the unknown and the missing ones;
        nothing for a value that is not per set (``earliest``, ``latest``, None)."""
        if not isinstance(named, Mapping):
            return
        found = set(self.seen)
        unknown, missing = sorted(set(named) - found), sorted(found - set(named))
        if unknown or missing:
            raise HAReplicaOptionError(
                option.name, dict(named),
                f"must name exactly the broker sets of name server {self.answered_by}'s route "
                f"({', '.join(sorted(found))}): " + "; ".join(
                    ([f"unknown {', '.join(unknown)}"] if unknown else [])
                    + ([f"missing {', '.join(missing)}"] if missing else [])))

    def with_new_sets(self, brokers: BrokerSets, options: SourceOptions, start: SourceOffset) -> SourceOffset:
        """``start`` plus, with ``new_broker_set_offsets='latest'``, where each live set it lacks starts (its
        commitLogMaxOffset when first planned); with ``earliest`` such a set starts at its commitLogMinOffset
        (the planner's rule for a set without an offset)."""
        if options.new_broker_set_offsets != STARTING_OFFSETS_LATEST:
            return start
        positions = dict(start.positions)
        for broker in brokers.route.brokers:
            if broker.name in positions:
                continue
            if broker.name not in self.new_starts:
                self.new_starts[broker.name] = bounds(brokers.refresh(broker))[1]
                log.info("broker set %s is new: it starts at its commitLogMaxOffset %d (%s=%s)", broker.name,
                         self.new_starts[broker.name], OPTIONS.new_broker_set_offsets.name, STARTING_OFFSETS_LATEST)
            positions[broker.name] = self.new_starts[broker.name]
        return SourceOffset(positions, dict(start.extras))

    def new_set_starts(self, start: SourceOffset, end: SourceOffset) -> dict[str, dict[str, int]]:
        """The :data:`NEW_SET_STARTS_KEY` entry of an end offset: where :meth:`with_new_sets` started each set of
        ``end`` that ``start`` (the batch's start as Spark gave it) lacks; empty when there is none."""
        before = start.positions
        starts = {name: self.new_starts[name] for name in end.positions
                  if name not in before and name in self.new_starts}
        return {NEW_SET_STARTS_KEY: starts} if starts else {}

    def recall_new_starts(self, end: SourceOffset) -> None:
        """Take the new sets' starts an end offset recorded (:meth:`new_set_starts`): a restarted driver planning
        the partitions of a replayed batch starts them where the batch was planned. Raises ValueError naming the
        set when a recorded start is not an integer."""
        for name, position in (end.extras.get(NEW_SET_STARTS_KEY) or {}).items():
            if isinstance(position, bool) or not isinstance(position, int):
                raise ValueError(f"source offset: {NEW_SET_STARTS_KEY} of broker set {name!r} is {position!r}, "
                                 "not an integer")
            self.new_starts[name] = position

    def carry_absent(self, options: SourceOptions, start: SourceOffset, end: SourceOffset) -> SourceOffset:
        """``end`` plus the offset (and fingerprint) of every set of ``start`` that is not planned now (it left
        the route or lost its master): the checkpoint keeps it and the set continues from it when it is back.
        Past ``max_outage_ms`` ``fail_on_data_loss`` decides: DataLossError naming the set, or one WARNING and
        the offset is still kept (only ``drop_broker_sets`` removes a set from the checkpoint)."""
        now = self.clock()
        for name, position in start.positions.items():
            if name in end.positions:
                continue
            gone_ms = int((now - self.left_at.setdefault(name, now)) * 1000)
            if gone_ms > options.fetch.max_outage_ms and name not in self.overdue:
                on_data_loss(options.fail_on_data_loss,
                             f"broker set {name} has been out of the name server's route (or without a master) for "
                             f"{gone_ms} ms, longer than {OPTIONS.max_outage_ms.name}="
                             f"{options.fetch.max_outage_ms}; its offset {position} is not read further "
                             f"({OPTIONS.drop_broker_sets.name}={name} removes it from the checkpoint)",
                             instead="go on without it, its offset kept for when it is back", logger=log)
                self.overdue.add(name)
            end.carry(name, start)
        return end

    def endpoints_for(self, route: Route, start: SourceOffset, end: SourceOffset) -> tuple[BrokerEndpoint, ...]:
        """The planned sets (``route``) plus any set ``end`` moves past ``start`` that is not planned now (a batch
        planned before it left the route, replayed after a restart): its last known master."""
        names = set(route.broker_names)
        before = start.positions
        extra = [self.seen[n].master for n, pos in end.positions.items()
                 if n not in names and n in self.seen and self.seen[n].master is not None and pos > before.get(n, pos)]
        return (*route.brokers, *extra)

    def close(self) -> None:
        """Close the name-server and broker connections."""
        self.client.close()
        for admin in self._admins.values():
            admin.close()
        self._admins.clear()


def _merged(previous: DiscoveredSet, new: DiscoveredSet) -> DiscoveredSet:
    """A controller-mode set's members, first seen first: the controller may make any of them master, and
    :class:`connector.source.driver.controller_mode.ControllerModeSet` follows it among them."""
    members = [previous.master, *previous.slaves]
    for endpoint in (new.master, *new.slaves):
        if endpoint is not None and all(endpoint.ha_addr != m.ha_addr for m in members if m is not None):
            members.append(endpoint)
    members = [m for m in members if m is not None]
    return DiscoveredSet(previous.name, new.cluster, members[0], tuple(members[1:]), new.protocol)
