"""Range and format rules for every ``broker.conf`` key: type ranges, :data:`POSITIVE_KEYS`, the per-key rules of
:func:`check_ranges`, keys that contradict each other (:func:`check_consistency`) and, at start only, DNS and
disk checks (:func:`check_environment`); a broken rule is one :class:`BrokerConfigError` line naming key and
value. The rules and why 4.9.8 gets them wrong: docs/broker_stub.md "Configuration keys (RocketMQ names, 4.9.8
defaults)".
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import socket
from pathlib import Path
from typing import Any, Protocol

from broker_stub.ha.allow_list import parse_networks
from connector.errors import AddressError, HAReplicaError
from connector.protocol.address import split_host_port
from connector.protocol.commitlog.layout import END_FILE_MIN_BLANK_LENGTH_BYTES, calc_msg_length


class CheckedConfig(Protocol):
    """What the rules read of :class:`broker_stub.config.BrokerStubConfig` (which imports this module): its
    four 4.9.8 config objects (dataclasses whose field names are the ``broker.conf`` keys) and the pinned
    ``haMasterAddress``."""

    broker: Any
    netty_server: Any
    netty_client: Any
    store: Any

    @property
    def fixed_ha_master_address(self) -> str | None: ...


class BrokerConfigError(HAReplicaError):
    """A broker.conf the stub cannot run with (bad value, unsupported role...). Names the key."""


INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
# Fields that are Java ``long`` in 4.9.8 (BrokerConfig, MessageStoreConfig, NettyClientConfig); all other
# numeric fields are ``int``.
LONG_KEYS = frozenset({
    "brokerId", "shortPollingTimeMills", "consumerFallbehindThreshold", "waitTimeMillsInSendQueue",
    "waitTimeMillsInPullQueue", "waitTimeMillsInHeartbeatQueue", "waitTimeMillsInTransactionQueue",
    "startAcceptSendRequestTimeStamp", "filterDataCleanTimeSpan", "transactionTimeOut", "transactionCheckInterval",
    "flushDelayOffsetInterval", "osPageCacheBusyTimeOutMills", "channelNotActiveInterval",
    "serverMaxPendingFrameBytes"})
POSITIVE_KEYS = frozenset({
    "haTransferBatchSize", "maxMessageSize", "flushIntervalCommitLog", "flushIntervalConsumeQueue",
    "flushCommitLogThoroughInterval", "haSendHeartbeatInterval", "haHousekeepingInterval", "defaultTopicQueueNums",
    "minInSyncSlaves", "syncFlushTimeout", "slaveTimeout", "mappedFileSizeConsumeQueue", "cleanResourceInterval",
    "registerNameServerPeriod", "flushConsumerOffsetInterval", "connectTimeoutMillis", "serverMaxConnections",
    "maxTopicConfigNums", "maxSubscriptionGroupNums",
    "serverMaxPendingFrameBytes", "maxTransferCountOnMessageInMemory", "maxTransferCountOnMessageInDisk",
    "maxTransferBytesOnMessageInMemory", "maxTransferBytesOnMessageInDisk", "defaultQueryMaxNum",
    "maxMsgsNumBatch", "registerBrokerTimeoutMills"})
# mappedFileSizeCommitLog is a Java int in 4.9.8 (at most 2 GiB − 1); a file is mapped whole, so a larger
# value would also map more address space than the machine has. 4 KiB: one OS page.
MIN_COMMITLOG_FILE_BYTES = 4096
MAX_COMMITLOG_FILE_BYTES = INT_MAX
#: the most queues RocketMQ 4.9.8 gives a topic it creates itself (BenchmarkTest, TopicConfigManager); a
#: ``defaultTopicQueueNums`` above it gives TBW102, and every topic a client auto-creates from it, that many
#: ConsumeQueues
MAX_DEFAULT_TOPIC_QUEUE_NUMS = 1024
#: MessageStoreConfig.maxMessageSize's 4.9.8 default (4 MiB)
DEFAULT_MAX_MESSAGE_SIZE_BYTES = 4 * 1024 * 1024
_DELETE_WHEN = re.compile(r"^\d{1,2}(;\d{1,2})*$")
_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def check_number_ranges(cfg: CheckedConfig) -> None:
    """Every numeric key: within its Java type, not negative, and ≥ 1 for :data:`POSITIVE_KEYS`."""
    for obj in (cfg.broker, cfg.netty_server, cfg.netty_client, cfg.store):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, bool) or not isinstance(value, int):
                continue
            top = LONG_MAX if f.name in LONG_KEYS else INT_MAX
            if value > top:
                kind = "long" if top == LONG_MAX else "int"
                raise BrokerConfigError(f"config key {f.name}: {value} is larger than a Java {kind} ({top})")
            low = 1 if f.name in POSITIVE_KEYS else 0
            if value < low:
                raise BrokerConfigError(f"config key {f.name}: {value} must be >= {low}")


def check_host(key: str, value: str) -> None:
    """An IPv4/IPv6 literal or a DNS host name; all-digit dotted text must be a valid IPv4 address."""
    text = value.strip()
    if not text:
        raise BrokerConfigError(f"config key {key}: empty address")
    if ":" in text or re.fullmatch(r"[0-9.]+", text):
        try:
            ipaddress.ip_address(text.strip("[]"))
        except ValueError:
            raise BrokerConfigError(f"config key {key}: {value!r} is not a valid IP address") from None
        return
    labels = text.rstrip(".").split(".")
    if len(text) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        raise BrokerConfigError(f"config key {key}: {value!r} is neither an IP address nor a host name")


def check_host_port(key: str, value: str) -> None:
    """``host:port`` (IPv6 as ``[addr]:port``, or bare as RocketMQ reads it) with a port in 1..65535
    (:func:`connector.protocol.address.split_host_port`), the host checked by :func:`check_host`."""
    try:
        host, _ = split_host_port(value, bare_ipv6=True)
    except AddressError:
        raise BrokerConfigError(f"config key {key}: {value!r} is not HOST:PORT with a port in 1..65535") from None
    check_host(key, host)


def check_ranges(cfg: CheckedConfig) -> None:
    """The key-specific rules (see module doc); raises BrokerConfigError naming the first bad key."""
    store, broker = cfg.store, cfg.broker
    if not 10 <= store.diskMaxUsedSpaceRatio <= 95:
        raise BrokerConfigError(f"config key diskMaxUsedSpaceRatio: {store.diskMaxUsedSpaceRatio} is outside 10..95 "
                                "(percent of the disk; RocketMQ would clamp it)")
    if not 0 <= store.accessMessageInMemoryMaxRatio <= 100:
        raise BrokerConfigError(
            f"config key accessMessageInMemoryMaxRatio: {store.accessMessageInMemoryMaxRatio} is outside 0..100")
    size = store.mappedFileSizeCommitLog
    if not MIN_COMMITLOG_FILE_BYTES <= size <= MAX_COMMITLOG_FILE_BYTES:
        raise BrokerConfigError(
            f"config key mappedFileSizeCommitLog: {size} bytes is outside {MIN_COMMITLOG_FILE_BYTES}.."
            f"{MAX_COMMITLOG_FILE_BYTES} (a Java int in RocketMQ 4.9.8; each file is mapped whole)")
    if not _DELETE_WHEN.match(store.deleteWhen.strip()):
        raise BrokerConfigError(f"config key deleteWhen: {store.deleteWhen!r} is not hours HH or HH;HH;... "
                                "(e.g. 04 or 03;04; a value of 24 or more never matches)")
    if not 0 <= broker.brokerPermission <= 7:
        raise BrokerConfigError(f"config key brokerPermission: {broker.brokerPermission} is outside 0..7 "
                                "(PERM_PRIORITY 8 is not a broker permission)")
    if not store.storePathRootDir.strip():
        raise BrokerConfigError("config key storePathRootDir: empty path")
    if store.storePathCommitLog is not None and not store.storePathCommitLog.strip():
        raise BrokerConfigError("config key storePathCommitLog: empty path (leave the key out for the default)")
    for key in ("brokerName", "brokerClusterName"):
        if not getattr(broker, key).strip():
            raise BrokerConfigError(f"config key {key}: empty name")
    check_host("brokerIP1", broker.brokerIP1)
    if broker.brokerIP2 is not None:
        check_host("brokerIP2", broker.brokerIP2)
    if broker.metricsPromExporterHost:
        check_host("metricsPromExporterHost", broker.metricsPromExporterHost)
    if cfg.fixed_ha_master_address:
        check_host_port("haMasterAddress", cfg.fixed_ha_master_address)
    for addr in filter(None, (a.strip() for a in (broker.namesrvAddr or "").split(";"))):
        check_host_port("namesrvAddr", addr)
    for key in ("haAllowedAddresses", "haReplicaAddresses"):
        try:
            parse_networks(key, getattr(store, key))
        except ValueError as exc:
            raise BrokerConfigError(str(exc)) from None
    check_number_ranges(cfg)
    check_consistency(cfg)


def check_consistency(cfg: CheckedConfig) -> None:
    """Keys that each pass alone but cannot work together (docs/broker_stub.md "Configuration keys").

    * ``maxMessageSize``, when set above its 4 MiB default: a message of that body (a one-byte topic, no
      properties) plus the 8-byte minimum END_FILE blank must fit one ``mappedFileSizeCommitLog`` file —
      4.9.8 closes the current file and a fresh one with blanks for a record that fits neither and stores
      nothing (CommitLog.putMessage, END_OF_FILE twice). At the default (which every dump of a 4.9.8
      config holds, small test files included) the stub refuses such a record at send instead.
    * ``haHousekeepingInterval`` > ``haSendHeartbeatInterval``: a master and a slave each close an HA
      connection that read nothing for haHousekeepingInterval ms, and an idle peer writes only every
      haSendHeartbeatInterval ms (4.9.8 HAConnection, HAService.HAClient), so every idle connection would drop.
    * ``defaultTopicQueueNums`` ≤ :data:`MAX_DEFAULT_TOPIC_QUEUE_NUMS`.
    """
    store, broker = cfg.store, cfg.broker
    if store.maxMessageSize > DEFAULT_MAX_MESSAGE_SIZE_BYTES:
        smallest = calc_msg_length(0, store.maxMessageSize, 1, 0) + END_FILE_MIN_BLANK_LENGTH_BYTES
        if smallest > store.mappedFileSizeCommitLog:
            raise BrokerConfigError(
                f"config key maxMessageSize: {store.maxMessageSize} bytes cannot be stored in CommitLog files of "
                f"mappedFileSizeCommitLog={store.mappedFileSizeCommitLog} bytes (such a record needs at least "
                f"{smallest}); lower maxMessageSize or raise mappedFileSizeCommitLog")
    if store.haHousekeepingInterval <= store.haSendHeartbeatInterval:
        raise BrokerConfigError(
            f"config key haHousekeepingInterval: {store.haHousekeepingInterval} ms must be above "
            f"haSendHeartbeatInterval={store.haSendHeartbeatInterval} ms, else every idle HA connection is closed "
            "between two heartbeats")
    if broker.defaultTopicQueueNums > MAX_DEFAULT_TOPIC_QUEUE_NUMS:
        raise BrokerConfigError(
            f"config key defaultTopicQueueNums: {broker.defaultTopicQueueNums} is above "
            f"{MAX_DEFAULT_TOPIC_QUEUE_NUMS}, the most queues RocketMQ 4.9.8 gives any topic it creates itself")


def resolve_host(key: str, value: str) -> str:
    """The IP address ``value`` (an IP literal or a host name) stands for: the literal itself, else the first
    address DNS gives (as Java's ``InetSocketAddress`` resolves ``brokerIP1`` in 4.9.8).

    Raises:
        BrokerConfigError: the name does not resolve, naming ``key`` and ``value``.
    """
    text = value.strip().strip("[]")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(text, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise BrokerConfigError(f"config key {key}: {value!r} does not resolve to an IP address ({why})") from None
    return str(infos[0][4][0])


def check_environment(cfg: CheckedConfig) -> None:
    """Start-time checks that need DNS and the disk (not run by :func:`check_ranges`, so a config can be
    checked anywhere): the host names resolve (:func:`resolve_host`), and ``storePathRootDir`` and
    ``storePathCommitLog`` exist as writable folders or can be created (they are, as the store would).

    Raises:
        BrokerConfigError: naming the key, the value and the operating system's reason.
    """
    broker, store = cfg.broker, cfg.store
    for key in ("brokerIP1", "brokerIP2", "metricsPromExporterHost"):
        value = getattr(broker, key)
        if value:
            resolve_host(key, value)
    paths = [("storePathRootDir", store.storePathRootDir)]
    if store.storePathCommitLog:
        paths.append(("storePathCommitLog", store.storePathCommitLog))
    for key, value in paths:
        path = Path(value).expanduser()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BrokerConfigError(f"config key {key}: {value!r} cannot be created as a folder "
                                    f"({exc.strerror or exc})") from None
        if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
            raise BrokerConfigError(f"config key {key}: {value!r} is not a writable folder")
