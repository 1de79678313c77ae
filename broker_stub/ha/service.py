"""Master HA service (RocketMQ 4.9.8 ``HAService`` + ``GroupTransferService``, spec §2.1, §2.8, §2.9).

* Accepts any number of HA connections on ``haListenPort`` (bound to ``brokerIP2``, see
  :mod:`broker_stub.config`) and keeps the registry (``connectionCount`` counts accepted connections,
  reported or not, as upstream).
* ``push2SlaveMaxOffset`` is the highest ack of any connection; it never decreases.
* ``isSlaveOK(masterPutWhere)``: a connection exists and the master is less than ``haSlaveFallbehindMax``
  bytes ahead of ``push2SlaveMaxOffset``.
* Every CommitLog append wakes every connection's writer (event-driven push).
* SYNC_MASTER replica waits (:meth:`HAService.wait_for_replicas`) are futures resolved by acks, with the
  ``slaveTimeout`` deadline; **improvement**: when the last connection closes, pending waits answer
  SLAVE_NOT_AVAILABLE at once instead of waiting for the timeout (DESIGN §5).
"""

from __future__ import annotations

import asyncio
import logging

from broker_stub.config import MessageStoreConfig
from broker_stub.ha.connection import HAConnection
from broker_stub.store.commit_log import CommitLog, PutMessageStatus

log = logging.getLogger(__name__)


class HAService:
    """Accept loop, connection registry, ``push2SlaveMaxOffset`` and replica waits of one master."""

    def __init__(self, commit_log: CommitLog, store_config: MessageStoreConfig, *, host: str, port: int) -> None:
        self.commit_log = commit_log
        self.store_config = store_config
        self.host = host
        self.port = port
        self.connections: list[HAConnection] = []
        self.push2_slave_max_offset = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._replica_waits: list[tuple[int, asyncio.Future]] = []
        commit_log.append_listeners.append(self._on_append)

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    async def start(self) -> None:
        """Bind and listen. Raises OSError when the port is taken."""
        self._server = await asyncio.start_server(self._accept, host=self.host, port=self.port, reuse_address=True,
                                                  backlog=128)
        log.info("ha service listening host=%s haListenPort=%d", self.host, self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        self.connections.append(conn)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await conn.run()
        finally:
            if task is not None:
                self._tasks.discard(task)

    def remove_connection(self, conn: HAConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)
        if not self.connections and self._replica_waits:
            log.warning("last HA connection closed; %d replica waits answer SLAVE_NOT_AVAILABLE",
                        len(self._replica_waits))
            waits, self._replica_waits = self._replica_waits, []
            for _, fut in waits:
                if not fut.done():
                    fut.set_result(PutMessageStatus.SLAVE_NOT_AVAILABLE)

    def _on_append(self, _max_offset: int) -> None:
        for conn in self.connections:
            conn.wakeup()

    def notify_transfer_some(self, offset: int) -> None:
        """Raise ``push2SlaveMaxOffset`` to ``offset`` if higher and complete the satisfied replica waits."""
        if offset <= self.push2_slave_max_offset:
            return
        self.push2_slave_max_offset = offset
        if self._replica_waits:
            still = []
            for next_offset, fut in self._replica_waits:
                if fut.done():
                    continue
                if next_offset <= offset:
                    fut.set_result(PutMessageStatus.PUT_OK)
                else:
                    still.append((next_offset, fut))
            self._replica_waits = still

    def is_slave_ok(self, master_put_where: int) -> bool:
        """HAService.isSlaveOK: a connection exists and the lag is below ``haSlaveFallbehindMax`` bytes."""
        return (self.connection_count > 0
                and master_put_where - self.push2_slave_max_offset < self.store_config.haSlaveFallbehindMax)

    async def wait_for_replicas(self, next_offset: int) -> PutMessageStatus:
        """SYNC_MASTER: PUT_OK once a slave acked ``next_offset``; SLAVE_NOT_AVAILABLE when none can
        (checked at once, or the last slave left); FLUSH_SLAVE_TIMEOUT after ``slaveTimeout`` ms."""
        if not self.is_slave_ok(next_offset):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        if self.push2_slave_max_offset >= next_offset:
            return PutMessageStatus.PUT_OK
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._replica_waits.append((next_offset, fut))
        for conn in self.connections:
            conn.wakeup()
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout=self.store_config.slaveTimeout / 1000)
        except TimeoutError:
            return PutMessageStatus.PUT_OK if self.push2_slave_max_offset >= next_offset \
                else PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        finally:
            self._replica_waits = [(o, f) for o, f in self._replica_waits if f is not fut]

    async def shutdown(self) -> None:
        """Stop accepting, close every connection, answer pending waits with SLAVE_NOT_AVAILABLE."""
        if self._server is not None:
            self._server.close()
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
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), timeout=1.0)
            except TimeoutError:
                pass
        log.info("ha service stopped push2SlaveMaxOffset=%d", self.push2_slave_max_offset)

    def status(self) -> dict:
        """push2SlaveMaxOffset, connection count and per-connection figures (issue 3 status/metrics)."""
        return {"push2SlaveMaxOffset": self.push2_slave_max_offset, "connectionCount": self.connection_count,
                "connections": [c.status() for c in self.connections]}
