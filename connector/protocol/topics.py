"""RocketMQ 4.9.8's own topic names and topic-name rules (``TopicValidator``, ``MixAll``), defined once.

* *System topics* (``TopicValidator.SYSTEM_TOPIC_SET`` plus the ``rmq_sys_`` prefix) hold broker
  bookkeeping or parked copies of user messages: delayed messages wait in ``SCHEDULE_TOPIC_XXXX``,
  transactional half messages in ``RMQ_SYS_TRANS_HALF_TOPIC``.
* A producer may not send to ``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``; the broker refuses it too.
* A topic name is 1..127 characters of ``^[%|a-zA-Z0-9_-]+$`` (``TopicValidator.validateTopic``).
* ``%RETRY%<group>`` and ``%DLQ%<group>`` are a group's retry and dead-letter topics (``MixAll``).

Pure constants and checks; the broker stub, the producer and the source's topic filter import them.
"""

from __future__ import annotations

import re

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"  # the default topic new topics inherit from
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"

#: TopicValidator.SYSTEM_TOPIC_SET
SYSTEM_TOPICS = frozenset({
    AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
})
SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX
#: TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET
NOT_ALLOWED_SEND_TOPICS = frozenset({
    RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
})
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"  # MixAll
TOPIC_MAX_LENGTH = 127  # TopicValidator.TOPIC_MAX_LENGTH (characters)
VALID_TOPIC = re.compile(r"^[%|a-zA-Z0-9_-]+$")  # TopicValidator.isTopicOrGroupIllegal
VALID_TOPIC_CHARS = frozenset("%|-_" "0123456789" "ABCDEFGHIJKLMNOPQRSTUVWXYZ" "abcdefghijklmnopqrstuvwxyz")


def is_system_topic(topic: str) -> bool:
    """RocketMQ 4.9.8 ``TopicValidator.isSystemTopic``: the fixed set or the ``rmq_sys_`` prefix."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def validate_topic(topic: str | None) -> str | None:
    """TopicValidator.validateTopic: an error remark (a broker answers it with SYSTEM_ERROR), or None when valid.

    Rules: not blank, only ``^[%|a-zA-Z0-9_-]+$``, at most 127 characters.
    """
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if any(ch not in VALID_TOPIC_CHARS for ch in topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None
