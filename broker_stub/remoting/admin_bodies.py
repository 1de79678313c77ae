"""JSON bodies of the broker's topic and consumer statistics answers, in fastjson's layout (RocketMQ 4.9.8
``TopicStatsTable``, ``ConsumeStats``, ``ConsumerConnection``, ``GroupList``; ``RemotingSerializable.encode``).

fastjson writes bean fields in name order and a map whose keys are objects — ``HashMap<MessageQueue, ...>`` —
with each key written as a JSON object (``{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}``). That is
not standard JSON, but it is what 4.9.8 brokers send and what the Java client's fastjson reads back (checked
with the real 4.9.8 ``mqadmin`` in tests/interop/test_mqadmin.py). The entries here are written sorted by
(topic, queueId); Java's HashMap order differs but carries no meaning. Nothing here does IO.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, order=True)
class MessageQueue:
    """A queue as admin answers name it (MessageQueue: topic, brokerName, queueId)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


def _message_queue_map(table: Mapping[MessageQueue, dict]) -> str:
    """A ``Map<MessageQueue, bean>`` as fastjson writes it (object keys), entries sorted by queue."""
    return "{" + ",".join(f"{_dumps(mq.to_json())}:{_dumps(v)}"
                          for mq, v in sorted(table.items(), key=lambda kv: (kv[0].topic, kv[0].queue_id,
                                                                                  kv[0].broker_name))) + "}"


def encode_topic_stats_table(offsets: Mapping[MessageQueue, tuple[int, int, int]]) -> bytes:
    """TopicStatsTable: ``{"offsetTable": {MessageQueue: TopicOffset}}``.

    ``offsets`` maps each queue to ``(minOffset, maxOffset, lastUpdateTimestamp)`` — queue offsets in
    ConsumeQueue entries, the timestamp in epoch ms (0 for an empty queue).
    """
    table = {mq: {"lastUpdateTimestamp": ts, "maxOffset": max_o, "minOffset": min_o}
             for mq, (min_o, max_o, ts) in offsets.items()}
    return ('{"offsetTable":' + _message_queue_map(table) + "}").encode("utf-8")


def encode_consume_stats(offsets: Mapping[MessageQueue, tuple[int, int, int]], consume_tps: float) -> bytes:
    """ConsumeStats: ``{"consumeTps": double, "offsetTable": {MessageQueue: OffsetWrapper}}``.

    ``offsets`` maps each queue to ``(brokerOffset, consumerOffset, lastTimestamp)`` — entries, entries,
    epoch ms of the last consumed message's store time (0 when unknown).
    """
    table = {mq: {"brokerOffset": b, "consumerOffset": c, "lastTimestamp": ts}
             for mq, (b, c, ts) in offsets.items()}
    return ('{"consumeTps":' + json.dumps(float(consume_tps)) + ',"offsetTable":' + _message_queue_map(table)
            + "}").encode("utf-8")


def subscription_data(sub: Mapping) -> dict:
    """A SubscriptionData as a broker re-serialises it from a heartbeat: the seven fields fastjson writes
    (``filterClassSource`` is not serialised), with 4.9.8's defaults for missing ones."""
    return {"classFilterMode": bool(sub.get("classFilterMode", False)), "codeSet": list(sub.get("codeSet") or []),
            "expressionType": str(sub.get("expressionType") or "TAG"), "subString": sub.get("subString"),
            "subVersion": int(sub.get("subVersion") or 0), "tagsSet": list(sub.get("tagsSet") or []),
            "topic": sub.get("topic")}


def encode_consumer_connection(connections: Iterable[tuple[str, str, str, int]], consume_type: str,
                               message_model: str, consume_from_where: str,
                               subscriptions: Mapping[str, Mapping]) -> bytes:
    """ConsumerConnection: ``connectionSet`` of Connection ``{"clientAddr", "clientId", "language", "version"}``
    (``connections`` as ``(clientId, clientAddr, language, version)``), the group's ``consumeFromWhere``,
    ``consumeType`` and ``messageModel`` (enum names) and ``subscriptionTable`` ``{topic: SubscriptionData}``."""
    body = {"connectionSet": [{"clientAddr": addr, "clientId": cid, "language": lang, "version": version}
                              for cid, addr, lang, version in connections],
            "consumeFromWhere": consume_from_where, "consumeType": consume_type, "messageModel": message_model,
            "subscriptionTable": {t: subscription_data(s) for t, s in subscriptions.items()}}
    return _dumps(body).encode("utf-8")


def encode_group_list(groups: Iterable[str]) -> bytes:
    """GroupList: ``{"groupList": [group, ...]}`` (sorted)."""
    return _dumps({"groupList": sorted(groups)}).encode("utf-8")


__all__ = ["MessageQueue", "encode_consume_stats", "encode_consumer_connection", "encode_group_list",
           "encode_topic_stats_table", "subscription_data"]
