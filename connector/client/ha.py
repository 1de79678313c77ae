"""Blocking HA client that fetches one CommitLog byte range ``[start, end)`` of one broker (docs/protocol.md §2).

:class:`HAConnection` is the one owner of an HA-port socket (connect, reports, receive, close), as
:mod:`connector.client.remoting` is of remoting sockets; :class:`HARangeFetcher` drives it and
:func:`prefetch_chunks` runs a fetcher on a background thread. :class:`HARangeFetcher` speaks the classic
RocketMQ 4.9.8 master/slave protocol as a slave that never acknowledges:

* **Reports.** The first 8-byte report is ``start`` and every keep-alive report repeats it (a thread
  sends one every ``haSendHeartbeatInterval`` ms, below the master's 20 s ``haHousekeepingInterval``).
  The master treats each report as a replica ack (``push2SlaveMaxOffset``, docs/protocol.md §2.8), and a
  SYNC_MASTER would tell producers SEND_OK on the strength of it; ``start`` is already committed
  downstream, so reporting it acknowledges nothing new (docs/source.md "Acknowledgements (safe on a SYNC_MASTER)").
* **Offset 0.** A first report of 0 makes the master start at its current *last* file (docs/protocol.md §2.5), so
  a range starting at 0 reports 1 and supplies byte 0 itself: TOTALSIZE is a big-endian int32 whose
  high byte is 0 for every record under 16 MiB (checked against a real 4.9.8 master, docs/source.md "Full history,
  reading from slaves").
* **Frames.** 12-byte headers plus raw bytes, parsed by
  :class:`connector.protocol.ha.TransferFrameReader`; each frame must start exactly where the previous
  one ended, else :class:`HAProtocolError` naming both offsets.
* **Stalls and data loss.** The master answers an offset it no longer holds with heartbeats forever
  (docs/protocol.md §2.5, §7.5). A heartbeat while bytes are still expected therefore triggers a probe of the
  broker's commitLogMinOffset/commitLogMaxOffset (remoting): bytes below the min offset are lost
  (:class:`DataLossError` naming the range, or with ``fail_on_data_loss=False`` a logged skip to the
  min offset); a max offset below the range end means the broker lost its tail; otherwise the stall is
  counted and more than ``fetch_retries`` stalls in a row fail the fetch. (Skipping lost bytes is the
  one case where a reconnect reports more than ``start``: it reports commitLogMinOffset, which only
  acknowledges bytes the broker has deleted and no producer can still be waiting for.)
* **Outages are waited out** (docs/source.md "Broker outages"). A refused or reset connection, one
  silent for ``read_timeout_ms``, or one that has begun a frame and not delivered all of it after waiting
  ``read_timeout_ms`` for it in all (a master that drips a frame a byte at a time), is reconnected with
  exponential backoff and jitter
  (``reconnect_backoff_ms`` .. ``reconnect_backoff_max_ms``, :class:`connector.client.reconnect.OutageWait`)
  until the broker is back or the outage has lasted ``max_outage_ms``; then :class:`HAFetchError`. The
  outage is logged once when it starts and once when it ends. A reconnect reports ``start`` again
  and discards the bytes it already delivered.
* **Peers that are not RocketMQ.** A first frame header whose offset is not the one reported, or a
  peer that never sent a frame and sends fewer than the 12 bytes of a frame header within
  ``read_timeout_ms``, is not a RocketMQ HA port: :class:`NotAnHAPortError` at once, naming the address
  and the first bytes (never retried).

The iterator yields ``(offset, memoryview)`` chunks, one per frame, that cover ``[start, end)`` exactly and
in order: views of the receive buffers, never copied (see ``keep_views``). The only exception is a
data-loss skip with ``fail_on_data_loss=False``: then the next chunk starts later (possibly as an empty
chunk at the new offset) and the bytes in between are gone.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator

from connector.client.net import open_connection
from connector.client.reconnect import OutageWait
from connector.data_loss import on_data_loss
from connector.protocol.errors import HAProtocolError, HAReplicaError
from connector.protocol.ha import (
    HA_CONNECT_TIMEOUT_MS,
    HA_HOUSEKEEPING_INTERVAL_MS,
    HA_SEND_HEARTBEAT_INTERVAL_MS,
    TransferFrameReader,
    encode_report,
)

log = logging.getLogger(__name__)

# The fetch defaults: the source's options of the same meaning take them (connector.options.OPTION_DEFAULTS).
DEFAULT_CONNECT_TIMEOUT_MS = HA_CONNECT_TIMEOUT_MS  # RemotingUtil.connect
DEFAULT_READ_TIMEOUT_MS = HA_HOUSEKEEPING_INTERVAL_MS
DEFAULT_FETCH_RETRIES = 3
DEFAULT_RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms
DEFAULT_RECONNECT_BACKOFF_MAX_MS = 1000  # Kafka's reconnect.backoff.max.ms
DEFAULT_MAX_OUTAGE_MS = 5 * 60 * 1000  # a broker restart of a minute is waited out with room to spare
DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS = HA_SEND_HEARTBEAT_INTERVAL_MS
DEFAULT_FETCH_PREFETCH_CHUNKS = 4  # received chunks waiting for the decoder (prefetch_chunks)

RECV_BUFFER_BYTES = 1024 * 1024  # the reader's buffers: recv_into them, frames parsed in place, bodies never copied
PREFETCH_POLL_S = 0.2


_ZERO_BYTE = memoryview(b"\x00")


class HAFetchError(HAReplicaError):
    """An HA fetch gave up: an outage longer than ``maxOutageMs`` or stalls beyond ``fetchRetries``."""


class NotAnHAPortError(HAProtocolError):
    """The peer at the HA address does not speak RocketMQ's HA protocol (e.g. an HTTP or echo server)."""


