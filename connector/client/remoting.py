"""The blocking RocketMQ remoting clients (docs/protocol.md §4): the only owners of a blocking remoting socket.

* :class:`RemotingConnection` — one request at a time: the source's
  :class:`connector.client.admin.BrokerAdminClient`, the apps' preflight and status, the broker stub's
  ``status`` / ``delete-expired`` commands and the test helpers send through it.
* :class:`PipelinedConnection` — many requests in flight, responses completed on a reader thread: the
  producer (:mod:`connector.client.producer`) sends through it.

Frames are encoded and decoded by :mod:`connector.protocol.remoting` (no parsing here).

A request is matched to its response by ``opaque``; unrelated frames are skipped. A peer whose bytes are
no remoting frame, or that sends our own request back (an echo server), is not a RocketMQ broker
(:class:`NotARocketMQBrokerError`). With ACL credentials every request is signed as RocketMQ 4.9.8's
``AclClientRPCHook`` signs it (docs/security.md).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError

from connector.client.net import open_connection
from connector.errors import (
    BrokerConnectionError,
    BrokerUnreachableError,
    MQClientException,
    NotARocketMQBrokerError,
    RemotingProtocolError,
)
from connector.protocol.acl import AclCredentials
from connector.protocol.address import split_host_port
from connector.protocol.remoting import FrameDecoder, RemotingCommand, RequestCode

log = logging.getLogger(__name__)

REQUEST_NAMES = {v: k for k, v in vars(RequestCode).items() if isinstance(v, int)}
_RECV_BYTES = 64 * 1024
_PIPELINE_RECV_BYTES = 256 * 1024
_FIRST_BYTES_KEPT = 64  # of the peer's answer, for the "not a RocketMQ broker" message


def describe_request(code: int, addr: str) -> str:
    """``"GET_BROKER_CONFIG (26) to broker 10.0.0.1:10911"``: how errors name a request."""
    return f"{REQUEST_NAMES.get(code, 'request')} ({code}) to broker {addr}"


class RemotingConnection:
    """One blocking remoting connection to a broker (opened lazily, kept, closed after any failure).

    Args:
        addr: the broker's remoting address ``host:listenPort``.
        timeout_ms: connect timeout and the longest wait for one response (ms).
        credentials: an ACL account; requests are then signed (see the module doc). None: unsigned.

    Not thread-safe: one request at a time.
    """

    def __init__(self, addr: str, timeout_ms: int = 3000, credentials: AclCredentials | None = None):
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.credentials = credentials
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder()

    def __enter__(self) -> RemotingConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def sock(self) -> socket.socket | None:
        """The open socket, or None between connections (for diagnostics and tests)."""
        return self._sock

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._decoder = FrameDecoder()

    def invoke(self, request: RemotingCommand, *, idempotent: bool = False) -> RemotingCommand:
        """Send ``request`` (signed when there are credentials) and return its response, whatever its code.

        ``idempotent``: the request changes nothing on the broker, so when a *kept* connection turns out
        closed (a broker closes connections idle for ``serverChannelMaxIdleTimeSeconds``, 120 s in 4.9)
        it is asked once more on a fresh one before the broker counts as unreachable.

        Raises BrokerUnreachableError (connect error, reset, timeout after ``timeout_ms``, malformed
        address) and NotARocketMQBrokerError; the connection is closed then.
        """
        what = describe_request(request.code, self.addr)
        if self.credentials is not None:
            self.credentials.sign(request.ext_fields, request.body)
        reused = self._sock is not None
        try:
            return self._exchange(request, what)
        except ConnectionError as exc:
            if not (reused and idempotent):
                raise self._unreachable(what, exc) from exc
            log.debug("%s: kept connection was closed (%s); reconnecting once", what, exc)
            try:
                return self._exchange(request, what)
            except (OSError, ValueError) as exc2:
                raise self._unreachable(what, exc2) from exc2
        except (OSError, ValueError) as exc:
            raise self._unreachable(what, exc) from exc

    def _exchange(self, request: RemotingCommand, what: str) -> RemotingCommand:
        """Send ``request`` on the kept connection (opened when there is none) and return the response;
        the connection is closed on any failure (OSError, ValueError, NotARocketMQBrokerError)."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        try:
            if self._sock is None:
                self._sock = open_connection(self.addr, self.timeout_ms / 1000)
            self._sock.settimeout(self.timeout_ms / 1000)
            self._sock.sendall(request.encode())
            return self._await(request, deadline, what)
        except BaseException:
            self.close()
            raise

    def _unreachable(self, what: str, exc: BaseException) -> BrokerUnreachableError:
        kind = "timed out" if isinstance(exc, TimeoutError) else "failed"
        return BrokerUnreachableError(f"{what} {kind} after <= {self.timeout_ms} ms: {exc}")

    def _not_rocketmq(self, what: str, first: bytes, how: str) -> NotARocketMQBrokerError:
        return NotARocketMQBrokerError(f"{self.addr} is not a RocketMQ broker's remoting port: {what} was answered "
                                       f"with {first[:32]!r}, {how}")

    def _await(self, request: RemotingCommand, deadline: float, what: str) -> RemotingCommand:
        """The response to ``request``; NotARocketMQBrokerError when the peer's bytes are no remoting
        frame, or are our own request sent back (an echo server)."""
        assert self._sock is not None
        opaque = request.opaque
        first = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no response")
            self._sock.settimeout(remaining)
            data = self._sock.recv(_RECV_BYTES)
            if not data:
                if first:
                    raise self._not_rocketmq(what, first, "then closed the connection")
                raise ConnectionError("connection closed by the broker")
            if len(first) < _FIRST_BYTES_KEPT:
                first += data[:_FIRST_BYTES_KEPT - len(first)]
            try:
                commands = self._decoder.feed(data)
            except RemotingProtocolError as exc:
                raise self._not_rocketmq(what, first, f"which is not a remoting frame ({exc})") from None
            for cmd in commands:
                if cmd.is_response and cmd.opaque == opaque:
                    return cmd
                if not cmd.is_response and cmd.opaque == opaque and cmd.code == request.code:
                    raise self._not_rocketmq(what, first, "our own request sent back (an echo server?)")
                log.debug("%s: ignoring unrelated frame code=%s opaque=%s", what, cmd.code, cmd.opaque)


