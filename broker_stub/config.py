"""Broker stub configuration: reads a real ``broker.conf`` into :class:`BrokerConfig`, :class:`NettyServerConfig`,
:class:`NettyClientConfig` and :class:`MessageStoreConfig` as RocketMQ 4.9.8's ``BrokerStartup`` maps it
(``MixAll.properties2Object``), with 4.9.8's property names and defaults
(``tests/fixtures/rocketmq-4.9.8/broker_config.properties`` lists every key as a real broker reports it).

Each deliberate difference is documented on the field it touches; the rules that refuse a value live in
:mod:`broker_stub.config_rules`. The keys, the stub-only ones and the checks: docs/broker_stub.md "Configuration
keys (RocketMQ names, 4.9.8 defaults)"; ports and bind addresses: docs/broker_stub.md "Ports".
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker_stub.config_rules import DEFAULT_MAX_MESSAGE_SIZE_BYTES, BrokerConfigError, check_ranges, resolve_host
from broker_stub.javautil import parse_java_properties
from connector.protocol.broker import MASTER_ID, PERM_READ_WRITE, ha_listen_port, vip_listen_port
from connector.protocol.ha import (
    HA_HOUSEKEEPING_INTERVAL_MS,
    HA_MAX_TRANSFER_BODY_BYTES,
    HA_SEND_HEARTBEAT_INTERVAL_MS,
    HA_TRANSFER_BATCH_SIZE_BYTES,
)
from connector.protocol.mapped_files import DEFAULT_MAPPED_FILE_SIZE_COMMITLOG
from connector.protocol.topics import RMQ_SYS_TRACE_TOPIC

__all__ = ["BrokerConfigError", "BrokerStubConfig", "config_from_properties", "load_config"]

log = logging.getLogger(__name__)

_CPUS = os.cpu_count() or 1

BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
FLUSH_DISK_TYPES = ("SYNC_FLUSH", "ASYNC_FLUSH")
DEFAULT_LISTEN_PORT = 10911  # BrokerStartup: nettyServerConfig.setListenPort(10911)
DEFAULT_BROKER_IP = "127.0.0.1"


def _local_host_name() -> str:
    """BrokerConfig.localHostName(): the host name, or ``DEFAULT_BROKER`` when it cannot be found."""
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


@dataclass
class BrokerConfig:
    """``org.apache.rocketmq.common.BrokerConfig`` (4.9.8): identity, topics, thread pools, transactions."""

    rocketmqHome: str | None = None
    namesrvAddr: str | None = None
    brokerIP1: str = DEFAULT_BROKER_IP  # stub default; upstream auto-detects a local address
    brokerIP2: str | None = None  # None → brokerIP1 (upstream auto-detects)
    brokerName: str = field(default_factory=_local_host_name)
    brokerClusterName: str = "DefaultCluster"
    brokerId: int = MASTER_ID
    brokerPermission: int = PERM_READ_WRITE
    defaultTopicQueueNums: int = 8
    autoCreateTopicEnable: bool = True
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    # stub-only: table sizes past which sends, heartbeats and pulls create no more topics / groups
    maxTopicConfigNums: int = 10000
    maxSubscriptionGroupNums: int = 10000
    messageStorePlugIn: str = ""
    msgTraceTopicName: str = RMQ_SYS_TRACE_TOPIC
    traceTopicEnable: bool = False
    sendMessageThreadPoolNums: int = min(_CPUS, 4)
    putMessageFutureThreadPoolNums: int = min(_CPUS, 4)
    pullMessageThreadPoolNums: int = 16 + _CPUS * 2
    processReplyMessageThreadPoolNums: int = 16 + _CPUS * 2
    queryMessageThreadPoolNums: int = 8 + _CPUS
    adminBrokerThreadPoolNums: int = 16
    clientManageThreadPoolNums: int = 32
    consumerManageThreadPoolNums: int = 32
    heartbeatThreadPoolNums: int = min(32, _CPUS)
    endTransactionThreadPoolNums: int = max(8 + _CPUS * 2, min(_CPUS, 4) * 4)
    flushConsumerOffsetInterval: int = 5000
    flushConsumerOffsetHistoryInterval: int = 60000
    rejectTransactionMessage: bool = False
    fetchNamesrvAddrByAddressServer: bool = False
    sendThreadPoolQueueCapacity: int = 10000
    putThreadPoolQueueCapacity: int = 10000
    pullThreadPoolQueueCapacity: int = 100000
    replyThreadPoolQueueCapacity: int = 10000
    queryThreadPoolQueueCapacity: int = 20000
    clientManagerThreadPoolQueueCapacity: int = 1000000
    consumerManagerThreadPoolQueueCapacity: int = 1000000
    heartbeatThreadPoolQueueCapacity: int = 50000
    endTransactionPoolQueueCapacity: int = 100000
    filterServerNums: int = 0
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    notifyConsumerIdsChangedEnable: bool = True
    highSpeedMode: bool = False
    commercialEnable: bool = True
    commercialTimerCount: int = 1
    commercialTransCount: int = 1
    commercialBigCount: int = 1
    commercialBaseCount: int = 1
    transferMsgByHeap: bool = True
    maxDelayTime: int = 40
    regionId: str = "DefaultRegion"
    registerBrokerTimeoutMills: int = 6000
    slaveReadEnable: bool = False
    disableConsumeIfConsumerReadSlowly: bool = False
    consumerFallbehindThreshold: int = 17179869184
    brokerFastFailureEnable: bool = True
    waitTimeMillsInSendQueue: int = 200
    waitTimeMillsInPullQueue: int = 5000
    waitTimeMillsInHeartbeatQueue: int = 31000
    waitTimeMillsInTransactionQueue: int = 3000
    startAcceptSendRequestTimeStamp: int = 0
    traceOn: bool = True
    enableCalcFilterBitMap: bool = False
    expectConsumerNumUseFilter: int = 32
    maxErrorRateOfBloomFilter: int = 20
    filterDataCleanTimeSpan: int = 86400000
    filterSupportRetry: bool = False
    enablePropertyFilter: bool = False
    compressedRegister: bool = False
    forceRegister: bool = True
    registerNameServerPeriod: int = 30000
    transactionTimeOut: int = 6000
    transactionCheckMax: int = 15
    transactionCheckInterval: int = 60000
    aclEnable: bool = False
    storeReplyMessageEnable: bool = True
    enableDetailStat: bool = True
    autoDeleteUnusedStats: bool = False
    isolateLogEnable: bool = False
    configBlackList: str = "configBlackList;brokerConfigPath"
    # stub-only (RocketMQ 5.x names): Prometheus text endpoint, 0 = off; host "" = brokerIP1
    metricsPromExporterPort: int = 0
    metricsPromExporterHost: str = ""


@dataclass
class NettyServerConfig:
    """``NettyServerConfig`` (4.9.8): the remoting server. ``listenPort`` defaults to 10911 as BrokerStartup sets."""

    listenPort: int = DEFAULT_LISTEN_PORT
    serverWorkerThreads: int = 8
    serverCallbackExecutorThreads: int = 0
    serverSelectorThreads: int = 3
    serverOnewaySemaphoreValue: int = 256
    serverAsyncSemaphoreValue: int = 64
    serverChannelMaxIdleTimeSeconds: int = 120
    serverSocketSndBufSize: int = 0
    serverSocketRcvBufSize: int = 0
    writeBufferHighWaterMark: int = 0
    writeBufferLowWaterMark: int = 0
    serverSocketBacklog: int = 1024
    serverPooledByteBufAllocatorEnable: bool = True
    useEpollNativeSelector: bool = False
    # stub-only: open connections per listening port (remoting, VIP, HA); beyond it new ones are closed at once
    serverMaxConnections: int = 10000
    # stub-only: bytes all connections' unfinished remoting frames may hold together (64 MiB)
    serverMaxPendingFrameBytes: int = 64 * 1024 * 1024


@dataclass
class NettyClientConfig:
    """``NettyClientConfig`` (4.9.8): the broker's outgoing remoting client (name server, slave sync)."""

    clientWorkerThreads: int = 4
    clientCallbackExecutorThreads: int = _CPUS
    clientOnewaySemaphoreValue: int = 65535
    clientAsyncSemaphoreValue: int = 65535
    connectTimeoutMillis: int = 3000
    channelNotActiveInterval: int = 60000
    clientChannelMaxIdleTimeSeconds: int = 120
    clientSocketSndBufSize: int = 0
    clientSocketRcvBufSize: int = 0
    clientPooledByteBufAllocatorEnable: bool = False
    clientCloseSocketIfTimeout: bool = True
    useTLS: bool = False