OffsetsProbe = Callable[[], tuple[int, int]]


class HAConnection:
    """The one owner of an HA-port socket: connect, the offset reports (the first one and the keep-alive
    ones), receiving into a frame reader's buffer, close. Every HA client of the source goes through it
    (:class:`HARangeFetcher`, :class:`connector.client.ha_autoswitch.AutoSwitchRangeFetcher`,
    :func:`connector.client.ha_autoswitch.probe_master`).

    Args:
        encode_report: an offset (bytes) -> the report's wire bytes (classic 8-byte or AutoSwitch 12-byte).
        connect_timeout_ms: TCP connect timeout (ms).
        read_timeout_ms: the socket timeout after connecting (ms); :meth:`recv_into` may set another.
        heartbeat_interval_ms: period of the keep-alive reports (ms).
        name: for the keep-alive thread's name (``ha-keepalive-<name>``).

    One object serves any number of connections in turn (:meth:`open` after :meth:`close`); the counters
    cover all of them. :meth:`close` may be called from any thread; it wakes a receive blocked in another.
    """

    def __init__(self, encode_report: Callable[[int], bytes], *, connect_timeout_ms: int, read_timeout_ms: int,
                 heartbeat_interval_ms: int = DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS, name: str = "broker"):
        self.encode_report = encode_report
        self.connect_timeout_ms = connect_timeout_ms
        self.read_timeout_ms = read_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.name = name
        self.connections = 0  # TCP connections opened
        self.reports_sent: list[int] = []  # the offset of every report sent, in order
        self.bytes_received = 0  # stream bytes (headers included) over all connections
        self._sock: socket.socket | None = None
        self._stop_keepalive: threading.Event | None = None
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        """True between :meth:`open` and :meth:`close`."""
        return self._sock is not None

    def open(self, addr: str) -> None:
        """Connect to ``addr`` (``host:haPort``); raises OSError (TimeoutError, ConnectionError...) or AddressError."""
        sock = open_connection(addr, self.connect_timeout_ms / 1000)
        self._sock = sock
        self.connections += 1
        sock.settimeout(self.read_timeout_ms / 1000)

    def send(self, data: bytes) -> None:
        """Send ``data`` whole (a handshake). Raises OSError, or ConnectionResetError when closed."""
        sock = self._sock
        if sock is None:
            raise ConnectionResetError("HA connection closed")
        with self._lock:
            sock.sendall(data)

    def report(self, offset: int) -> None:
        """Send one report of ``offset`` (nothing when closed); raises OSError."""
        sock = self._sock
        if sock is None:
            return
        with self._lock:
            sock.sendall(self.encode_report(offset))
            self.reports_sent.append(offset)

    def keep_reporting(self, offset: Callable[[], int]) -> None:
        """Report ``offset()`` every ``heartbeat_interval_ms`` on a daemon thread until :meth:`close`."""
        stop = threading.Event()
        self._stop_keepalive = stop

        def run() -> None:
            while not stop.wait(self.heartbeat_interval_ms / 1000):
                try:
                    self.report(offset())
                except OSError as exc:
                    log.debug("HA %s: keep-alive report failed: %s", self.name, exc)
                    return

        threading.Thread(target=run, name=f"ha-keepalive-{self.name}", daemon=True).start()

    def recv_into(self, reader: TransferFrameReader, timeout_s: float | None = None) -> int:
        """One receive into ``reader``'s buffer (``timeout_s``: a new socket timeout, seconds); returns the bytes
        received, 0 when the peer closed. Raises TimeoutError, OSError, ConnectionResetError when closed."""
        sock = self._sock
        if sock is None:
            raise ConnectionResetError("HA connection closed")
        if timeout_s is not None:
            sock.settimeout(timeout_s)
        received = sock.recv_into(reader.writable())
        if received:
            self.bytes_received += received
            reader.wrote(received)
        return received

    def close(self) -> None:
        """Stop the keep-alive reports and close the connection (idempotent, any thread)."""
        if self._stop_keepalive is not None:
            self._stop_keepalive.set()
            self._stop_keepalive = None
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a recv blocked in another thread (close alone does not)
            except OSError:
                pass
            finally:
                sock.close()


