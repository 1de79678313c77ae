"""Consumer statistics requests of RocketMQ 4.9.8 ``AdminBrokerProcessor``: GET_CONSUME_STATS (208),
GET_CONSUMER_CONNECTION_LIST (203) and QUERY_TOPIC_CONSUME_BY_WHO (300), behind ``mqadmin consumerProgress`` and
``topicList -c``. Bodies: :mod:`broker_stub.remoting.admin_bodies`.

What each answer holds and where it differs from 4.9.8: docs/broker_stub.md "mqadmin".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker_stub.remoting.admin_bodies import (
    MessageQueue,
    encode_consume_stats,
    encode_consumer_connection,
    encode_group_list,
)
from broker_stub.remoting.server import Processor, RequestContext
from broker_stub.remoting.topic_admin_processor import message_store_timestamp
from connector.protocol.config_files import TOPIC_GROUP_SEPARATOR
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.metadata import ConsumerOffsetManager
    from broker_stub.remoting.consumer_processor import ConsumerManager
    from broker_stub.store.message_store import DefaultMessageStore
    from broker_stub.topic_config import TopicConfigManager


class ConsumerAdminContext(Protocol):
    """What consumer_admin_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore
    topic_config_manager: TopicConfigManager
    consumer_offset_manager: ConsumerOffsetManager
    consumer_manager: ConsumerManager


def _needing(name: str, handler: Callable[[RemotingCommand, str], RemotingCommand]) -> Processor:
    """A handler called with the request's ``name`` header field; SYSTEM_ERROR naming it when it is absent."""
    def handle(_ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        value = (request.ext_fields or {}).get(name)
        if value is None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"the custom field <{name}> is null")
        return handler(request, value)
    return handle


class ConsumerAdminProcessor:
    """Serves GET_CONSUME_STATS, GET_CONSUMER_CONNECTION_LIST and QUERY_TOPIC_CONSUME_BY_WHO (module doc)."""

    def __init__(self, context: ConsumerAdminContext) -> None:
        self.context = context

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on; each needs one header field."""
        return {
            RequestCode.GET_CONSUME_STATS: _needing("consumerGroup", lambda request, group: self.get_consume_stats(
                request, group, (request.ext_fields or {}).get("topic"))),
            RequestCode.GET_CONSUMER_CONNECTION_LIST: _needing("consumerGroup", self.get_consumer_connection_list),
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: _needing("topic", self.query_topic_consume_by_who),
        }

    def _offset_keys(self) -> list[tuple[str, str]]:
        """``(topic, group)`` of every committed-offset entry (keys ``topic@group``)."""
        keys = []
        for key in list(self.context.consumer_offset_manager.offset_table):
            topic, sep, group = key.partition(TOPIC_GROUP_SEPARATOR)
            if sep:
                keys.append((topic, group))
        return keys

    def get_consume_stats(self, request: RemotingCommand, group: str, topic: str | None) -> RemotingCommand:
        """GET_CONSUME_STATS (see module doc)."""
        c = self.context
        if topic is None or not topic.strip():
            topics = sorted({t for t, g in self._offset_keys() if g == group})
        else:
            topics = [topic]
        online = c.consumer_manager.online_group(group)
        store = c.message_store
        broker_name = c.config.broker.brokerName
        offsets = {}
        for name in topics:
            tc = c.topic_config_manager.select_topic_config(name)
            if tc is None:
                continue
            if online is not None and online.subscriptions and name not in online.subscriptions:
                continue
            for queue_id in range(tc.readQueueNums):
                broker_offset = max(store.get_max_offset_in_queue(name, queue_id), 0)
                consumer_offset = max(c.consumer_offset_manager.query_offset(group, name, queue_id), 0)
                last = message_store_timestamp(store, name, queue_id, consumer_offset - 1)
                offsets[MessageQueue(name, broker_name, queue_id)] = (broker_offset, consumer_offset, max(last, 0))
        return request.response(ResponseCode.SUCCESS, body=encode_consume_stats(offsets, 0.0))

    def get_consumer_connection_list(self, request: RemotingCommand, group: str) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST (see module doc)."""
        manager = self.context.consumer_manager
        info = manager.online_group(group)
        if info is None:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE, remark=f"the consumer group[{group}] not online")
        connections = []
        for client_id in manager.alive_clients(group):
            channel = info.channels.get(client_id)
            if channel is not None:
                connections.append((client_id, channel.client_addr, channel.language, channel.version))
        body = encode_consumer_connection(connections, info.consume_type, info.message_model,
                                          info.consume_from_where, info.subscriptions)
        return request.response(ResponseCode.SUCCESS, body=body)

    def query_topic_consume_by_who(self, request: RemotingCommand, topic: str) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO (see module doc)."""
        groups = self.context.consumer_manager.query_topic_consume_by_who(topic)
        groups |= {g for t, g in self._offset_keys() if t == topic}
        return request.response(ResponseCode.SUCCESS, body=encode_group_list(sorted(groups)))


__all__ = ["ConsumerAdminProcessor"]