@dataclass
class MessageStoreConfig:
    """``MessageStoreConfig`` (4.9.8): CommitLog files, flushing, HA. Sizes in bytes, intervals in ms.

    ``storePathRootDir`` defaults to ``~/store`` and ``storePathCommitLog`` to ``{storePathRootDir}/commitlog``.
    ``haListenPort`` is None unless configured; see :attr:`BrokerStubConfig.ha_listen_port`.
    """

    storePathRootDir: str = field(default_factory=lambda: str(Path.home() / "store"))
    storePathCommitLog: str | None = None
    storePathDLedgerCommitLog: str | None = None
    readOnlyCommitLogStorePaths: str | None = None
    mappedFileSizeCommitLog: int = DEFAULT_MAPPED_FILE_SIZE_COMMITLOG
    mappedFileSizeConsumeQueue: int = 300000 * 20
    enableConsumeQueueExt: bool = False
    mappedFileSizeConsumeQueueExt: int = 48 * 1024 * 1024
    # BrokerController sets it to the consumer-filter bloom filter's bit count: 112 for the default
    # maxErrorRateOfBloomFilter=20 / expectConsumerNumUseFilter=32 (the field itself says 64).
    bitMapLengthConsumeQueueExt: int = 112
    flushIntervalCommitLog: int = 500
    commitIntervalCommitLog: int = 200
    useReentrantLockWhenPutMessage: bool = True
    flushCommitLogTimed: bool = True
    flushIntervalConsumeQueue: int = 1000
    cleanResourceInterval: int = 10000
    deleteCommitLogFilesInterval: int = 100
    deleteConsumeQueueFilesInterval: int = 100
    destroyMapedFileIntervalForcibly: int = 120000
    redeleteHangedFileInterval: int = 120000
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    fileReservedTime: int = 72
    putMsgIndexHightWater: int = 600000
    maxMessageSize: int = DEFAULT_MAX_MESSAGE_SIZE_BYTES
    checkCRCOnRecover: bool = True
    flushCommitLogLeastPages: int = 4
    commitCommitLogLeastPages: int = 4
    flushLeastPagesWhenWarmMapedFile: int = 4096
    flushConsumeQueueLeastPages: int = 2
    flushCommitLogThoroughInterval: int = 10000
    commitCommitLogThoroughInterval: int = 200
    flushConsumeQueueThoroughInterval: int = 60000
    maxTransferBytesOnMessageInMemory: int = 262144
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInDisk: int = 65536
    maxTransferCountOnMessageInDisk: int = 8
    accessMessageInMemoryMaxRatio: int = 40
    messageIndexEnable: bool = True
    maxHashSlotNum: int = 5000000
    maxIndexNum: int = 5000000 * 4
    maxMsgsNumBatch: int = 64
    messageIndexSafe: bool = False
    haListenPort: int | None = None
    haSendHeartbeatInterval: int = HA_SEND_HEARTBEAT_INTERVAL_MS
    haHousekeepingInterval: int = HA_HOUSEKEEPING_INTERVAL_MS
    haTransferBatchSize: int = HA_TRANSFER_BATCH_SIZE_BYTES
    haMasterAddress: str | None = None
    haSlaveFallbehindMax: int = 256 * 1024 * 1024
    brokerRole: str = "ASYNC_MASTER"
    flushDiskType: str = "ASYNC_FLUSH"
    syncFlushTimeout: int = 5000
    slaveTimeout: int = 3000
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flushDelayOffsetInterval: int = 10000
    cleanFileForciblyEnable: bool = True
    warmMapedFileEnable: bool = False
    offsetCheckInSlave: bool = False
    debugLockEnable: bool = False
    duplicationEnable: bool = False
    diskFallRecorded: bool = True
    osPageCacheBusyTimeOutMills: int = 1000
    defaultQueryMaxNum: int = 32
    transientStorePoolEnable: bool = False
    transientStorePoolSize: int = 5
    fastFailIfNoBufferInStorePool: bool = False
    enableDLegerCommitLog: bool = False
    dLegerGroup: str | None = None
    dLegerPeers: str | None = None
    dLegerSelfId: str | None = None
    preferredLeaderId: str | None = None
    isEnableBatchPush: bool = False
    enableScheduleMessageStats: bool = True
    enableLmq: bool = False
    enableMultiDispatch: bool = False
    maxLmqConsumeQueueNum: int = 20000
    enableScheduleAsyncDeliver: bool = False
    scheduleAsyncDeliverMaxPendingLimit: int = 2000
    scheduleAsyncDeliverMaxResendNum2Blocked: int = 3
    # stub-only: distinct slaves a SYNC_MASTER waits for; 1 = 4.9.8 behaviour (alias key inSyncReplicas)
    minInSyncSlaves: int = 1
    # stub-only: an invalid record followed by data in later files ends the CommitLog there, moving what
    # follows to {storePathRootDir}/quarantine/; false = refuse to start (broker_stub.store.quarantine)
    cutCorruptCommitLogOnRecover: bool = False
    # stub-only: HA-port peers allowed to connect / whose acks count as replicas; IPs or CIDRs, "" = all
    # (broker_stub.ha.allow_list, docs/security.md "HA port")
    haAllowedAddresses: str = ""
    haReplicaAddresses: str = ""
    # RocketMQ 5.x key, stub default false (5.x: true): a %RETRY% topic over 127 characters is stored as a
    # MessageVersion V2 record as 5.x does; false = refused with MESSAGE_ILLEGAL as 4.9.8 (docs/protocol.md §8)
    autoMessageVersionOnTopicLen: bool = False

    @property
    def commit_log_dir(self) -> Path:
        """The CommitLog folder: ``storePathCommitLog`` or ``{storePathRootDir}/commitlog`` (docs/protocol.md §1.1)."""
        return Path(self.storePathCommitLog) if self.storePathCommitLog else Path(self.storePathRootDir) / "commitlog"

    def delay_levels_ms(self) -> list[int]:
        """``messageDelayLevel`` parsed as ScheduleMessageService.parseDelayLevel: level n → ms (index n-1).

        Units s, m, h, d. Raises BrokerConfigError for an unknown unit or a non-number.
        """
        units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        out = []
        for item in self.messageDelayLevel.split():
            unit = units.get(item[-1:])
            try:
                if unit is None:
                    raise ValueError(item)
                out.append(int(item[:-1]) * unit)
            except ValueError as exc:
                raise BrokerConfigError(
                    f"messageDelayLevel has a bad level {item!r} (expected e.g. 5s, 1m, 2h)") from exc
        return out


