"""Topic administration requests of RocketMQ 4.9.8 ``AdminBrokerProcessor``: UPDATE_AND_CREATE_TOPIC (17) and
GET_TOPIC_STATS_INFO (202), behind ``mqadmin updateTopic`` and ``topicStatus``.

What they change and answer, the refusals and the ACL rule: docs/broker_stub.md "mqadmin" and docs/security.md
"Plain ACL on the remoting port".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from broker_stub.remoting.admin_bodies import MessageQueue, encode_topic_stats_table
from broker_stub.remoting.server import Processor, RequestContext, request_only
from broker_stub.store.message_store import DefaultMessageStore
from broker_stub.topic_config import TopicConfig
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.topics import is_system_topic, validate_topic

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.outer_api import BrokerOuterAPI
    from broker_stub.topic_config import TopicConfigManager


class TopicAdminContext(Protocol):
    """What topic_admin_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore
    topic_config_manager: TopicConfigManager
    outer_api: BrokerOuterAPI


log = logging.getLogger(__name__)

TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")  # TopicFilterType
SLAVE_REFUSAL = ("Can't modify topic or subscription group from slave broker, please execute it from master "
                 "broker.")
_CREATE_TOPIC_REQUIRED = ("topic", "defaultTopic", "readQueueNums", "writeQueueNums", "perm", "topicFilterType",
                          "order")


def message_store_timestamp(store: DefaultMessageStore, topic: str, queue_id: int, queue_offset: int) -> int:
    """DefaultMessageStore.getMessageStoreTimeStamp: the store timestamp (epoch ms) of the record a queue's
    entry ``queue_offset`` points at; −1 when the entry or its record is gone."""
    cq = store.cq_store.find(topic, queue_id)
    entry = cq.entry(queue_offset) if cq is not None and queue_offset >= 0 else None
    record = store.commit_log.look_message_by_offset(entry[0]) if entry is not None else None
    return record.store_timestamp if record is not None else -1


class TopicAdminProcessor:
    """Serves UPDATE_AND_CREATE_TOPIC and GET_TOPIC_STATS_INFO for one broker (see module doc)."""

    def __init__(self, context: TopicAdminContext) -> None:
        self.context = context

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on."""
        return {RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
                RequestCode.GET_TOPIC_STATS_INFO: request_only(self.get_topic_stats_info)}

    def _topic_config_from_header(self, request: RemotingCommand) -> TopicConfig | str:
        """The TopicConfig a CreateTopicRequestHeader asks for, or the refusal remark."""
        ext = request.ext_fields or {}
        for name in _CREATE_TOPIC_REQUIRED:
            if ext.get(name) is None:
                return f"the custom field <{name}> is null"
        topic = ext["topic"]
        refused = validate_topic(topic)
        if refused is not None:
            return refused
        if is_system_topic(topic):
            return f"The topic[{topic}] is conflict with system topic."
        if ext["topicFilterType"] not in TOPIC_FILTER_TYPES:
            return f"No enum constant TopicFilterType.{ext['topicFilterType'][:64]}"
        try:
            return TopicConfig(topic, readQueueNums=int(ext["readQueueNums"]),
                               writeQueueNums=int(ext["writeQueueNums"]), perm=int(ext["perm"]),
                               topicFilterType=ext["topicFilterType"],
                               topicSysFlag=int(ext.get("topicSysFlag") or 0))
        except ValueError as exc:
            return f"bad CreateTopicRequestHeader number: {exc}"

    async def update_and_create_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC (see module doc)."""
        c = self.context
        if c.config.is_slave:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=SLAVE_REFUSAL)
        tc = self._topic_config_from_header(request)
        if isinstance(tc, str):
            log.warning("updateAndCreateTopic refused: %s peer=%s", tc, ctx.peer_text)
            return request.response(ResponseCode.SYSTEM_ERROR, remark=tc)
        manager = c.topic_config_manager
        refused = manager.creation_refused(tc.topicName)
        if refused is not None:
            log.warning("updateAndCreateTopic refused: %s peer=%s", refused, ctx.peer_text)
            return request.response(ResponseCode.SYSTEM_ERROR, remark=refused)
        log.info("updateAndCreateTopic called by %s", ctx.peer_text)
        manager.update_topic_config(tc)
        await c.outer_api.register_broker_all()  # registerIncrementBrokerData: answered once registered
        return request.response(ResponseCode.SUCCESS)

    def get_topic_stats_info(self, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO (see module doc)."""
        topic = (request.ext_fields or {}).get("topic")
        c = self.context
        tc = c.topic_config_manager.select_topic_config(topic) if topic is not None else None
        if tc is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"topic[{topic}] not exist")
        store = c.message_store
        broker_name = c.config.broker.brokerName
        offsets = {}
        for queue_id in range(tc.writeQueueNums):
            min_offset = max(store.get_min_offset_in_queue(topic, queue_id), 0)
            max_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
            timestamp = message_store_timestamp(store, topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            offsets[MessageQueue(topic, broker_name, queue_id)] = (min_offset, max_offset, timestamp)
        return request.response(ResponseCode.SUCCESS, body=encode_topic_stats_table(offsets))


__all__ = ["SLAVE_REFUSAL", "TopicAdminProcessor", "message_store_timestamp"]
