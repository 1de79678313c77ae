"""Which CommitLog records a ``format("hareplica")`` query keeps, decided by topic on the executors.

The CommitLog holds every topic of a broker, including RocketMQ's own. The rule, applied to the raw
topic bytes of each record before any other column is built (:mod:`connector.decode.columns`):

1. ``subscribe`` (a comma-separated list of exact names) keeps exactly those topics. A
   system topic named there is kept too: naming it is an explicit choice.
2. Otherwise ``subscribePattern`` (a Python regular expression) keeps topics it
   matches *as a whole* (``re.fullmatch``, like Java's ``Matcher.matches()`` that Kafka's
   ``subscribePattern`` uses).
3. Otherwise every topic is kept.

In cases 2 and 3, *system topics* are dropped unless ``includeSystemTopics=true``. A system topic is
what RocketMQ 4.9.8 itself calls one (``TopicValidator.isSystemTopic``, :mod:`connector.protocol.topics`): ``TBW102``,
``SCHEDULE_TOPIC_XXXX``, ``BenchmarkTest``, ``RMQ_SYS_TRANS_HALF_TOPIC``, ``RMQ_SYS_TRACE_TOPIC``,
``RMQ_SYS_TRANS_OP_HALF_TOPIC``, ``TRANS_CHECK_MAX_TIME_TOPIC``, ``SELF_TEST_TOPIC``,
``OFFSET_MOVED_EVENT``, and any topic starting with ``rmq_sys_``. Their records are broker
bookkeeping or *parked copies* of user messages: a delayed message sits in ``SCHEDULE_TOPIC_XXXX``
until it is due and is then written again under its real topic; a transactional message sits in
``RMQ_SYS_TRANS_HALF_TOPIC`` until its commit writes it again under its real topic. Keeping them by
default would show such messages twice (or, for rolled-back transactions, messages that never
happened), as Kafka's internal topics are hidden from a pattern subscription by default.

``%RETRY%<group>`` and ``%DLQ%<group>`` topics are *not* system topics: they are user-visible
(consumers subscribe to their retry topic, operators read dead letters) and are kept like any other
topic. Their records are re-sent copies of earlier messages (property ``RETRY_TOPIC`` / ``ORIGIN_MESSAGE_ID``
name the original); exclude them with a pattern such as ``(?!%RETRY%|%DLQ%).*`` when they are not wanted.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from connector.arrow_numpy import to_numpy
from connector.protocol.topics import is_system_topic

log = logging.getLogger(__name__)

MAX_CACHED_DECISIONS = 65536


@dataclass(frozen=True, slots=True)
class TopicFilter:
    """The topic rule of one query (see the module doc). Picklable; decisions are cached per topic.

    ``topics`` (exact names) and ``pattern`` (regular expression source) are mutually exclusive;
    ``include_system_topics`` applies to the pattern and to the no-filter case.
    """

    topics: frozenset[str] | None = None
    pattern: str | None = None
    include_system_topics: bool = False
    _cache: dict = field(default_factory=dict, compare=False, repr=False)
    _regex: re.Pattern | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.topics is not None and self.pattern is not None:
            raise ValueError("a TopicFilter takes topics or a pattern, not both")
        if self.pattern is not None:
            object.__setattr__(self, "_regex", re.compile(self.pattern))

    def __getstate__(self):
        return (self.topics, self.pattern, self.include_system_topics)

    def __setstate__(self, state) -> None:
        topics, pattern, include = state
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "include_system_topics", include)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_regex", None if pattern is None else re.compile(pattern))

    @property
    def keeps_everything(self) -> bool:
        """True when no record can be dropped (no list, no pattern, system topics included)."""
        return self.topics is None and self.pattern is None and self.include_system_topics

    def keep(self, topic: str) -> bool:
        """Whether records of ``topic`` are kept."""
        cache = self._cache
        hit = cache.get(topic)
        if hit is not None:
            return hit
        if self.topics is not None:
            decision = topic in self.topics
        else:
            decision = self.include_system_topics or not is_system_topic(topic)
            if decision and self._regex is not None:
                decision = self._regex.fullmatch(topic) is not None
        if len(cache) < MAX_CACHED_DECISIONS:
            cache[topic] = decision
        return decision

    def mask(self, topics: pa.Array) -> np.ndarray | None:
        """Boolean keep-mask for a string array of topics, or None when every record is kept.

        Vectorised: each distinct topic of the array is decided once (dictionary encoding).
        """
        if self.keeps_everything or len(topics) == 0:
            return None
        encoded = topics.dictionary_encode()
        decisions = np.fromiter((self.keep(t) for t in encoded.dictionary.to_pylist()), dtype=bool,
                                count=len(encoded.dictionary))
        if decisions.all():
            return None
        return decisions[to_numpy(encoded.indices)]
