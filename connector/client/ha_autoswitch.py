"""Fetch CommitLog bytes ``[start, end)`` from a RocketMQ 5.x controller-mode master over AutoSwitch HA
(docs/protocol.md §10), and probe such a master's epochs and confirmOffset for the driver.

:class:`AutoSwitchRangeFetcher` is :class:`connector.client.ha.HARangeFetcher` with the AutoSwitch wire
format: per connection it sends the 16-byte handshake as an async learner (``slaveBrokerId`` -1), reads the
master's handshake reply (max offset and epoch entries), then sends 12-byte TRANSFER reports and reads
36-byte-header transfer frames. Everything else is the classic fetcher's: outages waited out, heartbeat
stalls probed for data loss, chunks yielded in order, reports that carry ``start`` only (docs/protocol.md
§10.7 says why that acknowledges nothing new). Differences:

* **Offset 0.** A report of 0 makes the master start at its commitLogMinOffset (§10.2), not at its last
  file, so no byte is supplied locally; a first frame above 0 means bytes ``[0, frame offset)`` are gone
  (DataLossError, or skipped with ``fail_on_data_loss=False``).
* **Epochs.** Each data frame's ``(epoch, epochStartOffset)`` must be the handshake entry that covers its
  offset, and its body must end inside that entry (the master cuts frames at epoch ends, §10.5) — except the
  frame that ends exactly at an entry's end, which a real master tags with the *next* entry; anything else
  is HAProtocolError naming the frame and the entry: the master's history is not the one it announced.
* **confirmOffset** of the newest frame is kept in :attr:`AutoSwitchRangeFetcher.confirm_offset`.
* **Master switches** (``locate_master``): a reconnect first asks which member of the broker set is master
  now and connects to it. Its handshake must agree with the epochs the range was planned under
  (``planned_epochs``) up to the range end (RocketMQ's consistent point, docs/protocol.md §10.4); bytes past
  the point where they agree were never on the new master and are lost (DataLossError naming them, or
  skipped with ``fail_on_data_loss=False``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from connector.client.admin import BrokerAdminClient
from connector.client.ha import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    DEFAULT_READ_TIMEOUT_MS,
    RECV_BUFFER_BYTES,
    HAConnection,
    HARangeFetcher,
    NotAnHAPortError,
    _Stall,
    _Wire,
)
from connector.protocol.errors import HAProtocolError
from connector.protocol.ha_autoswitch import (
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


class AutoSwitchRangeFetcher(HARangeFetcher):
    """Fetch CommitLog bytes ``[start, end)`` from a controller-mode master's HA port (AutoSwitch HA).

    Arguments, iteration, errors and :func:`connector.client.ha.prefetch_chunks` use as for
    :class:`connector.client.ha.HARangeFetcher` (offsets in bytes, times in ms), plus ``locate_master`` (see
    the module doc; None: always ``ha_addr``), ``planned_epochs`` (the ``(epoch, startOffset)`` entries the
    range was planned under; empty: not checked) and ``credentials`` (for the offsets probe of a new
    master). After a connection's handshake, :attr:`handshake` holds the master's reply
    (:class:`HandshakeReply`); :attr:`confirm_offset` the confirmOffset of the newest frame (None before one);
    :attr:`switches` the ``(old, new)`` HA addresses of each master switch followed.
    """

    protocol = "autoswitch"

    def __init__(self, ha_addr: str, start: int, end: int, *, locate_master: MasterLocator | None = None,
                 planned_epochs: Sequence[tuple[int, int]] = (), credentials=None, **kwargs):
        super().__init__(ha_addr, start, end, **kwargs)
        self.report_offset = start  # 0 is legal here: the master then starts at its min offset
        self.handshake: HandshakeReply | None = None
        self.confirm_offset: int | None = None
        self.locate_master = locate_master
        self.planned_epochs = tuple(planned_epochs)
        self.credentials = credentials
        self.switches: list[tuple[str, str]] = []
        self._sessions = 0
        self._admin: BrokerAdminClient | None = None
        self._cap, self._cap_why = end, ""  # where this connection's bytes stop being the planned ones

    def close(self) -> None:
        """Stop keep-alives and close the connection (idempotent)."""
        super().close()
        if self._admin is not None:
            self._admin.close()

    def _follow_master(self) -> None:
        """Before a reconnect: connect to whichever member is master now (raises ConnectionRefusedError, an
        outage to wait out, while none is)."""
        found = self.locate_master()
        if found is None:
            raise ConnectionRefusedError(f"no member of broker set {self.broker} is master (an election under way?)")
        if found[0] != self.ha_addr:
            log.warning("%s: the master switched to %s; reading the rest of the range from it", self._where(),
                        found[0])
            self.switches.append((self.ha_addr, found[0]))
            self.ha_addr = found[0]
            if self._admin is not None:
                self._admin.close()
            self._admin = BrokerAdminClient(found[1], self.read_timeout_ms, self.credentials)
            self.offsets_probe = self._admin.commit_log_offsets

    def _check_planned(self, reply: HandshakeReply) -> None:
        """The master's epochs must agree with the planned ones up to the range end: past the point where they
        agree, its bytes are not the planned ones. Sets :attr:`_cap` there (the bytes from it to the range end
        are reported lost once reached, see the module doc)."""
        self._cap, self._cap_why = self.end, ""
        if not self.planned_epochs:
            return
        planned = EpochHistory([EpochEntry(e, o) for e, o in self.planned_epochs],
                               max(self.end, self.planned_epochs[-1][1]))
        common = max(planned.common_point(reply.history()), self.start)
        if common >= self.end:
            return
        already = ""
        if self.delivered > common:
            already = f"; [{common}, {self.delivered}) of them were already read from the old master"
        self._cap = max(common, self.delivered)
        self._cap_why = (f"master {self.ha_addr} (epoch {reply.last_epoch}) agrees with the epochs the range was "
                         f"planned under ({list(self.planned_epochs)}) only up to offset {common}: the bytes "
                         f"[{common}, {self.end}) never reached it{already}")

    @staticmethod
    def encode_report(offset: int) -> bytes:
        """A report's wire bytes: the 12-byte AutoSwitch TRANSFER report (docs/protocol.md §10.2)."""
        return encode_slave_report(offset)

    def _handshake(self, reader: AutoSwitchFrameReader) -> HandshakeReply:
        """Send the learner handshake, return the master's reply; then send the first report and start the
        keep-alive reports. A peer that answers something else is not an AutoSwitch HA port."""
        self.conn.send(LEARNER_HANDSHAKE.encode())
        while True:
            try:
                reply = reader.next_handshake()
            except HAProtocolError as exc:
                raise self._not_ha(reader.head(64), f"not an AutoSwitch handshake reply ({exc})") from None
            if reply is not None:
                break
            try:
                received = self.conn.recv_into(reader)
            except TimeoutError:
                raise _Stall(f"no handshake reply from the master for {self.read_timeout_ms} ms") from None
            if not received:
                if reader.buffered_bytes:
                    raise self._not_ha(reader.head(64), "then closed the connection")
                raise ConnectionResetError("master closed the connection before its handshake reply")
        try:
            reply.history()
        except ValueError as exc:
            raise HAProtocolError(f"{self._where()}: the master's handshake reply lists {exc}") from None
        self.handshake = reply
        self.conn.report(self.report_offset)
        self.conn.keep_reporting(lambda: self.report_offset)
        return reply

    def _not_ha(self, first: bytes, what: str) -> NotAnHAPortError:
        return NotAnHAPortError(f"{self.ha_addr} (broker {self.broker}) is not a RocketMQ AutoSwitch HA port: it "
                                f"answered the 16-byte handshake with {first[:32]!r}, {what}")

    def _session(self) -> Iterator[list[tuple[int, bytes | memoryview]]]:
        self._sessions += 1
        if self.locate_master is not None and self._sessions > 1:
            self._follow_master()
        self.conn.open(self.ha_addr)
        reader = AutoSwitchFrameReader(buffer_bytes=RECV_BUFFER_BYTES, keep_views=self.keep_views)
        reply = self._handshake(reader)
        self._check_planned(reply)
        history = reply.history()
        wire = _Wire(self.report_offset)
        while self.delivered < self.end:
            if self.delivered >= self._cap:
                self._lost(self.delivered, self.end, self._cap_why)
                yield [(self.delivered, b"")]  # marks the skip for the consumer
                break
            spans, resume = self._parse_transfer(reader, wire, history)
            yield from self._deliver(spans)
            del spans
            if resume is not None:
                yield [(resume, b"")]
                self.close()
                return
            if self._cap > self.delivered:
                self._receive(reader, wire)
        self.close()

    def _parse_transfer(self, reader: AutoSwitchFrameReader, wire: _Wire,
                        history: EpochHistory) -> tuple[list[tuple[int, memoryview]], int | None]:
        """Like HARangeFetcher._parse, for transfer frames (36-byte headers) checked against ``history``."""
        spans: list[tuple[int, memoryview]] = []
        while self.delivered < self._cap:
            try:
                header = reader.peek_transfer()
            except HAProtocolError as exc:
                raise HAProtocolError(f"{self._where()}: {exc}") from None
            if header is None:
                break
            if not wire.frames and header.body_size and header.offset != wire.offset:
                if wire.offset != 0 or header.offset < 0:
                    raise HAProtocolError(f"{self._where()}: master's first frame is at offset {header.offset}, "
                                          f"not at the reported offset {wire.offset}")
                # reported 0: the master starts at its commitLogMinOffset (docs/protocol.md §10.2)
                self._lost(self.delivered, min(header.offset, self.end),
                           f"the master's CommitLog starts at {header.offset} (commitLogMinOffset)")
                wire.offset = header.offset
            frame = reader.next_transfer_view()
            if frame is None:
                break
            header, body = frame
            wire.frames += 1
            self.confirm_offset = header.confirm_offset
            if not body:  # heartbeat although bytes are expected
                wire.stalls += 1
                resume = self._on_heartbeat(wire.offset, wire.stalls)
                if resume is not None:
                    return spans, resume
                continue
            if header.offset != wire.offset:
                raise HAProtocolError(f"{self._where()}: master pushed a frame at offset {header.offset}, expected "
                                      f"{wire.offset} (the end of the previous frame)")
            self._check_epoch(header, history)
            wire.stalls = 0
            first = wire.offset
            wire.offset += len(body)
            self._take(spans, first, body, self._cap)
        return spans, None

    def _check_epoch(self, header: TransferHeader, history: EpochHistory) -> None:
        """The frame's epoch must be the handshake entry covering its bytes (docs/protocol.md §10.5, §10.7)."""
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
            f"{self._where()}: frame [{header.offset}, {end}) is tagged epoch {header.epoch} starting at "
            f"{header.epoch_start_offset}, but the master's handshake announced {announced} there: its epoch "
            "history changed under the connection")


@dataclass(frozen=True, slots=True)
class AutoSwitchMasterState:
    """What one short AutoSwitch connection tells about a master: its CommitLog max offset and epoch entries
    (the handshake reply) and its confirmOffset (from the first transfer frame; None when the reported offset
    was already at the master's max offset, so no frame came at once); offsets in bytes."""

    handshake: HandshakeReply
    confirm_offset: int | None


def probe_master(ha_addr: str, report_offset: int, *, connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
                 read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS) -> AutoSwitchMasterState:
    """Handshake with a controller-mode master as a learner, report ``report_offset`` and read the first
    transfer frame for the master's confirmOffset (docs/protocol.md §10.5, §10.6).

    ``report_offset`` must be an offset the query already landed (a batch start): the report then
    acknowledges nothing new (docs/protocol.md §10.7). When it is at or past the master's max offset no
    frame is awaited (the master would only send a heartbeat after 5 s). Raises OSError/TimeoutError
    (unreachable or silent for ``read_timeout_ms``), HAProtocolError (a peer that is not an AutoSwitch
    master; the message names the field and stream byte).
    """
    conn = HAConnection(encode_slave_report, connect_timeout_ms=connect_timeout_ms, read_timeout_ms=read_timeout_ms)
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
