"""Client and consumer-offset requests: RocketMQ 4.9.8 ``ClientManageProcessor`` + ``ConsumerManageProcessor``
(HEART_BEAT 34, UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38, QUERY/UPDATE_CONSUMER_OFFSET 14/15,
CHECK_CLIENT_CONFIG 46), and the live clients they register (dropped 120 s after their last heartbeat).

Headers and answers: docs/protocol.md §4.6; groups, retry topics and name checks: docs/security.md "Names and
caps"; SQL92 subscriptions: docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)", "SQL92 filters".
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from broker_stub.javautil import fastjson_loads
from broker_stub.name_rules import validate_group
from broker_stub.remoting.admin_bodies import encode_consumer_id_list
from broker_stub.remoting.server import Processor, RequestContext
from connector.protocol.broker import PERM_READ, PERM_WRITE
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.topics import RETRY_GROUP_TOPIC_PREFIX, validate_topic

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.metadata import ConsumerOffsetManager, SubscriptionGroupManager
    from broker_stub.store.message_store import DefaultMessageStore
    from broker_stub.topic_config import TopicConfigManager


class ConsumerContext(Protocol):
    """What consumer_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore
    topic_config_manager: TopicConfigManager
    consumer_offset_manager: ConsumerOffsetManager
    subscription_group_manager: SubscriptionGroupManager
    consumer_manager: ConsumerManager


log = logging.getLogger(__name__)

CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


@dataclass
class ClientChannelInfo:
    """A client's connection as its last heartbeat showed it (4.9.8 ``ClientChannelInfo``): ``client_addr`` is
    the peer ``"ip:port"``, ``language`` and ``version`` come from the request header (e.g. ``"JAVA"``, 409)."""

    client_addr: str
    language: str
    version: int


@dataclass
class _ConsumerGroupInfo:
    clients: dict[str, float] = field(default_factory=dict)  # clientID → last heartbeat (monotonic s)
    subscriptions: dict[str, dict] = field(default_factory=dict)  # topic → SubscriptionData JSON
    message_model: str = "CLUSTERING"
    consume_type: str = "CONSUME_PASSIVELY"  # ConsumeType name (PULL: CONSUME_ACTIVELY)
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[str, ClientChannelInfo] = field(default_factory=dict)  # clientID → its connection


class ConsumerManager:
    """Consumer groups known from heartbeats (ConsumerManager)."""

    def __init__(self) -> None:
        self.groups: dict[str, _ConsumerGroupInfo] = {}
        self.producer_groups: dict[str, dict[str, float]] = {}
        self.producer_channels: dict[str, dict[str, RequestContext]] = {}  # group → clientID → its connection
        self._producer_turn = 0

    def register_consumer(self, group: str, client_id: str, subscriptions: list[dict], message_model: str, *,
                          consume_type: str = "", consume_from_where: str = "",
                          channel: ClientChannelInfo | None = None) -> None:
        """Record one heartbeat's consumer data (empty strings keep the group's previous values)."""
        info = self.groups.setdefault(group, _ConsumerGroupInfo())
        info.clients[client_id] = time.monotonic()
        info.message_model = message_model or info.message_model
        info.consume_type = consume_type or info.consume_type
        info.consume_from_where = consume_from_where or info.consume_from_where
        if channel is not None:
            info.channels[client_id] = channel
        for sub in subscriptions:
            if isinstance(sub, dict) and sub.get("topic"):
                info.subscriptions[str(sub["topic"])] = sub

    def register_producer(self, group: str, client_id: str, channel: RequestContext | None = None) -> None:
        self.producer_groups.setdefault(group, {})[client_id] = time.monotonic()
        if channel is not None:
            self.producer_channels.setdefault(group, {})[client_id] = channel

    def available_producer_channel(self, group: str) -> RequestContext | None:
        """ProducerManager.getAvailableChannel: an open connection of a live producer of ``group`` (taken in
        turn), None when the group has none. Producers silent for 120 s are dropped first."""
        seen = self.producer_groups.get(group, {})
        channels = self.producer_channels.get(group, {})
        limit = time.monotonic() - CHANNEL_EXPIRED_TIMEOUT_MS / 1000
        for cid in [c for c, t in seen.items() if t < limit]:
            del seen[cid]
            channels.pop(cid, None)
        alive = [channels[c] for c in sorted(channels) if c in seen and channels[c].active]
        if not alive:
            return None
        self._producer_turn += 1
        return alive[self._producer_turn % len(alive)]

    def unregister(self, client_id: str, producer_group: str | None, consumer_group: str | None) -> None:
        if consumer_group and consumer_group in self.groups:
            self.groups[consumer_group].clients.pop(client_id, None)
        if producer_group and producer_group in self.producer_groups:
            self.producer_groups[producer_group].pop(client_id, None)
            self.producer_channels.get(producer_group, {}).pop(client_id, None)

    def alive_clients(self, group: str) -> list[str]:
        info = self.groups.get(group)
        if info is None:
            return []
        limit = time.monotonic() - CHANNEL_EXPIRED_TIMEOUT_MS / 1000
        for cid in [c for c, t in info.clients.items() if t < limit]:
            del info.clients[cid]
        return sorted(info.clients)

    def find_subscription(self, group: str, topic: str) -> dict | None:
        info = self.groups.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def online_group(self, group: str) -> _ConsumerGroupInfo | None:
        """The group's info while at least one of its clients is alive (4.9.8 getConsumerGroupInfo), else None."""
        return self.groups.get(group) if self.alive_clients(group) else None

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        """ConsumerManager.queryTopicConsumeByWho: the online groups subscribed to ``topic``."""
        return {g for g, info in list(self.groups.items()) if topic in info.subscriptions and self.alive_clients(g)}


