"""Master HA service (RocketMQ 4.9.8 ``HAService`` + ``GroupTransferService``): accepts HA connections on
``haListenPort``, keeps ``push2SlaveMaxOffset`` (the highest replica ack, never decreasing) and ``isSlaveOK``,
wakes every writer on each append, and resolves SYNC_MASTER replica waits (:meth:`HAService.wait_for_replicas`)
from acks.

4.9.8's rules: docs/protocol.md §2.1, §2.8, §2.9; the ``minInSyncSlaves`` quorum and the early
SLAVE_NOT_AVAILABLE: docs/broker_stub.md "Configuration keys" and "Better than 4.9.8, same wire"; the address
lists (:mod:`broker_stub.ha.allow_list`): docs/security.md "HA port".
"""

from __future__ import annotations

import asyncio
import logging
import socket

from broker_stub.config import MessageStoreConfig
from broker_stub.ha.allow_list import HAAddressPolicy
from broker_stub.ha.connection import HAConnection
from broker_stub.remoting.server import DEFAULT_MAX_CONNECTIONS, ConnectionLimiter
from broker_stub.store.commit_log import CommitLog, PutMessageStatus

log = logging.getLogger(__name__)


class HAService:
    """Accept loop, connection registry, ``push2SlaveMaxOffset`` and replica waits of one master."""

    def __init__(self, commit_log: CommitLog, store_config: MessageStoreConfig, *, host: str, port: int,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, policy: HAAddressPolicy | None = None) -> None:
        """``max_connections``: ``serverMaxConnections``, beyond which a new HA connection is closed at once;
        ``policy``: the HA address lists (default: everyone connects and counts, as 4.9.8)."""
        self.commit_log = commit_log
        self.policy = policy or HAAddressPolicy()
        self.limiter = ConnectionLimiter("ha", max_connections)
        self.store_config = store_config
        self.host = host
        self.port = port
        self.connections: list[HAConnection] = []
        self.push2_slave_max_offset = 0
        self._listener: socket.socket | None = None
        self._accept_task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._replica_waits: list[tuple[int, asyncio.Future]] = []
        commit_log.append_listeners.append(self._on_append)

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    @property
    def replica_count(self) -> int:
        """Connections whose acks count (all of them without ``haReplicaAddresses``)."""
        return sum(1 for c in self.connections if c.is_replica)

    async def start(self) -> None:
        """Bind and listen (AcceptSocketService, SO_REUSEADDR). Raises OSError when the port is taken."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._accept_task = asyncio.create_task(self._accept_loop(), name="HAService.accept")
        log.debug("ha service listening host=%s haListenPort=%d", self.host, self.port)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(self._listener)
            except OSError as exc:  # e.g. EMFILE: keep serving the connections we have
                log.error("ha accept failed error=%s", exc)
                await asyncio.sleep(0.1)
                continue
            if not self.policy.admit(peer[0], peer[1]):
                sock.close()
                continue
            if not self.limiter.try_acquire(f"{peer[0]}:{peer[1]}"):
                sock.close()
                continue
            conn = HAConnection(self, sock, peer)
            conn.is_replica = self.policy.is_replica(peer[0])
            self.connections.append(conn)
            task = asyncio.create_task(conn.run(), name=f"HAConnection {conn.client_addr}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @property
    def in_sync_replicas(self) -> int:
        """``minInSyncSlaves``: distinct slaves whose acks a SYNC_MASTER wait needs (at least 1)."""
        return max(self.store_config.minInSyncSlaves, 1)

    def remove_connection(self, conn: HAConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)
            self.limiter.release()
        if self.replica_count < self.in_sync_replicas and self._replica_waits:
            log.warning("HA connections left %d < minInSyncSlaves %d; %d replica waits answer SLAVE_NOT_AVAILABLE",
                        self.replica_count, self.in_sync_replicas, len(self._replica_waits))
            waits, self._replica_waits = self._replica_waits, []
            for _, fut in waits:
                if not fut.done():
                    fut.set_result(PutMessageStatus.SLAVE_NOT_AVAILABLE)

    def _on_append(self, _max_offset: int) -> None:
        for conn in self.connections:
            conn.wakeup()

    def notify_transfer_some(self, offset: int, conn: HAConnection | None = None) -> None:
        """An ack of ``offset`` bytes arrived (the connection has recorded it as its ``slaveAckOffset``).

        Raises ``push2SlaveMaxOffset`` if higher and completes the replica waits now satisfied; an ack from
        a connection that is no replica (``haReplicaAddresses``) changes nothing.
        """
        if conn is not None and not conn.is_replica:
            return
        raised = offset > self.push2_slave_max_offset
        if raised:
            self.push2_slave_max_offset = offset
        if self._replica_waits and (raised or self.in_sync_replicas > 1):
            still = []
            for next_offset, fut in self._replica_waits:
                if fut.done():
                    continue
                if self._acked(next_offset):
                    fut.set_result(PutMessageStatus.PUT_OK)
                else:
                    still.append((next_offset, fut))
            self._replica_waits = still

    def _acked(self, next_offset: int) -> bool:
        if self.in_sync_replicas <= 1:
            return self.push2_slave_max_offset >= next_offset
        acked = sum(1 for c in self.connections if c.is_replica and c.slave_ack_offset >= next_offset)
        return acked >= self.in_sync_replicas

    def in_sync_connection_count(self, master_put_where: int) -> int:
        """Connections less than ``haSlaveFallbehindMax`` bytes behind ``master_put_where`` (unreported count as 0)."""
        limit = self.store_config.haSlaveFallbehindMax
        return sum(1 for c in self.connections
                   if c.is_replica and master_put_where - max(c.slave_ack_offset, 0) < limit)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """HAService.isSlaveOK: a connection exists and the lag is below ``haSlaveFallbehindMax`` bytes.

        With ``minInSyncSlaves`` N > 1: at least N connections are that close.
        """
        if self.in_sync_replicas <= 1:
            return (self.replica_count > 0
                    and master_put_where - self.push2_slave_max_offset < self.store_config.haSlaveFallbehindMax)
        return self.in_sync_connection_count(master_put_where) >= self.in_sync_replicas

    async def wait_for_replicas(self, next_offset: int) -> PutMessageStatus:
        """SYNC_MASTER: PUT_OK once a slave (``minInSyncSlaves`` slaves) acked ``next_offset``;
        SLAVE_NOT_AVAILABLE when that cannot happen (checked at once, or slaves left);
        FLUSH_SLAVE_TIMEOUT after ``slaveTimeout`` ms (docs/protocol.md §2.8, §2.9)."""
        if not self.is_slave_ok(next_offset):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        if self._acked(next_offset):
            return PutMessageStatus.PUT_OK
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._replica_waits.append((next_offset, fut))
        for conn in self.connections:
            conn.wakeup()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout=self.store_config.slaveTimeout / 1000)
        except TimeoutError:
            return PutMessageStatus.PUT_OK if self._acked(next_offset) else PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        finally:
            self._replica_waits = [(o, f) for o, f in self._replica_waits if f is not fut]

    async def shutdown(self) -> None:
        """Stop accepting, close every connection, answer pending waits with SLAVE_NOT_AVAILABLE."""
        if self._accept_task is not None:
            self._accept_task.cancel()
            try:
                await self._accept_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
        if self._listener is not None:
            self._listener.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
        for _, fut in self._replica_waits:
            if not fut.done():
                fut.set_result(PutMessageStatus.SLAVE_NOT_AVAILABLE)
        self._replica_waits = []
        log.debug("ha service stopped push2SlaveMaxOffset=%d", self.push2_slave_max_offset)

    def status(self) -> dict:
        """push2SlaveMaxOffset, connection count and per-connection figures (status command and metrics)."""
        return {"push2SlaveMaxOffset": self.push2_slave_max_offset, "connectionCount": self.connection_count,
                "connections": [c.status() for c in self.connections]}