_GROUPS = (BrokerConfig, NettyServerConfig, NettyClientConfig, MessageStoreConfig)
#: alias key -> the key it stands for; the file may hold either, not both (docs/broker_stub.md "Stub-only keys")
CONFIG_KEY_ALIASES = {"inSyncReplicas": "minInSyncSlaves"}


def _kind(f: dataclasses.Field) -> str:
    t = str(f.type).replace(" ", "")
    if t.startswith("bool"):
        return "bool"
    if t.startswith("int"):
        return "int"
    return "str"


def _convert(key: str, raw: str, kind: str) -> int | bool | str:
    """Convert one property value like MixAll.properties2Object (trimmed), raising on malformed input."""
    text = raw.strip()
    if kind == "int":
        try:
            return int(text, 10)
        except ValueError:
            raise BrokerConfigError(f"config key {key}: {raw!r} is not an integer") from None
    if kind == "bool":
        low = text.lower()
        if low not in ("true", "false"):
            raise BrokerConfigError(f"config key {key}: {raw!r} is not true/false")
        return low == "true"
    return raw


def _to_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class BrokerStubConfig:
    """Everything a broker stub process runs with, plus where it came from.

    ``file_properties`` holds the raw properties as read (all keys, known or not).
    """

    broker: BrokerConfig
    netty_server: NettyServerConfig
    netty_client: NettyClientConfig
    store: MessageStoreConfig
    file_properties: dict[str, str] = field(default_factory=dict)
    config_path: Path | None = None

    @property
    def ha_listen_port(self) -> int:
        """The HA port: an explicitly configured ``haListenPort``, else ``listenPort + 1`` (see module doc)."""
        if self.store.haListenPort is not None:
            return self.store.haListenPort
        return ha_listen_port(self.netty_server.listenPort)

    @property
    def listen_port(self) -> int:
        return self.netty_server.listenPort

    @property
    def vip_listen_port(self) -> int:
        """The VIP ("fast") remoting port, ``listenPort - 2`` as BrokerController sets it (docs/protocol.md §2.1,
        §3.2)."""
        return vip_listen_port(self.netty_server.listenPort)

    @property
    def is_slave(self) -> bool:
        return self.store.brokerRole == "SLAVE"

    @property
    def fixed_ha_master_address(self) -> str | None:
        """``haMasterAddress`` when it pins the master (≥ 6 characters, as BrokerController checks), else None.

        None means the slave learns the master's ``haServerAddr`` from name-server registrations (docs/protocol.md
        §3.1).
        """
        addr = (self.store.haMasterAddress or "").strip()
        return addr if len(addr) >= 6 else None

    @property
    def metrics_host(self) -> str:
        return self.broker.metricsPromExporterHost or self.broker.brokerIP1

    @property
    def broker_ip1(self) -> str:
        return self.broker.brokerIP1

    @property
    def broker_ip2(self) -> str:
        """``brokerIP2``, defaulting to ``brokerIP1``: the advertised and bound HA address."""
        return self.broker.brokerIP2 or self.broker.brokerIP1

    @property
    def store_host(self) -> str:
        """``brokerIP1:listenPort``, the STOREHOSTADDRESS of every record this broker writes (docs/protocol.md §1.2);
        a host name is resolved to its IP address, as 4.9.8's InetSocketAddress does."""
        host = resolve_host("brokerIP1", self.broker.brokerIP1)
        if ":" in host:
            return f"[{host}]:{self.listen_port}"
        return f"{host}:{self.listen_port}"

    def all_properties(self) -> dict[str, str]:
        """Every config key with its effective value as text (GET_BROKER_CONFIG body, docs/protocol.md §4.6).

        Order: BrokerConfig, NettyServerConfig, NettyClientConfig, MessageStoreConfig fields, then unknown
        keys from the file. Unset optional values (None) are omitted, as Java's object2Properties does;
        ``brokerIP2``, ``haListenPort`` and ``storePathCommitLog`` are reported with their effective values.
        """
        out: dict[str, str] = {}
        for obj in (self.broker, self.netty_server, self.netty_client, self.store):
            for f in dataclasses.fields(obj):
                value = getattr(obj, f.name)
                if value is not None:
                    out[f.name] = _to_text(value)
        out["brokerIP2"] = self.broker_ip2
        out["haListenPort"] = str(self.ha_listen_port)
        out["storePathCommitLog"] = str(self.store.commit_log_dir)
        for k, v in self.file_properties.items():
            out.setdefault(k, v)
        return out


