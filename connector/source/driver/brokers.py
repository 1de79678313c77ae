"""What the driver asks the brokers of each set over remoting, and what it keeps of their answers.

One :class:`BrokerSets` per stream reader: the remoting clients (GET_BROKER_CONFIG, GET_BROKER_RUNTIME_INFO),
each set's :class:`connector.source.driver.broker_view.BrokerSetView` (mapped-file size, offset samples, known
boundaries), the outage clocks (``max_outage_ms``, :mod:`connector.client.reconnect`), each set's HA
protocol and, for 5.x controller-mode sets, the :class:`connector.source.driver.controller_mode.ControllerModeSet`
that follows master switches (docs/source.md "Offsets, batches, partitions", "Slaves", "RocketMQ 5.x controller mode").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from connector.client.admin import BrokerAdminClient
from connector.client.reconnect import OutageWait
from connector.errors import BrokerAdminError, BrokerUnreachableError, HAReplicaOptionError
from connector.options import BrokerEndpoint, SourceOptions
from connector.protocol.ha import HA_PROTOCOL_CLASSIC
from connector.protocol.ha_autoswitch import HA_PROTOCOL_AUTOSWITCH
from connector.settings import OPTIONS, READ_FROM_SLAVE
from connector.source.driver.broker_view import ACK_WINDOW_MARGIN_MS, BrokerSetView, ServerOffsets
from connector.source.driver.controller_mode import ControllerModeSet

log = logging.getLogger(__name__)


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
    (:mod:`connector.source.driver.history`). Broker errors raise BrokerAdminError / BrokerUnreachableError.
    """

    def __init__(self, options: SourceOptions):
        self.options = options
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
        candidates = [broker, *self.options.slaves_of(broker.name)]  # any of them tells the set's mode
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
            members = [(e.ha_addr, e.remoting_addr) for e in (broker, *self.options.slaves_of(broker.name))]
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
        return broker if cset is None else cset.endpoint((broker, *self.options.slaves_of(broker.name)))

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
            view.slaves = [self.sample(s, "slave") for s in self.options.slaves_of(broker.name)]
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
