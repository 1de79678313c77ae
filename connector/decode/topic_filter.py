"""Which CommitLog records a ``format("hareplica")`` query keeps, decided by topic and tag in the tasks.

:class:`TopicFilter` applies the query's topic list, topic pattern (a whole-topic ``re.fullmatch``),
``include_system_topics`` and tag lists (:class:`connector.options.settings.DecodeSettings`) to each record before its
other columns are built (:mod:`connector.decode.columns`): the topic first, then, for the topics that carry a
tag list, the stored TAGS property; system topics are RocketMQ 4.9.8's own (:mod:`connector.protocol.topics`).
The rules: docs/source.md "Which topics are kept" and "Tags".
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.arrow_numpy import binary_array, bool_to_numpy, to_numpy
from connector.options.settings import DecodeSettings
from connector.protocol.topics import is_system_topic

log = logging.getLogger(__name__)

MAX_CACHED_DECISIONS = 65536


@dataclass(frozen=True, slots=True)
class TopicFilter:
    """The topic rule of one query (see the module doc). Picklable; decisions are cached per topic.

    ``topics`` (exact names) and ``pattern`` (regular expression source) are mutually exclusive;
    ``include_system_topics`` applies to the pattern and to the no-filter case; ``tags``: ``(topic, tag set)``
    pairs, each topic also in ``topics``: a record of such a topic is kept only when its TAGS property is in the
    set (one without TAGS is dropped, as RocketMQ 4.9.8's PullAPIWrapper.processPullResult drops it).
    """

    topics: frozenset[str] | None = None
    pattern: str | None = None
    include_system_topics: bool = False
    tags: tuple[tuple[str, frozenset[str]], ...] = ()
    _cache: dict = field(default_factory=dict, compare=False, repr=False)
    _regex: re.Pattern | None = field(default=None, compare=False, repr=False)
    _tags: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.topics is not None and self.pattern is not None:
            raise ValueError("a TopicFilter takes topics or a pattern, not both")
        if self.tags and (self.topics is None or not {t for t, _ in self.tags} <= self.topics):
            raise ValueError("a TopicFilter's tag lists name topics of its topic list")
        if self.pattern is not None:
            object.__setattr__(self, "_regex", re.compile(self.pattern))
        object.__setattr__(self, "_tags", dict(self.tags))

    def __getstate__(self):
        return (self.topics, self.pattern, self.include_system_topics, self.tags)

    def __setstate__(self, state) -> None:
        topics, pattern, include, tags = state
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "include_system_topics", include)
        object.__setattr__(self, "tags", tags)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_regex", None if pattern is None else re.compile(pattern))
        object.__setattr__(self, "_tags", dict(tags))

    @classmethod
    def of(cls, settings: DecodeSettings) -> TopicFilter:
        """The filter of the query's ``settings`` (``topics``, ``topic_pattern``, ``include_system_topics``,
        ``topic_tags``)."""
        return cls(topics=settings.topics, pattern=settings.topic_pattern,
                   include_system_topics=settings.include_system_topics, tags=settings.topic_tags)

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

    def filters_tags(self, topics: pa.Array) -> bool:
        """Whether some record of ``topics`` (a string array of kept records) belongs to a topic with a tag list."""
        if not self._tags or len(topics) == 0:
            return False
        return any(t in self._tags for t in topics.unique().to_pylist())

    def tag_mask(self, topics: pa.Array, tags: pa.Array) -> np.ndarray | None:
        """Boolean keep-mask by tag for the records of ``topics`` with TAGS ``tags`` (string arrays of one
        length, a null tag: no TAGS property), or None when every record is kept.

        A record of a topic without a tag list is kept; one of a topic with a tag list is kept when its TAGS
        equals one of the list (RocketMQ's ``SubscriptionData.getTagsSet().contains(msg.getTags())``).
        """
        if not self._tags or len(topics) == 0:
            return None
        keep = np.ones(len(topics), dtype=bool)
        for topic, wanted in self._tags.items():
            of_topic = bool_to_numpy(pc.equal(topics, binary_array([topic], pa.string())[0]))  # no pa.scalar: no shim
            if of_topic.any():
                tagged = pc.is_in(tags, value_set=binary_array(sorted(wanted), pa.string()))  # null: no TAGS
                keep &= ~of_topic | (bool_to_numpy(tagged) & bool_to_numpy(pc.is_valid(tagged)))
        return None if keep.all() else keep
