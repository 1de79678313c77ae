"""The driver's remoting client of RocketMQ name servers: GET_BROKER_CLUSTER_INFO (106) over the name-server
addresses of ``SourceOptions.namesrv_addr``, tried in turn as RocketMQ's clients do (docs/source.md "Discovery").
"""

from __future__ import annotations

import logging

from connector.client.remoting import RemotingConnection
from connector.errors import BrokerAdminError, NameServerError, RemotingProtocolError
from connector.protocol.acl import AclCredentials
from connector.protocol.cluster_info import ClusterInfo, decode_cluster_info
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)


class NameServerClient:
    """One remoting connection at a time to one of several name servers.

    Args:
        addrs: the name servers' ``host:port`` addresses, in the order given.
        timeout_ms: connect timeout and the longest wait for one answer (ms), per address.
        credentials: an ACL account to sign requests with (name servers ignore it unless they check ACL).

    The address that answered last is asked first next time; on a failure the next one is tried, as
    RocketMQ's ``NettyRemotingClient`` moves to the next name server after a failed call.
    """

    def __init__(self, addrs: tuple[str, ...], timeout_ms: int = 3000, credentials: AclCredentials | None = None):
        if not addrs:
            raise ValueError("NameServerClient needs at least one address")
        self.addrs = tuple(addrs)
        self.timeout_ms = timeout_ms
        self.credentials = credentials
        self._index = 0
        self._connection: RemotingConnection | None = None

    def __enter__(self) -> NameServerClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def cluster_info(self) -> tuple[str, ClusterInfo]:
        """(the address that answered, its :class:`connector.protocol.cluster_info.ClusterInfo`).

        Raises NameServerError naming every address and why it gave no route (unreachable, an error code,
        a body that does not parse) when none answers.
        """
        failures: list[str] = []
        for step in range(len(self.addrs)):
            index = (self._index + step) % len(self.addrs)
            addr = self.addrs[index]
            if self._connection is None or self._connection.addr != addr:
                self.close()
                self._connection = RemotingConnection(addr, self.timeout_ms, self.credentials)
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            try:
                response = self._connection.invoke(request, idempotent=True)
                if response.code != ResponseCode.SUCCESS:
                    raise RemotingProtocolError(f"answered code {response.code}: "
                                                f"{response.remark or '(no remark)'}")
                info = decode_cluster_info(response.body)
            except (BrokerAdminError, RemotingProtocolError) as exc:
                cause = exc.__cause__ if isinstance(exc, BrokerAdminError) and exc.__cause__ else exc
                failures.append(f"{addr}: {cause}")
                self.close()
                continue
            if index != self._index:
                log.info("name server %s answered GET_BROKER_CLUSTER_INFO (after: %s)", addr, "; ".join(failures))
            self._index = index
            return addr, info
        raise NameServerError(f"no name server answered GET_BROKER_CLUSTER_INFO (106): {'; '.join(failures)}")
