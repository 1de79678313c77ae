"""Every option of ``format("hareplica")`` declared once (:data:`OPTIONS`), and those of
``format("hareplica-landing")`` (:data:`LANDING_OPTIONS`) and ``format("deltalake")`` (:data:`SINK_OPTIONS`).

:data:`OPTIONS` holds one :class:`Option` record per option: its name, the settings attribute it fills, its
type, default, bounds or choices, the Kafka/RocketMQ/Spark name it mirrors (or none) and its one-line meaning.
The parser and validation (:mod:`connector.options.parse`), the error messages naming an option
(``OPTIONS.x.name``), ``FetchSettings`` (what an HA read needs) and ``DecodeSettings`` (what the decoder needs,
both :mod:`connector.options.settings`) all take them from here; docs/options.md's table is checked against it
(``tests/unit/test_option_docs.py``) and ``tests/unit/test_options_declared_once.py`` checks that no other product
module of ``connector/`` writes an option's name. What each option does in context: docs/options.md and docs/source.md.

A few RocketMQ names are spelled like an option without being one: ``haSendHeartbeatInterval`` is also the
broker's ``MessageStoreConfig`` key (:mod:`connector.protocol.ha`) and ``accessKey`` / ``secretKey`` are also
the ACL header fields (:mod:`connector.protocol.acl`); those modules write RocketMQ's name, not the option's.

This module imports only the standard library and :mod:`connector.protocol` constants, so every layer may read
the declaration without pulling in sockets, the HA client, pyarrow or the decoder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from connector.protocol.commitlog.layout import DEFAULT_MAX_INFLATED_BODY_BYTES
from connector.protocol.ha import HA_CONNECT_TIMEOUT_MS, HA_HOUSEKEEPING_INTERVAL_MS, HA_SEND_HEARTBEAT_INTERVAL_MS

STARTING_OFFSETS_EARLIEST = "earliest"
STARTING_OFFSETS_LATEST = "latest"
EARLIEST_OFFSET_SENTINEL = -2  # Kafka's convention in startingOffsets JSON
LATEST_OFFSET_SENTINEL = -1
DEFAULT_MAX_TRIGGER_DELAY = "15m"  # Kafka source maxTriggerDelay's default
ENDING_OFFSETS_LATEST = "latest"
TIMESTAMP_STRATEGY_ERROR = "error"  # startingOffsetsByTimestampStrategy, Kafka's values
TIMESTAMP_STRATEGY_LATEST = "latest"
READ_FROM_MASTER = "master"
READ_FROM_SLAVE = "slave"
MODE_PERMISSIVE = "PERMISSIVE"  # the bad-record modes, Spark's file-source ``mode`` values
MODE_FAILFAST = "FAILFAST"
BAD_RECORD_MODES = (MODE_PERMISSIVE, MODE_FAILFAST)
#: the largest bound of an inflated body: keeps a group plus one body below int32 Arrow offsets
MAX_MAX_INFLATED_BODY_BYTES = 1024 * 1024 * 1024


#: where an option's parsed value goes (:attr:`Option.holder`)
HOLDERS = ("source", "fetch", "decode", "acl", "landing", "sink")


class _Required:
    """The default of an option that has none: it must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True, slots=True)