class ConsumerProcessor:
    """Serves HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, QUERY/UPDATE_CONSUMER_OFFSET."""

    def __init__(self, context: ConsumerContext) -> None:
        self.context = context

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on."""
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    @staticmethod
    def _header(request: RemotingCommand, *names: str) -> dict[str, str]:
        ext = request.ext_fields or {}
        for name in names:
            if ext.get(name) is None:
                raise ValueError(f"the custom field <{name}> is null")
        return ext

    def heart_beat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            data = fastjson_loads(request.body)
            if not isinstance(data, dict):
                raise ValueError("HeartbeatData is not a JSON object")
        except (UnicodeDecodeError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad HeartbeatData body: {exc}")
        client_id = str(data.get("clientID") or ctx.peer_text)
        c = self.context
        refused = self._refused_groups(data)
        if refused is not None:
            log.warning("heartbeat refused: %s client=%s", refused, ctx.peer_text)
            return request.response(ResponseCode.SYSTEM_ERROR, remark=refused)
        for consumer in data.get("consumerDataSet") or []:
            if not isinstance(consumer, dict) or not consumer.get("groupName"):
                continue
            group = str(consumer["groupName"])
            group_cfg = c.subscription_group_manager.find(group)
            if group_cfg is not None and group_cfg.retryQueueNums > 0:
                retry_topic = RETRY_GROUP_TOPIC_PREFIX + group
                if c.topic_config_manager.create_topic_in_send_message_back_method(
                        retry_topic, group_cfg.retryQueueNums, PERM_READ | PERM_WRITE) is None:
                    return request.response(ResponseCode.SYSTEM_ERROR,
                                            remark=c.topic_config_manager.creation_refused(retry_topic))
            subs = consumer.get("subscriptionDataSet") or []
            c.consumer_manager.register_consumer(group, client_id, subs if isinstance(subs, list) else [],
                                                 str(consumer.get("messageModel") or "CLUSTERING"),
                                                 consume_type=str(consumer.get("consumeType") or ""),
                                                 consume_from_where=str(consumer.get("consumeFromWhere") or ""),
                                                 channel=ClientChannelInfo(ctx.peer_text, request.language,
                                                                           request.version))
        for producer in data.get("producerDataSet") or []:
            if isinstance(producer, dict) and producer.get("groupName"):
                c.consumer_manager.register_producer(str(producer["groupName"]), client_id, ctx)
        return request.response(ResponseCode.SUCCESS)

    def _refused_groups(self, data: dict) -> str | None:
        """The first reason a heartbeat's groups may not be stored (a bad name, a full table), else None
        (docs/security.md "Names and caps"). Producer groups are checked by name only (kept in memory)."""
        for consumer in data.get("consumerDataSet") or []:
            if isinstance(consumer, dict) and consumer.get("groupName"):
                group = str(consumer["groupName"])
                refused = (self.context.subscription_group_manager.creation_refused(group)
                           if self.context.subscription_group_manager.auto_create else validate_group(group))
                if refused is not None:
                    return refused
        for producer in data.get("producerDataSet") or []:
            if isinstance(producer, dict) and producer.get("groupName"):
                refused = validate_group(str(producer["groupName"]))
                if refused is not None:
                    return refused.replace("consumer group", "producer group")
        return None

    def check_client_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """ClientManageProcessor.checkClientConfig (see the module doc)."""
        try:
            data = fastjson_loads(request.body) if request.body else None
        except (UnicodeDecodeError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad CheckClientRequestBody: {exc}")
        sub = data.get("subscriptionData") if isinstance(data, dict) else None
        if not isinstance(sub, dict):
            return request.response(ResponseCode.SUCCESS)
        expression_type = sub.get("expressionType")
        if not expression_type or str(expression_type) == "TAG":  # ExpressionType.isTagType
            return request.response(ResponseCode.SUCCESS)
        if not self.context.config.broker.enablePropertyFilter:
            return request.response(ResponseCode.SYSTEM_ERROR, remark="The broker does not support consumer to "
                                    f"filter message by {expression_type}")
        log.warning("client filter refused: the stub cannot compile %s expressions client=%s sub=%s",
                    expression_type, ctx.peer_text, sub.get("subString"))
        return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                remark=f"the broker stub has no {expression_type} filter")

    def unregister_client(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        self.context.consumer_manager.unregister(ext.get("clientID", ""), ext.get("producerGroup"),
                                                    ext.get("consumerGroup"))
        return request.response(ResponseCode.SUCCESS)

    def get_consumer_list_by_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            ext = self._header(request, "consumerGroup")
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        clients = self.context.consumer_manager.alive_clients(ext["consumerGroup"])
        if not clients:
            return request.response(ResponseCode.SYSTEM_ERROR, remark="no consumer for this group, "
                                    + ext["consumerGroup"])
        return request.response(ResponseCode.SUCCESS, body=encode_consumer_id_list(clients))

    def query_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            ext = self._header(request, "consumerGroup", "topic", "queueId")
            queue_id = int(ext["queueId"])
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        c = self.context
        offset = c.consumer_offset_manager.query_offset(ext["consumerGroup"], ext["topic"], queue_id)
        if offset >= 0:
            return request.response(ResponseCode.SUCCESS, {"offset": offset})
        if c.message_store.get_min_offset_in_queue(ext["topic"], queue_id) <= 0:
            return request.response(ResponseCode.SUCCESS, {"offset": 0})
        return request.response(ResponseCode.QUERY_NOT_FOUND,
                                remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def update_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            ext = self._header(request, "consumerGroup", "topic", "queueId", "commitOffset")
            queue_id, offset = int(ext["queueId"]), int(ext["commitOffset"])
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        c = self.context
        group, topic = ext["consumerGroup"], ext["topic"]
        refused = validate_group(group) or validate_topic(topic)
        if refused is not None:
            log.warning("consumer offset not stored: %s client=%s", refused, ctx.peer_text)
            return request.response(ResponseCode.SYSTEM_ERROR, remark=refused)
        if c.subscription_group_manager.find(group) is None:  # bounded by maxSubscriptionGroupNums
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    remark=f"subscription group [{group}] does not exist")
        c.consumer_offset_manager.commit_offset(group, topic, queue_id, offset)
        return request.response(ResponseCode.SUCCESS)
