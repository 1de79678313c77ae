"""The bodies of the four requests a RocketMQ 4.9.8 slave's ``SlaveSynchronize`` sends its master, decoded: fastjson
text (:func:`connector.protocol.fastjson.loads`, bare integer keys allowed) into plain Python values, RocketMQ's own
field names kept. Pure: no IO. The requests and what a slave does with each: docs/protocol.md §3.2; what the lake
keeps of them: docs/metadata.md.

Every decoder raises ValueError (one line naming the request and what is wrong) for a body that is not the table the
request answers.
"""

from __future__ import annotations

from connector.protocol.config_files import TOPIC_GROUP_SEPARATOR
from connector.protocol.fastjson import loads

__all__ = [
    "decode_consumer_offsets",
    "decode_delay_offsets",
    "decode_subscription_groups",
    "decode_topic_configs",
]

def _table(body: bytes | str, request: str, field: str) -> dict:
    try:
        obj = loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{request} answer is not JSON: {exc}") from None
    table = obj.get(field) if isinstance(obj, dict) else None
    if table is None and isinstance(obj, dict) and field in obj:
        table = {}
    if not isinstance(table, dict):
        raise ValueError(f"{request} answer has no {field} object")
    return table


def decode_topic_configs(body: bytes | str) -> dict[str, dict]:
    """GET_ALL_TOPIC_CONFIG (21), a ``TopicConfigSerializeWrapper``: ``topicName → TopicConfig`` JSON object
    (``readQueueNums``, ``writeQueueNums``, ``perm``, ``topicFilterType``, ``topicSysFlag``, ``order``, …) from its
    ``topicConfigTable``."""
    table = _table(body, "GET_ALL_TOPIC_CONFIG", "topicConfigTable")
    for name, config in table.items():
        if not isinstance(config, dict):
            raise ValueError(f"GET_ALL_TOPIC_CONFIG answer: topicConfigTable[{name!r}] is not an object")
    return {str(k): v for k, v in table.items()}


def decode_subscription_groups(body: bytes | str) -> dict[str, dict]:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), a ``SubscriptionGroupWrapper``: ``groupName →
    SubscriptionGroupConfig`` JSON object from its ``subscriptionGroupTable``."""
    table = _table(body, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", "subscriptionGroupTable")
    for name, config in table.items():
        if not isinstance(config, dict):
            raise ValueError(f"GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer: subscriptionGroupTable[{name!r}] is not an "
                             "object")
    return {str(k): v for k, v in table.items()}


def decode_consumer_offsets(body: bytes | str) -> dict[tuple[str, str], dict[int, int]]:
    """GET_ALL_CONSUMER_OFFSET (43), ``ConsumerOffsetManager.encode()``: ``(group, topic) → {queueId: offset}``
    (entries) from its ``offsetTable``, whose keys are ``topic@group`` (:data:`TOPIC_GROUP_SEPARATOR`; neither a
    topic nor a group name may hold ``@``) and whose inner maps have bare integer keys."""
    table = _table(body, "GET_ALL_CONSUMER_OFFSET", "offsetTable")
    out: dict[tuple[str, str], dict[int, int]] = {}
    for key, queues in table.items():
        topic, sep, group = str(key).partition(TOPIC_GROUP_SEPARATOR)
        if not sep or not topic or not group:
            raise ValueError(f"GET_ALL_CONSUMER_OFFSET answer: offsetTable key {key!r} is not topic@group")
        try:
            out[(group, topic)] = {int(q): int(o) for q, o in queues.items()}
        except (AttributeError, TypeError, ValueError):
            raise ValueError(f"GET_ALL_CONSUMER_OFFSET answer: offsetTable[{key!r}] is not a queueId → offset "
                             "map of integers") from None
    return out


def decode_delay_offsets(body: bytes | str) -> dict[int, int]:
    """GET_ALL_DELAY_OFFSET (45), ``ScheduleMessageService.encode()``: ``delayLevel → offset`` (entries of the
    level's queue of ``SCHEDULE_TOPIC_XXXX``) from its ``offsetTable``. An empty body (a master that never ran
    the schedule service has no ``delayOffset.json``) is an empty table."""
    if not (body.strip() if isinstance(body, str) else bytes(body).strip()):
        return {}
    table = _table(body, "GET_ALL_DELAY_OFFSET", "offsetTable")
    try:
        return {int(level): int(offset) for level, offset in table.items()}
    except (TypeError, ValueError):
        raise ValueError("GET_ALL_DELAY_OFFSET answer: offsetTable is not a delayLevel → offset map of "
                         "integers") from None