class HARangeFetcher:
    """Fetch CommitLog bytes ``[start, end)`` from a broker's HA port.

    Args:
        ha_addr: ``host:haListenPort`` of a master (or of a slave, whose HA port serves the same way).
        start, end: CommitLog offsets in bytes, ``0 <= start <= end``.
        broker: broker name for messages.
        connect_timeout_ms: TCP connect timeout.
        read_timeout_ms: longest silence from the broker before the connection counts as dead.
        fetch_retries: heartbeat stalls in a row (a live broker sending no data) before giving up.
        reconnect_backoff_ms, reconnect_backoff_max_ms: backoff between reconnect attempts (ms).
        max_outage_ms: longest time without a working connection before HAFetchError (ms).
        heartbeat_interval_ms: period of keep-alive reports (all equal to the first report).
        offsets_probe: returns the broker's (commitLogMinOffset, commitLogMaxOffset); called when the
            master sends heartbeats although bytes are expected. None disables loss detection.
        fail_on_data_loss: raise DataLossError (True) or skip the lost bytes with a warning (False).
        server_is_slave: ``ha_addr`` is a slave's HA port: a max offset below ``end`` then means the
            slave has not replicated the bytes *yet* (a stall, retried), not that they were lost.
        keep_views: yield chunks safe to keep: memoryviews, one per frame, of receive buffers that are
            never written over (:class:`TransferFrameReader` ``keep_views``: a new buffer once one is
            mostly filled, only a partial frame copied into it), so no byte is copied in user space on
            the way to the consumer; False yields views of one reused buffer, valid only until the next
            iteration (for a consumer that copies them at once).

    Iterate once; use as a context manager or call :meth:`close` to drop the connection early.
    Raises HAProtocolError (bad frames, offset discontinuity), DataLossError, HAFetchError.
    """

    def __init__(self, ha_addr: str, start: int, end: int, *, broker: str = "broker",
                 connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS, read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS,
                 fetch_retries: int = DEFAULT_FETCH_RETRIES,
                 heartbeat_interval_ms: int = DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS,
                 offsets_probe: OffsetsProbe | None = None,
                 fail_on_data_loss: bool = True, server_is_slave: bool = False, keep_views: bool = True,
                 reconnect_backoff_ms: int = DEFAULT_RECONNECT_BACKOFF_MS,
                 reconnect_backoff_max_ms: int = DEFAULT_RECONNECT_BACKOFF_MAX_MS,
                 max_outage_ms: int = DEFAULT_MAX_OUTAGE_MS):
        if not 0 <= start <= end:
            raise ValueError(f"bad CommitLog range [{start}, {end})")
        self.ha_addr = ha_addr
        self.start = start
        self.end = end
        self.broker = broker
        self.connect_timeout_ms = connect_timeout_ms
        self.read_timeout_ms = read_timeout_ms
        self.fetch_retries = fetch_retries
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.offsets_probe = offsets_probe
        self.fail_on_data_loss = fail_on_data_loss
        self.server_is_slave = server_is_slave
        self.keep_views = keep_views
        #: the one value every report carries: ``start``, or 1 for a range starting at 0
        self.report_offset = start if start > 0 else 1
        self.delivered = start  # every byte below this was yielded (or skipped as lost)
        self.lost_ranges: list[tuple[int, int]] = []
        self.frames_received = 0  # whole frames over all connections (0: the peer never showed it speaks HA)
        #: the connection (its ``connections``, ``reports_sent`` and ``bytes_received`` count all of them)
        self.conn = HAConnection(self.encode_report, connect_timeout_ms=connect_timeout_ms,
                                 read_timeout_ms=read_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                                 name=broker)
        self._cancelled = False
        self._cancel_event = threading.Event()
        self.outage = OutageWait(f"broker {broker} HA {ha_addr}", reconnect_backoff_ms, reconnect_backoff_max_ms,
                                 max_outage_ms, cancelled=self._cancel_event)

    def __enter__(self) -> HARangeFetcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def encode_report(offset: int) -> bytes:
        """A report's wire bytes: the classic 8-byte offset (docs/protocol.md §2.2)."""
        return encode_report(offset)

    @property
    def connections(self) -> int:
        """HA connections opened so far."""
        return self.conn.connections

    @property
    def reports_sent(self) -> list[int]:
        """The offset of every report sent, in order, over all connections."""
        return self.conn.reports_sent

    @property
    def bytes_received(self) -> int:
        """Stream bytes (frame headers included) received over all connections."""
        return self.conn.bytes_received

    @property
    def max_reported_offset(self) -> int | None:
        """The largest offset this fetcher ever reported (None before the first report)."""
        return max(self.reports_sent) if self.reports_sent else None

    def _where(self) -> str:
        return f"broker {self.broker} HA {self.ha_addr}, range [{self.start}, {self.end})"

    def close(self) -> None:
        """Stop keep-alives and close the connection (idempotent)."""
        self.conn.close()

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

    # --- one connection ----------------------------------------------------------------------------
    def _open(self) -> None:
        """Connect, send the first report and start the keep-alive reports."""
        self.conn.open(self.ha_addr)
        self.conn.report(self.report_offset)
        self.conn.keep_reporting(lambda: self.report_offset)

    def _session(self) -> Iterator[list[tuple[int, bytes | memoryview]]]:
        """One connection: receive frames straight into the reader's buffer, yield the bytes of the range (one
        list of chunks per receive)."""
        self._open()
        reader = TransferFrameReader(buffer_bytes=RECV_BUFFER_BYTES, keep_views=self.keep_views)
        wire = _Wire(self.report_offset)
        while self.delivered < self.end:
            self._receive(reader, wire)
            frames = wire.frames
            spans, resume = self._parse(reader, wire)
            if wire.frames != frames:  # whatever is buffered now is a new frame: its wait starts at 0
                self.frames_received += wire.frames - frames
                wire.partial_wait_s = 0.0
            yield from self._deliver(spans)
            del spans
            if resume is not None:
                yield [(resume, b"")]  # marks the skip (if any) for the consumer
                self.close()
                return  # reconnect (reporting self.report_offset) unless the range is done
        self.close()

    def _deliver(self, spans: list[tuple[int, memoryview]]) -> Iterator[list[tuple[int, memoryview]]]:
        """Yield one receive's spans of the range (views of the receive buffer, see ``keep_views``) as one list,
        unless there are none; any span ends an outage."""
        if not spans:
            return
        if self.outage.active:
            self.outage.recovered()
        yield spans

    def _receive(self, reader: TransferFrameReader, wire: _Wire) -> None:
        """One ``recv_into`` the reader's buffer; a silent, closing or frame-dripping peer raises (see the class).

        The socket timeout bounds one wait for the first byte of a frame; once a frame has begun, the waits
        for the rest of it share one ``read_timeout_ms`` budget (only time blocked here counts, not the
        consumer's time between chunks), so a master sending a byte now and then cannot hold the task.
        """
        begun = reader.buffered_bytes > 0  # a frame has begun and is not complete
        timeout_s = self.read_timeout_ms / 1000 - (wire.partial_wait_s if begun else 0.0)
        if timeout_s <= 0:
            raise self._incomplete_frame(reader, wire)
        waited_from = time.monotonic()
        try:
            received = self.conn.recv_into(reader, timeout_s)
        except TimeoutError:
            if begun:
                raise self._incomplete_frame(reader, wire) from None
            raise _Stall(f"no bytes from the master for {self.read_timeout_ms} ms while waiting for offset "
                         f"{wire.offset}") from None
        finally:
            if begun:
                wire.partial_wait_s += time.monotonic() - waited_from
        if not received:
            if not wire.frames and reader.buffered_bytes:
                raise self._not_ha(reader.head(64), "then closed the connection")
            raise ConnectionResetError(f"master closed the connection while offset {wire.offset} was expected")

    def _parse(self, reader: TransferFrameReader, wire: _Wire) -> tuple[list[tuple[int, memoryview]], int | None]:
        """The range's bytes in the complete frames buffered so far, as ``(CommitLog offset, view)`` spans, and
        the offset to reconnect at when a heartbeat stall asks for it (else None)."""
        spans: list[tuple[int, memoryview]] = []
        while self.delivered < self.end:
            try:
                header = reader.peek_header()
            except HAProtocolError as exc:
                if not wire.frames:
                    raise self._not_ha(reader.head(64), f"not a frame header ({exc})") from None
                raise HAProtocolError(f"{self._where()}: {exc}") from None
            if not wire.frames and header is not None and header[0] != wire.offset:
                raise self._not_ha(reader.head(64), f"a first frame at offset {header[0]}, not at the "
                                   f"reported offset {wire.offset}")
            frame = reader.next_frame_view()
            if frame is None:
                break  # incomplete frame: wait for more bytes
            frame_offset, body = frame
            wire.frames += 1
            if frame_offset != wire.offset:
                raise HAProtocolError(
                    f"{self._where()}: master pushed a frame at offset {frame_offset}, expected {wire.offset} "
                    "(the end of the previous frame)")
            if not body:  # heartbeat although bytes are expected
                wire.stalls += 1
                resume = self._on_heartbeat(wire.offset, wire.stalls)
                if resume is not None:
                    return spans, resume
                continue
            wire.stalls = 0
            first = wire.offset
            wire.offset += len(body)
            if self.delivered == 0 and first == 1:
                spans.append((0, _ZERO_BYTE))  # byte 0: TOTALSIZE's high byte (docs/source.md "Full history...")
                self.delivered = 1
            self._take(spans, first, body, self.end)
        return spans, None

    def _take(self, spans: list[tuple[int, memoryview]], first: int, body: memoryview, cap: int) -> None:
        """Add to ``spans`` the part of a frame body starting at CommitLog offset ``first`` that the range still
        needs: from what was delivered up to ``cap`` (bytes)."""
        lo, hi = max(first, self.delivered), min(first + len(body), cap)
        if hi > lo:
            spans.append((lo, body[lo - first:hi - first]))
            self.delivered = hi

    def _incomplete_frame(self, reader: TransferFrameReader, wire: _Wire) -> Exception:
        """A frame begun but not whole after ``read_timeout_ms`` of waiting: from a peer that never sent a
        whole frame header, NotAnHAPortError; else a stall (reconnect, bounded by ``max_outage_ms``)."""
        if not self.frames_received and not wire.frames and reader.peek_header() is None:
            return self._not_ha(reader.head(64), f"then less than one frame header in {self.read_timeout_ms} ms")
        return _Stall(f"the master sent only {reader.buffered_bytes} bytes of the frame at offset {wire.offset} in "
                      f"{self.read_timeout_ms} ms (readTimeoutMs bounds a whole frame)")

    def _not_ha(self, first: bytes, what: str) -> NotAnHAPortError:
        return NotAnHAPortError(f"{self.ha_addr} (broker {self.broker}) is not a RocketMQ HA port: it answered the "
                                f"8-byte offset report with {first[:32]!r}, {what}")

    def _on_heartbeat(self, wire: int, stalls: int) -> int | None:
        """A heartbeat at ``wire`` although bytes up to ``end`` are expected: find out why.

        Returns the offset to reconnect at (after skipping lost bytes) or None to keep waiting.
        Raises DataLossError (``fail_on_data_loss``) or HAFetchError after ``fetch_retries`` stalls.
        """
        if self.offsets_probe is not None:
            try:
                min_offset, max_offset = self.offsets_probe()
            except HAReplicaError as exc:
                log.warning("%s: cannot probe the broker's offsets: %s", self._where(), exc)
            else:
                if min_offset > wire:
                    # the master deleted the file holding `wire`: it will send heartbeats forever
                    if min_offset > self.delivered:
                        self._lost(self.delivered, min(min_offset, self.end),
                                   f"commitLogMinOffset is {min_offset}; the files were deleted")
                    # reconnect reporting commitLogMinOffset: it acknowledges only deleted bytes, which no
                    # producer can still be waiting for
                    self.report_offset = max(self.report_offset, min(min_offset, self.delivered))
                    return self.delivered
                if max_offset <= wire and max_offset < self.end and self.server_is_slave:
                    log.warning("%s: the slave holds CommitLog bytes up to %d only; waiting for it to replicate "
                                "up to %d", self._where(), max_offset, self.end)
                elif max_offset <= wire and max_offset < self.end:
                    self._lost(self.delivered, self.end,
                               f"the CommitLog now ends at {max_offset}, below the planned range end (the broker "
                               "lost its tail, e.g. a crash before flushing)")
                    return self.delivered
        if stalls > self.fetch_retries:
            raise HAFetchError(f"{self._where()}: master sent {stalls} heartbeats in a row at offset {wire} instead "
                               f"of data (fetchRetries={self.fetch_retries})")
        return None

    def _lost(self, lo: int, hi: int, why: str) -> None:
        """Bytes [lo, hi) of the range are gone: raise DataLossError, or log and skip them."""
        self.lost_ranges.append((lo, hi))
        on_data_loss(self.fail_on_data_loss, f"broker {self.broker} ({self.ha_addr}) no longer holds CommitLog bytes "
                     f"[{lo}, {hi}) that the query needs: {why}", instead="skip lost bytes", logger=log)
        self.delivered = hi