class Option:
    """One option of ``format("hareplica")``.

    ``name``: the option as users write it (case-insensitive); ``attr``: the settings attribute it fills
    (snake_case, on :class:`FetchSettings`, :class:`DecodeSettings` or ``SourceOptions``); ``kind``: ``"int"``,
    ``"bool"``, ``"choice"`` or ``"str"``; ``default``: the value when absent (:data:`REQUIRED`: must be given;
    None: unset); ``minimum`` / ``maximum``: bounds of an ``int`` (inclusive, None: unbounded); ``choices``: the
    values of a ``choice`` (compared case-insensitively); ``mirrors``: the Kafka, Spark or RocketMQ setting it
    follows (None: our own); ``meaning``: one line; ``holder``: where the parsed value goes, one of
    :data:`HOLDERS` (``fetch``: a field of ``FetchSettings``, ``decode``: of ``DecodeSettings``, both built from
    these records; ``source``: of ``SourceOptions``; ``acl``: the two options of ``FetchSettings.credentials``);
    ``app_flag``: ``hareplica run`` has a flag for it (:attr:`flag`; its type, default and help come from here);
    ``landing``: an option of ``format("hareplica-landing")`` that becomes a Delta sink option
    (:attr:`sink_option`, :data:`LANDING_OPTIONS`); ``sink``: an option of ``format("deltalake")``
    (:data:`SINK_OPTIONS`).
    """

    name: str
    attr: str
    kind: str
    default: object
    meaning: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    mirrors: str | None = None
    holder: str = "source"
    app_flag: bool = False

    @property
    def sink_option(self) -> str:
        """The ``format("deltalake")`` option a ``landing`` option becomes: its name without the ``landing``
        prefix (``landingPath`` -> ``path``, ``landingSplitConfig`` -> ``splitConfig``)."""
        rest = self.name.removeprefix("landing")
        return rest[:1].lower() + rest[1:]

    @property
    def flag(self) -> str:
        """The flag of ``hareplica run`` that passes this option when :attr:`app_flag` is set: the name in
        kebab-case (``maxBytesPerTrigger`` -> ``--max-bytes-per-trigger``), ``--no-...`` for a boolean whose
        default is true (the flag turns it off)."""
        kebab = re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", self.name).lower()
        return f"--no-{kebab}" if self.kind == "bool" and self.default is True else f"--{kebab}"


class OptionTable(Mapping[str, Option]):
    """The declared options by name, in declaration order; ``OPTIONS.<attr>`` is the option of that attribute
    (``OPTIONS.max_outage_ms.name == "maxOutageMs"``). AttributeError for an attribute no option fills."""

    def __init__(self, options: tuple[Option, ...]):
        self._by_name = {o.name: o for o in options}
        self._by_attr = {o.attr: o for o in options}
        if len(self._by_name) != len(options) or len(self._by_attr) != len(options):
            raise ValueError("two options share a name or an attribute")
        odd = [o.name for o in options if o.holder not in HOLDERS]
        if odd:
            raise ValueError(f"options {', '.join(odd)} have a holder other than {', '.join(HOLDERS)}")

    def __getitem__(self, name: str) -> Option:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def held_by(self, holder: str) -> tuple[Option, ...]:
        """The options whose parsed value goes to ``holder`` (one of :data:`HOLDERS`), in declaration order."""
        return tuple(o for o in self._by_name.values() if o.holder == holder)

    def __getattr__(self, attr: str) -> Option:
        try:
            return self.__dict__["_by_attr"][attr]
        except KeyError:
            raise AttributeError(f"no option fills the settings attribute {attr!r}") from None


