"""The blocking RocketMQ remoting client: one connection, one request at a time (spec §4).

:class:`RemotingConnection` is the only owner of a blocking request/response remoting socket in the
project: the source's :class:`connector.client.admin.BrokerAdminClient`, the apps' preflight and status,
the broker stub's ``status`` / ``delete-expired`` commands and the test helpers all send through it.
Frames are encoded and decoded by :mod:`connector.protocol.remoting` (no parsing here).

A request is matched to its response by ``opaque``; unrelated frames are skipped. A peer whose bytes are
no remoting frame, or that sends our own request back (an echo server), is not a RocketMQ broker
(:class:`NotARocketMQBrokerError`). With ACL credentials every request is signed as RocketMQ 4.9.8's
``AclClientRPCHook`` signs it (docs/security.md).
"""

from __future__ import annotations

import logging
import socket
import time

from connector.client.net import open_connection
from connector.protocol.acl import AclCredentials
from connector.protocol.errors import HAReplicaError, RemotingProtocolError
from connector.protocol.remoting import FrameDecoder, RemotingCommand, RequestCode

log = logging.getLogger(__name__)

REQUEST_NAMES = {v: k for k, v in vars(RequestCode).items() if isinstance(v, int)}
_RECV_BYTES = 64 * 1024
_FIRST_BYTES_KEPT = 64  # of the peer's answer, for the "not a RocketMQ broker" message


class BrokerAdminError(HAReplicaError):
    """A remoting request to a broker failed: connect error, timeout, error response or bad answer.

    The message names the broker's remoting address and the request (name and code).
    """


class BrokerUnreachableError(BrokerAdminError):
    """The broker's remoting port refused, reset or timed out the request: it may be down or restarting,
    so callers wait it out (``maxOutageMs``, docs/source.md "Broker outages")."""


class NotARocketMQBrokerError(BrokerAdminError):
    """The peer answered, but not with a RocketMQ remoting response (e.g. an HTTP or an echo server)."""


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


def request_once(addr: str, request: RemotingCommand, timeout_ms: int,
                 credentials: AclCredentials | None = None) -> RemotingCommand:
    """One request on a fresh connection, closed afterwards; the response whatever its code.

    Raises BrokerUnreachableError / NotARocketMQBrokerError as :meth:`RemotingConnection.invoke`.
    """
    with RemotingConnection(addr, timeout_ms, credentials) as connection:
        return connection.invoke(request)
