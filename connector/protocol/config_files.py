"""The files RocketMQ 4.9.8's ``ConfigManager`` subclasses persist under ``{storePathRootDir}/config/`` — their names
and their exact fastjson text — shared by the broker stub (which keeps these tables) and restore (which writes them
from the lake's metadata tables). Pure: no IO. The text rules: docs/protocol.md §4.7.

Each map is written in the iteration order of the ``ConcurrentHashMap`` 4.9.8 keeps it in
(:class:`connector.protocol.java_hash_map.JavaConcurrentHashMap`, keys put in the order given), with the initial
capacity 4.9.8 creates it with.
"""

from __future__ import annotations

from collections.abc import Mapping

from connector.protocol.fastjson import Bean, dumps
from connector.protocol.java_hash_map import JavaConcurrentHashMap, java_int_hash, java_string_hash

__all__ = [
    "CONFIG_DIR",
    "CONSUMER_OFFSET_FILE",
    "DELAY_OFFSET_FILE",
    "DELAY_OFFSET_TABLE_CAPACITY",
    "OFFSET_TABLE_CAPACITY",
    "QUEUE_OFFSET_TABLE_CAPACITY",
    "SUBSCRIPTION_GROUP_FILE",
    "SUBSCRIPTION_GROUP_TABLE_CAPACITY",
    "TOPICS_FILE",
    "TOPIC_CONFIG_TABLE_CAPACITY",
    "TOPIC_GROUP_SEPARATOR",
    "data_version_bean",
    "encode_consumer_offsets",
    "encode_delay_offsets",
    "encode_subscription_groups",
    "encode_topic_configs",
    "topic_config_wrapper",
]

#: the folder under ``storePathRootDir`` (4.9.8 ``StorePathConfigHelper``, ``BrokerPathConfigHelper``)
CONFIG_DIR = "config"
TOPICS_FILE = "topics.json"  # TopicConfigManager
SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"  # SubscriptionGroupManager
CONSUMER_OFFSET_FILE = "consumerOffset.json"  # ConsumerOffsetManager
DELAY_OFFSET_FILE = "delayOffset.json"  # ScheduleMessageService

#: ``ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR``: the offset table's keys are ``topic@group``
TOPIC_GROUP_SEPARATOR = "@"

# initial capacities of 4.9.8's ConcurrentHashMaps (they set the written order)
TOPIC_CONFIG_TABLE_CAPACITY = 1024  # TopicConfigManager.topicConfigTable
SUBSCRIPTION_GROUP_TABLE_CAPACITY = 1024  # SubscriptionGroupManager.subscriptionGroupTable
OFFSET_TABLE_CAPACITY = 512  # ConsumerOffsetManager.offsetTable
QUEUE_OFFSET_TABLE_CAPACITY = 32  # its per-topic@group map, created by commitOffset
DELAY_OFFSET_TABLE_CAPACITY = 32  # ScheduleMessageService.offsetTable


def data_version_bean(dv: Mapping) -> Bean:
    """A ``DataVersion`` bean from ``{"counter": n, "timestamp": epoch ms}`` (``counter`` is an AtomicLong: a
    number)."""
    return Bean(counter=int(dv.get("counter", 0)), timestamp=int(dv.get("timestamp", 0)))


def topic_config_wrapper(table: Mapping[str, Bean], data_version: Mapping) -> Bean:
    """``TopicConfigSerializeWrapper`` over ``table`` (topic name → its ``TopicConfig`` bean; the names in the order
    they were put into 4.9.8's ``ConcurrentHashMap(1024)``) and ``data_version`` (see :func:`data_version_bean`)."""
    names = JavaConcurrentHashMap.order(list(table), java_string_hash, TOPIC_CONFIG_TABLE_CAPACITY)
    return Bean(dataVersion=data_version_bean(data_version), topicConfigTable={name: table[name] for name in names})


def encode_topic_configs(table: Mapping[str, Bean], data_version: Mapping, pretty: bool = True) -> str:
    """``TopicConfigManager.encode(pretty)``: ``{"dataVersion":{..},"topicConfigTable":{..}}`` — pretty for
    ``topics.json``, compact for GET_ALL_TOPIC_CONFIG."""
    return dumps(topic_config_wrapper(table, data_version), pretty)


def encode_subscription_groups(table: Mapping[str, Bean], data_version: Mapping, pretty: bool = True) -> str:
    """``SubscriptionGroupManager.encode(pretty)``: ``{"dataVersion":{..},"subscriptionGroupTable":{..}}`` over
    ``table`` (group name → its ``SubscriptionGroupConfig`` bean, names in insertion order)."""
    names = JavaConcurrentHashMap.order(list(table), java_string_hash, SUBSCRIPTION_GROUP_TABLE_CAPACITY)
    return dumps(Bean(dataVersion=data_version_bean(data_version),
                      subscriptionGroupTable={name: table[name] for name in names}), pretty)


def encode_consumer_offsets(table: Mapping[str, Mapping[int, int]], pretty: bool = True) -> str:
    """``ConsumerOffsetManager.encode(pretty)``: ``{"offsetTable":{"topic@group":{queueId:offset}}}`` (offsets in
    ConsumeQueue entries; queue ids are bare Integer keys)."""
    keys = JavaConcurrentHashMap.order(list(table), java_string_hash, OFFSET_TABLE_CAPACITY)
    out = {}
    for key in keys:
        queues = table[key]
        ids = JavaConcurrentHashMap.order(list(queues), java_int_hash, QUEUE_OFFSET_TABLE_CAPACITY)
        out[key] = {q: queues[q] for q in ids}
    return dumps(Bean(offsetTable=out), pretty)


def encode_delay_offsets(table: Mapping[int, int], pretty: bool = True) -> str:
    """``ScheduleMessageService.encode(pretty)``: DelayOffsetSerializeWrapper ``{"offsetTable":{level:offset}}`` —
    pretty for ``delayOffset.json``, compact for GET_ALL_DELAY_OFFSET; ``table`` maps delay level → the next
    ConsumeQueue offset of ``SCHEDULE_TOPIC_XXXX`` queue level − 1 to deliver."""
    levels = JavaConcurrentHashMap.order(list(table), java_int_hash, DELAY_OFFSET_TABLE_CAPACITY)
    return dumps(Bean(offsetTable={level: table[level] for level in levels}), pretty)
