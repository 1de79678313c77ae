"""The source's one HA client: :class:`HARangeFetcher` fetches one CommitLog byte range ``[start, end)`` of one broker
as a slave that never acknowledges anything new, and :func:`prefetch_receives` runs it on a background thread
(:func:`fetch_receives`: the HA stage of a task's read).

One frame loop over a :class:`connector.client.ha_connection.HATransferConnection` serves both HA protocols; what
differs is the wire object it calls: :class:`connector.client.ha_wire.ClassicWire` (RocketMQ 4.9.8 master/slave,
docs/protocol.md §2) or :class:`connector.client.ha_autoswitch.AutoSwitchWire` (5.x controller mode, §10). What a
read reports, how it starts at offset 0, waits out outages, detects lost bytes and refuses a peer that is not an HA
port: docs/source.md "Acknowledgements (safe on a SYNC_MASTER)", "Full history, reading from slaves", "Broker
outages", "Data loss" and "Errors".
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator, Sequence

from connector.client.ha_autoswitch import AutoSwitchWire, MasterLocator
from connector.client.ha_connection import HATransferConnection
from connector.client.ha_wire import ClassicWire, HAWire, OffsetsProbe, StreamState
from connector.client.reconnect import OutageWait
from connector.data_loss import on_data_loss
from connector.errors import HAFetchError, HAReplicaError, NotAnHAPortError
from connector.options.declaration import OPTIONS
from connector.options.settings import FetchSettings
from connector.protocol.acl import AclCredentials
from connector.protocol.ha import (
    HA_PROTOCOL_CLASSIC,
    TransferFrameReader,
)
from connector.protocol.ha_autoswitch import HA_PROTOCOL_AUTOSWITCH, HandshakeReply

log = logging.getLogger(__name__)

_DEFAULT_SETTINGS = FetchSettings()  # the declared defaults (connector.options.declaration.OPTIONS)
RECV_BUFFER_BYTES = 1024 * 1024  # the reader's buffers: recv_into them, frames parsed in place, bodies never copied
PREFETCH_POLL_S = 0.2

#: the HA protocols a fetcher speaks, by id (:meth:`connector.client.admin.BrokerAdminClient.ha_protocol`)
HA_PROTOCOLS = (HA_PROTOCOL_CLASSIC, HA_PROTOCOL_AUTOSWITCH)

_ZERO_BYTE = memoryview(b"\x00")


class HARangeFetcher:
    """Fetch CommitLog bytes ``[start, end)`` from a broker's HA port, over the classic or AutoSwitch protocol.

    Iterating yields ``(offset, memoryview)`` chunks, one per frame, covering ``[start, end)`` exactly and in
    order; the one exception is a data-loss skip with ``fail_on_data_loss=False``, after which the next chunk
    (possibly empty) starts at the broker's commitLogMinOffset. Every report carries ``start`` (1 for a classic
    range starting at 0, whose byte 0 the fetcher supplies itself: docs/source.md "Full history, reading from
    slaves"); a reconnect reports it again and does not deliver a byte twice.

    Args:
        ha_addr: ``host:haListenPort`` of a master (or of a slave, whose HA port serves the same way).
        start, end: CommitLog offsets in bytes, ``0 <= start <= end``.
        protocol: the HA protocol id, ``"classic"`` (RocketMQ 4.9.8 master/slave) or ``"autoswitch"`` (5.x
            controller mode); :meth:`connector.client.admin.BrokerAdminClient.ha_protocol` tells which.
        broker: broker name for messages.
        settings: the query's :class:`connector.options.settings.FetchSettings` (the declared defaults when not given):
            ``connect_timeout_ms`` (TCP connect), ``read_timeout_ms`` (longest silence from the broker before the
            connection counts as dead), ``fetch_retries`` (heartbeat stalls in a row, a live broker sending no
            data, before giving up), ``reconnect_backoff_ms`` / ``reconnect_backoff_max_ms`` (backoff between
            reconnect attempts), ``max_outage_ms`` (longest time without a working connection before
            HAFetchError), ``heartbeat_interval_ms`` (period of keep-alive reports, all equal to the first),
            ``fail_on_data_loss``; all times in ms.
        offsets_probe: returns the broker's (commitLogMinOffset, commitLogMaxOffset); called when the
            master sends heartbeats although bytes are expected. None disables loss detection.
        fail_on_data_loss: raise DataLossError (True) or skip the lost bytes with a warning (False); None:
            ``settings.fail_on_data_loss``.
        server_is_slave: ``ha_addr`` is a slave's HA port: a max offset below ``end`` then means the
            slave has not replicated the bytes *yet* (a stall, retried), not that they were lost.
        keep_views: yield chunks safe to keep: memoryviews, one per frame, of receive buffers that are
            never written over (:class:`TransferFrameReader` ``keep_views``: a new buffer once one is
            mostly filled, only a partial frame copied into it), so no byte is copied in user space on
            the way to the consumer; False yields views of one reused buffer, valid only until the next
            iteration (for a consumer that copies them at once).
        locate_master, planned_epochs, credentials: AutoSwitch only
            (:class:`connector.client.ha_autoswitch.AutoSwitchWire`): finds the broker set's master before a
            reconnect (None: always ``ha_addr``); the ``(epoch, startOffset)`` entries the range was planned
            under (empty: not checked); the ACL account for the offsets probe of a new master.

    After a connection's AutoSwitch handshake :attr:`handshake` holds the master's reply
    (:class:`connector.protocol.ha_autoswitch.HandshakeReply`), :attr:`confirm_offset` the confirmOffset of
    the newest frame and :attr:`switches` the ``(old, new)`` HA addresses of each master switch followed (None,
    None and empty for the classic protocol).

    Iterate once; use as a context manager or call :meth:`close` to drop the connection early.
    Raises ValueError (a bad range, an unknown protocol, AutoSwitch arguments for the classic one) at once;
    while iterating HAProtocolError (bad frames, offset discontinuity), NotAnHAPortError, DataLossError,
    HAFetchError.
    """

    def __init__(self, ha_addr: str, start: int, end: int, *, protocol: str = HA_PROTOCOL_CLASSIC,
                 broker: str = "broker",
                 settings: FetchSettings = _DEFAULT_SETTINGS, offsets_probe: OffsetsProbe | None = None,
                 fail_on_data_loss: bool | None = None, server_is_slave: bool = False, keep_views: bool = True,
                 locate_master: MasterLocator | None = None, planned_epochs: Sequence[tuple[int, int]] = (),
                 credentials: AclCredentials | None = None):
        if not 0 <= start <= end:
            raise ValueError(f"bad CommitLog range [{start}, {end})")
        self.settings = settings
        self.wire = _wire(protocol, locate_master, planned_epochs, credentials, settings.read_timeout_ms)
        self.protocol = protocol
        self.ha_addr = ha_addr
        self.start = start
        self.end = end
        self.broker = broker
        self.offsets_probe = offsets_probe
        self.fail_on_data_loss = settings.fail_on_data_loss if fail_on_data_loss is None else fail_on_data_loss
        self.server_is_slave = server_is_slave
        self.keep_views = keep_views
        #: the one value every report carries: ``start`` (classic: 1 for a range starting at 0)
        self.report_offset = self.wire.first_report_offset(start)
        self.delivered = start  # every byte below this was yielded (or skipped as lost)
        self.lost_ranges: list[tuple[int, int]] = []
        self.frames_received = 0  # whole frames over all connections (0: the peer never showed it speaks HA)
        self.handshake: HandshakeReply | None = None
        self.confirm_offset: int | None = None
        self.switches: list[tuple[str, str]] = []
        #: the connection (its ``connections``, report counters and ``bytes_received`` count all of them)
        self.conn = HATransferConnection(self.wire.encode_report, connect_timeout_ms=settings.connect_timeout_ms,
                                         read_timeout_ms=settings.read_timeout_ms,
                                         heartbeat_interval_ms=settings.heartbeat_interval_ms, name=broker,
                                         receive_buffer_bytes=settings.receive_buffer_bytes)
        self._cap, self._cap_why = end, ""  # where this connection's bytes stop being the planned ones
        self._cancelled = False
        self._cancel_event = threading.Event()
        self.outage = OutageWait(f"broker {broker} HA {ha_addr}", settings.reconnect_backoff_ms,
                                 settings.reconnect_backoff_max_ms, settings.max_outage_ms,
                                 cancelled=self._cancel_event)

    def __enter__(self) -> HARangeFetcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def connections(self) -> int:
        """HA connections opened so far."""
        return self.conn.connections

    @property
    def report_count(self) -> int:
        """Reports sent so far (first and keep-alive ones), over all connections."""
        return self.conn.report_count

    @property
    def min_reported_offset(self) -> int | None:
        """The smallest offset this fetcher ever reported (None before the first report)."""
        return self.conn.min_reported_offset

    @property
    def max_reported_offset(self) -> int | None:
        """The largest offset this fetcher ever reported (None before the first report)."""
        return self.conn.max_reported_offset

    @property
    def bytes_received(self) -> int:
        """Stream bytes (frame headers included) received over all connections."""
        return self.conn.bytes_received

    def describe(self) -> str:
        """``broker <name> HA <addr>, range [start, end)``, the prefix of the fetch's messages."""
        return f"broker {self.broker} HA {self.ha_addr}, range [{self.start}, {self.end})"

    def close(self) -> None:
        """Stop keep-alives and close the connection (idempotent)."""
        self.conn.close()
        self.wire.close()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Stop the fetch from any thread: close the connection and never reconnect. The iteration then
        ends without an error (a consumer that cancels does not want the rest)."""
        self._cancelled = True
        self._cancel_event.set()
        self.close()

    def __iter__(self) -> Iterator[tuple[int, bytes | memoryview]]:
        for spans in self.receives():
            yield from spans

    def receives(self) -> Iterator[list[tuple[int, bytes | memoryview]]]:
        """The chunks of :meth:`__iter__` grouped by the receive that brought them (one list per ``recv_into``
        that completed frames of the range), for a consumer that hands them on per receive."""
        try:
            while self.delivered < self.end and not self._cancelled:
                before = self.delivered
                try:
                    yield from self._session()
                except (OSError, _Stall) as exc:  # the broker is down or silent: wait it out, bounded
                    self.close()
                    if self._cancelled:
                        return
                    if self.delivered > before:
                        self.outage.recovered()  # progress, then a new failure: a new outage starts now
                    if not self.outage.failed(f"{exc} at offset {self.delivered}"):
                        raise HAFetchError(f"{self.outage.give_up_message(exc)}; range [{self.start}, {self.end}) "
                                           f"stopped at offset {self.delivered}") from exc
        finally:
            self.close()

    # --- one connection: the frame loop ----------------------------------------------------------------
    def _session(self) -> Iterator[list[tuple[int, bytes | memoryview]]]:
        """One connection: open the stream (:meth:`HAWire.begin`), receive frames straight into the reader's
        buffer, yield the bytes of the range (one list of chunks per receive)."""
        self.wire.before_connect(self)
        self.conn.open(self.ha_addr)
        reader = self.wire.new_reader(RECV_BUFFER_BYTES, self.keep_views)
        self._cap, self._cap_why = self.wire.begin(self, reader)
        stream = StreamState(self.report_offset)
        while self.delivered < self.end:
            if self.delivered >= self._cap:  # the rest of the range is not on this master
                self.lose(self.delivered, self.end, self._cap_why)
                yield [(self.delivered, b"")]  # marks the skip for the consumer
                break
            frames = stream.frames
            spans, resume = self._parse(reader, stream)
            if stream.frames != frames:  # whatever is buffered now is a new frame: its wait starts at 0
                self.frames_received += stream.frames - frames
                stream.partial_wait_s = 0.0
            yield from self._deliver(spans)
            del spans
            if resume is not None:
                yield [(resume, b"")]  # marks the skip (if any) for the consumer
                self.close()
                return  # reconnect (reporting self.report_offset) unless the range is done
            if self.delivered < self._cap:
                self._receive(reader, stream)
        self.close()

    def _deliver(self, spans: list[tuple[int, memoryview]]) -> Iterator[list[tuple[int, memoryview]]]:
        """Yield one receive's spans of the range (views of the receive buffer, see ``keep_views``) as one list,
        unless there are none; any span ends an outage."""
        if not spans:
            return
        if self.outage.active:
            self.outage.recovered()
        yield spans

    def _receive(self, reader: TransferFrameReader, stream: StreamState) -> None:
        """One ``recv_into`` the reader's buffer; a silent, closing or frame-dripping peer raises (see the class).

        The socket timeout bounds one wait for the first byte of a frame; once a frame has begun, the waits
        for the rest of it share one ``read_timeout_ms`` budget (only time blocked here counts, not the
        consumer's time between chunks), so a master sending a byte now and then cannot hold the task.
        """
        begun = reader.buffered_bytes > 0  # a frame has begun and is not complete
        timeout_s = self.settings.read_timeout_ms / 1000 - (stream.partial_wait_s if begun else 0.0)
        if timeout_s <= 0:
            raise self._incomplete_frame(reader, stream)
        waited_from = time.monotonic()
        try:
            received = self.conn.recv_into(reader, timeout_s)
        except TimeoutError:
            if begun:
                raise self._incomplete_frame(reader, stream) from None
            raise _Stall(f"no bytes from the master for {self.settings.read_timeout_ms} ms while waiting for offset "
                         f"{stream.offset}") from None
        finally:
            if begun:
                stream.partial_wait_s += time.monotonic() - waited_from
        if not received:
            if not stream.frames and reader.buffered_bytes:
                raise self.not_an_ha_port(reader.head(64), "then closed the connection")
            raise ConnectionResetError(f"master closed the connection while offset {stream.offset} was expected")

    def _parse(self, reader: TransferFrameReader,
               stream: StreamState) -> tuple[list[tuple[int, memoryview]], int | None]:
        """The range's bytes in the complete frames buffered so far, as ``(CommitLog offset, view)`` spans, and
        the offset to reconnect at when a heartbeat stall asks for it (else None)."""
        spans: list[tuple[int, memoryview]] = []
        while self.delivered < self._cap:
            frame = self.wire.next_frame(self, reader, stream)
            if frame is None:
                break  # incomplete frame: wait for more bytes
            body = frame[1]
            if not body:  # heartbeat although bytes are expected
                stream.stalls += 1
                resume = self._on_heartbeat(stream.offset, stream.stalls)
                if resume is not None:
                    return spans, resume
                continue
            stream.stalls = 0
            first = stream.offset
            stream.offset += len(body)
            if self.delivered == 0 and first == 1:
                spans.append((0, _ZERO_BYTE))  # byte 0: TOTALSIZE's high byte (docs/source.md "Full history...")
                self.delivered = 1
            self._take(spans, first, body, self._cap)
        return spans, None

    def _take(self, spans: list[tuple[int, memoryview]], first: int, body: memoryview, cap: int) -> None:
        """Add to ``spans`` the part of a frame body starting at CommitLog offset ``first`` that the range still
        needs: from what was delivered up to ``cap`` (bytes)."""
        lo, hi = max(first, self.delivered), min(first + len(body), cap)
        if hi > lo:
            spans.append((lo, body[lo - first:hi - first]))
            self.delivered = hi

    def _incomplete_frame(self, reader: TransferFrameReader, stream: StreamState) -> Exception:
        """A frame begun but not whole after ``read_timeout_ms`` of waiting: from a peer that has not shown it
        speaks HA (:meth:`HAWire.unproven`), NotAnHAPortError; else a stall (reconnect, bounded by
        ``max_outage_ms``)."""
        if self.wire.unproven(self, reader, stream):
            return self.not_an_ha_port(reader.head(64),
                                       f"then less than one frame header in {self.settings.read_timeout_ms} ms")
        return _Stall(f"the master sent only {reader.buffered_bytes} bytes of the frame at offset {stream.offset} in "
                      f"{self.settings.read_timeout_ms} ms ({OPTIONS.read_timeout_ms.name} bounds a whole frame)")

    def not_an_ha_port(self, first: bytes, what: str) -> NotAnHAPortError:
        """The NotAnHAPortError of a peer that answered with ``first`` (bytes) and then did ``what``."""
        return NotAnHAPortError(f"{self.ha_addr} (broker {self.broker}) is not a {self.wire.peer}: it answered "
                                f"the {self.wire.first_message} with {first[:32]!r}, {what}")

    def _on_heartbeat(self, offset: int, stalls: int) -> int | None:
        """A heartbeat at ``offset`` although bytes up to ``end`` are expected: find out why.

        Returns the offset to reconnect at (after skipping lost bytes) or None to keep waiting.
        Raises DataLossError (``fail_on_data_loss``) or HAFetchError after ``fetch_retries`` stalls.
        """
        if self.offsets_probe is not None:
            try:
                min_offset, max_offset = self.offsets_probe()
            except HAReplicaError as exc:
                log.warning("%s: cannot probe the broker's offsets: %s", self.describe(), exc)
            else:
                if min_offset > offset:
                    # the master deleted the file holding `offset`: it will send heartbeats forever
                    if min_offset > self.delivered:
                        self.lose(self.delivered, min(min_offset, self.end),
                                  f"commitLogMinOffset is {min_offset}; the files were deleted")
                    # reconnect reporting commitLogMinOffset: it acknowledges only deleted bytes, which no
                    # producer can still be waiting for
                    self.report_offset = max(self.report_offset, min(min_offset, self.delivered))
                    return self.delivered
                if max_offset <= offset and max_offset < self.end and self.server_is_slave:
                    log.warning("%s: the slave holds CommitLog bytes up to %d only; waiting for it to replicate "
                                "up to %d", self.describe(), max_offset, self.end)
                elif max_offset <= offset and max_offset < self.end:
                    self.lose(self.delivered, self.end,
                              f"the CommitLog now ends at {max_offset}, below the planned range end (the broker "
                              "lost its tail, e.g. a crash before flushing)")
                    return self.delivered
        if stalls > self.settings.fetch_retries:
            raise HAFetchError(f"{self.describe()}: master sent {stalls} heartbeats in a row at offset {offset} "
                               f"instead of data ({OPTIONS.fetch_retries.name}={self.settings.fetch_retries})")
        return None

    def lose(self, lo: int, hi: int, why: str) -> None:
        """Bytes [lo, hi) of the range are gone: raise DataLossError, or log and skip them (``lost_ranges``)."""
        self.lost_ranges.append((lo, hi))
        on_data_loss(self.fail_on_data_loss, f"broker {self.broker} ({self.ha_addr}) no longer holds CommitLog bytes "
                     f"[{lo}, {hi}) that the query needs: {why}", instead="skip lost bytes", logger=log)
        self.delivered = hi


def _wire(protocol: str, locate_master: MasterLocator | None, planned_epochs: Sequence[tuple[int, int]],
          credentials: AclCredentials | None, read_timeout_ms: int) -> HAWire:
    """The wire object of ``protocol``; ValueError for an unknown id or AutoSwitch arguments given to another."""
    if protocol == HA_PROTOCOL_AUTOSWITCH:
        return AutoSwitchWire(locate_master=locate_master, planned_epochs=planned_epochs, credentials=credentials,
                              read_timeout_ms=read_timeout_ms)
    if protocol != HA_PROTOCOL_CLASSIC:
        raise ValueError(f"unknown HA protocol {protocol!r} (expected one of {', '.join(HA_PROTOCOLS)})")
    given = [name for name, value in (("locate_master", locate_master), ("planned_epochs", planned_epochs),
                                      ("credentials", credentials)) if value]
    if given:
        raise ValueError(f"{', '.join(given)}: AutoSwitch HA arguments, not for the {protocol!r} protocol")
    return ClassicWire()


class _Stall(Exception):
    """Internal: the connection is alive but not delivering; retried like a connection error."""


class _Failure:
    """An exception raised on the prefetch thread, handed to the consumer."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException):
        self.exc = exc


_END = object()


def fetch_receives(fetcher: HARangeFetcher, depth: int) -> Iterator[list[tuple[int, bytes | memoryview]]]:
    """The HA stage of a task's read (docs/architecture.md "The path of one body"): ``fetcher``'s chunks grouped by
    the receive that brought them, one list per receive (:meth:`HARangeFetcher.receives`), received on a
    background thread ``depth`` receives ahead (:func:`prefetch_receives`) or, for ``depth`` 0, on the consumer's
    thread. Its consumer enters it once per receive (at most one 1 MiB receive buffer, or one larger frame)."""
    return prefetch_receives(fetcher, depth) if depth else fetcher.receives()


def prefetch_receives(fetcher: HARangeFetcher,
                      depth: int) -> Iterator[list[tuple[int, bytes | memoryview]]]:
    """Iterate ``fetcher`` on a background thread, ``depth`` receives ahead of the consumer.

    Receiving (``recv_into``, frame parsing) then overlaps with whatever the consumer does with the previous
    chunks (decoding, in the executor), on another core when there is one. The fetcher must yield chunks
    that stay valid (``keep_views=True``); they are handed over one receive at a time, as the lists of
    :meth:`HARangeFetcher.receives`. Memory: the chunks of at most ``depth`` receives, each holding at
    most one receive buffer (1 MiB, or one larger frame), plus the fetcher's own buffer.

    Yields exactly what ``fetcher.receives()`` yields, in order; an exception of the fetcher (HAFetchError,
    DataLossError, HAProtocolError...) is raised here, in the consumer. Closing the generator early
    cancels the fetcher (the connection is shut down, no reconnect) and joins the thread.
    """
    if not fetcher.keep_views:
        raise ValueError("prefetch_receives needs a fetcher with keep_views=True (its chunks outlive the next recv)")
    handoff: queue.Queue = queue.Queue(maxsize=depth)

    def put(item) -> bool:
        while not fetcher.cancelled:
            try:
                handoff.put(item, timeout=PREFETCH_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for spans in fetcher.receives():
                if not put(spans):
                    return
            put(_END)
        except BaseException as exc:  # noqa: BLE001 - every failure goes to the consumer
            put(_Failure(exc))

    thread = threading.Thread(target=run, name=f"ha-prefetch-{fetcher.broker}", daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item
    finally:
        fetcher.cancel()
        thread.join(timeout=max(fetcher.settings.read_timeout_ms / 1000, 1.0) + 5)
