"""Blocking RocketMQ remoting client the driver uses for offsets and broker config (spec §4).

The driver never touches message bytes: it learns where the CommitLog starts and ends from
GET_BROKER_RUNTIME_INFO (28) and how big a mapped file is from GET_BROKER_CONFIG (26), then plans byte
ranges that executors fetch over the HA port (DESIGN §1, §3).
"""

from __future__ import annotations

import logging
import socket
import time

from connector.protocol.acl import AclCredentials
from connector.protocol.errors import HAReplicaError, RemotingProtocolError
from connector.protocol.remoting import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_kv_table,
    decode_properties_body,
)

log = logging.getLogger(__name__)

DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES = 1024 * 1024 * 1024  # MessageStoreConfig.mappedFileSizeCommitLog
_REQUEST_NAMES = {v: k for k, v in vars(RequestCode).items() if isinstance(v, int)}
_RECV_BYTES = 64 * 1024


class BrokerAdminError(HAReplicaError):
    """A remoting request to a broker failed: connect error, timeout, error response or bad answer.

    The message names the broker's remoting address and the request (name and code).
    """


class BrokerUnreachableError(BrokerAdminError):
    """The broker's remoting port refused, reset or timed out the request: it may be down or restarting,
    so callers wait it out (``maxOutageMs``, docs/source.md "Broker outages")."""


class BrokerNotReadyError(BrokerUnreachableError):
    """The broker answered, but is still starting: waited out like an unreachable broker.

    A RocketMQ 4.9 broker answers GET_BROKER_RUNTIME_INFO with SYSTEM_ERROR and a
    ``java.util.NoSuchElementException`` remark until its statistics took their first sample, about
    1 s after start (docs/source.md "Broker outages"). Other SYSTEM_ERROR answers (ACL refusals among
    them) stay BrokerAdminError and fail at once.
    """


#: requests that change nothing on the broker, so asking again on a fresh connection is safe
_READ_ONLY_CODES = frozenset({RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_BROKER_CONFIG})
#: the remark of the SYSTEM_ERROR a 4.9 broker gives for GET_BROKER_RUNTIME_INFO while it is starting
_NOT_READY_REMARK = "java.util.NoSuchElementException"


class NotARocketMQBrokerError(BrokerAdminError):
    """The peer answered, but not with a RocketMQ remoting response (e.g. an HTTP or an echo server)."""


