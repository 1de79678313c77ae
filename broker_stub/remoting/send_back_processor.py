"""Consumer retries: CONSUMER_SEND_MSG_BACK (36) and sends to ``%RETRY%group`` (RocketMQ 4.9.8
``SendMessageProcessor.asyncConsumerSendMsgBack`` and ``handleRetryAndDLQ``).

A handed-back message is copied to ``%RETRY%group`` with a ``DELAY`` level (delivered there by
:mod:`broker_stub.store.schedule`) or, at the maximum, to ``%DLQ%group``; :func:`retry_send_target` redirects a
plain send to the retry topic the same way. The checks in order, the copy's fields and property order (kept by
:class:`broker_stub.javautil.JavaHashMap`) and the answers: docs/broker_stub.md "What it does (RocketMQ 4.9.8
behaviour)", "Consumer retries".
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker_stub.javautil import JavaHashMap, parse_boolean
from broker_stub.remoting.server import Processor, RequestContext
from broker_stub.store.commit_log import MessageExtBrokerInner, PutMessageStatus
from connector.protocol.broker import PERM_READ, PERM_WRITE
from connector.protocol.commitlog import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_WAIT_STORE_MSG_OK, MessageRecord
from connector.protocol.commitlog.properties import PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.metadata import SubscriptionGroupConfig, SubscriptionGroupManager
    from broker_stub.store.message_store import DefaultMessageStore
    from broker_stub.topic_config import TopicConfig, TopicConfigManager


class SendBackContext(Protocol):
    """What send_back_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore
    topic_config_manager: TopicConfigManager
    subscription_group_manager: SubscriptionGroupManager


log = logging.getLogger(__name__)

MQ_VERSION_V3_4_9 = 121  # MQVersion.Version.V3_4_9.ordinal(): clients from here on send maxReconsumeTimes
DLQ_NUMS_PER_GROUP = 1  # AbstractSendMessageProcessor.DLQ_NUMS_PER_GROUP
FIRST_RETRY_DELAY_LEVEL = 3  # delayLevel 0 → 3 + reconsumeTimes
_REQUIRED = ("offset", "group", "delayLevel")
_RANDOM = random.Random()


class SendBackRefused(Exception):
    """A hand-back (or retry-topic send) the broker refuses: ``code`` and ``remark`` of the response."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass
class SendBackHeader:
    """ConsumerSendMsgBackRequestHeader: ``offset`` is a CommitLog offset (bytes)."""

    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None

    @classmethod
    def parse(cls, request: RemotingCommand) -> SendBackHeader:
        """The typed header. Raises SendBackRefused (SYSTEM_ERROR naming the field) for a missing required
        field or a number that does not parse, as the RemotingCommandException of decodeCommandCustomHeader."""
        ext = request.ext_fields or {}
        for name in _REQUIRED:
            if ext.get(name) is None:
                raise SendBackRefused(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")

        def number(name: str) -> int | None:
            value = ext.get(name)
            try:
                return None if value is None else int(value.strip())
            except ValueError:
                raise SendBackRefused(ResponseCode.SYSTEM_ERROR,
                                      f"the custom field <{name}> = {value!r} is not a number") from None
        return cls(offset=number("offset"), group=ext["group"], delay_level=number("delayLevel"),
                   origin_msg_id=ext.get("originMsgId"), origin_topic=ext.get("originTopic"),
                   unit_mode=parse_boolean(ext.get("unitMode") or "false"),
                   max_reconsume_times=number("maxReconsumeTimes"))


def max_reconsume_times(group: SubscriptionGroupConfig, header_value: int | None, request_version: int) -> int:
    """The header's maxReconsumeTimes for clients from V3_4_9 on when it is given, else ``retryMaxTimes``."""
    if request_version >= MQ_VERSION_V3_4_9 and header_value is not None:
        return header_value
    return group.retryMaxTimes


def send_back_message(looked: MessageRecord, topic: str, queue_id: int, delay_level: int) -> MessageExtBrokerInner:
    """The copy CONSUMER_SEND_MSG_BACK stores for ``looked`` in ``topic``/``queue_id`` with ``DELAY`` =
    ``delay_level`` (0 for the dead-letter queue) — step 5 of the module doc, before the CommitLog moves a
    delayed copy to SCHEDULE_TOPIC_XXXX. Raises UnicodeDecodeError for properties that are not UTF-8."""
    props = JavaHashMap.from_properties_string(looked.properties_raw.decode("utf-8"))
    if props.get(PROPERTY_RETRY_TOPIC) is None:
        props.put(PROPERTY_RETRY_TOPIC, looked.topic)
    props.put(PROPERTY_WAIT_STORE_MSG_OK, "false")
    props.put(PROPERTY_DELAY_TIME_LEVEL, str(delay_level))
    origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
    props.put(PROPERTY_ORIGIN_MESSAGE_ID, origin if origin and origin.strip() else looked.msg_id)  # isBlank
    return MessageExtBrokerInner(
        topic=topic, queue_id=queue_id, body=looked.body, flag=looked.flag, properties=props,
        properties_string=props.to_properties_string(), sys_flag=looked.sys_flag,
        born_timestamp=looked.born_timestamp, born_host=looked.born_host, store_host=looked.store_host,
        reconsume_times=looked.reconsume_times + 1)


def _group_config(context: SendBackContext, group: str) -> SubscriptionGroupConfig:
    cfg = context.subscription_group_manager.find(group)
    if cfg is None:
        raise SendBackRefused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                              f"subscription group not exist, {group}")
    return cfg


