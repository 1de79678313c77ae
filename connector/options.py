"""Every option of ``format("hareplica")``: parsing, defaults and validation in one place.

Option names are case-insensitive (Spark hands them over lower-cased). Names follow Spark's Kafka
source where the meaning is the same (``subscribe``, ``subscribePattern``, ``startingOffsets``,
``failOnDataLoss``, ``maxBytesPerTrigger``) and RocketMQ's property names where the value is a RocketMQ
setting (``haSendHeartbeatInterval``). ``minInSyncSlaves`` is also the broker stub's ``broker.conf`` key
for the same idea: how many slaves must hold the bytes.

**Aliases.** This source's earlier names are still accepted, without a warning: ``topics`` for
``subscribe``, ``topicPattern`` for ``subscribePattern``, ``minReplicas`` for ``minInSyncSlaves``
(:data:`OPTION_ALIASES`). Giving a name and its alias together is an error naming both.

=========================  ============  ==========================================================
option                     default       meaning
=========================  ============  ==========================================================
brokers                    (required)    broker sets to read, ``name=host:haPort[/host:remotingPort]``
                                         joined by commas, e.g.
                                         ``broker-a=10.0.0.1:10912,broker-b=10.0.0.2:10912``: each
                                         brokerName with the HA address of its *master*.
                                         The remoting address (GET_BROKER_RUNTIME_INFO /
                                         GET_BROKER_CONFIG) defaults to the HA host with port
                                         ``haPort - 1``, as RocketMQ derives ``haListenPort =
                                         listenPort + 1`` (docs/protocol.md §2.1); give it after a ``/`` when
                                         it differs, e.g. ``broker-a=10.0.0.1:10912/10.0.0.9:10911``.
                                         IPv6 hosts go in brackets: ``broker-a=[::1]:10912``.
slaves                     (none)        the slaves of the broker sets, same syntax, one entry per
                                         slave (a name may repeat):
                                         ``broker-a=10.0.0.11:10912,broker-a=10.0.0.12:10912``.
                                         Needed by ``readFrom=slave`` and ``minInSyncSlaves``.
                                         For a 5.x controller-mode broker set: its other members;
                                         the source follows the master the controller elects
                                         among them (docs/source.md).
readFrom                   master        ``master``: executors read the master's HA port.
                                         ``slave``: they read a slave's HA port (the one holding
                                         the most; the master only for bytes no slave holds) and
                                         batches end at what a slave holds.
minInSyncSlaves            0             a batch ends no later than what at least this many
                                         slaves of the broker set hold (commitLogMaxOffset over
                                         remoting, rounded down to a record boundary the driver
                                         has seen): Kafka's high watermark for RocketMQ.
                                         Alias: ``minReplicas``.
startingOffsets            earliest      ``earliest`` (the broker's commitLogMinOffset), ``latest``
                                         (commitLogMaxOffset) or JSON ``{"broker-a": 12345}`` with
                                         one entry per broker: a CommitLog offset that is a record
                                         boundary, or -2 (earliest) / -1 (latest) as in Kafka.
maxBytesPerTrigger         none          soft cap in bytes of CommitLog per micro-batch, over all
                                         brokers (see ``connector.source`` for why it is soft).
minPartitions              none          desired minimum number of InputPartitions per micro-batch
                                         (Spark's Kafka option): large slices are split inside a
                                         mapped file at record boundaries the broker's ConsumeQueues
                                         give (``connector.splits``), in proportion to their size.
maxBytesPerPartition       none          split slices of CommitLog larger than this many bytes the
                                         same way. Pieces are never below 1 MiB.
failOnDataLoss             true          fail when CommitLog bytes the query needs are gone from the
                                         broker; ``false`` logs the lost range and goes on.
subscribe                  (all)         comma-separated topic names to keep (exact match); other
                                         records are skipped on the executors. Alias: ``topics``.
subscribePattern           (all)         regular expression (Python ``re``) a topic must match as a
                                         whole to be kept. Not together with ``subscribe``.
                                         Alias: ``topicPattern``.
includeSystemTopics        false         keep RocketMQ's system topics (SCHEDULE_TOPIC_XXXX,
                                         RMQ_SYS_*, TBW102, ... see ``connector.topic_filter``) when
                                         ``subscribe`` is not given.
decompressBody             true          inflate bodies stored compressed (sysFlag COMPRESSED_FLAG).
mode                       PERMISSIVE    what a bad body does (BODYCRC mismatch, does not
                                         decompress, unknown compression type, past
                                         maxInflatedBodyBytes): ``PERMISSIVE`` keeps the record as
                                         a row with its stored body and the reason in
                                         ``decodeError``; ``FAILFAST`` fails the query naming
                                         broker, offset, file and field (Spark's file-source
                                         ``mode``; DROPMALFORMED is not offered: rows never vanish).
verifyBodyCRC              true          check every body against its BODYCRC.
maxInflatedBodyBytes       67108864      bytes a compressed body may decompress to (1..1 GiB);
                                         a larger one is a bad record, never allocated whole.
connectTimeoutMs           5000          TCP connect timeout, HA and remoting (RemotingUtil.connect).
readTimeoutMs              20000         no byte from the broker for this long means a dead
                                         connection (haHousekeepingInterval); also the remoting
                                         request timeout.
fetchRetries               3             heartbeat stalls in a row (a live broker sending no data
                                         although it holds the bytes) before a task fails;
                                         connection failures are governed by maxOutageMs.
reconnectBackoffMs         50            first wait (ms) before reconnecting to a broker that is
                                         down; doubles per failed attempt (Kafka's
                                         reconnect.backoff.ms), with +-20% jitter.
reconnectBackoffMaxMs      1000          largest wait (ms) between reconnect attempts (Kafka's
                                         reconnect.backoff.max.ms).
maxOutageMs                300000        how long a task (HA fetch) and the driver (remoting)
                                         wait for a broker that is down before the query fails.
haSendHeartbeatInterval    5000          ms between keep-alive reports on an HA connection (must be
                                         below the master's haHousekeepingInterval, 20000).
arrowMaxRecordsPerBatch    10000         rows per pyarrow.RecordBatch a task yields.
arrowMaxBytesPerBatch      8388608       stored CommitLog bytes per RecordBatch (soft: one record);
                                         also the cap on inflated body bytes per RecordBatch.
fetchPrefetchChunks        4             received chunks (<= 1 MiB each) a task's receive thread
                                         holds ahead of decoding; 0 receives on the task's thread.
batchTransform             (none)        ``package.module:function`` the tasks apply to every
                                         decoded batch before Spark sees it
                                         (:mod:`connector.transform`); ``.schema(...)`` gives
                                         the function's output columns.
accessKey / secretKey      (none)        an ACL account of a broker with ``aclEnable=true``: every
                                         remoting request is signed as RocketMQ 4.9.8's
                                         AclClientRPCHook signs it (both or neither; the secret is
                                         never logged). The HA port has no authentication.
=========================  ============  ==========================================================

Errors: :class:`HAReplicaOptionError` (a ``ValueError``) naming the option and the bad value.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from connector.decode.bodies import BAD_RECORD_MODES, MAX_MAX_INFLATED_BODY_BYTES, MODE_PERMISSIVE
from connector.protocol.acl import AclCredentials, credentials
from connector.protocol.address import AddressError, join_host_port, split_host_port
from connector.protocol.broker import listen_port_of_ha
from connector.protocol.commitlog import DEFAULT_MAX_INFLATED_BODY_BYTES
from connector.protocol.errors import HAReplicaError
from connector.protocol.ha import HA_CONNECT_TIMEOUT_MS, HA_HOUSEKEEPING_INTERVAL_MS, HA_SEND_HEARTBEAT_INTERVAL_MS
from connector.protocol.topics import TOPIC_MAX_LENGTH, VALID_TOPIC
from connector.topic_filter import TopicFilter

log = logging.getLogger(__name__)

STARTING_OFFSETS_EARLIEST = "earliest"
STARTING_OFFSETS_LATEST = "latest"
EARLIEST_OFFSET_SENTINEL = -2  # Kafka's convention in startingOffsets JSON
LATEST_OFFSET_SENTINEL = -1

DEFAULT_CONNECT_TIMEOUT_MS = HA_CONNECT_TIMEOUT_MS  # RemotingUtil.connect
DEFAULT_READ_TIMEOUT_MS = HA_HOUSEKEEPING_INTERVAL_MS
DEFAULT_FETCH_RETRIES = 3
DEFAULT_RECONNECT_BACKOFF_MS = 50  # Kafka's reconnect.backoff.ms
DEFAULT_RECONNECT_BACKOFF_MAX_MS = 1000  # Kafka's reconnect.backoff.max.ms
DEFAULT_MAX_OUTAGE_MS = 5 * 60 * 1000  # a broker restart of a minute is waited out with room to spare
DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS = HA_SEND_HEARTBEAT_INTERVAL_MS
DEFAULT_ARROW_MAX_RECORDS_PER_BATCH = 10000  # spark.sql.execution.arrow.maxRecordsPerBatch
DEFAULT_ARROW_MAX_BYTES_PER_BATCH = 8 * 1024 * 1024
DEFAULT_FETCH_PREFETCH_CHUNKS = 4  # received chunks waiting for the decoder (connector.ha_fetch.prefetch_chunks)

_BROKER_NAME = re.compile(r"^[A-Za-z0-9_.%-]+$")
#: earlier option names accepted as they are (no warning): alias -> option
OPTION_ALIASES = {"topics": "subscribe", "topicPattern": "subscribePattern", "minReplicas": "minInSyncSlaves"}
_KNOWN = {name.lower(): name for name in (
    "brokers", "slaves", "readFrom", "minInSyncSlaves", "startingOffsets", "maxBytesPerTrigger", "failOnDataLoss",
    "minPartitions", "maxBytesPerPartition",
    "subscribe", "subscribePattern", "includeSystemTopics", "decompressBody", "mode", "verifyBodyCRC",
    "maxInflatedBodyBytes", "connectTimeoutMs", "readTimeoutMs",
    "fetchRetries", "haSendHeartbeatInterval", "arrowMaxRecordsPerBatch", "arrowMaxBytesPerBatch",
    "fetchPrefetchChunks", "reconnectBackoffMs", "reconnectBackoffMaxMs", "maxOutageMs", "accessKey", "secretKey",
    "batchTransform", *OPTION_ALIASES)}
READ_FROM_MASTER = "master"
READ_FROM_SLAVE = "slave"


class HAReplicaOptionError(HAReplicaError, ValueError):
    """A missing, unknown or malformed option of ``format("hareplica")``; the message names it."""

    def __init__(self, option: str, value: object, problem: str):
        shown = "(missing)" if value is None else repr(value)
        super().__init__(f"option {option}={shown}: {problem}")
        self.option = option
        self.value = value


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One broker set to read: its brokerName, HA address (host, haListenPort) and remoting address."""

    name: str
    ha_host: str
    ha_port: int
    remoting_host: str
    remoting_port: int

    @property
    def ha_addr(self) -> str:
        """``host:port`` of the HA port (IPv6 in brackets)."""
        return join_host_port(self.ha_host, self.ha_port)

    @property
    def remoting_addr(self) -> str:
        """``host:port`` of the remoting port (IPv6 in brackets)."""
        return join_host_port(self.remoting_host, self.remoting_port)


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """What an executor needs to fetch and decode one range (carried inside every InputPartition).

    Times in milliseconds, sizes in bytes.
    """

    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS
    fetch_retries: int = DEFAULT_FETCH_RETRIES
    heartbeat_interval_ms: int = DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS
    fail_on_data_loss: bool = True
    decompress_body: bool = True
    mode: str = MODE_PERMISSIVE  # bad-record policy: PERMISSIVE or FAILFAST
    verify_body_crc: bool = True
    max_inflated_body_bytes: int = DEFAULT_MAX_INFLATED_BODY_BYTES
    max_records_per_batch: int = DEFAULT_ARROW_MAX_RECORDS_PER_BATCH
    max_bytes_per_batch: int = DEFAULT_ARROW_MAX_BYTES_PER_BATCH
    topic_filter: TopicFilter = field(default_factory=TopicFilter)
    prefetch_chunks: int = DEFAULT_FETCH_PREFETCH_CHUNKS
    reconnect_backoff_ms: int = DEFAULT_RECONNECT_BACKOFF_MS
    reconnect_backoff_max_ms: int = DEFAULT_RECONNECT_BACKOFF_MAX_MS
    max_outage_ms: int = DEFAULT_MAX_OUTAGE_MS
    # accessKey/secretKey: remoting requests are signed (RocketMQ 4.9.8 plain ACL); repr hides the secret
    credentials: AclCredentials | None = None


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The validated options of one ``format("hareplica")`` source.

    ``starting_offsets`` is ``"earliest"``, ``"latest"`` or a mapping broker name → CommitLog offset
    (bytes; -2 earliest, -1 latest). ``max_bytes_per_trigger`` is None when unset. ``slaves`` holds
    one endpoint per configured slave (``name`` = its broker set); ``read_from`` is ``"master"`` or
    ``"slave"``; ``min_in_sync_slaves`` (``minInSyncSlaves``) is 0 when replicated-only reads are off.
    """

    brokers: tuple[BrokerEndpoint, ...]
    starting_offsets: str | Mapping[str, int] = STARTING_OFFSETS_EARLIEST
    max_bytes_per_trigger: int | None = None
    fetch: FetchSettings = field(default_factory=FetchSettings)
    slaves: tuple[BrokerEndpoint, ...] = ()
    read_from: str = READ_FROM_MASTER
    min_in_sync_slaves: int = 0
    min_partitions: int | None = None
    max_bytes_per_partition: int | None = None
    #: ``batchTransform``: ``package.module:function`` the tasks apply to each batch (connector.transform)
    batch_transform: str | None = None

    def slaves_of(self, name: str) -> tuple[BrokerEndpoint, ...]:
        """The configured slaves of broker set ``name``, in option order."""
        return tuple(s for s in self.slaves if s.name == name)

    @property
    def fail_on_data_loss(self) -> bool:
        """``failOnDataLoss``: fail (True) or log and skip (False) when needed bytes are gone."""
        return self.fetch.fail_on_data_loss

    @property
    def broker_names(self) -> list[str]:
        """The configured brokerNames, in option order."""
        return [b.name for b in self.brokers]

    def broker(self, name: str) -> BrokerEndpoint:
        """The endpoint of broker ``name``; KeyError when it is not configured."""
        for b in self.brokers:
            if b.name == name:
                return b
        raise KeyError(name)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceOptions:
        """Parse Spark's option map (keys in any case, values strings).

        Raises HAReplicaOptionError naming the option for a missing ``brokers``, an unknown or
        reserved option, or any malformed value.
        """
        opts = {str(k).lower(): v for k, v in options.items()}
        for key, value in opts.items():
            if key not in _KNOWN:
                raise HAReplicaOptionError(key, value, f"unknown option; known options: {', '.join(_KNOWN.values())}")
        for name in OPTION_ALIASES.values():
            _spelling(opts, name)
        brokers = parse_brokers(opts.get("brokers"))
        names = [b.name for b in brokers]
        slaves = parse_slaves(opts.get("slaves"), names)
        read_from = _choice(opts, "readFrom", (READ_FROM_MASTER, READ_FROM_SLAVE), READ_FROM_MASTER)
        slaves_option = _spelling(opts, "minInSyncSlaves")
        min_in_sync_slaves = _int(opts, slaves_option, 0, minimum=0)
        for name in names:
            count = sum(1 for s in slaves if s.name == name)
            if read_from == READ_FROM_SLAVE and count == 0:
                raise HAReplicaOptionError("readFrom", opts.get("readfrom"), f"needs at least one slave of broker "
                                           f"{name} in the slaves option")
            if count < min_in_sync_slaves:
                raise HAReplicaOptionError(slaves_option, opts.get(slaves_option.lower()), f"needs at least "
                                           f"{min_in_sync_slaves} slave(s) of broker {name} in the slaves option, "
                                           f"found {count}")
        fetch = FetchSettings(
            connect_timeout_ms=_positive_int(opts, "connectTimeoutMs", DEFAULT_CONNECT_TIMEOUT_MS),
            read_timeout_ms=_positive_int(opts, "readTimeoutMs", DEFAULT_READ_TIMEOUT_MS),
            fetch_retries=_int(opts, "fetchRetries", DEFAULT_FETCH_RETRIES, minimum=0),
            heartbeat_interval_ms=_positive_int(opts, "haSendHeartbeatInterval", DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            decompress_body=_bool(opts, "decompressBody", True),
            mode=_choice(opts, "mode", tuple(m.lower() for m in BAD_RECORD_MODES), MODE_PERMISSIVE.lower()).upper(),
            verify_body_crc=_bool(opts, "verifyBodyCRC", True),
            max_inflated_body_bytes=_int(opts, "maxInflatedBodyBytes", DEFAULT_MAX_INFLATED_BODY_BYTES, minimum=1,
                                         maximum=MAX_MAX_INFLATED_BODY_BYTES),
            max_records_per_batch=_positive_int(opts, "arrowMaxRecordsPerBatch", DEFAULT_ARROW_MAX_RECORDS_PER_BATCH),
            max_bytes_per_batch=_positive_int(opts, "arrowMaxBytesPerBatch", DEFAULT_ARROW_MAX_BYTES_PER_BATCH),
            topic_filter=parse_topic_filter(opts),
            prefetch_chunks=_int(opts, "fetchPrefetchChunks", DEFAULT_FETCH_PREFETCH_CHUNKS, minimum=0),
            reconnect_backoff_ms=_positive_int(opts, "reconnectBackoffMs", DEFAULT_RECONNECT_BACKOFF_MS),
            reconnect_backoff_max_ms=_positive_int(opts, "reconnectBackoffMaxMs", DEFAULT_RECONNECT_BACKOFF_MAX_MS),
            max_outage_ms=_int(opts, "maxOutageMs", DEFAULT_MAX_OUTAGE_MS, minimum=0),
            credentials=_credentials(opts),
        )
        if fetch.reconnect_backoff_max_ms < fetch.reconnect_backoff_ms:
            raise HAReplicaOptionError(
                "reconnectBackoffMaxMs", opts.get("reconnectbackoffmaxms"),
                f"must be >= reconnectBackoffMs ({fetch.reconnect_backoff_ms})")
        if fetch.heartbeat_interval_ms >= HA_HOUSEKEEPING_INTERVAL_MS:
            raise HAReplicaOptionError(
                "haSendHeartbeatInterval", opts.get("hasendheartbeatinterval"),
                f"must be below the master's haHousekeepingInterval ({HA_HOUSEKEEPING_INTERVAL_MS} ms) "
                "or the master closes the connection")
        max_bytes = None
        if opts.get("maxbytespertrigger") is not None:
            max_bytes = _positive_int(opts, "maxBytesPerTrigger", 0)
        min_partitions = _positive_int(opts, "minPartitions", 0) if opts.get("minpartitions") is not None else None
        max_part = None
        if opts.get("maxbytesperpartition") is not None:
            max_part = _positive_int(opts, "maxBytesPerPartition", 0)
        transform = opts.get("batchtransform")
        if transform is not None:
            import_function("batchTransform", transform)  # fails here, on the driver, not in every task
        return cls(brokers=brokers, starting_offsets=parse_starting_offsets(opts.get("startingoffsets"), names),
                   max_bytes_per_trigger=max_bytes, fetch=fetch, slaves=slaves, read_from=read_from,
                   min_in_sync_slaves=min_in_sync_slaves, min_partitions=min_partitions,
                   max_bytes_per_partition=max_part, batch_transform=transform)


def import_function(option: str, spec: str) -> Callable:
    """The function ``spec`` (``package.module:function``) names, for option ``option``.

    Raises connector.options.HAReplicaOptionError naming the option when ``spec`` is malformed, its module
    does not import or the attribute is missing or not callable.
    """
    module_name, _, attr = spec.partition(":")
    try:
        if not module_name or not attr:
            raise ValueError("expected package.module:function")
        function = getattr(importlib.import_module(module_name), attr)
        if not callable(function):
            raise ValueError(f"{attr} is not a function")
    except (ImportError, AttributeError, ValueError) as e:
        raise HAReplicaOptionError(option, spec, str(e)) from None
    return function


def parse_topic_filter(opts: Mapping[str, str]) -> TopicFilter:
    """``subscribe`` / ``subscribePattern`` (or their aliases ``topics`` / ``topicPattern``) /
    ``includeSystemTopics`` (lower-cased keys) → TopicFilter.

    Topic names must be valid RocketMQ topics (``^[%|a-zA-Z0-9_-]+$``, at most 127 characters,
    TopicValidator). Raises HAReplicaOptionError for an empty list, a bad name, a pattern that does
    not compile, or both options at once.
    """
    include = _bool(opts, "includeSystemTopics", False)
    topics_option, pattern_option = _spelling(opts, "subscribe"), _spelling(opts, "subscribePattern")
    raw_topics = opts.get(topics_option.lower())
    raw_pattern = opts.get(pattern_option.lower())
    if raw_topics is not None and raw_pattern is not None:
        raise HAReplicaOptionError(topics_option, raw_topics, f"give {topics_option} or {pattern_option}, not both")
    if raw_topics is not None:
        names = [t.strip() for t in str(raw_topics).split(",") if t.strip()]
        if not names:
            raise HAReplicaOptionError(topics_option, raw_topics,
                                       "names no topic; give one or more names joined by commas")
        for name in names:
            if not VALID_TOPIC.match(name) or len(name) > TOPIC_MAX_LENGTH:
                raise HAReplicaOptionError(topics_option, raw_topics, f"{name!r} is not a RocketMQ topic name "
                                           f"(^[%|a-zA-Z0-9_-]+$, at most {TOPIC_MAX_LENGTH} characters)")
        return TopicFilter(topics=frozenset(names), include_system_topics=include)
    if raw_pattern is not None:
        pattern = str(raw_pattern)
        if not pattern.strip():
            raise HAReplicaOptionError(pattern_option, raw_pattern, "is empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise HAReplicaOptionError(pattern_option, raw_pattern, f"is not a valid regular expression: {exc}"
                                       ) from None
        return TopicFilter(pattern=pattern, include_system_topics=include)
    return TopicFilter(include_system_topics=include)


def _spelling(opts: Mapping[str, str], name: str) -> str:
    """How option ``name`` was given: ``name`` itself, or its alias (:data:`OPTION_ALIASES`) when only that is
    in ``opts`` (lower-cased keys). Raises HAReplicaOptionError naming both when both are given."""
    for alias, option in OPTION_ALIASES.items():
        if option == name and alias.lower() in opts:
            if name.lower() in opts:
                raise HAReplicaOptionError(name, opts[name.lower()], f"give {name} or its alias {alias}, not both")
            return alias
    return name


def parse_slaves(value: str | None, broker_names: list[str]) -> tuple[BrokerEndpoint, ...]:
    """Parse ``slaves``: ``name=host:haPort[/host:remotingPort]`` entries (a name may repeat).

    Raises HAReplicaOptionError (option slaves) for malformed entries, names not in ``brokers``, or
    the same address twice.
    """
    if value is None:
        return ()
    out = parse_endpoints(value, "slaves", unique_names=False)
    for slave in out:
        if slave.name not in broker_names:
            raise HAReplicaOptionError("slaves", value, f"names broker {slave.name!r} which is not in brokers "
                                       f"({', '.join(broker_names)})")
    addrs = [s.ha_addr for s in out]
    for addr in addrs:
        if addrs.count(addr) > 1:
            raise HAReplicaOptionError("slaves", value, f"HA address {addr} appears twice")
    return out


def parse_brokers(value: str | None) -> tuple[BrokerEndpoint, ...]:
    """Parse ``name=host:haPort[/host:remotingPort][,...]``. Raises HAReplicaOptionError (option brokers)."""
    if value is None or not str(value).strip():
        raise HAReplicaOptionError("brokers", value, "is required, e.g. brokers=broker-a=10.0.0.1:10912")
    return parse_endpoints(value, "brokers", unique_names=True)


def parse_endpoints(value: str, option: str, *, unique_names: bool) -> tuple[BrokerEndpoint, ...]:
    """Parse ``name=host:haPort[/host:remotingPort][,...]`` for ``option`` (brokers or slaves)."""
    out: list[BrokerEndpoint] = []
    for item in str(value).split(","):
        item = item.strip()
        name, sep, addrs = item.partition("=")
        name = name.strip()
        if not sep or not name or not addrs.strip():
            raise HAReplicaOptionError(option, value, f"entry {item!r} is not name=host:haPort")
        if not _BROKER_NAME.match(name):
            raise HAReplicaOptionError(option, value, f"broker name {name!r} has characters other than "
                                       "letters, digits and _.%:-")
        ha_text, slash, remoting_text = addrs.strip().partition("/")
        ha_host, ha_port = _split_host_port(ha_text, value, f"HA address of {name}", option)
        if slash:
            rem_host, rem_port = _split_host_port(remoting_text, value, f"remoting address of {name}", option)
        else:
            if ha_port < 2:
                raise HAReplicaOptionError(option, value, f"HA port {ha_port} of {name} leaves no remoting port "
                                           "(haPort - 1); give it as name=host:haPort/host:remotingPort")
            rem_host, rem_port = ha_host, listen_port_of_ha(ha_port)
        if unique_names and any(b.name == name for b in out):
            raise HAReplicaOptionError(option, value, f"broker name {name!r} appears twice")
        out.append(BrokerEndpoint(name, ha_host, ha_port, rem_host, rem_port))
    return tuple(out)


def parse_starting_offsets(value: str | None, broker_names: list[str]) -> str | dict[str, int]:
    """Parse startingOffsets: earliest | latest | JSON object broker → offset (>= 0, or -2 / -1).

    Raises HAReplicaOptionError (option startingOffsets) for anything else, for a JSON object that
    misses a configured broker or names one that is not configured.
    """
    if value is None:
        return STARTING_OFFSETS_EARLIEST
    text = str(value).strip()
    if text.lower() in (STARTING_OFFSETS_EARLIEST, STARTING_OFFSETS_LATEST):
        return text.lower()
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise HAReplicaOptionError("startingOffsets", value,
                                   'must be earliest, latest or a JSON object like {"broker-a": 12345}')
    offsets: dict[str, int] = {}
    for name, off in obj.items():
        if name not in broker_names:
            raise HAReplicaOptionError("startingOffsets", value, f"names broker {name!r} which is not in brokers "
                                       f"({', '.join(broker_names)})")
        if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST_OFFSET_SENTINEL:
            raise HAReplicaOptionError("startingOffsets", value, f"offset of {name!r} must be an integer CommitLog "
                                       "offset >= 0, or -2 (earliest) / -1 (latest)")
        offsets[name] = off
    missing = [n for n in broker_names if n not in offsets]
    if missing:
        raise HAReplicaOptionError("startingOffsets", value, f"has no offset for broker(s) {', '.join(missing)}")
    return offsets


def _split_host_port(text: str, whole: str, what: str, option: str = "brokers") -> tuple[str, int]:
    """:func:`connector.protocol.address.split_host_port`, its error as HAReplicaOptionError of ``option``."""
    try:
        return split_host_port(text, what)
    except AddressError as exc:
        raise HAReplicaOptionError(option, whole, str(exc)) from None


def _int(opts: Mapping[str, str], name: str, default: int, *, minimum: int, maximum: int | None = None) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip()
    try:
        value = int(text)
    except ValueError:
        raise HAReplicaOptionError(name, raw, "must be an integer") from None
    if value < minimum:
        raise HAReplicaOptionError(name, raw, f"must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise HAReplicaOptionError(name, raw, f"must be <= {maximum}")
    return value


def _credentials(opts: Mapping[str, str]) -> AclCredentials | None:
    """``accessKey``/``secretKey``: both or neither (docs/security.md); errors never show the secret."""
    try:
        return credentials(opts.get("accesskey"), opts.get("secretkey"))
    except ValueError:
        missing = "secretKey" if opts.get("accesskey") else "accessKey"
        raise HAReplicaOptionError(missing, None, "accessKey and secretKey must be given together") from None


def _positive_int(opts: Mapping[str, str], name: str, default: int) -> int:
    return _int(opts, name, default, minimum=1)


def _choice(opts: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in choices:
        raise HAReplicaOptionError(name, raw, f"must be one of {', '.join(choices)}")
    return text


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise HAReplicaOptionError(name, raw, "must be true or false")