OPTIONS = OptionTable((
    Option("brokers", "brokers", "str", None,
           "the broker sets to read: brokerName=host:haPort[/host:port] (this or namesrvAddr)"),
    Option("slaves", "slaves", "str", None, "the slaves (or 5.x controller-mode members) of the broker sets"),
    Option("namesrvAddr", "namesrv_addr", "str", None,
           "find the broker sets through these name servers: host:port;host:port (this or brokers)",
           mirrors="RocketMQ client namesrvAddr"),
    Option("clusterName", "cluster_names", "str", None,
           "with namesrvAddr: read only the broker sets of these clusters (comma-separated)",
           mirrors="RocketMQ broker.conf brokerClusterName"),
    Option("namesrvPollIntervalMs", "namesrv_poll_interval_ms", "int", 30_000,
           "with namesrvAddr: ms between two route requests, asked before a micro-batch", minimum=1,
           mirrors="RocketMQ ClientConfig pollNameServerInterval"),
    Option("newBrokerSetOffsets", "new_broker_set_offsets", "choice", STARTING_OFFSETS_EARLIEST,
           "with namesrvAddr: where a broker set that appears while the query runs starts",
           choices=(STARTING_OFFSETS_EARLIEST, STARTING_OFFSETS_LATEST),
           mirrors="Kafka source: new partitions start at earliest"),
    Option("dropBrokerSets", "drop_broker_sets", "str", None,
           "broker sets whose offsets the query removes from its checkpoint (comma-separated; none is read now)"),
    Option("readFrom", "read_from", "choice", READ_FROM_MASTER, "read partitions from the master or a slave",
           choices=(READ_FROM_MASTER, READ_FROM_SLAVE)),
    Option("minInSyncSlaves", "min_in_sync_slaves", "int", 0,
           "a batch ends no later than what this many slaves hold (0: off)", minimum=0,
           mirrors="RocketMQ broker.conf minInSyncSlaves (the broker stub's key)"),
    Option("startingOffsets", "starting_offsets", "str", STARTING_OFFSETS_EARLIEST,
           "where a query without a checkpoint starts: earliest, latest or JSON broker -> offset",
           mirrors="Kafka source startingOffsets", app_flag=True),
    Option("endingOffsets", "ending_offsets", "str", ENDING_OFFSETS_LATEST,
           "batch reads: where the read ends, latest or JSON broker -> offset (-1 latest)",
           mirrors="Kafka source endingOffsets"),
    Option("startingTimestamp", "starting_timestamp", "int", None,
           "start every broker set at its first record stored at or after this time (ms since the epoch)",
           minimum=0, mirrors="Kafka source startingTimestamp", app_flag=True),
    Option("startingOffsetsByTimestamp", "starting_offsets_by_timestamp", "str", None,
           "start each broker set at its first record stored at or after a time: JSON broker -> ms",
           mirrors="Kafka source startingOffsetsByTimestamp"),
    Option("startingOffsetsByTimestampStrategy", "starting_offsets_by_timestamp_strategy", "choice",
           TIMESTAMP_STRATEGY_ERROR, "a starting time past a broker set's last record: error, or start at latest",
           choices=(TIMESTAMP_STRATEGY_ERROR, TIMESTAMP_STRATEGY_LATEST),
           mirrors="Kafka source startingOffsetsByTimestampStrategy"),
    Option("endingTimestamp", "ending_timestamp", "int", None,
           "batch reads: end every broker set before its first record stored at or after this time (ms)",
           minimum=0, mirrors="Kafka source endingTimestamp"),
    Option("endingOffsetsByTimestamp", "ending_offsets_by_timestamp", "str", None,
           "batch reads: end each broker set before its first record stored at or after a time: JSON broker -> ms",
           mirrors="Kafka source endingOffsetsByTimestamp"),
    Option("maxBytesPerTrigger", "max_bytes_per_trigger", "int", None,
           "cap of CommitLog bytes per micro-batch over all brokers (a batch may end up to 1 MiB past it)",
           minimum=1, mirrors="Spark ReadMaxBytes", app_flag=True),
    Option("minBytesPerTrigger", "min_bytes_per_trigger", "int", None,
           "skip a micro-batch until this many CommitLog bytes are new, or maxTriggerDelay passed", minimum=1,
           mirrors="Kafka source minOffsetsPerTrigger"),
    Option("maxTriggerDelay", "max_trigger_delay", "str", DEFAULT_MAX_TRIGGER_DELAY,
           "with minBytesPerTrigger: the longest a micro-batch is skipped, a duration such as 30s or 15m",
           mirrors="Kafka source maxTriggerDelay"),
    Option("minPartitions", "min_partitions", "int", None, "desired minimum number of partitions per micro-batch",
           minimum=1, mirrors="Kafka source minPartitions", app_flag=True),
    Option("maxBytesPerPartition", "max_bytes_per_partition", "int", None,
           "split every slice larger than this many CommitLog bytes", minimum=1),
    Option("failOnDataLoss", "fail_on_data_loss", "bool", True,
           "fail the query (true) or log and skip (false) when needed bytes are gone",
           mirrors="Kafka source failOnDataLoss", holder="fetch", app_flag=True),
    Option("subscribe", "topics", "str", None,
           "keep only records of these topics (comma-separated; Topic:TagA || TagB keeps those tags of it)",
           mirrors="Kafka source subscribe", holder="decode"),
    Option("subscribePattern", "topic_pattern", "str", None,
           "keep records whose topic matches this regular expression as a whole",
           mirrors="Kafka source subscribePattern", holder="decode"),
    Option("includeSystemTopics", "include_system_topics", "bool", False,
           "also keep RocketMQ's system topics when no topic list is given", holder="decode"),
    Option("decompressBody", "decompress_body", "bool", True, "decompress bodies stored compressed", holder="decode"),
    Option("mode", "mode", "choice", MODE_PERMISSIVE, "what a bad record does: PERMISSIVE keeps it, FAILFAST fails",
           choices=BAD_RECORD_MODES, mirrors="Spark file-source mode", holder="decode"),
    Option("verifyBodyCRC", "verify_body_crc", "bool", True, "check every body against its stored BODYCRC",
           holder="decode"),
    Option("maxInflatedBodyBytes", "max_inflated_body_bytes", "int", DEFAULT_MAX_INFLATED_BODY_BYTES,
           "bytes one compressed body may decompress to", minimum=1, maximum=MAX_MAX_INFLATED_BODY_BYTES,
           holder="decode"),
    Option("connectTimeoutMs", "connect_timeout_ms", "int", HA_CONNECT_TIMEOUT_MS,
           "TCP connect timeout (ms) of HA and remoting connections", minimum=1,
           mirrors="RocketMQ RemotingUtil.connect timeout", holder="fetch"),
    Option("readTimeoutMs", "read_timeout_ms", "int", HA_HOUSEKEEPING_INTERVAL_MS,
           "silence (ms) after which a connection, or an HA frame begun, is dead", minimum=1,
           mirrors="RocketMQ haHousekeepingInterval", holder="fetch"),
    Option("fetchRetries", "fetch_retries", "int", 3, "heartbeat stalls in a row before a partition fails",
           minimum=0, holder="fetch"),
    Option("reconnectBackoffMs", "reconnect_backoff_ms", "int", 50, "first wait (ms) before reconnecting",
           minimum=1, mirrors="Kafka reconnect.backoff.ms", holder="fetch"),
    Option("reconnectBackoffMaxMs", "reconnect_backoff_max_ms", "int", 1000,
           "longest wait (ms) between reconnect attempts", minimum=1, mirrors="Kafka reconnect.backoff.max.ms",
           holder="fetch"),
    Option("maxOutageMs", "max_outage_ms", "int", 5 * 60 * 1000,
           "how long (ms) a task or the driver waits for a broker that is down", minimum=0, holder="fetch"),
    Option("haSendHeartbeatInterval", "heartbeat_interval_ms", "int", HA_SEND_HEARTBEAT_INTERVAL_MS,
           "ms between keep-alive reports on an HA connection, below the master's haHousekeepingInterval",
           minimum=1, mirrors="RocketMQ MessageStoreConfig.haSendHeartbeatInterval", holder="fetch"),
    Option("arrowMaxRecordsPerBatch", "max_records_per_batch", "int", 10000, "rows per Arrow record batch",
           minimum=1, mirrors="Spark spark.sql.execution.arrow.maxRecordsPerBatch", holder="decode"),
    Option("arrowMaxBytesPerBatch", "max_bytes_per_batch", "int", 8 * 1024 * 1024,
           "stored CommitLog bytes (and inflated body bytes) per Arrow record batch", minimum=1, holder="decode"),
    Option("fetchPrefetchChunks", "prefetch_chunks", "int", 4,
           "received chunks a task holds ahead of decoding (0: receive on the task's thread)", minimum=0,
           holder="fetch"),
    Option("receiveBufferBytes", "receive_buffer_bytes", "int", 0,
           "SO_RCVBUF of each HA connection, set before connecting (0: the operating system's)", minimum=0,
           mirrors="Kafka receive.buffer.bytes", holder="fetch"),
    Option("batchTransform", "batch_transform", "str", None,
           "package.module:function the tasks apply to every decoded batch"),
    Option("accessKey", "access_key", "str", None, "the ACL account's access key (with secretKey)",
           mirrors="RocketMQ plain ACL accessKey", holder="acl"),
    Option("secretKey", "secret_key", "str", None, "the ACL account's secret key (with accessKey)",
           mirrors="RocketMQ plain ACL secretKey", holder="acl"),
))