def config_from_properties(props: Mapping[str, str], *, config_path: Path | None = None) -> BrokerStubConfig:
    """Build and validate a :class:`BrokerStubConfig` from property strings (as ``broker.conf`` holds them).

    Applies BrokerStartup's rules: masters get ``brokerId`` 0; a SLAVE needs ``brokerId`` > 0.
    Raises BrokerConfigError for malformed values, an unknown ``brokerRole``/``flushDiskType``, DLedger mode,
    or impossible sizes/ports.
    """
    values = _resolve_aliases(props)
    objs = []
    for cls in _GROUPS:
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in values:
                kwargs[f.name] = _convert(f.name, values[f.name], _kind(f))
        objs.append(cls(**kwargs))
    cfg = BrokerStubConfig(*objs, file_properties=dict(props), config_path=config_path)
    _validate(cfg)
    return cfg


def _resolve_aliases(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` with each alias key's value under the key it stands for (:data:`CONFIG_KEY_ALIASES`).

    Raises BrokerConfigError naming both keys when the file gives a key and its alias.
    """
    values = dict(props)
    for alias, key in CONFIG_KEY_ALIASES.items():
        if alias in values:
            if key in values:
                raise BrokerConfigError(f"config keys {key} and {alias}: {alias} is an alias of {key}; give one")
            values[key] = values[alias]
    return values


_CONTROL_BYTE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def load_config(path: str | os.PathLike) -> BrokerStubConfig:
    """Read a ``broker.conf`` (``java.util.Properties`` syntax, ISO-8859-1 like ``Properties.load``).

    A file that is not properties text is refused as unparsable: one holding control bytes (anything
    below 0x20 but tab, line feed, form feed and carriage return; DEL), or a key that is not a Java
    identifier-like name (letters, digits, ``_``, ``.``, ``-``) — every RocketMQ key is a field name.
    Keys no config object knows are kept (GET_BROKER_CONFIG reports them, as upstream) and logged.
    Raises BrokerConfigError when the file is missing, unparsable or invalid (see
    :func:`config_from_properties`), naming the file and the line, key or byte.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise BrokerConfigError(f"cannot read broker config {p}: {exc}") from exc
    bad = _CONTROL_BYTE.search(raw)
    if bad:
        line = raw[:bad.start()].count(b"\n") + 1
        raise BrokerConfigError(f"broker config {p} is not a properties text file: control byte "
                                f"0x{bad.group()[0]:02x} at byte offset {bad.start()} (line {line})")
    text = raw.decode("latin-1")
    try:
        props = parse_java_properties(text)
    except ValueError as exc:
        raise BrokerConfigError(f"broker config {p}: {exc}") from exc
    known = {f.name for cls in _GROUPS for f in dataclasses.fields(cls)} | set(CONFIG_KEY_ALIASES)
    for key in props:
        if not _KEY.match(key):
            raise BrokerConfigError(f"broker config {p} is not parsable as broker properties: key {key[:40]!r} "
                                    "is not a RocketMQ property name")
        if key not in known:
            log.warning("broker config key not used by the stub (kept for GET_BROKER_CONFIG) key=%s", key)
    return config_from_properties(props, config_path=p)


def _validate(cfg: BrokerStubConfig) -> None:
    store = cfg.store
    role = store.brokerRole.strip()
    store.brokerRole = role
    if role not in BROKER_ROLES:
        raise BrokerConfigError(f"config key brokerRole: {role!r} is not one of {', '.join(BROKER_ROLES)}")
    flush = store.flushDiskType.strip()
    store.flushDiskType = flush
    if flush not in FLUSH_DISK_TYPES:
        raise BrokerConfigError(f"config key flushDiskType: {flush!r} is not one of {', '.join(FLUSH_DISK_TYPES)}")
    if store.enableDLegerCommitLog:
        raise BrokerConfigError("config key enableDLegerCommitLog: DLedger mode is not supported by the broker stub")
    if role in ("ASYNC_MASTER", "SYNC_MASTER"):
        cfg.broker.brokerId = MASTER_ID
    elif cfg.broker.brokerId <= 0:
        raise BrokerConfigError("config key brokerId: a SLAVE's brokerId must be > 0")
    for key, port in (("listenPort", cfg.netty_server.listenPort), ("haListenPort", cfg.ha_listen_port)):
        if not 1 <= port <= 65535:
            raise BrokerConfigError(f"config key {key}: port {port} is outside 1..65535")
    if cfg.ha_listen_port == cfg.netty_server.listenPort:
        raise BrokerConfigError(f"config key haListenPort: {cfg.ha_listen_port} equals listenPort")
    if cfg.ha_listen_port == cfg.vip_listen_port:
        raise BrokerConfigError(f"config key haListenPort: {cfg.ha_listen_port} equals the VIP remoting port "
                                f"(listenPort - 2 = {cfg.vip_listen_port}, docs/protocol.md §3.2)")
    if store.haTransferBatchSize > HA_MAX_TRANSFER_BODY_BYTES:
        raise BrokerConfigError(
            f"config key haTransferBatchSize: {store.haTransferBatchSize} bytes would never fit a 4.9.8 slave's "
            f"4 MiB read buffer (maximum {HA_MAX_TRANSFER_BODY_BYTES})")
    if not 0 <= cfg.broker.metricsPromExporterPort <= 65535:
        raise BrokerConfigError(
            f"config key metricsPromExporterPort: port {cfg.broker.metricsPromExporterPort} is outside 0..65535")
    for key, value in (("brokerIP1", cfg.broker.brokerIP1), ("brokerIP2", cfg.broker_ip2)):
        if not value.strip():
            raise BrokerConfigError(f"config key {key}: empty address")
    store.delay_levels_ms()  # validates messageDelayLevel
    check_ranges(cfg)
