"""Topic configuration table (RocketMQ 4.9.8 ``TopicConfigManager`` / ``TopicConfig``): the system topics a broker
starts with, topics created from a default topic, ``config/topics.json`` and the compact text
GET_ALL_TOPIC_CONFIG serves (``replace_from_master`` applies it on a slave). The rules: docs/protocol.md §3.3;
the text: §4.7.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from broker_stub.config import BrokerConfig
from broker_stub.javautil import fastjson_loads
from connector.protocol.broker import PERM_INHERIT, PERM_READ, PERM_READ_WRITE, PERM_WRITE
from connector.protocol.config_files import encode_topic_configs
from connector.protocol.config_files import topic_config_wrapper as _wrapper
from connector.protocol.fastjson import Bean
from connector.protocol.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
)

log = logging.getLogger(__name__)

SCHEDULE_TOPIC_QUEUE_NUM = 18


@dataclass
class TopicConfig:
    """One topic (TopicConfig): queue counts, permission bits (6 = read+write), filter type."""

    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PERM_READ_WRITE
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False

    def to_json(self) -> Bean:
        """The TopicConfig bean (all seven properties; ``topicFilterType`` by enum name)."""
        return Bean(order=self.order, perm=self.perm, readQueueNums=self.readQueueNums,
                    topicFilterType=self.topicFilterType, topicName=self.topicName,
                    topicSysFlag=self.topicSysFlag, writeQueueNums=self.writeQueueNums)

    @classmethod
    def from_json(cls, obj: dict) -> TopicConfig:
        return cls(topicName=str(obj["topicName"]), readQueueNums=int(obj.get("readQueueNums", 16)),
                   writeQueueNums=int(obj.get("writeQueueNums", 16)), perm=int(obj.get("perm", 6)),
                   topicFilterType=str(obj.get("topicFilterType", "SINGLE_TAG")),
                   topicSysFlag=int(obj.get("topicSysFlag", 0)), order=bool(obj.get("order", False)))


def topic_config_wrapper(table: dict[str, TopicConfig], data_version: dict) -> Bean:
    """TopicConfigSerializeWrapper over ``table`` (insertion order = the order topics were put into 4.9.8's
    ``ConcurrentHashMap(1024)``, which sets the written order) and ``data_version``."""
    return _wrapper({name: config.to_json() for name, config in table.items()}, data_version)


class TopicConfigManager:
    """The topic table plus its DataVersion; persisted to ``config_path`` on every change."""

    def __init__(self, broker_config: BrokerConfig, config_path: Path) -> None:
        self.broker_config = broker_config
        self.config_path = Path(config_path)
        self.table: dict[str, TopicConfig] = {}
        self.data_version = {"counter": 0, "timestamp": time.time_ns() // 1_000_000}
        # called after a topic is created by a send or a consumer (the broker then re-registers, as upstream)
        self.change_listeners: list = []
        self._add_system_topics()
        self._load()

    def _add_system_topics(self) -> None:
        bc = self.broker_config
        self.table[RMQ_SYS_SELF_TEST_TOPIC] = TopicConfig(RMQ_SYS_SELF_TEST_TOPIC, 1, 1)
        if bc.autoCreateTopicEnable:
            self.table[AUTO_CREATE_TOPIC_KEY_TOPIC] = TopicConfig(
                AUTO_CREATE_TOPIC_KEY_TOPIC, bc.defaultTopicQueueNums, bc.defaultTopicQueueNums,
                PERM_INHERIT | PERM_READ | PERM_WRITE)
        self.table[RMQ_SYS_BENCHMARK_TOPIC] = TopicConfig(RMQ_SYS_BENCHMARK_TOPIC, 1024, 1024)
        perm = PERM_INHERIT | ((PERM_READ | PERM_WRITE) if bc.clusterTopicEnable else 0)
        self.table[bc.brokerClusterName] = TopicConfig(bc.brokerClusterName, perm=perm)
        perm = PERM_INHERIT | ((PERM_READ | PERM_WRITE) if bc.brokerTopicEnable else 0)
        self.table[bc.brokerName] = TopicConfig(bc.brokerName, 1, 1, perm)
        self.table[RMQ_SYS_OFFSET_MOVED_EVENT] = TopicConfig(RMQ_SYS_OFFSET_MOVED_EVENT, 1, 1)
        self.table[RMQ_SYS_SCHEDULE_TOPIC] = TopicConfig(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM,
                                                         SCHEDULE_TOPIC_QUEUE_NUM)
        if bc.traceTopicEnable:
            self.table[bc.msgTraceTopicName] = TopicConfig(bc.msgTraceTopicName, 1, 1)
        reply = f"{bc.brokerClusterName}_REPLY_TOPIC"
        self.table[reply] = TopicConfig(reply, 1, 1)

    def _load(self) -> None:
        if not self.config_path.exists():
            return
        try:
            obj = fastjson_loads(self.config_path.read_text(encoding="utf-8"))
            for name, tc in (obj.get("topicConfigTable") or {}).items():
                self.table[name] = TopicConfig.from_json(tc)
            dv = obj.get("dataVersion") or {}
            self.data_version = {"counter": int(dv.get("counter", 0)),
                                 "timestamp": int(dv.get("timestamp", self.data_version["timestamp"]))}
            log.info("topic config loaded path=%s topics=%d", self.config_path, len(self.table))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("topic config unreadable, starting from defaults path=%s error=%s", self.config_path, exc)

    def wrapper(self) -> Bean:
        """The TopicConfigSerializeWrapper bean (``buildTopicConfigSerializeWrapper``)."""
        return topic_config_wrapper(self.table, self.data_version)

    def encode(self, pretty: bool = False) -> str:
        """``TopicConfigManager.encode(pretty)``: ``{"dataVersion":{..},"topicConfigTable":{..}}`` as fastjson
        writes it (compact for GET_ALL_TOPIC_CONFIG, pretty for ``topics.json``)."""
        return encode_topic_configs({name: config.to_json() for name, config in self.table.items()},
                                    self.data_version, pretty)

    def persist(self) -> None:
        """Write ``topics.json`` atomically (temp file + rename)."""
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".json.tmp")
        tmp.write_text(self.encode(pretty=True), encoding="utf-8")
        os.replace(tmp, self.config_path)

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def creation_refused(self, topic: str) -> str | None:
        """A one-line remark when ``topic`` is missing and the table already holds the stub-only cap
        ``maxTopicConfigNums`` topics (docs/security.md "Names and caps"); None when it may be created."""
        cap = self.broker_config.maxTopicConfigNums
        if topic in self.table or len(self.table) < cap:
            return None
        return f"topic table full (maxTopicConfigNums={cap} reached), topic {topic[:130]!r} not created"

    def create_topic_in_send_message_method(self, topic: str, default_topic: str | None, remote_address: str,
                                            client_default_topic_queue_nums: int, topic_sys_flag: int
                                            ) -> TopicConfig | None:
        """TopicConfigManager.createTopicInSendMessageMethod: create ``topic`` from ``default_topic``.

        Returns None (the caller answers TOPIC_NOT_EXIST) when the default topic is missing or not
        inheritable — e.g. TBW102 does not exist because ``autoCreateTopicEnable=false``.
        """
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        refused = self.creation_refused(topic)
        if refused is not None:
            log.warning("create topic failed: %s producer=%s", refused, remote_address)
            return None
        default = self.table.get(default_topic or "")
        if default is None:
            log.warning("create topic failed: default topic missing topic=%s defaultTopic=%s producer=%s",
                        topic, default_topic, remote_address)
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker_config.autoCreateTopicEnable:
            default.perm = PERM_READ | PERM_WRITE  # upstream strips inheritance when auto-create is off
        if not default.perm & PERM_INHERIT:
            log.warning("create topic failed: default topic not inheritable topic=%s defaultTopic=%s perm=%d",
                        topic, default_topic, default.perm)
            return None
        queue_nums = max(min(client_default_topic_queue_nums, default.writeQueueNums), 0)
        tc = TopicConfig(topic, queue_nums, queue_nums, default.perm & ~PERM_INHERIT, default.topicFilterType,
                         topic_sys_flag)
        self.table[topic] = tc
        self._next_data_version()
        log.info("topic created topic=%s queues=%d defaultTopic=%s producer=%s", topic, queue_nums, default_topic,
                 remote_address)
        self._persist_logged()
        self._changed()
        return tc

    def _next_data_version(self) -> None:
        """DataVersion.nextVersion: counter + 1, timestamp now (ms); slaves copy the table when it differs."""
        self.data_version = {"counter": self.data_version["counter"] + 1, "timestamp": time.time_ns() // 1_000_000}

    def _persist_logged(self) -> None:
        """Persist ``topics.json``; a failure is logged on one line, the table in memory stays changed."""
        try:
            self.persist()
        except OSError as exc:
            log.error("topic config persist failed path=%s error=%s", self.config_path, exc)

    def _changed(self) -> None:
        for listener in self.change_listeners:
            listener()

    def update_topic_config(self, tc: TopicConfig) -> TopicConfig | None:
        """TopicConfigManager.updateTopicConfig (UPDATE_AND_CREATE_TOPIC): put ``tc`` in the table (a new topic
        or a replacement), move to the next DataVersion and persist ``topics.json``; returns the replaced config
        (None for a new topic). The change listeners are not called: the caller registers with the name
        servers itself (4.9.8's registerIncrementBrokerData answers only after that registration)."""
        old = self.table.get(tc.topicName)
        self.table[tc.topicName] = tc
        if old is not None:
            log.info("update topic config, old=%s new=%s", old, tc)
        else:
            log.info("create new topic %s", tc)
        self._next_data_version()
        self._persist_logged()
        return old

    def create_topic_in_send_message_back_method(self, topic: str, queue_nums: int, perm: int,
                                                 topic_sys_flag: int = 0) -> TopicConfig | None:
        """TopicConfigManager.createTopicInSendMessageBackMethod: create ``topic`` (a retry topic) if missing.

        None when the table is full (:meth:`creation_refused`, logged on one line)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        refused = self.creation_refused(topic)
        if refused is not None:
            log.warning("create topic failed: %s", refused)
            return None
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, topicSysFlag=topic_sys_flag)
        self.table[topic] = tc
        self._next_data_version()
        log.info("topic created topic=%s queues=%d (retry topic)", topic, queue_nums)
        self._persist_logged()
        self._changed()
        return tc

    def replace_from_master(self, obj: dict) -> bool:
        """Slave sync (SlaveSynchronize.syncTopicConfig, docs/protocol.md §3.2): when the master's ``dataVersion``
        differs, replace the whole table (topics the master dropped go away) and persist. True if replaced."""
        dv = obj.get("dataVersion")
        table = obj.get("topicConfigTable")
        if not isinstance(dv, dict) or not isinstance(table, dict):
            raise ValueError("TopicConfigSerializeWrapper without dataVersion/topicConfigTable")
        version = {"counter": int(dv.get("counter", 0)), "timestamp": int(dv.get("timestamp", 0))}
        if version == self.data_version:
            return False
        self.table = {str(name): TopicConfig.from_json(tc) for name, tc in table.items()}
        self.data_version = version
        self.persist()
        log.info("topic config replaced from master topics=%d dataVersion=%s", len(self.table), version)
        return True
