"""The typed settings an HA read (:class:`FetchSettings`) and the decoder (:class:`DecodeSettings`) get, on the
driver and in every task (an InputPartition carries both). Their defaults are the declaration's
(:data:`connector.options.declaration.OPTIONS`); the parser (:mod:`connector.options.parse`, driver only) fills
them from Spark's option map.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.options.declaration import OPTIONS
from connector.protocol.acl import AclCredentials


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """What an HA read of CommitLog bytes needs, on a task or the driver (carried inside every InputPartition).

    Times in milliseconds; the defaults are the declaration's (:data:`OPTIONS`). ``fail_on_data_loss``: raise
    DataLossError (True) or skip lost bytes with a warning; ``prefetch_chunks``: received chunks held ahead of
    decoding; ``credentials``: the ACL account remoting requests are signed with (repr hides the secret).
    """

    connect_timeout_ms: int = OPTIONS.connect_timeout_ms.default
    read_timeout_ms: int = OPTIONS.read_timeout_ms.default
    fetch_retries: int = OPTIONS.fetch_retries.default
    heartbeat_interval_ms: int = OPTIONS.heartbeat_interval_ms.default
    fail_on_data_loss: bool = OPTIONS.fail_on_data_loss.default
    prefetch_chunks: int = OPTIONS.prefetch_chunks.default
    reconnect_backoff_ms: int = OPTIONS.reconnect_backoff_ms.default
    reconnect_backoff_max_ms: int = OPTIONS.reconnect_backoff_max_ms.default
    max_outage_ms: int = OPTIONS.max_outage_ms.default
    credentials: AclCredentials | None = None


@dataclass(frozen=True, slots=True)
class DecodeSettings:
    """What the decoder needs to turn CommitLog bytes into record batches (carried inside every InputPartition).

    Sizes in bytes; the defaults are the declaration's (:data:`OPTIONS`). ``mode`` is ``PERMISSIVE`` or
    ``FAILFAST``; ``topics`` (exact names) and ``topic_pattern`` (a regular expression) are exclusive, None when
    not given; ``topic_tags``: ``(topic, tags)`` pairs, sorted by topic, for the ``subscribe`` entries that carry
    a tag list (``Topic:TagA || TagB``; a record of such a topic is kept only when its TAGS property is one of
    them, docs/source.md "Tags") (:class:`connector.decode.topic_filter.TopicFilter` applies them).
    """

    decompress_body: bool = OPTIONS.decompress_body.default
    mode: str = OPTIONS.mode.default
    verify_body_crc: bool = OPTIONS.verify_body_crc.default
    max_inflated_body_bytes: int = OPTIONS.max_inflated_body_bytes.default
    max_records_per_batch: int = OPTIONS.max_records_per_batch.default
    max_bytes_per_batch: int = OPTIONS.max_bytes_per_batch.default
    topics: frozenset[str] | None = None
    topic_pattern: str | None = None
    topic_tags: tuple[tuple[str, frozenset[str]], ...] = ()
    include_system_topics: bool = OPTIONS.include_system_topics.default