class _Stall(Exception):
    """Internal: the connection is alive but not delivering; retried like a connection error."""


class _Wire:
    """Internal: where one connection's stream stands."""

    __slots__ = ("offset", "stalls", "frames", "partial_wait_s")

    def __init__(self, offset: int):
        self.offset = offset  # CommitLog offset where the next frame must start
        self.stalls = 0  # heartbeats in a row while bytes are expected
        self.frames = 0  # frames parsed (0: the peer has not yet shown it speaks HA)
        self.partial_wait_s = 0.0  # seconds spent waiting for the rest of the frame begun in the buffer



class _Failure:
    """An exception raised on the prefetch thread, handed to the consumer."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException):
        self.exc = exc


_END = object()


def prefetch_chunks(fetcher: HARangeFetcher,
                    depth: int = DEFAULT_FETCH_PREFETCH_CHUNKS) -> Iterator[tuple[int, bytes | memoryview]]:
    """Iterate ``fetcher`` on a background thread, ``depth`` receives ahead of the consumer.

    Receiving (``recv_into``, frame parsing) then overlaps with whatever the consumer does with the previous
    chunks (decoding, in the executor), on another core when there is one. The fetcher must yield chunks
    that stay valid (``keep_views=True``); they are handed over one receive at a time
    (:meth:`HARangeFetcher.receives`). Memory: the chunks of at most ``depth`` receives, each holding at
    most one receive buffer (1 MiB, or one larger frame), plus the fetcher's own buffer.

    Yields exactly what the fetcher yields, in order; an exception of the fetcher (HAFetchError,
    DataLossError, HAProtocolError...) is raised here, in the consumer. Closing the generator early
    cancels the fetcher (the connection is shut down, no reconnect) and joins the thread.
    """
    if not fetcher.keep_views:
        raise ValueError("prefetch_chunks needs a fetcher with keep_views=True (its chunks outlive the next recv)")
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
            yield from item
    finally:
        fetcher.cancel()
        thread.join(timeout=max(fetcher.read_timeout_ms / 1000, 1.0) + 5)
