"""The slave end of one HA-port connection: the one owner of a blocking HA socket (docs/protocol.md §2, §10).

:class:`HATransferConnection` connects, sends the offset reports (the first one and the keep-alive ones on
a thread), receives into a frame reader's buffer and closes, as :mod:`connector.client.remoting` does for
remoting sockets. Every HA client of the source goes through it: the range fetcher of :mod:`connector.client.ha`
(both protocols) and :func:`connector.client.ha_autoswitch.probe_master`. It parses nothing: the frames are
:mod:`connector.protocol.ha`'s and :mod:`connector.protocol.ha_autoswitch`'s.

(RocketMQ's own names: the master's end of the connection is ``HAConnection``, the broker stub's
:class:`broker_stub.ha.connection.HAConnection`; the slave that owns this end is ``HAClient``.)
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

from connector.client.net import open_connection
from connector.protocol.ha import HA_SEND_HEARTBEAT_INTERVAL_MS, TransferFrameReader

log = logging.getLogger(__name__)


class HATransferConnection:
    """The slave end of HA-port connections, one at a time: connect, the offset reports, receiving into a
    frame reader's buffer, close.

    Args:
        encode_report: an offset (bytes) -> the report's wire bytes (classic 8-byte or AutoSwitch 12-byte).
        connect_timeout_ms: TCP connect timeout (ms).
        read_timeout_ms: the socket timeout after connecting (ms); :meth:`recv_into` may set another.
        heartbeat_interval_ms: period of the keep-alive reports (ms).
        name: for the keep-alive thread's name (``ha-keepalive-<name>``).
        receive_buffer_bytes: ``SO_RCVBUF`` set before connecting (0: the operating system's;
            :func:`connector.client.net.open_connection`).

    One object serves any number of connections in turn (:meth:`open` after :meth:`close`); the counters
    (:attr:`connections`, :attr:`report_count`, :attr:`min_reported_offset`, :attr:`max_reported_offset`,
    :attr:`bytes_received`) cover all of them and stay the same size however long a read lasts.
    :meth:`close` may be called from any thread; it wakes a receive blocked in another.
    """

    def __init__(self, encode_report: Callable[[int], bytes], *, connect_timeout_ms: int, read_timeout_ms: int,
                 heartbeat_interval_ms: int = HA_SEND_HEARTBEAT_INTERVAL_MS, name: str = "broker",
                 receive_buffer_bytes: int = 0):
        self.encode_report = encode_report
        self.receive_buffer_bytes = receive_buffer_bytes
        self.connect_timeout_ms = connect_timeout_ms
        self.read_timeout_ms = read_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.name = name
        self.connections = 0  # TCP connections opened
        self.report_count = 0  # reports sent (the first ones and the keep-alive ones)
        self.min_reported_offset: int | None = None  # the smallest offset reported (None before a report)
        self.max_reported_offset: int | None = None  # the largest offset reported (None before a report)
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
        sock = open_connection(addr, self.connect_timeout_ms / 1000, self.receive_buffer_bytes)
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
            self.report_count += 1
            if self.min_reported_offset is None or offset < self.min_reported_offset:
                self.min_reported_offset = offset
            if self.max_reported_offset is None or offset > self.max_reported_offset:
                self.max_reported_offset = offset

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
