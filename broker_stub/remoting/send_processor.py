"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320): RocketMQ 4.9.8 ``SendMessageProcessor``
(``asyncSendMessage`` / ``asyncSendBatchMessage`` + ``msgCheck``): header checks, topic creation from the default
topic, properties (``CLUSTER`` added, ``WAIT`` kept out of the stored string), half messages for ``TRAN_MSG``, and
the answer once the store, flush and replica waits are done. A SLAVE refuses every send.

Headers and answers: docs/protocol.md §4.5, properties §1.5, statuses §2.10; transactions and retries:
docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)" (sends to ``%RETRY%group``:
:mod:`broker_stub.remoting.send_back_processor`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import TYPE_CHECKING, Protocol

from broker_stub.javautil import JavaHashMap, parse_boolean
from broker_stub.remoting.send_back_processor import SendBackRefused, retry_send_target, retry_topic_for_send
from broker_stub.remoting.server import Processor, RequestContext
from broker_stub.store.commit_log import (
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageException,
    PutMessageResult,
    PutMessageStatus,
)
from broker_stub.topic_config import TopicConfig
from connector.protocol.commitlog import (
    MULTI_TAGS_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_TYPE_MASK,
    HostAddress,
)
from connector.protocol.commitlog.properties import (
    PROPERTY_MSG_REGION,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_TRANSACTION_PREPARED,
)
from connector.protocol.remoting import SEND_MESSAGE_V2_FIELD_NAMES, RemotingCommand, RequestCode, ResponseCode
from connector.protocol.topics import (
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TRANS_HALF_TOPIC,
    validate_topic,
)

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.ha.service import HAService
    from broker_stub.metadata import SubscriptionGroupManager
    from broker_stub.store.message_store import DefaultMessageStore
    from broker_stub.store.stats import BrokerStats
    from broker_stub.topic_config import TopicConfigManager