#: option name -> default, in declaration order (``REQUIRED``: must be given; None: unset unless given)
OPTION_DEFAULTS: Mapping[str, object] = {name: option.default for name, option in OPTIONS.items()}


#: ``format("hareplica-landing")``'s own options, beside every ``format("hareplica")`` option: each becomes the
#: Delta sink option its :attr:`Option.sink_option` names (connector/landing/options.py; docs/delta.md).
LANDING_OPTIONS = OptionTable((
    Option("landingPath", "path", "str", None, "the Delta table's location (required without landingTargets)",
           holder="landing"),
    Option("landingAppId", "app_id", "str", None, "the Delta txn appId (required without landingTargets)",
           holder="landing"),
    Option("landingPartitionBy", "partition_by", "str", None,
           "partition columns, comma-separated (unset: storeDate; empty: none)", holder="landing"),
    Option("landingTargetFileSize", "target_file_size", "int", None, "bytes per Parquet file (unset: the sink's)",
           minimum=1, holder="landing"),
    Option("landingCompression", "compression", "str", None, "the Parquet codec (unset: the sink's)",
           holder="landing"),
    Option("landingTargets", "targets", "str", None,
           "several tables instead of one: a JSON list of objects with path, appId and schema", holder="landing"),
    Option("landingSplit", "split", "str", None,
           "with landingTargets: package.module:function giving each decoded batch's one batch per table",
           holder="landing"),
    Option("landingSplitConfig", "split_config", "str", None,
           "with landingSplit: a text handed to it once per task, which then names a factory", holder="landing"),
))


