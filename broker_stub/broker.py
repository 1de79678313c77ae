"""The broker process (RocketMQ 4.9.8 ``BrokerController``): store + HA service + remoting server.

One asyncio event loop runs everything (DESIGN §5): appends happen on the loop (the loop is the put
lock), disk flushes run in worker threads, HA pushes are woken by appends. :func:`run_broker` is the
process body used by ``python -m broker_stub``: it starts the broker, waits for SIGTERM/SIGINT, and
shuts down cleanly (stop accepting, close connections, flush, delete ``abort``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import struct
import time

from broker_stub.config import BrokerStubConfig
from broker_stub.ha.service import HAService
from broker_stub.remoting.admin_processor import AdminBrokerProcessor
from broker_stub.remoting.send_processor import SendMessageProcessor
from broker_stub.remoting.server import RemotingServer
from broker_stub.store.message_store import DefaultMessageStore
from broker_stub.store.stats import BrokerStats
from broker_stub.topic_config import TopicConfigManager
from connector.protocol.commitlog import BORNHOST_V6_FLAG, MESSAGE_MAGIC_CODE

log = logging.getLogger(__name__)

SHUTDOWN_STEP_TIMEOUT_S = 3.0
MASTER_SLAVE_DIFF_LOG_INTERVAL_S = 60.0


class BrokerController:
    """Wires the parts of one broker. ``await start()`` then ``await shutdown()``.

    Raises (from ``start``) BrokerStoreError when the store cannot be opened and OSError when a port
    cannot be bound.
    """

    def __init__(self, config: BrokerStubConfig) -> None:
        self.config = config
        self.message_store = DefaultMessageStore(config)
        self.broker_stats = BrokerStats()
        self.topic_config_manager = TopicConfigManager(config.broker, self.message_store.config_dir / "topics.json")
        self.config_data_version = {"counter": 1, "timestamp": time.time_ns() // 1_000_000}
        self.ha_service = HAService(self.message_store.commit_log, config.store, host=config.broker_ip2,
                                    port=config.ha_listen_port)
        self.remoting_server = RemotingServer(config.broker_ip1, config.listen_port)
        self.remoting_server.register(SendMessageProcessor.CODES, SendMessageProcessor(self))
        self.admin_processor = AdminBrokerProcessor(self)
        self.remoting_server.register(AdminBrokerProcessor.CODES, self.admin_processor)
        self._tasks: list[asyncio.Task] = []
        self._stopped = False

    async def start(self) -> None:
        cfg = self.config
        log.info("broker starting brokerName=%s brokerClusterName=%s brokerRole=%s flushDiskType=%s "
                 "mappedFileSizeCommitLog=%d listen=%s:%d ha=%s:%d", cfg.broker.brokerName,
                 cfg.broker.brokerClusterName, cfg.store.brokerRole, cfg.store.flushDiskType,
                 cfg.store.mappedFileSizeCommitLog, cfg.broker_ip1, cfg.listen_port, cfg.broker_ip2,
                 cfg.ha_listen_port)
        report = self.message_store.load()
        log.info("store recovered maxOffset=%d minOffset=%d abnormal=%s", self.message_store.commit_log.max_offset,
                 self.message_store.commit_log.min_offset, report.abnormal)
        try:
            await self.message_store.start()
            await self.ha_service.start()
            await self.remoting_server.start()
        except BaseException:
            await self.shutdown()
            raise
        self._tasks.append(asyncio.create_task(self._print_master_and_slave_diff(), name="printMasterAndSlaveDiff"))
        log.info("broker started brokerName=%s maxOffset=%d", cfg.broker.brokerName,
                 self.message_store.commit_log.max_offset)

    async def shutdown(self) -> None:
        """Stop accepting, close connections, flush and close the store (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        for t in self._tasks:
            t.cancel()
        await self.remoting_server.stop_accepting()
        # HA first: closing its connections answers pending SYNC_MASTER waits, whose replies then go out
        for step in (self.ha_service.shutdown(), self.remoting_server.shutdown()):
            try:
                await asyncio.wait_for(step, timeout=SHUTDOWN_STEP_TIMEOUT_S)
            except TimeoutError:
                log.warning("shutdown step timed out")
        await self.message_store.shutdown()
        log.info("broker stopped")

    async def _print_master_and_slave_diff(self) -> None:
        """BrokerController.printMasterAndSlaveDiff: log the replica lag every 60 s while slaves exist."""
        await asyncio.sleep(10)
        while True:
            if self.ha_service.connection_count:
                diff = self.message_store.commit_log.max_offset - self.ha_service.push2_slave_max_offset
                log.info("Slave fall behind master: %d bytes", diff)
            await asyncio.sleep(MASTER_SLAVE_DIFF_LOG_INTERVAL_S)

    def earliest_message_time(self) -> int:
        """Store timestamp (ms) of the record at commitLogMinOffset, −1 when there is none."""
        cl = self.message_store.commit_log
        data = cl.get_data(cl.min_offset, 80) if cl.min_offset >= 0 else None
        if not data or len(data) < 76:
            return -1
        size, magic, sys_flag = struct.unpack_from(">ii", data, 0) + struct.unpack_from(">i", data, 36)
        if magic != MESSAGE_MAGIC_CODE or size <= 0:
            return -1
        pos = 56 + (12 if sys_flag & BORNHOST_V6_FLAG else 0)
        return struct.unpack_from(">q", data, pos)[0]


async def run_broker(config: BrokerStubConfig, *, ready: asyncio.Event | None = None) -> int:
    """Run a broker until SIGTERM/SIGINT (or cancellation); returns the process exit code (0 = clean)."""
    controller = BrokerController(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    await controller.start()
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
        log.info("shutdown signal received")
    finally:
        await controller.shutdown()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
    return 0