class PipelinedConnection:
    """One remoting connection with up to ``max_in_flight`` requests awaiting responses (RocketMQ's client
    sends asynchronously the same way): a reader thread matches responses to requests by ``opaque``.

    Args:
        addr: the broker's remoting address ``host:listenPort``.
        timeout_ms: the longest wait for a free in-flight slot and for one response (ms).
        max_in_flight: requests awaiting a response at once; :meth:`send` blocks beyond it.
        connect_timeout_s: TCP connect timeout (s).
        credentials: an ACL account; every request is then signed (module doc). None: unsigned.
        owner: who uses the connection, for thread names, logs and errors (e.g. ``"producer"``).

    Opens the connection at once and raises BrokerConnectionError when it cannot; after the broker closes
    it, the next :meth:`send` reconnects. Thread-safe: the reader thread and any number of sending threads
    share it.
    """

    def __init__(self, addr: str, *, timeout_ms: int, max_in_flight: int = 1024, connect_timeout_s: float = 5.0,
                 credentials: AclCredentials | None = None, owner: str = "client") -> None:
        _, self._port = split_host_port(addr, bare_ipv6=True)
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.owner = owner
        self._credentials = credentials
        self._connect_timeout_s = connect_timeout_s
        self._pending: dict[int, tuple[Future, Callable[[RemotingCommand], object]]] = {}
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._in_flight = threading.BoundedSemaphore(max_in_flight)
        self._sock: socket.socket | None = None
        self._reader: threading.Thread | None = None
        self._closed = False
        first = self._connect()
        try:
            self._local_ip = first.getsockname()[0]
        except OSError:  # already closed by the peer: the first send reconnects
            self._local_ip = "127.0.0.1"

    @property
    def sock(self) -> socket.socket | None:
        """The open socket, or None between connections (for diagnostics and tests)."""
        return self._sock

    def local_ip(self) -> str:
        """The local IP of the first connection (``127.0.0.1`` when the peer had already closed it)."""
        return self._local_ip

    def _connect(self) -> socket.socket:
        """Open the connection and start its reader thread; returns the socket (callers keep this reference:
        the reader thread clears ``self._sock`` when the connection closes). Raises BrokerConnectionError."""
        try:
            sock = open_connection(self.addr, self._connect_timeout_s)
            sock.settimeout(None)
        except OSError as exc:
            raise BrokerConnectionError(f"connect to {self.addr} failed: {exc}") from exc
        with self._pending_lock:
            self._sock = sock
        self._reader = threading.Thread(target=self._read_loop, args=(sock,),
                                        name=f"{self.owner}-reader-{self._port}", daemon=True)
        self._reader.start()
        return sock

    def _read_loop(self, sock: socket.socket) -> None:
        decoder = FrameDecoder()
        error: Exception | None = None
        try:
            while True:
                data = sock.recv(_PIPELINE_RECV_BYTES)
                if not data:
                    break
                for cmd in decoder.feed(data):
                    self._complete(cmd)
        except (OSError, RemotingProtocolError) as exc:
            error = exc
        if not self._closed:
            log.warning("%s connection lost broker=%s error=%s", self.owner, self.addr, error)
        with self._pending_lock:
            pending, self._pending = self._pending, {}
            if self._sock is sock:
                self._sock = None
        for fut, _ in pending.values():
            if not fut.done():
                fut.set_exception(BrokerConnectionError(f"connection to {self.addr} closed: {error or 'EOF'}"))
            self._in_flight.release()

    def _complete(self, cmd: RemotingCommand) -> None:
        with self._pending_lock:
            entry = self._pending.pop(cmd.opaque, None)
        if entry is None:
            log.debug("response for an unknown or timed-out request opaque=%d", cmd.opaque)
            return
        self._in_flight.release()
        fut, convert = entry
        if fut.done():
            return
        try:
            fut.set_result(convert(cmd))
        except Exception as exc:  # noqa: BLE001 - handed to the caller through the future
            fut.set_exception(exc)

    def send(self, cmd: RemotingCommand, convert: Callable[[RemotingCommand], object]) -> Future:
        """Write one request (signed when there are credentials); the returned future (``.opaque`` set)
        completes with ``convert(response)``, or with the exception ``convert`` raised.

        Raises MQClientException when closed or when no in-flight slot frees up within ``timeout_ms``,
        BrokerConnectionError when the request cannot be written.
        """
        if self._closed:
            raise MQClientException(f"{self.owner} is closed")
        if not self._in_flight.acquire(timeout=self.timeout_ms / 1000):
            raise MQClientException(f"too many requests in flight to {self.addr} for {self.timeout_ms} ms")
        fut: Future = Future()
        fut.opaque = cmd.opaque  # type: ignore[attr-defined]
        if self._credentials is not None:
            self._credentials.sign(cmd.ext_fields, cmd.body)
        frame = cmd.encode()
        registered = False
        try:
            with self._write_lock:
                sock = self._sock  # one read: the reader thread may clear the attribute at any time
                if sock is None:
                    sock = self._connect()
                with self._pending_lock:
                    if self._sock is not sock:  # closed meanwhile: its reader has already failed what was pending
                        raise BrokerConnectionError(f"connection to {self.addr} closed")
                    self._pending[cmd.opaque] = (fut, convert)
                    registered = True
                sock.sendall(frame)
        except (OSError, MQClientException) as exc:
            release = not registered
            if registered:
                with self._pending_lock:
                    release = self._pending.pop(cmd.opaque, None) is not None
            if release:
                self._in_flight.release()
            raise BrokerConnectionError(f"send to {self.addr} failed: {exc}") from exc
        return fut

    def wait(self, fut: Future) -> object:
        """The result of a :meth:`send` future within ``timeout_ms``; MQClientException on timeout (the request
        is forgotten: a late response is dropped)."""
        try:
            return fut.result(timeout=self.timeout_ms / 1000)
        except FutureTimeoutError:
            with self._pending_lock:
                removed = self._pending.pop(fut.opaque, None)  # type: ignore[attr-defined]
            if removed is not None:
                self._in_flight.release()
            raise MQClientException(f"send to {self.addr} timed out after {self.timeout_ms} ms") from None

    def close(self) -> None:
        """Close the connection; pending requests fail with BrokerConnectionError."""
        self._closed = True
        with self._pending_lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        if self._reader is not None:
            self._reader.join(timeout=5)