class UnsupportedBrokerModeError(HAReplicaError):
    """The broker does not serve the classic master/slave HA protocol (DLedger or controller mode)."""


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` → (host, port). Raises ValueError on anything else."""
    if addr.startswith("["):
        host, _, port = addr[1:].partition("]:")
    else:
        host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host, int(port)


class BrokerAdminClient:
    """One remoting connection to a broker (opened lazily, reopened after an error).

    Args:
        addr: the broker's remoting address ``host:listenPort``.
        timeout_ms: connect timeout and the longest wait for one response (ms).
        credentials: an ACL account (:class:`connector.protocol.acl.AclCredentials`, options
            ``accessKey``/``secretKey``); requests are then signed as RocketMQ 4.9.8's ``AclClientRPCHook``
            signs them (docs/security.md). None: unsigned.

    Every method raises :class:`BrokerAdminError` naming ``addr`` and the request when the broker
    cannot be reached, does not answer within ``timeout_ms``, answers with a non-SUCCESS code, or
    answers with a body that does not parse.
    """

    def __init__(self, addr: str, timeout_ms: int = 3000, credentials: AclCredentials | None = None):
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.credentials = credentials
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder()

    # --- plumbing ----------------------------------------------------------------------------------
    def __enter__(self) -> BrokerAdminClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {"addr": self.addr, "timeout_ms": self.timeout_ms, "credentials": self.credentials}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["addr"], state["timeout_ms"], state.get("credentials"))

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._decoder = FrameDecoder()

    def _not_rocketmq(self, what: str, first: bytes, how: str) -> NotARocketMQBrokerError:
        return NotARocketMQBrokerError(f"{self.addr} is not a RocketMQ broker's remoting port: {what} was answered "
                                       f"with {first[:32]!r}, {how}")

    def _describe(self, code: int) -> str:
        return f"{_REQUEST_NAMES.get(code, 'request')} ({code}) to broker {self.addr}"

    def invoke(self, code: int, ext_fields: dict | None = None, body: bytes = b"") -> RemotingCommand:
        """Send one request and return its SUCCESS response.

        Raises BrokerAdminError (see the class) for every failure; the connection is closed then.
        """
        what = self._describe(code)
        request = RemotingCommand.request(code, ext_fields, body)
        if self.credentials is not None:
            self.credentials.sign(request.ext_fields, request.body)
        reused = self._sock is not None
        try:
            response = self._exchange(request, what)
        except ConnectionError as exc:
            if not (reused and code in _READ_ONLY_CODES):
                raise self._unreachable(what, exc) from exc
            # a kept connection the broker closed while it was idle (serverChannelMaxIdleTimeSeconds,
            # 120 s in 4.9): ask once more on a fresh one, before calling it an outage
            log.debug("%s: kept connection was closed (%s); reconnecting once", what, exc)
            try:
                response = self._exchange(request, what)
            except (OSError, ValueError) as exc2:
                raise self._unreachable(what, exc2) from exc2
        except (OSError, ValueError) as exc:
            raise self._unreachable(what, exc) from exc
        return self._check(code, what, response)

    def _exchange(self, request: RemotingCommand, what: str) -> RemotingCommand:
        """Send ``request`` on the kept connection (opened when there is none) and return the response;
        the connection is closed on any failure (OSError, ValueError, NotARocketMQBrokerError)."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        try:
            if self._sock is None:
                host, port = split_addr(self.addr)
                self._sock = socket.create_connection((host, port), timeout=self.timeout_ms / 1000)
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock.settimeout(self.timeout_ms / 1000)
            self._sock.sendall(request.encode())
            return self._await(request, deadline, what)
        except BaseException:
            self.close()
            raise

    def _unreachable(self, what: str, exc: BaseException) -> BrokerUnreachableError:
        kind = "timed out" if isinstance(exc, TimeoutError) else "failed"
        return BrokerUnreachableError(f"{what} {kind} after <= {self.timeout_ms} ms: {exc}")

    def _check(self, code: int, what: str, response: RemotingCommand) -> RemotingCommand:
        if response.code != ResponseCode.SUCCESS:
            message = f"{what} answered code {response.code}: {response.remark or '(no remark)'}"
            if (code == RequestCode.GET_BROKER_RUNTIME_INFO and response.code == ResponseCode.SYSTEM_ERROR
                    and _NOT_READY_REMARK in (response.remark or "")):
                raise BrokerNotReadyError(f"{message} (the broker is still starting)")
            raise BrokerAdminError(message)
        return response

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
            if len(first) < 64:
                first += data[:64 - len(first)]
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

    # --- requests ----------------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28): the broker's KVTable, e.g. ``commitLogMaxOffset`` (strings)."""
        response = self.invoke(RequestCode.GET_BROKER_RUNTIME_INFO)
        try:
            return decode_kv_table(response.body)
        except RemotingProtocolError as exc:
            raise BrokerAdminError(f"{self._describe(RequestCode.GET_BROKER_RUNTIME_INFO)}: {exc}") from exc

    def broker_config(self) -> dict[str, str]:
        """GET_BROKER_CONFIG (26): every broker/store property as strings (java.util.Properties body)."""
        response = self.invoke(RequestCode.GET_BROKER_CONFIG)
        return decode_properties_body(response.body)

    def _runtime_long(self, key: str) -> int:
        info = self.runtime_info()
        raw = info.get(key)
        try:
            return int(str(raw).strip())
        except ValueError:
            raise BrokerAdminError(f"{self._describe(RequestCode.GET_BROKER_RUNTIME_INFO)}: field {key} is "
                                   f"{raw!r}, not an integer") from None

    def commit_log_offsets(self) -> tuple[int, int]:
        """(commitLogMinOffset, commitLogMaxOffset) in bytes from one GET_BROKER_RUNTIME_INFO.

        The min offset is the start of the first mapped file the broker still has; -1 (no file yet)
        is returned as 0. The max offset is the next byte the broker will write (spec §1.1).
        """
        return self.store_offsets()[:2]

    def store_offsets(self) -> tuple[int, int, int | None]:
        """(commitLogMinOffset, commitLogMaxOffset, dispatchBehindBytes) from one GET_BROKER_RUNTIME_INFO.

        ``dispatchBehindBytes`` (bytes the ReputMessageService has not dispatched to ConsumeQueues yet,
        DefaultMessageStore.dispatchBehindBytes) is None when the broker does not report it.
        ``commitLogMaxOffset - dispatchBehindBytes`` is the reput offset, which only ever stops at a
        record boundary (the reput walks whole records and jumps over END_FILE blanks).
        """
        info = self.runtime_info()
        values = []
        for key in ("commitLogMinOffset", "commitLogMaxOffset"):
            raw = info.get(key)
            try:
                values.append(int(str(raw).strip()))
            except ValueError:
                raise BrokerAdminError(f"{self._describe(RequestCode.GET_BROKER_RUNTIME_INFO)}: field {key} is "
                                       f"{raw!r}, not an integer") from None
        try:
            behind = int(str(info["dispatchBehindBytes"]).strip())
        except (KeyError, ValueError):
            behind = None
        return max(values[0], 0), max(values[1], 0), behind

    def commit_log_min_offset(self) -> int:
        """commitLogMinOffset (bytes), -1 mapped to 0."""
        return max(self._runtime_long("commitLogMinOffset"), 0)

    def commit_log_max_offset(self) -> int:
        """commitLogMaxOffset (bytes): the next CommitLog byte the broker will write."""
        return max(self._runtime_long("commitLogMaxOffset"), 0)

    def mapped_file_size(self, config: dict[str, str] | None = None) -> int:
        """mappedFileSizeCommitLog (bytes) from GET_BROKER_CONFIG (or the ``config`` already fetched);
        1 GiB (upstream default) when absent."""
        config = self.broker_config() if config is None else config
        raw = config.get("mappedFileSizeCommitLog")
        if raw is None:
            return DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG_BYTES
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if size <= 0:
            raise BrokerAdminError(f"{self._describe(RequestCode.GET_BROKER_CONFIG)}: mappedFileSizeCommitLog is "
                                   f"{raw!r}, not a positive integer")
        return size

    def check_classic_ha(self, config: dict[str, str] | None = None) -> None:
        """Raise UnsupportedBrokerModeError when the broker runs DLedger (``enableDLegerCommitLog``) or
        controller mode (``enableControllerMode``, 5.x): neither serves the classic HA port (spec §2.1).
        """
        config = self.broker_config() if config is None else config
        if config.get("enableDLegerCommitLog", "false").strip().lower() == "true":
            raise UnsupportedBrokerModeError(
                f"broker {self.addr} runs a DLedger CommitLog (enableDLegerCommitLog=true): it has no classic HA "
                "port, so hareplica cannot replicate it")
        if config.get("enableControllerMode", "false").strip().lower() == "true":
            raise UnsupportedBrokerModeError(
                f"broker {self.addr} runs in controller (AutoSwitch) mode (enableControllerMode=true): its HA port "
                "speaks the AutoSwitch protocol with handshake and epochs, not the classic one hareplica speaks")