def dead_letter_queue(context: SendBackContext, group: str) -> tuple[str, int]:
    """``%DLQ%group`` (created when missing: 1 queue, perm read+write) and a queue of it.

    Raises SendBackRefused (SYSTEM_ERROR) when the topic cannot be created (the topic table is full)."""
    topic = DLQ_GROUP_TOPIC_PREFIX + group
    if context.topic_config_manager.create_topic_in_send_message_back_method(
            topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ) is None:
        raise SendBackRefused(ResponseCode.SYSTEM_ERROR, f"topic[{topic}] not exist")
    return topic, _RANDOM.randrange(99999999) % DLQ_NUMS_PER_GROUP


def retry_send_target(context: SendBackContext, topic: str, reconsume_times: int | None,
                      header_max_reconsume_times: int | None, request_version: int) -> tuple[str, int] | None:
    """handleRetryAndDLQ for a plain send: the dead-letter (topic, queue) a send to ``%RETRY%group`` goes to
    instead when its reconsumeTimes reached the maximum, None when it is stored as sent.

    Raises SendBackRefused: SUBSCRIPTION_GROUP_NOT_EXIST for an unknown group, SYSTEM_ERROR when the
    dead-letter topic cannot be created."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
    cfg = _group_config(context, group)
    if (reconsume_times or 0) < max_reconsume_times(cfg, header_max_reconsume_times, request_version):
        return None
    return dead_letter_queue(context, group)


def retry_topic_for_send(topics: TopicConfigManager, topic: str, topic_sys_flag: int) -> TopicConfig | None:
    """msgCheck's last resort for a send to a missing topic its default topic cannot create: a ``%RETRY%``
    topic is created with 1 queue, perm read+write. None for other topics or a full topic table."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    return topics.create_topic_in_send_message_back_method(topic, 1, PERM_WRITE | PERM_READ, topic_sys_flag)


class ConsumerSendMsgBackProcessor:
    """Serves CONSUMER_SEND_MSG_BACK (see the module doc)."""

    CODES = (RequestCode.CONSUMER_SEND_MSG_BACK,)

    def __init__(self, context: SendBackContext) -> None:
        self.context = context

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on."""
        return dict.fromkeys(self.CODES, self.consumer_send_msg_back)

    def consumer_send_msg_back(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            msg = self._retry_copy(request)
        except SendBackRefused as exc:
            log.warning("consumer send back refused peer=%s code=%d remark=%s", ctx.peer_text, exc.code, exc.remark)
            return request.response(exc.code, remark=exc.remark)
        if msg is None:
            return request.response(ResponseCode.SUCCESS)
        if self.context.config.is_slave:  # DefaultMessageStore.checkStoreStatus
            return request.response(ResponseCode.SYSTEM_ERROR, remark=PutMessageStatus.SERVICE_NOT_AVAILABLE.name)
        put = self.context.message_store.commit_log.put_message(msg)
        if put.status is not PutMessageStatus.PUT_OK:
            self.context.message_store.stats.on_put_failed()
            return request.response(ResponseCode.SYSTEM_ERROR, remark=put.status.name)
        # no msgPutTotal* count: 4.9.8 counts sends only (incBrokerPutNums), the store counts every put
        log.debug("message sent back topic=%s queueId=%d reconsumeTimes=%d peer=%s", msg.topic, msg.queue_id,
                  msg.reconsume_times, ctx.peer_text)
        return request.response(ResponseCode.SUCCESS)

    def _retry_copy(self, request: RemotingCommand) -> MessageExtBrokerInner | None:
        """Steps 1–5: the copy to store, None when the group keeps no retries. Raises SendBackRefused."""
        header = SendBackHeader.parse(request)
        c = self.context
        group = _group_config(c, header.group)
        if not c.config.broker.brokerPermission & PERM_WRITE:
            raise SendBackRefused(ResponseCode.NO_PERMISSION,
                                  f"the broker[{c.config.broker.brokerIP1}] sending message is forbidden")
        if group.retryQueueNums <= 0:
            return None
        topic = RETRY_GROUP_TOPIC_PREFIX + header.group
        queue_id = _RANDOM.randrange(99999999) % group.retryQueueNums
        topic_sys_flag = 0x2 if header.unit_mode else 0  # TopicSysFlag.buildSysFlag(false, true)
        tc = c.topic_config_manager.create_topic_in_send_message_back_method(
            topic, group.retryQueueNums, PERM_WRITE | PERM_READ, topic_sys_flag)
        if tc is None:
            raise SendBackRefused(ResponseCode.SYSTEM_ERROR, f"topic[{topic}] not exist")
        if not tc.perm & PERM_WRITE:
            raise SendBackRefused(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        looked = c.message_store.commit_log.look_message_by_offset(header.offset)
        if looked is None:
            raise SendBackRefused(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")
        delay_level = header.delay_level
        if (looked.reconsume_times >= max_reconsume_times(group, header.max_reconsume_times, request.version)
                or delay_level < 0):
            topic, queue_id = dead_letter_queue(c, header.group)
            delay_level = 0
        elif delay_level == 0:
            delay_level = FIRST_RETRY_DELAY_LEVEL + looked.reconsume_times
        try:
            return send_back_message(looked, topic, queue_id, delay_level)
        except UnicodeDecodeError as exc:
            raise SendBackRefused(ResponseCode.SYSTEM_ERROR, f"bad message properties: {exc}") from None
