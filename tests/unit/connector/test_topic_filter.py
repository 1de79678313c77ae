"""connector.decode.topic_filter: RocketMQ 4.9.8's system topics and the vectorised keep-mask."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from connector.decode.topic_filter import TopicFilter
from connector.protocol.topics import SYSTEM_TOPICS, is_system_topic


def test_system_topics_are_topic_validator_s_set_and_prefix():
    assert SYSTEM_TOPICS == {"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                             "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                             "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"}
    assert is_system_topic("rmq_sys_wheel_timer") and not is_system_topic("RMQ_SYS_X")  # prefix is lower case
    assert not is_system_topic("%RETRY%g") and not is_system_topic("%DLQ%g") and not is_system_topic("orders")


def test_mask_decides_each_distinct_topic_once():
    topics = pa.array(["a", "SCHEDULE_TOPIC_XXXX", "b", "a", "%DLQ%g"])
    assert TopicFilter().mask(topics).tolist() == [True, False, True, True, True]
    assert TopicFilter(pattern="a|b").mask(topics).tolist() == [True, False, True, True, False]
    assert TopicFilter(topics=frozenset({"a", "SCHEDULE_TOPIC_XXXX"})).mask(topics).tolist() == [
        True, True, False, True, False]
    assert TopicFilter(include_system_topics=True).mask(topics) is None  # nothing to drop
    assert TopicFilter().mask(pa.array(["x", "y"])) is None
    assert TopicFilter().mask(pa.array([], type=pa.string())) is None


def test_filters_pickle_compare_and_reject_both_rules():
    f = TopicFilter(pattern="o.*", include_system_topics=True)
    assert f.keep("orders")
    clone = pickle.loads(pickle.dumps(f))
    assert clone == f and clone.keep("orders") and not clone.keep("x")
    with pytest.raises(ValueError, match="topics or a pattern, not both"):
        TopicFilter(topics=frozenset({"a"}), pattern="a")
