"""The broker admin requests the driver uses for offsets and broker config (docs/protocol.md §4).

The driver never touches message bytes: it learns where the CommitLog starts and ends from
GET_BROKER_RUNTIME_INFO (28) and how big a mapped file is from GET_BROKER_CONFIG (26), then plans byte
ranges that executors fetch over the HA port (docs/architecture.md "The path of one offset").
"""

from __future__ import annotations

from connector.client.remoting import RemotingConnection, describe_request
from connector.errors import BrokerAdminError, BrokerNotReadyError, RemotingProtocolError, UnsupportedBrokerModeError
from connector.protocol.acl import AclCredentials
from connector.protocol.ha import HA_PROTOCOL_CLASSIC
from connector.protocol.ha_autoswitch import HA_PROTOCOL_AUTOSWITCH
from connector.protocol.mapped_files import DEFAULT_MAPPED_FILE_SIZE_COMMITLOG
from connector.protocol.remoting import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_kv_table,
    decode_properties_body,
)

#: requests that change nothing on the broker, so asking again on a fresh connection is safe
_READ_ONLY_CODES = frozenset({RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_BROKER_CONFIG})
#: the remark of the SYSTEM_ERROR a 4.9 broker gives for GET_BROKER_RUNTIME_INFO while it is starting
_NOT_READY_REMARK = "java.util.NoSuchElementException"


class BrokerAdminClient:
    """One remoting connection to a broker (opened lazily, reopened after an error).

    Args:
        addr: the broker's remoting address ``host:listenPort``.
        timeout_ms: connect timeout and the longest wait for one response (ms).
        credentials: an ACL account (:class:`connector.protocol.acl.AclCredentials`, the source's
            ``FetchSettings.credentials``); requests are then signed as RocketMQ 4.9.8's ``AclClientRPCHook``
            signs them (docs/security.md). None: unsigned.

    Every method raises :class:`BrokerAdminError` naming ``addr`` and the request when the broker
    cannot be reached, does not answer within ``timeout_ms``, answers with a non-SUCCESS code, or
    answers with a body that does not parse.
    """

    def __init__(self, addr: str, timeout_ms: int = 3000, credentials: AclCredentials | None = None):
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.credentials = credentials
        self.connection = RemotingConnection(addr, timeout_ms, credentials)

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
        self.connection.close()

    def _describe(self, code: int) -> str:
        return describe_request(code, self.addr)

    def invoke(self, code: int, ext_fields: dict | None = None, body: bytes = b"") -> RemotingCommand:
        """Send one request and return its SUCCESS response.

        Raises BrokerAdminError (see the class) for every failure; the connection is closed then.
        Read-only requests are asked once more when the kept connection turns out closed
        (:meth:`connector.client.remoting.RemotingConnection.invoke`).
        """
        request = RemotingCommand.request(code, ext_fields, body)
        response = self.connection.invoke(request, idempotent=code in _READ_ONLY_CODES)
        return self._check(code, self._describe(code), response)

    def _check(self, code: int, what: str, response: RemotingCommand) -> RemotingCommand:
        if response.code != ResponseCode.SUCCESS:
            message = f"{what} answered code {response.code}: {response.remark or '(no remark)'}"
            if (code == RequestCode.GET_BROKER_RUNTIME_INFO and response.code == ResponseCode.SYSTEM_ERROR
                    and _NOT_READY_REMARK in (response.remark or "")):
                raise BrokerNotReadyError(f"{message} (the broker is still starting)")
            raise BrokerAdminError(message)
        return response

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
        is returned as 0. The max offset is the next byte the broker will write (docs/protocol.md §1.1).
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
            return DEFAULT_MAPPED_FILE_SIZE_COMMITLOG
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if size <= 0:
            raise BrokerAdminError(f"{self._describe(RequestCode.GET_BROKER_CONFIG)}: mappedFileSizeCommitLog is "
                                   f"{raw!r}, not a positive integer")
        return size

    def ha_protocol(self, config: dict[str, str] | None = None) -> str:
        """The HA protocol this broker's HA port speaks (:func:`ha_protocol_of` its ``config``, asked for when not
        given). Raises UnsupportedBrokerModeError for a DLedger CommitLog."""
        return ha_protocol_of(self.broker_config() if config is None else config, f"broker {self.addr}")


def ha_protocol_of(config: dict[str, str], where: str) -> str:
    """The HA protocol a broker's HA port speaks, from its GET_BROKER_CONFIG ``config``: ``"classic"``
    (docs/protocol.md §2, :data:`connector.protocol.ha.HA_PROTOCOL_CLASSIC`) or, for a 5.x broker in controller mode
    (``enableControllerMode``), ``"autoswitch"`` (docs/protocol.md §10,
    :data:`connector.protocol.ha_autoswitch.HA_PROTOCOL_AUTOSWITCH`). Raises UnsupportedBrokerModeError, its
    message starting with ``where`` (the broker or broker set), for a DLedger CommitLog (``enableDLegerCommitLog``):
    it has no HA port."""
    if config.get("enableDLegerCommitLog", "false").strip().lower() == "true":
        raise UnsupportedBrokerModeError(
            f"{where} runs a DLedger CommitLog (enableDLegerCommitLog=true): it has no HA port (its log replicates "
            "over DLedger's own protocol), so hareplica cannot replicate it")
    if config.get("enableControllerMode", "false").strip().lower() == "true":
        return HA_PROTOCOL_AUTOSWITCH
    return HA_PROTOCOL_CLASSIC
