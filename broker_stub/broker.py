"""The broker process (RocketMQ 4.9.8 ``BrokerController``): store, HA service (and HA client on a SLAVE), remoting
servers (main and VIP port), name-server registration, slave metadata sync, consumer offsets and the optional
Prometheus endpoint, all on one asyncio event loop (docs/architecture.md "The broker stub's shape").
:func:`run_broker` is the process body of ``python -m broker_stub``: it starts the broker, waits for SIGTERM/SIGINT
and shuts down cleanly (docs/broker_stub.md "Commands").
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time

from broker_stub.config import BrokerConfigError, BrokerStubConfig
from broker_stub.exposure import open_exposure
from broker_stub.ha.allow_list import HAAddressPolicy
from broker_stub.ha.client import HAClient
from broker_stub.ha.service import HAService
from broker_stub.metadata import ConsumerOffsetManager, DelayOffsetStore, SubscriptionGroupManager
from broker_stub.metrics import MetricsExporter
from broker_stub.outer_api import BrokerOuterAPI
from broker_stub.remoting.acl import AclError, validator_for
from broker_stub.remoting.admin_processor import AdminBrokerProcessor
from broker_stub.remoting.client import RemotingClient
from broker_stub.remoting.consumer_admin_processor import ConsumerAdminProcessor
from broker_stub.remoting.consumer_processor import ConsumerManager, ConsumerProcessor
from broker_stub.remoting.end_transaction_processor import EndTransactionProcessor
from broker_stub.remoting.pull_processor import PullMessageProcessor
from broker_stub.remoting.query_message_processor import QueryMessageProcessor
from broker_stub.remoting.send_back_processor import ConsumerSendMsgBackProcessor
from broker_stub.remoting.send_processor import SendMessageProcessor
from broker_stub.remoting.server import RemotingServer
from broker_stub.remoting.topic_admin_processor import TopicAdminProcessor
from broker_stub.slave_synchronize import SlaveSynchronize
from broker_stub.store.message_store import DefaultMessageStore
from broker_stub.store.schedule import ScheduleMessageService
from broker_stub.store.stats import BrokerStats
from broker_stub.store.transaction_check import TransactionalMessageCheckService
from broker_stub.topic_config import TopicConfigManager
from connector.protocol.commitlog import V4_HEADER_BYTES, read_record_head

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
                                    port=config.ha_listen_port,
                                    max_connections=config.netty_server.serverMaxConnections,
                                    policy=HAAddressPolicy(config.store.haAllowedAddresses,
                                                           config.store.haReplicaAddresses))
        config_dir = self.message_store.config_dir
        self.consumer_offset_manager = ConsumerOffsetManager(config_dir / "consumerOffset.json")
        self.subscription_group_manager = SubscriptionGroupManager(
            config_dir / "subscriptionGroup.json", auto_create=config.broker.autoCreateSubscriptionGroup,
            max_groups=config.broker.maxSubscriptionGroupNums)
        self.delay_offset_store = DelayOffsetStore(config_dir / "delayOffset.json")
        # only a master delivers delayed messages (DefaultMessageStore.handleScheduleMessageService)
        self.schedule_message_service = (None if config.is_slave
                                         else ScheduleMessageService(self.message_store, self.delay_offset_store))
        self.consumer_manager = ConsumerManager()
        # only a master checks half messages with their producers (BrokerController.initialTransaction)
        self.transaction_check_service = (
            None if config.is_slave
            else TransactionalMessageCheckService(self, self.consumer_manager.available_producer_channel))
        netty = config.netty_server
        limits = {"max_idle_s": netty.serverChannelMaxIdleTimeSeconds, "max_connections": netty.serverMaxConnections,
                  "max_pending_frame_bytes": netty.serverMaxPendingFrameBytes}
        self.remoting_server = RemotingServer(config.broker_ip1, config.listen_port, **limits)
        # the VIP ("fast") port, listenPort - 2: same processors (a slave fetches GET_ALL_TOPIC_CONFIG there)
        self.fast_remoting_server = RemotingServer(config.broker_ip1, config.vip_listen_port, **limits)
        self.admin_processor = AdminBrokerProcessor(self)
        self.pull_processor = PullMessageProcessor(self)
        try:  # aclEnable: every request of both ports is checked first (docs/security.md)
            self.access_validator = validator_for(config.broker.rocketmqHome, config.broker.aclEnable)
        except AclError as exc:
            raise BrokerConfigError(f"config key aclEnable: {exc}") from None
        for server in (self.remoting_server, self.fast_remoting_server):
            server.access_validator = self.access_validator
            server.register_handlers(SendMessageProcessor(self).handlers())
            server.register_handlers(self.admin_processor.handlers())
            server.register_handlers(self.pull_processor.handlers())
            server.register_handlers(ConsumerProcessor(self).handlers())
            server.register_handlers(EndTransactionProcessor(self).handlers())
            server.register_handlers(TopicAdminProcessor(self).handlers())
            server.register_handlers(ConsumerAdminProcessor(self).handlers())
            server.register_handlers(ConsumerSendMsgBackProcessor(self).handlers())
            server.register_handlers(QueryMessageProcessor(self).handlers())
        self.ha_client: HAClient | None = None
        if config.is_slave:
            self.ha_client = HAClient(self.message_store.commit_log, config.store, config.fixed_ha_master_address)
        self.remoting_client = RemotingClient(config.netty_client.connectTimeoutMillis)
        self.outer_api = BrokerOuterAPI(self)
        self._register_tasks: set[asyncio.Task] = set()
        self.topic_config_manager.change_listeners.append(self._register_after_topic_change)
        self.slave_synchronize = SlaveSynchronize(self) if config.is_slave else None
        self.metrics_exporter = MetricsExporter(self)
        self._tasks: list[asyncio.Task] = []
        self._stopped = False

    async def start(self) -> None:
        cfg = self.config
        log.debug("broker starting brokerName=%s brokerClusterName=%s brokerRole=%s flushDiskType=%s "
                 "mappedFileSizeCommitLog=%d listen=%s:%d ha=%s:%d", cfg.broker.brokerName,
                 cfg.broker.brokerClusterName, cfg.store.brokerRole, cfg.store.flushDiskType,
                 cfg.store.mappedFileSizeCommitLog, cfg.broker_ip1, cfg.listen_port, cfg.broker_ip2,
                 cfg.ha_listen_port)
        report = self.message_store.load()
        log.debug("store recovered maxOffset=%d minOffset=%d abnormal=%s", self.message_store.commit_log.max_offset,
                  self.message_store.commit_log.min_offset, report.abnormal)
        try:
            await self.message_store.start()
            await listen(self.ha_service.start, "haListenPort", cfg.broker_ip2, cfg.ha_listen_port)
            await listen(self.remoting_server.start, "listenPort", cfg.broker_ip1, cfg.listen_port)
            try:
                await self.fast_remoting_server.start()
            except OSError as exc:  # upstream refuses to start; the stub keeps serving the main port
                log.warning("VIP remoting port %d not available, slaves cannot sync topics from it error=%s",
                            cfg.vip_listen_port, exc)
        except BaseException:
            await self.shutdown()
            raise
        if cfg.broker.metricsPromExporterPort:
            try:
                self.metrics_exporter.start(cfg.metrics_host, cfg.broker.metricsPromExporterPort)
            except OSError:
                await self.shutdown()
                raise
        self._tasks.append(asyncio.create_task(self._persist_consumer_offsets_loop(), name="persistConsumerOffset"))
        if self.schedule_message_service is not None:
            self.schedule_message_service.start()
        if self.transaction_check_service is not None:
            self.transaction_check_service.start()
        self._tasks.append(asyncio.create_task(self.outer_api.run(), name="registerBrokerAll"))
        if self.slave_synchronize is not None:
            self._tasks.append(asyncio.create_task(self.slave_synchronize.run(), name="SlaveSynchronize"))
        if self.ha_client is not None:
            self._tasks.append(asyncio.create_task(self.ha_client.run(), name="HAClient"))
        else:
            self._tasks.append(asyncio.create_task(self._print_master_and_slave_diff(),
                                                   name="printMasterAndSlaveDiff"))
        log.info("broker started brokerName=%s brokerRole=%s listen=%s:%d ha=%s:%d storePathRootDir=%s "
                 "lastShutdown=%s maxOffset=%d", cfg.broker.brokerName, cfg.store.brokerRole, cfg.broker_ip1,
                 cfg.listen_port, cfg.broker_ip2, cfg.ha_listen_port, cfg.store.storePathRootDir,
                 "abnormal" if report.abnormal else "normal", self.message_store.commit_log.max_offset)
        exposure = open_exposure(cfg)
        if exposure:  # once, at start (docs/security.md "Hardening checklist")
            log.warning("%s", exposure)

    async def shutdown(self) -> None:
        """Stop accepting, close connections, flush and close the store (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await asyncio.wait_for(t, timeout=SHUTDOWN_STEP_TIMEOUT_S)
            except (asyncio.CancelledError, TimeoutError, Exception):  # noqa: BLE001 - stopping regardless
                pass
        self.metrics_exporter.stop()
        await self.remoting_server.stop_accepting()
        await self.fast_remoting_server.stop_accepting()
        await self.outer_api.unregister_all()
        # HA first: closing its connections answers pending SYNC_MASTER waits, whose replies then go out
        for step in (self.ha_service.shutdown(), self.remoting_server.shutdown(), self.fast_remoting_server.shutdown(),
                     self.remoting_client.close()):
            try:
                await asyncio.wait_for(step, timeout=SHUTDOWN_STEP_TIMEOUT_S)
            except TimeoutError:
                log.warning("shutdown step timed out")
        if self.transaction_check_service is not None:
            await self.transaction_check_service.stop()
        self._persist_consumer_offsets()
        if self.schedule_message_service is not None:
            await self.schedule_message_service.stop()
        await self.message_store.shutdown()
        log.info("broker stopped")

    def _register_after_topic_change(self) -> None:
        """A new topic: register with the name servers now (createTopicInSendMessageMethod → registerBrokerAll)."""
        if self._stopped or not self.outer_api.name_servers:
            return
        task = asyncio.get_running_loop().create_task(self.outer_api.register_broker_all())
        self._register_tasks.add(task)
        task.add_done_callback(self._register_tasks.discard)

    def _persist_consumer_offsets(self) -> None:
        try:
            self.consumer_offset_manager.persist()
        except OSError as exc:
            log.error("consumer offsets persist failed error=%s", exc)

    async def _persist_consumer_offsets_loop(self) -> None:
        """Persist consumer offsets every ``flushConsumerOffsetInterval`` ms (BrokerController.initialize)."""
        while True:
            await asyncio.sleep(self.config.broker.flushConsumerOffsetInterval / 1000)
            self._persist_consumer_offsets()

    async def _print_master_and_slave_diff(self) -> None:
        """BrokerController.printMasterAndSlaveDiff: log the replica lag every 60 s while slaves exist."""
        await asyncio.sleep(10)
        while True:
            if self.ha_service.connection_count:
                diff = self.message_store.commit_log.max_offset - self.ha_service.push2_slave_max_offset
                log.info("Slave fall behind master: %d bytes", diff)
            await asyncio.sleep(MASTER_SLAVE_DIFF_LOG_INTERVAL_S)

    def ha_runtime_info(self) -> dict[str, str]:
        """The stub's replication keys of GET_BROKER_RUNTIME_INFO (round-2 contract), values as strings.

        Always: ``brokerRole``, ``brokerId``, ``push2SlaveMaxOffset`` (bytes), ``haConnectionCount``,
        ``haConnections`` (JSON array of :meth:`HAConnection.status` objects). On a SLAVE also
        ``haMasterAddress`` (the HA address in use, "" when none is known), ``masterPhyOffset`` (end offset of
        the last frame received, −1 before any) and ``slaveConnected`` ("true"/"false").
        """
        ha = self.ha_service
        conns = [c.status() for c in list(ha.connections)]
        info = {
            "brokerRole": self.config.store.brokerRole,
            "brokerId": str(self.config.broker.brokerId),
            "push2SlaveMaxOffset": str(ha.push2_slave_max_offset),
            "haConnectionCount": str(ha.connection_count),
            "haConnections": json.dumps(conns, separators=(",", ":")),
        }
        if self.ha_client is not None:
            info.update(self.ha_client.runtime_info())
        return info

    def earliest_message_time(self) -> int:
        """Store timestamp (ms) of the record at commitLogMinOffset, −1 when there is none."""
        cl = self.message_store.commit_log
        data = cl.get_data(cl.min_offset, V4_HEADER_BYTES) if cl.min_offset >= 0 else None
        head = read_record_head(data) if data else None
        if head is None or head.store_timestamp is None or head.total_size <= 0:
            return -1
        return head.store_timestamp


async def listen(start, key: str, host: str, port: int) -> None:
    """``await start()`` (a server's bind and listen); an OSError (a port already taken) is raised again naming
    the broker.conf ``key`` and the address: ``[Errno 98] listenPort=10911 on 127.0.0.1: Address already in use``."""
    try:
        await start()
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise OSError(exc.errno, f"{key}={port} on {host}: {reason}") from exc


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
