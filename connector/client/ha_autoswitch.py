"""The AutoSwitch HA wire of the source's HA client, and the driver's probe of a controller-mode master (RocketMQ 5.x
controller mode).

:class:`AutoSwitchWire` is what :class:`connector.client.ha.HARangeFetcher` (``protocol="autoswitch"``) does
differently from :class:`connector.client.ha_wire.ClassicWire`: the async-learner handshake, 12-byte TRANSFER
reports, 36-byte-header frames checked against the handshake's epochs (codecs:
:mod:`connector.protocol.ha_autoswitch`), ``confirmOffset``, and a reconnect that first locates the current master
(``locate_master``). :func:`probe_master` is one short learner connection that reads a master's epochs and
confirmOffset, and :func:`find_master` / :func:`master_locator` find which member of a set is master now, for the
driver and the tasks. The wire: docs/protocol.md §10; offset 0, epochs, master switches and what is lost:
docs/protocol.md §10.7 and docs/source.md "RocketMQ 5.x controller mode".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from connector.client.admin import BrokerAdminClient
from connector.client.ha_connection import HATransferConnection
from connector.client.ha_wire import HAWire, RangeFetch, StreamState, discontinuity
from connector.errors import BrokerAdminError, HAProtocolError, HAReplicaError
from connector.protocol.acl import AclCredentials
from connector.protocol.ha import HA_CONNECT_TIMEOUT_MS, HA_HOUSEKEEPING_INTERVAL_MS
from connector.protocol.ha_autoswitch import (
    HA_PROTOCOL_AUTOSWITCH,
    AutoSwitchFrameReader,
    EpochEntry,
    EpochHistory,
    HandshakeReply,
    SlaveHandshake,
    TransferHeader,
    encode_slave_report,
)

log = logging.getLogger(__name__)

#: finds the broker set's current master: ``(ha_addr, remoting_addr)``, or None while none is elected
MasterLocator = Callable[[], "tuple[str, str] | None"]

#: the handshake hareplica sends: an async learner without broker id (docs/protocol.md §10.7)
LEARNER_HANDSHAKE = SlaveHandshake()


class AutoSwitchWire(HAWire):
    """The AutoSwitch protocol for :class:`connector.client.ha.HARangeFetcher` (see the module doc).

    Args:
        locate_master: finds the current master before a reconnect (None: always the fetcher's ``ha_addr``).
        planned_epochs: the ``(epoch, startOffset)`` entries the range was planned under (empty: not checked).
        credentials: the ACL account for the offsets probe of a new master.
        read_timeout_ms: the remoting timeout of that probe (ms).
    """

    name = HA_PROTOCOL_AUTOSWITCH
    peer = "RocketMQ AutoSwitch HA port"
    first_message = "16-byte handshake"

    def __init__(self, *, locate_master: MasterLocator | None = None, planned_epochs: Sequence[tuple[int, int]] = (),
                 credentials: AclCredentials | None = None, read_timeout_ms: int = HA_HOUSEKEEPING_INTERVAL_MS):
        self.locate_master = locate_master
        self.planned_epochs = tuple(planned_epochs)
        self.credentials = credentials
        self.read_timeout_ms = read_timeout_ms
        self._connects = 0
        self._admin: BrokerAdminClient | None = None
        self._history: EpochHistory | None = None  # the current connection's, from the handshake

    def encode_report(self, offset: int) -> bytes:
        """The 12-byte AutoSwitch TRANSFER report (docs/protocol.md §10.2)."""
        return encode_slave_report(offset)

    def new_reader(self, buffer_bytes: int, keep_views: bool) -> AutoSwitchFrameReader:
        """A :class:`connector.protocol.ha_autoswitch.AutoSwitchFrameReader`."""
        return AutoSwitchFrameReader(buffer_bytes=buffer_bytes, keep_views=keep_views)

    def close(self) -> None:
        """Close the remoting connection of the offsets probe of a new master, if any."""
        if self._admin is not None:
            self._admin.close()

    def before_connect(self, fetch: RangeFetch) -> None:
        """Before a reconnect: connect to whichever member is master now (raises ConnectionRefusedError, an
        outage to wait out, while none is)."""
        self._connects += 1
        if self.locate_master is None or self._connects == 1:
            return
        found = self.locate_master()
        if found is None:
            raise ConnectionRefusedError(f"no member of broker set {fetch.broker} is master (an election under way?)")
        if found[0] != fetch.ha_addr:
            log.warning("%s: the master switched to %s; reading the rest of the range from it", fetch.describe(),
                        found[0])
            fetch.switches.append((fetch.ha_addr, found[0]))
            fetch.ha_addr = found[0]
            if self._admin is not None:
                self._admin.close()
            self._admin = BrokerAdminClient(found[1], self.read_timeout_ms, self.credentials)
            fetch.offsets_probe = self._admin.commit_log_offsets

    def begin(self, fetch: RangeFetch, reader: AutoSwitchFrameReader) -> tuple[int, str]:
        """Send the learner handshake and read the master's reply; then send the first report and start the
        keep-alive reports. A peer that answers something else is not an AutoSwitch HA port. Returns where the
        master's epochs stop agreeing with the planned ones (see :meth:`_planned_cap`)."""
        fetch.conn.send(LEARNER_HANDSHAKE.encode())
        while True:
            try:
                reply = reader.next_handshake()
            except HAProtocolError as exc:
                raise fetch.not_an_ha_port(reader.head(64), f"not an AutoSwitch handshake reply ({exc})") from None
            if reply is not None:
                break
            try:
                received = fetch.conn.recv_into(reader)
            except TimeoutError:
                raise TimeoutError(f"no handshake reply from the master for {fetch.read_timeout_ms} ms") from None
            if not received:
                if reader.buffered_bytes:
                    raise fetch.not_an_ha_port(reader.head(64), "then closed the connection")
                raise ConnectionResetError("master closed the connection before its handshake reply")
        try:
            self._history = reply.history()
        except ValueError as exc:
            raise HAProtocolError(f"{fetch.describe()}: the master's handshake reply lists {exc}") from None
        fetch.handshake = reply
        fetch.conn.report(fetch.report_offset)
        fetch.conn.keep_reporting(lambda: fetch.report_offset)
        return self._planned_cap(fetch, reply)

    def _planned_cap(self, fetch: RangeFetch, reply: HandshakeReply) -> tuple[int, str]:
        """The master's epochs must agree with the planned ones up to the range end: past the point where they
        agree, its bytes are not the planned ones. Returns that point (the bytes from it to the range end are
        reported lost once reached) and why, or ``(end, "")``."""
        if not self.planned_epochs:
            return fetch.end, ""
        planned = EpochHistory([EpochEntry(e, o) for e, o in self.planned_epochs],
                               max(fetch.end, self.planned_epochs[-1][1]))
        common = max(planned.common_point(reply.history()), fetch.start)
        if common >= fetch.end:
            return fetch.end, ""
        already = ""
        if fetch.delivered > common:
            already = f"; [{common}, {fetch.delivered}) of them were already read from the old master"
        return max(common, fetch.delivered), (
            f"master {fetch.ha_addr} (epoch {reply.last_epoch}) agrees with the epochs the range was planned under "
            f"({list(self.planned_epochs)}) only up to offset {common}: the bytes [{common}, {fetch.end}) never "
            f"reached it{already}")

    def next_frame(self, fetch: RangeFetch, reader: AutoSwitchFrameReader,
                   stream: StreamState) -> tuple[int, memoryview] | None:
        """The next transfer frame, its epoch checked against the handshake's; records its confirmOffset."""
        try:
            header = reader.peek_transfer()
        except HAProtocolError as exc:
            raise HAProtocolError(f"{fetch.describe()}: {exc}") from None
        if header is None:
            return None
        if not stream.frames and header.body_size and header.offset != stream.offset:
            if stream.offset != 0 or header.offset < 0:
                raise HAProtocolError(f"{fetch.describe()}: master's first frame is at offset {header.offset}, "
                                      f"not at the reported offset {stream.offset}")
            # reported 0: the master starts at its commitLogMinOffset (docs/protocol.md §10.2)
            fetch.lose(fetch.delivered, min(header.offset, fetch.end),
                       f"the master's CommitLog starts at {header.offset} (commitLogMinOffset)")
            stream.offset = header.offset
        frame = reader.next_transfer_view()
        if frame is None:
            return None
        header, body = frame
        stream.frames += 1
        fetch.confirm_offset = header.confirm_offset
        if body:  # a heartbeat's offset is not checked: it may be -1 (§10.5)
            if header.offset != stream.offset:
                raise discontinuity(fetch, header.offset, stream.offset)
            self._check_epoch(fetch, header)
        return header.offset, body

    def _check_epoch(self, fetch: RangeFetch, header: TransferHeader) -> None:
        """The frame's epoch must be the handshake entry covering its bytes (docs/protocol.md §10.5, §10.7)."""
        history = self._history
        covering = history.covering(header.offset)
        end = header.offset + header.body_size
        if covering is not None:
            entry, entry_end = covering
            if ((entry.epoch, entry.start_offset) == (header.epoch, header.epoch_start_offset)
                    and (entry_end is None or end <= entry_end)):
                return
            # the frame with an epoch's last bytes is tagged with the next epoch, which starts where it ends
            # (the master moves to the next entry before building the header, docs/protocol.md §10.5)
            if end == entry_end == header.epoch_start_offset and EpochEntry(header.epoch, end) in history.entries:
                return
            announced = f"epoch {entry.epoch} from offset {entry.start_offset} to {entry_end or 'the end'}"
        else:
            announced = "no epoch (the offset is before the first epoch entry)"
        raise HAProtocolError(
            f"{fetch.describe()}: frame [{header.offset}, {end}) is tagged epoch {header.epoch} starting at "
            f"{header.epoch_start_offset}, but the master's handshake announced {announced} there: its epoch "
            "history changed under the connection")


@dataclass(frozen=True, slots=True)
class AutoSwitchMasterState:
    """What one short AutoSwitch connection tells about a master: its CommitLog max offset and epoch entries
    (the handshake reply) and its confirmOffset (from the first transfer frame; None when the reported offset
    was already at the master's max offset, so no frame came at once); offsets in bytes."""

    handshake: HandshakeReply
    confirm_offset: int | None


def probe_master(ha_addr: str, report_offset: int, *, connect_timeout_ms: int = HA_CONNECT_TIMEOUT_MS,
                 read_timeout_ms: int = HA_HOUSEKEEPING_INTERVAL_MS) -> AutoSwitchMasterState:
    """Handshake with a controller-mode master as a learner, report ``report_offset`` and read the first
    transfer frame for the master's confirmOffset (docs/protocol.md §10.5, §10.6).

    ``report_offset`` must be an offset the query already landed (a batch start): the report then
    acknowledges nothing new (docs/protocol.md §10.7). When it is at or past the master's max offset no
    frame is awaited (the master would only send a heartbeat after 5 s). Raises OSError/TimeoutError
    (unreachable or silent for ``read_timeout_ms``), HAProtocolError (a peer that is not an AutoSwitch
    master; the message names the field and stream byte).
    """
    conn = HATransferConnection(encode_slave_report, connect_timeout_ms=connect_timeout_ms,
                                read_timeout_ms=read_timeout_ms)
    conn.open(ha_addr)
    try:
        reader = AutoSwitchFrameReader(buffer_bytes=64 * 1024)
        conn.send(LEARNER_HANDSHAKE.encode())

        def more(what: str) -> None:
            if not conn.recv_into(reader):
                raise ConnectionResetError(f"{ha_addr} closed the connection before its {what}")

        while (reply := reader.next_handshake()) is None:
            more("handshake reply")
        if report_offset >= reply.master_max_offset:
            return AutoSwitchMasterState(reply, None)
        conn.report(report_offset)
        while (frame := reader.next_transfer_view()) is None:
            more("first transfer frame")
        return AutoSwitchMasterState(reply, frame[0].confirm_offset)
    finally:
        conn.close()


#: a report offset no master holds: probe_master then reads the handshake only and reports nothing
NO_REPORT = 1 << 62


def broker_role(remoting_addr: str, timeout_ms: int, credentials: AclCredentials | None = None) -> str | None:
    """The broker's ``brokerRole`` (GET_BROKER_CONFIG), e.g. ``SYNC_MASTER`` or ``SLAVE``; None when it does
    not answer."""
    try:
        with BrokerAdminClient(remoting_addr, timeout_ms, credentials) as admin:
            return admin.broker_config().get("brokerRole", "").strip().upper() or None
    except BrokerAdminError:
        return None


def is_master_role(role: str | None) -> bool:
    """True for ``SYNC_MASTER`` / ``ASYNC_MASTER`` (a controller-mode master reports SYNC_MASTER)."""
    return role is not None and role.endswith("MASTER")


def find_master(members: Sequence[tuple[str, str]], *, connect_timeout_ms: int, read_timeout_ms: int,
                credentials: AclCredentials | None = None) -> tuple[str, str, int] | None:
    """Among ``members`` (``(ha_addr, remoting_addr)`` pairs), the one that says it is a master, as
    ``(ha_addr, remoting_addr, last epoch)``; of several, the highest epoch (a deposed master that has not
    noticed yet has a lower one). None when no member is a reachable master (an election may be under way).
    Reads handshakes only: nothing is reported to any master."""
    best: tuple[str, str, int] | None = None
    for ha_addr, remoting_addr in members:
        if not is_master_role(broker_role(remoting_addr, read_timeout_ms, credentials)):
            continue
        try:
            epoch = probe_master(ha_addr, NO_REPORT, connect_timeout_ms=connect_timeout_ms,
                                 read_timeout_ms=read_timeout_ms).handshake.last_epoch
        except (OSError, HAReplicaError) as exc:
            log.info("controller-mode member %s says it is master but its HA port does not answer: %s", ha_addr, exc)
            continue
        if best is None or epoch > best[2]:
            best = (ha_addr, remoting_addr, epoch)
    return best


def master_locator(members: Sequence[tuple[str, str]], connect_timeout_ms: int, read_timeout_ms: int,
                   credentials: AclCredentials | None = None) -> Callable[[], tuple[str, str] | None]:
    """A function returning the current master's ``(ha_addr, remoting_addr)`` among ``members`` (None while
    none is), for :class:`connector.client.ha.HARangeFetcher`'s ``locate_master`` (AutoSwitch)."""
    def locate() -> tuple[str, str] | None:
        found = find_master(members, connect_timeout_ms=connect_timeout_ms, read_timeout_ms=read_timeout_ms,
                            credentials=credentials)
        return None if found is None else (found[0], found[1])
    return locate
