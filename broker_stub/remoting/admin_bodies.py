"""JSON bodies of the broker's topic and consumer statistics answers, byte for byte as RocketMQ 4.9.8 writes them
(``TopicStatsTable``, ``ConsumeStats``, ``ConsumerConnection``, ``GroupList``,
``GetConsumerListByGroupResponseBody``). Nothing here does IO.

Maps are written in the iteration order of the Java collection 4.9.8 fills, from the order the caller lists the
entries in. fastjson's text, its JSON-object map keys and the one order that cannot be reproduced (a
``HashSet<Connection>``): docs/protocol.md §4.7.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from connector.protocol.fastjson import Bean, JavaMap, JavaSet, encode
from connector.protocol.java_hash_map import (
    JavaConcurrentHashMap,
    hash_map_order,
    java_int_hash,
    java_string_hash,
    message_queue_hash,
)


@dataclass(frozen=True, order=True)
class MessageQueue:
    """A queue as admin answers name it (MessageQueue: topic, brokerName, queueId)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> Bean:
        """The MessageQueue bean."""
        return Bean(brokerName=self.broker_name, queueId=self.queue_id, topic=self.topic)

    def java_hash(self) -> int:
        """``MessageQueue.hashCode()``."""
        return message_queue_hash(self.topic, self.broker_name, self.queue_id)


def _message_queue_map(table: Mapping[MessageQueue, Bean]) -> JavaMap:
    """A fresh ``HashMap<MessageQueue, bean>`` filled in ``table``'s order, as fastjson iterates it."""
    return JavaMap((mq.to_json(), table[mq]) for mq in hash_map_order(list(table), MessageQueue.java_hash))


def _string_set(items: Iterable[str]) -> JavaSet:
    """A fresh ``HashSet<String>`` filled in the given order."""
    return JavaSet(hash_map_order(list(dict.fromkeys(items)), java_string_hash))


def encode_topic_stats_table(offsets: Mapping[MessageQueue, tuple[int, int, int]]) -> bytes:
    """TopicStatsTable: ``{"offsetTable": {MessageQueue: TopicOffset}}``.

    ``offsets`` maps each queue to ``(minOffset, maxOffset, lastUpdateTimestamp)`` — queue offsets in
    ConsumeQueue entries, the timestamp in epoch ms (0 for an empty queue).
    """
    table = {mq: Bean(lastUpdateTimestamp=ts, maxOffset=max_o, minOffset=min_o)
             for mq, (min_o, max_o, ts) in offsets.items()}
    return encode(Bean(offsetTable=_message_queue_map(table)))


def encode_consume_stats(offsets: Mapping[MessageQueue, tuple[int, int, int]], consume_tps: float) -> bytes:
    """ConsumeStats: ``{"consumeTps": double, "offsetTable": {MessageQueue: OffsetWrapper}}``.

    ``offsets`` maps each queue to ``(brokerOffset, consumerOffset, lastTimestamp)`` — entries, entries,
    epoch ms of the last consumed message's store time (0 when unknown).
    """
    table = {mq: Bean(brokerOffset=b, consumerOffset=c, lastTimestamp=ts) for mq, (b, c, ts) in offsets.items()}
    return encode(Bean(consumeTps=float(consume_tps), offsetTable=_message_queue_map(table)))


def subscription_data(sub: Mapping) -> Bean:
    """A SubscriptionData as a broker re-serialises it from a heartbeat: the seven properties fastjson writes
    (``filterClassSource`` is not serialised), with 4.9.8's defaults for missing ones; ``tagsSet`` and
    ``codeSet`` are ``HashSet``s filled in the heartbeat's order (items of another type are dropped)."""
    codes = list(dict.fromkeys(c for c in sub.get("codeSet") or [] if isinstance(c, int) and not isinstance(c, bool)))
    tags = [t for t in sub.get("tagsSet") or [] if isinstance(t, str)]
    return Bean(classFilterMode=bool(sub.get("classFilterMode", False)),
                codeSet=JavaSet(hash_map_order(codes, java_int_hash)),
                expressionType=str(sub.get("expressionType") or "TAG"), subString=sub.get("subString"),
                subVersion=int(sub.get("subVersion") or 0), tagsSet=_string_set(tags), topic=sub.get("topic"))


def encode_consumer_connection(connections: Iterable[tuple[str, str, str, int]], consume_type: str,
                               message_model: str, consume_from_where: str,
                               subscriptions: Mapping[str, Mapping]) -> bytes:
    """ConsumerConnection: ``connectionSet`` of Connection ``{"clientAddr", "clientId", "language", "version"}``
    (``connections`` as ``(clientId, clientAddr, language, version)``), the group's ``consumeFromWhere``,
    ``consumeType`` and ``messageModel`` (enum names) and ``subscriptionTable`` ``{topic: SubscriptionData}``
    (``subscriptions`` in the order the group's table got them: that ``ConcurrentHashMap``'s order is copied by
    ``putAll`` into the body's). Connections keep the given order (module doc)."""
    topics = JavaConcurrentHashMap.order(list(subscriptions), java_string_hash)
    table = JavaConcurrentHashMap(java_string_hash)
    table.put_all(topics)
    body = Bean(connectionSet=JavaSet(Bean(clientAddr=addr, clientId=cid, language=lang, version=version)
                                      for cid, addr, lang, version in connections),
                consumeFromWhere=consume_from_where, consumeType=consume_type, messageModel=message_model,
                subscriptionTable={t: subscription_data(subscriptions[t]) for t in table.keys()})
    return encode(body)


def encode_group_list(groups: Iterable[str]) -> bytes:
    """GroupList: ``{"groupList":[group, ...]}``, a ``HashSet`` filled in the given order."""
    return encode(Bean(groupList=_string_set(groups)))


def encode_consume_queue_body(max_queue_index: int, min_queue_index: int,
                              entries: Iterable[tuple[int, int, int]]) -> bytes:
    """QueryConsumeQueueResponseBody (QUERY_CONSUME_QUEUE, docs/protocol.md §5.5) without filter data:
    ``{"maxQueueIndex","minQueueIndex","queueData":[ConsumeQueueData]}``; ``entries`` are ConsumeQueue entries
    ``(physicOffset, physicSize, tagsCode)``, written with ``eval`` false."""
    return encode(Bean(maxQueueIndex=max_queue_index, minQueueIndex=min_queue_index,
                       queueData=[Bean(eval=False, physicOffset=offset, physicSize=size, tagsCode=tags)
                                  for offset, size, tags in entries]))


def encode_consumer_id_list(client_ids: Iterable[str]) -> bytes:
    """GetConsumerListByGroupResponseBody: ``{"consumerIdList":[clientId, ...]}`` in the given order."""
    return encode(Bean(consumerIdList=list(client_ids)))


__all__ = ["MessageQueue", "encode_consume_queue_body", "encode_consume_stats", "encode_consumer_connection",
           "encode_consumer_id_list", "encode_group_list", "encode_topic_stats_table", "subscription_data"]
