"""Every option of ``format("hareplica")``: parsing, defaults and validation in one place.

Option names are case-insensitive (Spark hands them over lower-cased). Names follow Spark's Kafka
source where the meaning is the same (``subscribe``, ``subscribePattern``, ``startingOffsets``,
``failOnDataLoss``, ``maxBytesPerTrigger``) and RocketMQ's property names where the value is a RocketMQ
setting (``haSendHeartbeatInterval``). ``minInSyncSlaves`` is also the broker stub's ``broker.conf`` key
for the same idea: how many slaves must hold the bytes.

**Aliases** (:data:`OPTION_ALIASES`): none today; a name given with its alias would be an error naming both.

**Options, defaults and meanings** are listed in docs/source.md "Options" (and, shorter, in README's
source section). The defaults are gathered in :data:`OPTION_DEFAULTS`: the parser reads no other, and
tests/unit/test_option_docs.py checks both tables against it. Where a lower module uses a default itself, it
defines it and this table takes it from there (the fetch defaults from :mod:`connector.client.ha`, the Arrow
batch bounds from :mod:`connector.decode.stream`, ``maxInflatedBodyBytes`` from :mod:`connector.protocol.commitlog`).

Errors: :class:`HAReplicaOptionError` (a ``ValueError``) naming the option and the bad value.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from connector.client.ha import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    DEFAULT_FETCH_PREFETCH_CHUNKS,
    DEFAULT_FETCH_RETRIES,
    DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS,
    DEFAULT_MAX_OUTAGE_MS,
    DEFAULT_READ_TIMEOUT_MS,
    DEFAULT_RECONNECT_BACKOFF_MAX_MS,
    DEFAULT_RECONNECT_BACKOFF_MS,
)
from connector.decode.bodies import BAD_RECORD_MODES, MAX_MAX_INFLATED_BODY_BYTES, MODE_PERMISSIVE
from connector.decode.stream import DEFAULT_ARROW_MAX_BYTES_PER_BATCH, DEFAULT_ARROW_MAX_RECORDS_PER_BATCH
from connector.decode.topic_filter import TopicFilter
from connector.errors import AddressError, HAReplicaOptionError
from connector.protocol.acl import AclCredentials, credentials
from connector.protocol.address import join_host_port, split_host_port
from connector.protocol.broker import listen_port_of_ha
from connector.protocol.commitlog import DEFAULT_MAX_INFLATED_BODY_BYTES
from connector.protocol.ha import HA_HOUSEKEEPING_INTERVAL_MS
from connector.protocol.topics import TOPIC_MAX_LENGTH, VALID_TOPIC

log = logging.getLogger(__name__)

STARTING_OFFSETS_EARLIEST = "earliest"
STARTING_OFFSETS_LATEST = "latest"
EARLIEST_OFFSET_SENTINEL = -2  # Kafka's convention in startingOffsets JSON
LATEST_OFFSET_SENTINEL = -1

DEFAULT_FAIL_ON_DATA_LOSS = True
DEFAULT_DECOMPRESS_BODY = True
DEFAULT_VERIFY_BODY_CRC = True
DEFAULT_INCLUDE_SYSTEM_TOPICS = False
DEFAULT_MIN_IN_SYNC_SLAVES = 0  # replicated-only reads off
READ_FROM_MASTER = "master"
READ_FROM_SLAVE = "slave"


class _Required:
    """The default of an option that has none: it must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()

#: Every option of the source and its default, the one definition (docs/source.md "Options" documents them).
#: ``REQUIRED``: must be given; ``None``: unset unless given (the tables say "(none)" or "(all)").
OPTION_DEFAULTS: Mapping[str, object] = {
    "brokers": REQUIRED,
    "slaves": None,
    "readFrom": READ_FROM_MASTER,
    "minInSyncSlaves": DEFAULT_MIN_IN_SYNC_SLAVES,
    "startingOffsets": STARTING_OFFSETS_EARLIEST,
    "maxBytesPerTrigger": None,
    "minPartitions": None,
    "maxBytesPerPartition": None,
    "failOnDataLoss": DEFAULT_FAIL_ON_DATA_LOSS,
    "subscribe": None,
    "subscribePattern": None,
    "includeSystemTopics": DEFAULT_INCLUDE_SYSTEM_TOPICS,
    "decompressBody": DEFAULT_DECOMPRESS_BODY,
    "mode": MODE_PERMISSIVE,
    "verifyBodyCRC": DEFAULT_VERIFY_BODY_CRC,
    "maxInflatedBodyBytes": DEFAULT_MAX_INFLATED_BODY_BYTES,
    "connectTimeoutMs": DEFAULT_CONNECT_TIMEOUT_MS,
    "readTimeoutMs": DEFAULT_READ_TIMEOUT_MS,
    "fetchRetries": DEFAULT_FETCH_RETRIES,
    "reconnectBackoffMs": DEFAULT_RECONNECT_BACKOFF_MS,
    "reconnectBackoffMaxMs": DEFAULT_RECONNECT_BACKOFF_MAX_MS,
    "maxOutageMs": DEFAULT_MAX_OUTAGE_MS,
    "haSendHeartbeatInterval": DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS,
    "arrowMaxRecordsPerBatch": DEFAULT_ARROW_MAX_RECORDS_PER_BATCH,
    "arrowMaxBytesPerBatch": DEFAULT_ARROW_MAX_BYTES_PER_BATCH,
    "fetchPrefetchChunks": DEFAULT_FETCH_PREFETCH_CHUNKS,
    "batchTransform": None,
    "accessKey": None,
    "secretKey": None,
}

