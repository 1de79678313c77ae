"""Parsing and validation of ``format("hareplica")``'s options into :class:`SourceOptions`.

Every option is declared once in :data:`connector.options.declaration.OPTIONS` (name, default, bounds, meaning); this
module reads the declaration for every default, bound and option name it writes in an error. Option names are
case-insensitive (Spark hands them over lower-cased). What each option does: docs/options.md and
docs/source.md "Options" (tests/unit/test_option_docs.py checks the table against the declaration).

Errors: :class:`HAReplicaOptionError` (a ``ValueError``) naming the option and the bad value.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from connector.errors import AddressError, HAReplicaOptionError
from connector.options.declaration import (
    EARLIEST_OFFSET_SENTINEL,
    ENDING_OFFSETS_LATEST,
    LATEST_OFFSET_SENTINEL,
    OPTIONS,
    READ_FROM_SLAVE,
    STARTING_OFFSETS_EARLIEST,
    STARTING_OFFSETS_LATEST,
    Option,
)
from connector.options.functions import import_function
from connector.options.settings import DecodeSettings, FetchSettings
from connector.protocol.acl import AclCredentials, credentials
from connector.protocol.address import join_host_port, split_host_port
from connector.protocol.broker import listen_port_of_ha
from connector.protocol.cluster_info import split_namesrv_addr
from connector.protocol.ha import HA_HOUSEKEEPING_INTERVAL_MS
from connector.protocol.topics import TOPIC_MAX_LENGTH, VALID_TOPIC

log = logging.getLogger(__name__)

_BROKER_NAME = re.compile(r"^[A-Za-z0-9_.%-]+$")
_KNOWN = {name.lower(): name for name in OPTIONS}


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
class SourceOptions:
    """The validated options of one ``format("hareplica")`` source.

    ``starting_offsets`` is ``"earliest"``, ``"latest"`` or a mapping broker name → CommitLog offset
    (bytes; -2 earliest, -1 latest). ``max_bytes_per_trigger`` is None when unset. ``slaves`` holds
    one endpoint per configured slave (``name`` = its broker set); ``read_from`` is ``"master"`` or
    ``"slave"``; ``min_in_sync_slaves`` is 0 when replicated-only reads are off. ``fetch`` is what the HA reads
    need, ``decode`` what the decoder needs; defaults are the declaration's
    (:data:`connector.options.declaration.OPTIONS`).
    """

    brokers: tuple[BrokerEndpoint, ...]
    starting_offsets: str | Mapping[str, int] = OPTIONS.starting_offsets.default
    max_bytes_per_trigger: int | None = OPTIONS.max_bytes_per_trigger.default
    #: skip a micro-batch until this many CommitLog bytes are new (None: never skip), at most ``max_trigger_delay``
    min_bytes_per_trigger: int | None = OPTIONS.min_bytes_per_trigger.default
    max_trigger_delay: str = OPTIONS.max_trigger_delay.default
    fetch: FetchSettings = field(default_factory=FetchSettings)
    decode: DecodeSettings = field(default_factory=DecodeSettings)
    slaves: tuple[BrokerEndpoint, ...] = ()
    read_from: str = OPTIONS.read_from.default
    min_in_sync_slaves: int = OPTIONS.min_in_sync_slaves.default
    min_partitions: int | None = OPTIONS.min_partitions.default
    max_bytes_per_partition: int | None = OPTIONS.max_bytes_per_partition.default
    #: ``package.module:function`` the tasks apply to each batch (connector.source.task.transform)
    batch_transform: str | None = OPTIONS.batch_transform.default
    #: the name servers the broker sets are found through (docs/source.md "Discovery"); () with ``brokers``;
    #: with it ``brokers`` and ``slaves`` stay empty and the driver plans the route it discovers
    #: (:class:`connector.source.driver.route.Route`)
    namesrv_addr: tuple[str, ...] = ()
    #: the clusters to read with ``namesrv_addr`` (None: every cluster the name server knows)
    cluster_names: tuple[str, ...] | None = None
    namesrv_poll_interval_ms: int = OPTIONS.namesrv_poll_interval_ms.default
    new_broker_set_offsets: str = OPTIONS.new_broker_set_offsets.default
    #: broker sets whose offsets the query removes from its checkpoint (docs/source.md "Offsets, batches, partitions")
    drop_broker_sets: frozenset[str] = frozenset()

    #: batch reads: ``"latest"`` or broker name -> CommitLog offset (bytes; -1 latest)
    ending_offsets: str | Mapping[str, int] = OPTIONS.ending_offsets.default
    #: times in ms since the epoch (docs/source.md "Starting at a time"); None when not given
    starting_timestamp: int | None = OPTIONS.starting_timestamp.default
    starting_offsets_by_timestamp: Mapping[str, int] | None = OPTIONS.starting_offsets_by_timestamp.default
    starting_offsets_by_timestamp_strategy: str = OPTIONS.starting_offsets_by_timestamp_strategy.default
    ending_timestamp: int | None = OPTIONS.ending_timestamp.default
    ending_offsets_by_timestamp: Mapping[str, int] | None = OPTIONS.ending_offsets_by_timestamp.default

    @property
    def starts_at_times(self) -> bool:
        """True when ``starting_timestamp`` or ``starting_offsets_by_timestamp`` is given."""
        return self.starting_timestamp is not None or self.starting_offsets_by_timestamp is not None

    def starting_times(self, names: Sequence[str]) -> dict[str, int] | None:
        """Per broker set the time (ms) to start at, or None: ``starting_timestamp`` for each of ``names`` (the
        planned sets), else ``starting_offsets_by_timestamp`` (Kafka's precedence; either wins over
        ``starting_offsets``)."""
        if self.starting_timestamp is not None:
            return {name: self.starting_timestamp for name in names}
        return dict(self.starting_offsets_by_timestamp) if self.starting_offsets_by_timestamp is not None else None

    def ending_times(self, names: Sequence[str]) -> dict[str, int] | None:
        """Per broker set the time (ms) a batch read ends before, or None: ``ending_timestamp`` for each of
        ``names`` (the planned sets), else ``ending_offsets_by_timestamp`` (either wins over ``ending_offsets``)."""
        if self.ending_timestamp is not None:
            return {name: self.ending_timestamp for name in names}
        return dict(self.ending_offsets_by_timestamp) if self.ending_offsets_by_timestamp is not None else None

    def slaves_of(self, name: str) -> tuple[BrokerEndpoint, ...]:
        """The configured slaves of broker set ``name``, in option order."""
        return tuple(s for s in self.slaves if s.name == name)

    @property
    def max_trigger_delay_ms(self) -> int:
        """``max_trigger_delay`` in milliseconds (:func:`duration_ms`)."""
        return duration_ms(OPTIONS.max_trigger_delay, self.max_trigger_delay)

    @property
    def fail_on_data_loss(self) -> bool:
        """Fail (True) or log and skip (False) when needed bytes are gone."""
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

        Raises HAReplicaOptionError naming the option for a missing ``brokers``, an unknown option, or any
        malformed value.
        """
        opts = {str(k).lower(): v for k, v in options.items()}
        for key, value in opts.items():
            if key not in _KNOWN:
                raise HAReplicaOptionError(key, value, f"unknown option; known options: {', '.join(_KNOWN.values())}")
        discovery = parse_discovery(opts)
        brokers = () if discovery else parse_brokers(opts.get("brokers"))
        names = [b.name for b in brokers]
        slaves = parse_slaves(opts.get("slaves"), names)
        read_from = value_of(opts, OPTIONS.read_from)
        min_in_sync_slaves = value_of(opts, OPTIONS.min_in_sync_slaves)
        check_slave_counts(brokers, slaves, read_from, min_in_sync_slaves, "in the slaves option")
        fetch = FetchSettings(**values_of(opts, "fetch"), credentials=_credentials(opts))
        if fetch.reconnect_backoff_max_ms < fetch.reconnect_backoff_ms:
            raise _error(opts, OPTIONS.reconnect_backoff_max_ms,
                         f"must be >= {OPTIONS.reconnect_backoff_ms.name} ({fetch.reconnect_backoff_ms})")
        if fetch.heartbeat_interval_ms >= HA_HOUSEKEEPING_INTERVAL_MS:
            raise _error(opts, OPTIONS.heartbeat_interval_ms,
                         f"must be below the master's haHousekeepingInterval ({HA_HOUSEKEEPING_INTERVAL_MS} ms) "
                         "or the master closes the connection")
        decode = parse_decode_settings(opts)
        max_bytes = value_of(opts, OPTIONS.max_bytes_per_trigger)
        trigger_delay = {"min_bytes_per_trigger": value_of(opts, OPTIONS.min_bytes_per_trigger),
                         "max_trigger_delay": value_of(opts, OPTIONS.max_trigger_delay).strip()}
        duration_ms(OPTIONS.max_trigger_delay, trigger_delay["max_trigger_delay"])
        min_partitions = value_of(opts, OPTIONS.min_partitions)
        max_part = value_of(opts, OPTIONS.max_bytes_per_partition)
        transform = value_of(opts, OPTIONS.batch_transform)
        if transform is not None:
            import_function(OPTIONS.batch_transform.name, transform)  # fails here, on the driver, not in every task
        starting = parse_starting_offsets(opts.get(OPTIONS.starting_offsets.name.lower()),
                                          None if discovery else names)
        known = None if discovery else names  # with a name server the broker sets are known only when planning
        ending = parse_ending_offsets(opts.get(OPTIONS.ending_offsets.name.lower()), known)
        times = {attr: parse_times(opts, getattr(OPTIONS, attr), known)
                 for attr in ("starting_offsets_by_timestamp", "ending_offsets_by_timestamp")}
        times.update({attr: value_of(opts, getattr(OPTIONS, attr))
                      for attr in ("starting_timestamp", "ending_timestamp", "starting_offsets_by_timestamp_strategy")})
        dropped = frozenset(comma_names(opts, OPTIONS.drop_broker_sets, "broker set names") or ())
        if dropped & set(names):
            raise _error(opts, OPTIONS.drop_broker_sets, f"names {', '.join(sorted(dropped & set(names)))}, which "
                         f"{OPTIONS.brokers.name} also names: a set is read or dropped, not both")
        return cls(brokers=brokers, starting_offsets=starting, drop_broker_sets=dropped, ending_offsets=ending, **times,
                   max_bytes_per_trigger=max_bytes, **trigger_delay, fetch=fetch, decode=decode, slaves=slaves,
                   read_from=read_from,
                   min_in_sync_slaves=min_in_sync_slaves, min_partitions=min_partitions,
                   max_bytes_per_partition=max_part, batch_transform=transform, **discovery)