class SendContext(Protocol):
    """What send_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore
    broker_stats: BrokerStats
    topic_config_manager: TopicConfigManager
    subscription_group_manager: SubscriptionGroupManager
    ha_service: HAService


log = logging.getLogger(__name__)

_REQUIRED = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
             "bornTimestamp", "flag")
_INT_FIELDS = ("defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag", "reconsumeTimes",
               "maxReconsumeTimes")
_BOOL_FIELDS = ("unitMode", "batch")
_CODE_BY_STATUS = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}


class SendRequestHeaderError(ValueError):
    """A send request header the broker cannot decode (answered with SYSTEM_ERROR naming the field)."""


def parse_send_request_header(cmd: RemotingCommand) -> dict:
    """The SendMessageRequestHeader (V1 names, typed values) of a 10/310/320 request.

    V2 short names (``a``..``n``) are translated (SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1).
    Raises SendRequestHeaderError for a missing required field or a malformed number.
    """
    ext = cmd.ext_fields or {}
    if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        fields = {SEND_MESSAGE_V2_FIELD_NAMES.get(k, k): v for k, v in ext.items()
                  if k in SEND_MESSAGE_V2_FIELD_NAMES}
        names = {v: k for k, v in SEND_MESSAGE_V2_FIELD_NAMES.items()}
    else:
        fields = dict(ext)
        names = {k: k for k in _REQUIRED}
    header: dict = {}
    for name in _REQUIRED:
        if fields.get(name) is None:
            raise SendRequestHeaderError(f"the custom field <{names.get(name, name)}> is null")
    for name, value in fields.items():
        if name in _INT_FIELDS:
            try:
                header[name] = int(value.strip())
            except ValueError:
                raise SendRequestHeaderError(
                    f"the custom field <{names.get(name, name)}> = {value!r} is not a number") from None
        elif name in _BOOL_FIELDS:
            header[name] = parse_boolean(value)
        else:
            header[name] = value
    header.setdefault("batch", False)
    header.setdefault("unitMode", False)
    return header


class SendMessageProcessor:
    """Handles the three send codes for one broker."""

    CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)

    def __init__(self, context: SendContext) -> None:
        self.context = context
        self.config = context.config
        self.store_host = HostAddress.parse(context.config.store_host)
        self._random = random.Random()

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on."""
        return dict.fromkeys(self.CODES, self.send_message)

    def send_message(self, ctx: RequestContext, request: RemotingCommand):
        try:
            header = parse_send_request_header(request)
        except SendRequestHeaderError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
        response_ext = {PROPERTY_MSG_REGION: self.config.broker.regionId,
                        PROPERTY_TRACE_SWITCH: "true" if self.config.broker.traceOn else "false"}
        if self.config.is_slave:  # DefaultMessageStore.checkStoreStatus: a slave never takes writes
            log.warning("message store is slave mode, so putMessage is forbidden producer=%s", ctx.peer_text)
            self.context.message_store.stats.on_put_failed()
            return self._response(request, PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), 0,
                                  response_ext)
        error = self._pre_send(ctx, request, header, response_ext)
        if error is not None:
            return error
        if header["batch"] or request.code == RequestCode.SEND_BATCH_MESSAGE:
            return self._send_batch(ctx, request, header, response_ext)
        return self._send_single(ctx, request, header, response_ext)

    # --- checks --------------------------------------------------------------------------------------
    def _pre_send(self, ctx: RequestContext, request: RemotingCommand, header: dict,
                  ext: dict) -> RemotingCommand | None:
        start_ts = self.config.broker.startAcceptSendRequestTimeStamp
        if time.time() * 1000 < start_ts:
            return request.response(ResponseCode.SYSTEM_ERROR, ext,
                                    remark=f"broker unable to service, until {start_ts}")
        topic = header["topic"]
        remark = validate_topic(topic)
        if remark is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, ext, remark=remark)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return request.response(ResponseCode.NO_PERMISSION, ext,
                                    remark=f"Sending message to topic[{topic}] is forbidden.")
        topics = self.context.topic_config_manager
        tc = topics.select_topic_config(topic)
        if tc is None:
            refused = topics.creation_refused(topic)
            if refused is not None:
                log.warning("send refused: %s producer=%s", refused, ctx.peer_text)
                return request.response(ResponseCode.SYSTEM_ERROR, ext, remark=refused)
            log.warning("the topic does not exist, creating topic=%s producer=%s", topic, ctx.peer_text)
            topic_sys_flag = 0
            if header["unitMode"]:  # TopicSysFlag.buildSysFlag: unit topic, or unit subscription for retry topics
                topic_sys_flag = 0x2 if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else 0x1
            tc = topics.create_topic_in_send_message_method(
                topic, header.get("defaultTopic"), ctx.peer_text, header["defaultTopicQueueNums"], topic_sys_flag)
            if tc is None:  # msgCheck: a %RETRY% topic is created all the same
                tc = retry_topic_for_send(topics, topic, topic_sys_flag)
            if tc is None:
                return request.response(ResponseCode.TOPIC_NOT_EXIST, ext,
                                        remark=f"topic[{topic}] not exist, apply first please!")
        queue_id = header["queueId"]
        id_valid = max(tc.writeQueueNums, tc.readQueueNums)
        if queue_id >= id_valid:
            info = (f"request queueId[{queue_id}] is illegal, TopicConfig [topicName={tc.topicName}, "
                    f"readQueueNums={tc.readQueueNums}, writeQueueNums={tc.writeQueueNums}, perm={tc.perm}] "
                    f"Producer: {ctx.peer_text}")
            log.warning("send rejected: %s", info)
            return request.response(ResponseCode.SYSTEM_ERROR, ext, remark=info)
        return None

    def _queue_id(self, header: dict, tc: TopicConfig) -> int:
        queue_id = header["queueId"]
        if queue_id < 0:
            queue_id = self._random.randrange(99999999) % max(tc.writeQueueNums, 1)
        return queue_id

    def _sys_flag(self, header: dict, tc: TopicConfig) -> int:
        sys_flag = header["sysFlag"]
        if tc.topicFilterType == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        return sys_flag

    # --- single message ------------------------------------------------------------------------------
    def _send_single(self, ctx: RequestContext, request: RemotingCommand, header: dict, ext: dict):
        tc = self.context.topic_config_manager.select_topic_config(header["topic"])
        queue_id = self._queue_id(header, tc)
        try:  # handleRetryAndDLQ: a retry copy past maxReconsumeTimes goes to %DLQ%group (response: queue_id)
            dead_letter = retry_send_target(self.context, header["topic"], header.get("reconsumeTimes"),
                                            header.get("maxReconsumeTimes"), request.version)
        except SendBackRefused as exc:
            return request.response(exc.code, ext, remark=exc.remark)
        topic, stored_queue_id = dead_letter or (header["topic"], queue_id)
        props = JavaHashMap.from_properties_string(header.get("properties"))
        props.put(PROPERTY_CLUSTER, self.config.broker.brokerClusterName)
        if PROPERTY_WAIT_STORE_MSG_OK in props:
            wait_value = props.remove(PROPERTY_WAIT_STORE_MSG_OK)
            props_string = props.to_properties_string()
            props.put(PROPERTY_WAIT_STORE_MSG_OK, wait_value)
        else:
            props_string = props.to_properties_string()
        msg = MessageExtBrokerInner(
            topic=topic, queue_id=stored_queue_id, body=request.body, flag=header["flag"], properties=props,
            properties_string=props_string, sys_flag=self._sys_flag(header, tc),
            born_timestamp=header["bornTimestamp"], born_host=ctx.peer, store_host=self.store_host,
            reconsume_times=header.get("reconsumeTimes") or 0)
        if parse_boolean(props.get(PROPERTY_TRANSACTION_PREPARED) or "false"):
            if self.config.broker.rejectTransactionMessage:
                return request.response(ResponseCode.NO_PERMISSION, ext, remark=(
                    f"the broker[{self.config.broker.brokerIP1}] sending transaction message is forbidden"))
            _to_half_message(msg)
        try:
            result = self.context.message_store.commit_log.put_message(msg)
        except ValueError as exc:  # DELAY that is not a number (NumberFormatException upstream)
            return request.response(ResponseCode.SYSTEM_ERROR, ext, remark=f"bad message property: {exc}")
        wait = (props.get(PROPERTY_WAIT_STORE_MSG_OK) or "true").lower() == "true"
        return self._respond(request, result, queue_id, ext, wait)

    # --- batch ---------------------------------------------------------------------------------------
    def _send_batch(self, ctx: RequestContext, request: RemotingCommand, header: dict, ext: dict):
        tc = self.context.topic_config_manager.select_topic_config(header["topic"])
        queue_id = self._queue_id(header, tc)
        topic = header["topic"]
        if len(topic) > 127:
            return request.response(ResponseCode.MESSAGE_ILLEGAL, ext,
                                    remark=f"message topic length too long {len(topic)}")
        props = JavaHashMap.from_properties_string(header.get("properties"))
        props.put(PROPERTY_CLUSTER, self.config.broker.brokerClusterName)
        batch = MessageExtBatch(
            topic=topic, queue_id=queue_id, body=request.body, flag=header["flag"], properties=props,
            sys_flag=self._sys_flag(header, tc), born_timestamp=header["bornTimestamp"], born_host=ctx.peer,
            store_host=self.store_host, reconsume_times=header.get("reconsumeTimes") or 0)
        try:
            result = self.context.message_store.commit_log.put_messages(batch)
        except PutMessageException as exc:
            self.context.message_store.stats.on_put_failed()
            return request.response(ResponseCode.SYSTEM_ERROR, ext, remark=str(exc))
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, ext, remark=f"bad message property: {exc}")
        wait = (props.get(PROPERTY_WAIT_STORE_MSG_OK) or "true").lower() == "true"
        return self._respond(request, result, queue_id, ext, wait)

    # --- results -------------------------------------------------------------------------------------
    def _respond(self, request: RemotingCommand, put: PutMessageResult, queue_id: int, ext: dict, wait: bool):
        if put.status is not PutMessageStatus.PUT_OK or put.result is None:
            self.context.message_store.stats.on_put_failed()
            return self._response(request, put, queue_id, ext)
        self.context.broker_stats.on_put(put.result.msg_num)
        store_cfg = self.config.store
        sync_flush = store_cfg.flushDiskType == "SYNC_FLUSH" and wait
        sync_master = store_cfg.brokerRole == "SYNC_MASTER" and wait
        if sync_flush or sync_master:
            return self._await_flush_and_replicas(request, put, queue_id, ext, sync_flush, sync_master)
        return self._response(request, put, queue_id, ext)

    async def _await_flush_and_replicas(self, request: RemotingCommand, put: PutMessageResult, queue_id: int,
                                        ext: dict, sync_flush: bool, sync_master: bool):
        """CommitLog.asyncPutMessage's ``thenCombine`` (docs/protocol.md §2.9 step 5): flush and replica waits run
        concurrently; the replica status overrides the flush status when it is not PUT_OK."""
        assert put.result is not None
        next_offset = put.result.next_offset
        store = self.context.message_store
        waits = []
        if sync_flush:
            waits.append(store.flush_service.wait_flush(next_offset))
        if sync_master:
            waits.append(self.context.ha_service.wait_for_replicas(next_offset))
        statuses = await asyncio.gather(*waits)
        status = PutMessageStatus.PUT_OK
        for s in statuses:  # flush first, replica last: a non-OK replica status wins
            if s is not PutMessageStatus.PUT_OK:
                status = s
        if status is not PutMessageStatus.PUT_OK:
            put = PutMessageResult(status, put.result)
        return self._response(request, put, queue_id, ext)

    def _response(self, request: RemotingCommand, put: PutMessageResult, queue_id: int,
                  ext: dict) -> RemotingCommand:
        status = put.status
        code = _CODE_BY_STATUS.get(status)
        if code is not None and put.result is not None:
            fields = dict(ext)
            fields.update(msgId=put.result.msg_id, queueId=queue_id, queueOffset=put.result.logics_offset)
            return request.response(code, fields)
        max_size = self.config.store.maxMessageSize
        remark = {
            PutMessageStatus.CREATE_MAPEDFILE_FAILED: "create mapped file failed, server is busy or broken.",
            PutMessageStatus.MESSAGE_ILLEGAL: (
                "the message is illegal, maybe msg body or properties length not matched. "
                f"msg body length limit {max_size}B, msg properties length limit 32KB."),
            PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (
                "the message is illegal, maybe msg body or properties length not matched. "
                f"msg body length limit {max_size}B, msg properties length limit 32KB."),
            PutMessageStatus.SERVICE_NOT_AVAILABLE: "service not available now.",
            PutMessageStatus.OS_PAGECACHE_BUSY: "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
        }.get(status, "UNKNOWN_ERROR")
        code = {PutMessageStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
                PutMessageStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE}.get(
                    status, ResponseCode.SYSTEM_ERROR)
        return request.response(code, ext, remark=remark)


def _to_half_message(msg: MessageExtBrokerInner) -> None:
    """TransactionalMessageBridge.parseHalfMessageInner: park a prepared message in the half topic."""
    msg.properties.put(PROPERTY_REAL_TOPIC, msg.topic)
    msg.properties.put(PROPERTY_REAL_QUEUE_ID, str(msg.queue_id))
    msg.sys_flag &= ~TRANSACTION_TYPE_MASK
    msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
    msg.queue_id = 0
    msg.properties_string = msg.properties.to_properties_string()