#: the Parquet codecs of the sink's ``compression`` (``none`` and ``uncompressed`` write none)
PARQUET_CODECS = ("snappy", "zstd", "gzip", "lz4", "brotli", "none", "uncompressed")

#: ``format("deltalake")``'s options (also ``write_batch``'s and the direct landing's, which pass the same map),
#: beside its ``storage.KEY`` object-store settings (connector/delta/options.py; docs/delta.md "2. The sink").
SINK_OPTIONS = OptionTable((
    Option("path", "table_uri", "str", REQUIRED, "the Delta table's location, a path or s3:// URI (or .start(path))",
           holder="sink"),
    Option("appId", "app_id", "str", REQUIRED,
           "the Delta txn appId: a stable id per query, e.g. derived from its checkpoint location", holder="sink"),
    Option("partitionBy", "partition_by", "str", None, "partition columns of a new table, comma-separated",
           holder="sink"),
    Option("targetFileSize", "target_file_size", "int", 104_857_600,
           "bytes per Parquet file before the next one starts", minimum=1,
           mirrors="delta-rs delta.targetFileSize default", holder="sink"),
    Option("compression", "compression", "choice", "snappy", "the Parquet codec", choices=PARQUET_CODECS,
           holder="sink"),
    Option("createTableInNonEmptyPath", "create_in_non_empty_path", "bool", False,
           "create a new table in a folder that holds other files", holder="sink"),
))