#: a duration as Spark and the Kafka source write one (JavaUtils.timeStringAsMs): a bare number is ms
_DURATION = re.compile(r"(\d+)\s*(ms|s|m|min|h|d)?", re.IGNORECASE)
_DURATION_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(option: Option, text: str) -> int:
    """``text`` (``30s``, ``15m``, ``500ms``, ``2h``, ``1d``, a bare number: ms) in milliseconds, for ``option``.

    Raises HAReplicaOptionError naming the option for anything else."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise HAReplicaOptionError(option.name, text, "must be a duration: a whole number with ms, s, m, min, h "
                                   "or d (a bare number: ms), e.g. 30s or 15m")
    return int(match.group(1)) * _DURATION_UNIT_MS[(match.group(2) or "ms").lower()]


def values_of(opts: Mapping[str, str], holder: str) -> dict[str, object]:
    """``{attr: value}`` of every option ``holder`` holds (:attr:`connector.options.declaration.Option.holder`),
    each checked as the declaration says (:func:`value_of`). Raises HAReplicaOptionError."""
    return {option.attr: value_of(opts, option) for option in OPTIONS.held_by(holder)}


def parse_decode_settings(opts: Mapping[str, str]) -> DecodeSettings:
    """The decoder's settings from Spark's option map (lower-cased keys): every ``decode`` option as declared,
    the topic options as :func:`parse_topics` reads them. Raises HAReplicaOptionError."""
    topics, pattern, tags = parse_topics(opts)
    return DecodeSettings(**{**values_of(opts, "decode"), "topics": topics, "topic_pattern": pattern},
                          topic_tags=tags)


#: what marks a subscription expression as SQL92 (RocketMQ's ExpressionType name), before the expression
SQL92_PREFIX = "SQL92:"
#: characters a SQL92 filter needs (comparisons, IN (...), string literals) and no tag list of ours may hold
SQL92_CHARACTERS = frozenset("=<>()'")


def parse_topics(opts: Mapping[str, str]
                 ) -> tuple[frozenset[str] | None, str | None, tuple[tuple[str, frozenset[str]], ...]]:
    """The topic list, the topic pattern and the tag lists of Spark's option map (lower-cased keys).

    Returns ``(topics, pattern, tags)``: ``topics`` / ``pattern`` None when not given; ``tags`` the
    ``(topic, tag set)`` pairs, sorted by topic, of the ``subscribe`` entries ``Topic:expression`` whose
    expression is a tag list (:func:`parse_tag_expression`). A topic named twice keeps the union of its tag
    lists, or every record when one of its entries has no tag list. Topic names must be valid RocketMQ topics
    (``^[%|a-zA-Z0-9_-]+$``, at most 127 characters, TopicValidator). Raises HAReplicaOptionError for an
    empty list, a bad name, a SQL92 or empty-tag expression, a pattern that does not compile, or both options.
    """
    topics_option, pattern_option = OPTIONS.topics, OPTIONS.topic_pattern
    raw_topics = opts.get(topics_option.name.lower())
    raw_pattern = opts.get(pattern_option.name.lower())
    if raw_topics is not None and raw_pattern is not None:
        raise HAReplicaOptionError(topics_option.name, raw_topics,
                                   f"give {topics_option.name} or {pattern_option.name}, not both")
    if raw_topics is not None:
        entries = [t.strip() for t in str(raw_topics).split(",") if t.strip()]
        if not entries:
            raise HAReplicaOptionError(topics_option.name, raw_topics,
                                       "names no topic; give one or more names joined by commas")
        tag_lists: dict[str, frozenset[str] | None] = {}
        for entry in entries:
            name, colon, expression = entry.partition(":")
            name = name.strip()
            if not VALID_TOPIC.match(name) or len(name) > TOPIC_MAX_LENGTH:
                raise HAReplicaOptionError(topics_option.name, raw_topics, f"{name!r} is not a RocketMQ topic name "
                                           f"(^[%|a-zA-Z0-9_-]+$, at most {TOPIC_MAX_LENGTH} characters)")
            tags = parse_tag_expression(raw_topics, name, expression) if colon else None
            if name in tag_lists:
                before = tag_lists[name]
                tags = None if before is None or tags is None else before | tags
            tag_lists[name] = tags
        return (frozenset(tag_lists), None,
                tuple(sorted((name, tags) for name, tags in tag_lists.items() if tags is not None)))
    if raw_pattern is not None:
        pattern = str(raw_pattern)
        if not pattern.strip():
            raise HAReplicaOptionError(pattern_option.name, raw_pattern, "is empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise HAReplicaOptionError(pattern_option.name, raw_pattern,
                                       f"is not a valid regular expression: {exc}") from None
        return None, pattern, ()
    return None, None, ()


def parse_tag_expression(value: str, topic: str, expression: str) -> frozenset[str] | None:
    """The tag set of ``subscribe`` entry ``topic:expression`` (``value``: the whole option, for errors).

    RocketMQ 4.9.8's rule for a TAG expression (FilterAPI.buildSubscriptionData): ``*`` or empty means every
    record (None); else the expression splits at ``||`` and each part, trimmed, that is not empty is a tag.
    Refused with HAReplicaOptionError naming ``subscribe`` and the topic: an expression beginning ``SQL92:``
    (RocketMQ's ExpressionType name; the broker evaluates SQL92 and this source reads no broker filter), one
    holding a character of :data:`SQL92_CHARACTERS`, one whose tag holds a blank inside (``a IS NOT NULL``,
    ``a BETWEEN 1 AND 3``: SQL92 without those characters, which RocketMQ would take as one tag matching nothing;
    RocketMQ 4.9.8 itself allows blanks in a tag, but they cannot be told apart), and one of only ``||`` and
    blanks.
    """
    option = OPTIONS.topics.name
    text = expression.strip()
    if text.upper().startswith(SQL92_PREFIX):
        raise HAReplicaOptionError(option, value, f"topic {topic!r}: SQL92 expressions are not supported (only tag "
                                   "lists, TagA || TagB); filter on the properties column in Spark instead")
    if text in ("", "*"):
        return None
    odd = sorted(SQL92_CHARACTERS.intersection(text))
    if odd:
        raise HAReplicaOptionError(option, value, f"topic {topic!r}: {text!r} holds {' '.join(odd)}, which marks a "
                                   "SQL92 expression; only tag lists (TagA || TagB) are supported: filter on the "
                                   "properties column in Spark instead")
    tags = frozenset(part.strip() for part in text.split("||") if part.strip())
    if any(len(tag.split()) > 1 for tag in tags):
        raise HAReplicaOptionError(option, value, f"topic {topic!r}: {text!r} is not a tag list (TagA || TagB, "
                                   "tags without blanks, or *); SQL92 filters are not supported: filter on the "
                                   "properties column in Spark instead")
    if not tags:
        raise HAReplicaOptionError(option, value, f"topic {topic!r}: {text!r} names no tag; give TagA || TagB, "
                                   "or * for every record")
    return tags


def check_slave_counts(brokers: tuple[BrokerEndpoint, ...], slaves: tuple[BrokerEndpoint, ...], read_from: str,
                       min_in_sync_slaves: int, where: str) -> None:
    """Every broker set has the slaves ``read_from='slave'`` (one) and ``min_in_sync_slaves`` need; ``where``
    says where the slaves came from (the slaves option, or the name server's route). Raises HAReplicaOptionError
    naming the option and the broker set."""
    for broker in brokers:
        count = sum(1 for s in slaves if s.name == broker.name)
        if read_from == READ_FROM_SLAVE and count == 0:
            raise HAReplicaOptionError(OPTIONS.read_from.name, read_from,
                                       f"needs at least one slave of broker {broker.name} {where}")
        if count < min_in_sync_slaves:
            raise HAReplicaOptionError(OPTIONS.min_in_sync_slaves.name, min_in_sync_slaves,
                                       f"needs at least {min_in_sync_slaves} slave(s) of broker {broker.name} "
                                       f"{where}, found {count}")


def parse_discovery(opts: Mapping[str, str]) -> dict:
    """The name-server options of Spark's option map (lower-cased keys) as SourceOptions fields, {} when
    the name-server option (``namesrv_addr``) is not given (docs/source.md "Discovery").

    Raises HAReplicaOptionError when both or neither of ``brokers`` and ``namesrv_addr`` are given, when
    ``slaves`` comes with ``namesrv_addr`` (the route names the slaves), for an address that is not host:port,
    and for a ``cluster_names`` that names no cluster or a name-server option without ``namesrv_addr``.
    """
    option, brokers = OPTIONS.namesrv_addr, OPTIONS.brokers
    raw = opts.get(option.name.lower())
    raw_brokers = opts.get(brokers.name.lower())
    followers = (OPTIONS.cluster_names, OPTIONS.namesrv_poll_interval_ms, OPTIONS.new_broker_set_offsets)
    if raw is None:
        if raw_brokers is None or not str(raw_brokers).strip():
            raise HAReplicaOptionError(brokers.name, raw_brokers, f"is required unless {option.name} is given, e.g. "
                                       f"{brokers.name}=broker-a=10.0.0.1:10912 or {option.name}=10.0.0.1:9876")
        for follower in followers:
            if opts.get(follower.name.lower()) is not None:
                raise _error(opts, follower, f"needs {option.name} (the broker sets here come from {brokers.name})")
        return {}
    if raw_brokers is not None:
        raise HAReplicaOptionError(option.name, raw, f"give {brokers.name} or {option.name}, not both")
    if opts.get(OPTIONS.slaves.name.lower()) is not None:
        raise _error(opts, OPTIONS.slaves, f"cannot be given with {option.name}: the name server's route names "
                     "each broker set's slaves")
    try:
        addrs = split_namesrv_addr(raw)
    except AddressError as exc:
        raise HAReplicaOptionError(option.name, raw, str(exc)) from None
    clusters = comma_names(opts, OPTIONS.cluster_names, "brokerClusterName values")
    return {"namesrv_addr": addrs, "cluster_names": clusters,
            "namesrv_poll_interval_ms": value_of(opts, OPTIONS.namesrv_poll_interval_ms),
            "new_broker_set_offsets": value_of(opts, OPTIONS.new_broker_set_offsets)}


def comma_names(opts: Mapping[str, str], option: Option, what: str) -> tuple[str, ...] | None:
    """The comma-separated names ``option`` gives (None when absent); raises HAReplicaOptionError naming the
    option when it is given but names nothing (``what``: the kind of name, for the message)."""
    raw = opts.get(option.name.lower())
    if raw is None:
        return None
    names = tuple(n.strip() for n in str(raw).split(",") if n.strip())
    if not names:
        raise _error(opts, option, f"names nothing; give one or more {what} joined by commas")
    return names


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


def parse_starting_offsets(value: str | None, broker_names: list[str] | None) -> str | dict[str, int]:
    """Parse the starting offsets: earliest | latest | JSON object broker → offset (>= 0, or -2 / -1).

    Raises HAReplicaOptionError (option ``OPTIONS.starting_offsets``) for anything else, for a JSON object that
    misses a configured broker or names one that is not configured. ``broker_names`` None (``namesrv_addr``):
    the names are checked against the discovered broker sets when the query starts.
    """
    option = OPTIONS.starting_offsets.name
    if value is None:
        return OPTIONS.starting_offsets.default
    text = str(value).strip()
    if text.lower() in (STARTING_OFFSETS_EARLIEST, STARTING_OFFSETS_LATEST):
        return text.lower()
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise HAReplicaOptionError(option, value,
                                   'must be earliest, latest or a JSON object like {"broker-a": 12345}')
    offsets: dict[str, int] = {}
    for name, off in obj.items():
        if broker_names is not None and name not in broker_names:
            raise HAReplicaOptionError(option, value, f"names broker {name!r} which is not in brokers "
                                       f"({', '.join(broker_names)})")
        if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST_OFFSET_SENTINEL:
            raise HAReplicaOptionError(option, value, f"offset of {name!r} must be an integer CommitLog "
                                       "offset >= 0, or -2 (earliest) / -1 (latest)")
        offsets[name] = off
    missing = [n for n in broker_names or () if n not in offsets]
    if missing:
        raise HAReplicaOptionError(option, value, f"has no offset for broker(s) {', '.join(missing)}")
    return offsets


def parse_ending_offsets(value: str | None, broker_names: list[str] | None) -> str | dict[str, int]:
    """Parse the ending offsets of a batch read: latest | JSON object broker -> offset (>= 0, or -1 latest).

    Raises HAReplicaOptionError (option ``OPTIONS.ending_offsets``) for anything else, for -2 (an end cannot be
    earliest, as in Kafka), or for a JSON object that misses a configured broker or names another.
    """
    option = OPTIONS.ending_offsets
    if value is None:
        return option.default
    text = str(value).strip()
    if text.lower() == ENDING_OFFSETS_LATEST:
        return ENDING_OFFSETS_LATEST
    obj = _json_object(option, value, '{"broker-a": 12345}', broker_names)
    for name, off in obj.items():
        if isinstance(off, bool) or not isinstance(off, int) or off < LATEST_OFFSET_SENTINEL:
            raise HAReplicaOptionError(option.name, value, f"offset of {name!r} must be an integer CommitLog "
                                       "offset >= 0, or -1 (latest)")
    return obj


def parse_times(opts: Mapping[str, str], option: Option, broker_names: list[str] | None) -> dict[str, int] | None:
    """Parse a JSON object broker -> time (ms since the epoch, >= 0) of ``option`` (``starting_offsets_by_timestamp``,
    ``ending_offsets_by_timestamp``); None when not given. Raises HAReplicaOptionError naming the option and broker."""
    value = opts.get(option.name.lower())
    if value is None:
        return None
    obj = _json_object(option, value, '{"broker-a": 1795329712271}', broker_names)
    for name, ms in obj.items():
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise HAReplicaOptionError(option.name, value, f"time of {name!r} must be an integer >= 0 (ms since "
                                       "the epoch)")
    return obj


def _json_object(option: Option, value: str, example: str, broker_names: list[str] | None) -> dict:
    """``value`` as a JSON object naming every configured broker exactly (HAReplicaOptionError otherwise);
    ``broker_names`` None (broker sets found through a name server): any names."""
    try:
        obj = json.loads(str(value))
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise HAReplicaOptionError(option.name, value, f"must be a JSON object like {example}")
    if broker_names is None:
        return obj
    for name in obj:
        if name not in broker_names:
            raise HAReplicaOptionError(option.name, value, f"names broker {name!r} which is not in brokers "
                                       f"({', '.join(broker_names)})")
    missing = [n for n in broker_names if n not in obj]
    if missing:
        raise HAReplicaOptionError(option.name, value, f"has no entry for broker(s) {', '.join(missing)}")
    return obj


def _split_host_port(text: str, whole: str, what: str, option: str = "brokers") -> tuple[str, int]:
    """:func:`connector.protocol.address.split_host_port`, its error as HAReplicaOptionError of ``option``."""
    try:
        return split_host_port(text, what)
    except AddressError as exc:
        raise HAReplicaOptionError(option, whole, str(exc)) from None


def _error(opts: Mapping[str, str], option: Option, reason: str) -> HAReplicaOptionError:
    """The HAReplicaOptionError of ``option`` as given in ``opts`` (lower-cased keys)."""
    return HAReplicaOptionError(option.name, opts.get(option.name.lower()), reason)


def value_of(opts: Mapping[str, str], option: Option):
    """The value of ``option`` in Spark's option map ``opts`` (lower-cased keys), its declared default when absent.

    Checked as the declaration says: an ``int`` within ``minimum`` / ``maximum``, a ``bool`` written true or
    false (any case), a ``choice`` among ``choices`` (any case; returned as the declaration writes it), a ``str``
    as given. Raises HAReplicaOptionError naming the option and the value.
    """
    raw = opts.get(option.name.lower())
    if raw is None:
        return option.default
    if option.kind == "str":
        return raw
    text = str(raw).strip()
    if option.kind == "bool":
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise HAReplicaOptionError(option.name, raw, "must be true or false")
    if option.kind == "choice":
        by_lower = {c.lower(): c for c in option.choices}
        if text.lower() not in by_lower:
            raise HAReplicaOptionError(option.name, raw, f"must be one of {', '.join(by_lower)}")
        return by_lower[text.lower()]
    try:
        value = int(text)
    except ValueError:
        raise HAReplicaOptionError(option.name, raw, "must be an integer") from None
    if option.minimum is not None and value < option.minimum:
        raise HAReplicaOptionError(option.name, raw, f"must be >= {option.minimum}")
    if option.maximum is not None and value > option.maximum:
        raise HAReplicaOptionError(option.name, raw, f"must be <= {option.maximum}")
    return value


def _credentials(opts: Mapping[str, str]) -> AclCredentials | None:
    """The ACL account of the access-key / secret-key options: both or neither (docs/security.md); errors never
    show the secret."""
    access, secret = OPTIONS.access_key.name, OPTIONS.secret_key.name
    try:
        return credentials(opts.get(access.lower()), opts.get(secret.lower()))
    except ValueError:
        missing = secret if opts.get(access.lower()) else access
        raise HAReplicaOptionError(missing, None, f"{access} and {secret} must be given together") from None