_BROKER_NAME = re.compile(r"^[A-Za-z0-9_.%-]+$")
#: other names accepted for an option (no warning): alias -> option; none today
OPTION_ALIASES: dict[str, str] = {}
_KNOWN = {name.lower(): name for name in (*OPTION_DEFAULTS, *OPTION_ALIASES)}


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
    fail_on_data_loss: bool = DEFAULT_FAIL_ON_DATA_LOSS
    decompress_body: bool = DEFAULT_DECOMPRESS_BODY
    mode: str = MODE_PERMISSIVE  # bad-record policy: PERMISSIVE or FAILFAST
    verify_body_crc: bool = DEFAULT_VERIFY_BODY_CRC
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
    min_in_sync_slaves: int = DEFAULT_MIN_IN_SYNC_SLAVES
    min_partitions: int | None = None
    max_bytes_per_partition: int | None = None
    #: ``batchTransform``: ``package.module:function`` the tasks apply to each batch (connector.source.task.transform)
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
        read_from = _choice(opts, "readFrom", (READ_FROM_MASTER, READ_FROM_SLAVE))
        slaves_option = _spelling(opts, "minInSyncSlaves")
        min_in_sync_slaves = _int(opts, slaves_option, minimum=0)
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
            connect_timeout_ms=_positive_int(opts, "connectTimeoutMs"),
            read_timeout_ms=_positive_int(opts, "readTimeoutMs"),
            fetch_retries=_int(opts, "fetchRetries", minimum=0),
            heartbeat_interval_ms=_positive_int(opts, "haSendHeartbeatInterval"),
            fail_on_data_loss=_bool(opts, "failOnDataLoss"),
            decompress_body=_bool(opts, "decompressBody"),
            mode=_choice(opts, "mode", BAD_RECORD_MODES).upper(),
            verify_body_crc=_bool(opts, "verifyBodyCRC"),
            max_inflated_body_bytes=_int(opts, "maxInflatedBodyBytes", minimum=1,
                                         maximum=MAX_MAX_INFLATED_BODY_BYTES),
            max_records_per_batch=_positive_int(opts, "arrowMaxRecordsPerBatch"),
            max_bytes_per_batch=_positive_int(opts, "arrowMaxBytesPerBatch"),
            topic_filter=parse_topic_filter(opts),
            prefetch_chunks=_int(opts, "fetchPrefetchChunks", minimum=0),
            reconnect_backoff_ms=_positive_int(opts, "reconnectBackoffMs"),
            reconnect_backoff_max_ms=_positive_int(opts, "reconnectBackoffMaxMs"),
            max_outage_ms=_int(opts, "maxOutageMs", minimum=0),
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
        max_bytes = _positive_int(opts, "maxBytesPerTrigger")
        min_partitions = _positive_int(opts, "minPartitions")
        max_part = _positive_int(opts, "maxBytesPerPartition")
        transform = opts.get("batchtransform", OPTION_DEFAULTS["batchTransform"])
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
    """``subscribe`` / ``subscribePattern`` / ``includeSystemTopics`` (lower-cased keys) → TopicFilter.

    Topic names must be valid RocketMQ topics (``^[%|a-zA-Z0-9_-]+$``, at most 127 characters,
    TopicValidator). Raises HAReplicaOptionError for an empty list, a bad name, a pattern that does
    not compile, or both options at once.
    """
    include = _bool(opts, "includeSystemTopics")
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
        return OPTION_DEFAULTS["startingOffsets"]
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


def _default(name: str):
    """The default of option ``name`` or of the option it is an alias of (:data:`OPTION_DEFAULTS`)."""
    return OPTION_DEFAULTS[OPTION_ALIASES.get(name, name)]


def _int(opts: Mapping[str, str], name: str, *, minimum: int, maximum: int | None = None) -> int | None:
    """Integer option ``name`` (lower-cased keys in ``opts``), its default when absent. Raises HAReplicaOptionError."""
    raw = opts.get(name.lower())
    if raw is None:
        return _default(name)
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


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    return _int(opts, name, minimum=1)


def _choice(opts: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (compared case-insensitively; returned as the choice is written), its default when
    absent."""
    raw = opts.get(name.lower())
    if raw is None:
        return _default(name)
    text = str(raw).strip().lower()
    by_lower = {c.lower(): c for c in choices}
    if text not in by_lower:
        raise HAReplicaOptionError(name, raw, f"must be one of {', '.join(by_lower)}")
    return by_lower[text]


def _bool(opts: Mapping[str, str], name: str) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return _default(name)
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise HAReplicaOptionError(name, raw, "must be true or false")
