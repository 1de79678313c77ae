"""Admin and metadata requests: RocketMQ 4.9.8 ``AdminBrokerProcessor``'s offsets (GET_MAX_OFFSET 30, GET_MIN_OFFSET
31, SEARCH_OFFSET_BY_TIMESTAMP 29), the tables a slave synchronises (21, 43, 45, 201), DELETE_EXPIRED_COMMITLOG
(329), QUERY_CONSUME_QUEUE (321, without the consumer group's filter evaluation), GET_BROKER_CONFIG (26) and
GET_BROKER_RUNTIME_INFO (28) with the stub's replication keys.

Headers and bodies: docs/protocol.md §3.2, §4.6 and §5.5; the keys added to the runtime info: docs/broker_stub.md
"Runtime-info keys added for replication (contract with the source)". The rest of ``AdminBrokerProcessor`` that
``mqadmin`` needs is in :mod:`broker_stub.remoting.topic_admin_processor` and
:mod:`broker_stub.remoting.consumer_admin_processor`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker_stub.remoting.admin_bodies import encode_consume_queue_body
from broker_stub.remoting.server import Processor, request_only
from broker_stub.store.message_store import human_readable_byte_count
from broker_stub.store.schedule import decode_delay_offsets
from connector.protocol.config_files import data_version_bean, encode_delay_offsets
from connector.protocol.consume_queue import iter_cq_entries
from connector.protocol.fastjson import dumps
from connector.protocol.remoting import (
    MQ_VERSION_V4_9_8,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_kv_table,
    encode_properties_body,
)

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.metadata import ConsumerOffsetManager, DelayOffsetStore, SubscriptionGroupManager
    from broker_stub.store.message_store import DefaultMessageStore
    from broker_stub.store.schedule import ScheduleMessageService
    from broker_stub.store.stats import BrokerStats
    from broker_stub.topic_config import TopicConfigManager


class AdminContext(Protocol):
    """What admin_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    config_data_version: dict[str, int]
    message_store: DefaultMessageStore
    broker_stats: BrokerStats
    topic_config_manager: TopicConfigManager
    consumer_offset_manager: ConsumerOffsetManager
    subscription_group_manager: SubscriptionGroupManager
    delay_offset_store: DelayOffsetStore
    schedule_message_service: ScheduleMessageService | None
    def ha_runtime_info(self) -> dict[str, str]: ...
    def earliest_message_time(self) -> int: ...


BROKER_VERSION_DESC = "V4_9_8"


class AdminBrokerProcessor:
    """Serves the admin and metadata requests for one broker (see module doc)."""

    def __init__(self, context: AdminContext) -> None:
        self.context = context

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on."""
        c = self.context
        by_request = {
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_MAX_OFFSET: self.get_queue_offset,
            RequestCode.GET_MIN_OFFSET: self.get_queue_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.get_queue_offset,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
        }
        table: dict[int, Processor] = {code: request_only(fn) for code, fn in by_request.items()}
        for code, content in ((RequestCode.GET_ALL_TOPIC_CONFIG, c.topic_config_manager.encode),
                              (RequestCode.GET_ALL_CONSUMER_OFFSET, c.consumer_offset_manager.encode),
                              (RequestCode.GET_ALL_DELAY_OFFSET, self.delay_offsets),
                              (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, c.subscription_group_manager.encode)):
            table[code] = request_only(functools.partial(self.get_all_content, content))
        return table

    @staticmethod
    def get_all_content(content_of: Callable[[], str], request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_* of one metadata table: its JSON as the body, SYSTEM_ERROR when there is none."""
        content = content_of()
        if not content:
            return request.response(ResponseCode.SYSTEM_ERROR, remark="No content in this broker")
        return request.response(ResponseCode.SUCCESS, body=content.encode("utf-8"))

    def get_queue_offset(self, request: RemotingCommand) -> RemotingCommand:
        """GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP: header ``topic``, ``queueId`` (and
        ``timestamp``) → header ``offset`` (queue entries)."""
        ext = request.ext_fields or {}
        try:
            topic, queue_id = ext["topic"], int(ext["queueId"])
            timestamp = int(ext["timestamp"]) if request.code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP else 0
        except (KeyError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad header, topic and queueId needed: {exc}")
        store = self.context.message_store
        if request.code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            offset = store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
        elif request.code == RequestCode.GET_MAX_OFFSET:
            offset = store.get_max_offset_in_queue(topic, queue_id)
        else:
            offset = store.get_min_offset_in_queue(topic, queue_id)
        return request.response(ResponseCode.SUCCESS, {"offset": offset})

    def query_consume_queue(self, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (321) as 4.9.8's ``AdminBrokerProcessor.queryConsumeQueue`` answers it: SYSTEM_ERROR
        ``"<queueId>@<topic> is not exist!"`` for an unknown queue; SUCCESS without a body (remark ``"Index i of
        q@t is not exist!"``) for an index outside the queue; else the JSON body ``{"maxQueueIndex", "minQueueIndex",
        "queueData": [{"eval", "physicOffset", "physicSize", "tagsCode"}, ...]}`` (docs/protocol.md §5.5)."""
        ext = request.ext_fields or {}
        try:
            topic, queue_id = ext["topic"], int(ext["queueId"])
            index, count = int(ext["index"]), int(ext["count"])
        except (KeyError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    remark=f"bad header, topic, queueId, index and count needed: {exc}")
        cq = self.context.message_store.cq_store.find(topic, queue_id)
        if cq is None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"{queue_id}@{topic} is not exist!")
        buf = cq.get_index_buffer(index)
        if buf is None:
            return request.response(ResponseCode.SUCCESS, remark=f"Index {index} of {queue_id}@{topic} is not exist!")
        body = encode_consume_queue_body(cq.max_offset_in_queue, cq.min_offset_in_queue,
                                         iter_cq_entries(buf, max(0, count)))
        return request.response(ResponseCode.SUCCESS, body=body)

    def delay_offsets(self) -> str:
        """GET_ALL_DELAY_OFFSET: ``ScheduleMessageService.encode()`` (compact) of a master's offsets; a slave has
        no running service and answers with the offsets its ``delayOffset.json`` holds (the file's own text
        when it cannot be read as delay offsets)."""
        c = self.context
        if c.schedule_message_service is not None:
            return c.schedule_message_service.encode(pretty=False)
        text = c.delay_offset_store.encode()
        try:
            return encode_delay_offsets(decode_delay_offsets(text), pretty=False)
        except ValueError:
            return text

    async def delete_expired_commit_log(self, request: RemotingCommand) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (329): run a manual retention round now (module doc of retention).

        The response carries (stub extras) ``deletedFiles`` and the new ``commitLogMinOffset``.
        """
        store = self.context.message_store
        deleted = await store.clean_commit_log_service.execute_delete_files_manually()
        return request.response(ResponseCode.SUCCESS, {"deletedFiles": deleted,
                                                       "commitLogMinOffset": store.commit_log.min_offset})

    def get_broker_config(self, request: RemotingCommand) -> RemotingCommand:
        body = encode_properties_body(self.context.config.all_properties())
        version = dumps(data_version_bean(self.context.config_data_version))
        return request.response(ResponseCode.SUCCESS, {"version": version}, body=body)

    def runtime_info(self) -> dict[str, str]:
        """The GET_BROKER_RUNTIME_INFO table (string values)."""
        c = self.context
        store = c.message_store
        bc = c.config.broker
        info = store.runtime_info()
        if c.schedule_message_service is not None:  # buildRunningStats
            for level, (delivered, max_offset) in c.schedule_message_service.running_stats().items():
                info[f"scheduleMessageOffset_{level}"] = f"{delivered},{max_offset}"
        info["brokerVersionDesc"] = BROKER_VERSION_DESC
        info["brokerVersion"] = str(MQ_VERSION_V4_9_8)
        info.update(c.broker_stats.runtime_info())
        info.update({
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": str(bc.sendThreadPoolQueueCapacity),
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": str(bc.pullThreadPoolQueueCapacity),
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": str(bc.queryThreadPoolQueueCapacity),
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": str(bc.endTransactionPoolQueueCapacity),
            "dispatchBehindBytes": str(store.reput.dispatch_behind_bytes),
            "pageCacheLockTimeMills": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "earliestMessageTimeStamp": str(c.earliest_message_time()),
            "startAcceptSendRequestTimeStamp": str(bc.startAcceptSendRequestTimeStamp),
            "remainTransientStoreBufferNumbs": str(2**31 - 1),
            "remainHowManyDataToFlush": human_readable_byte_count(store.remain_how_many_data_to_flush()),
            "commitLogDirCapacity": store.dir_capacity(),
        })
        info.update(c.ha_runtime_info())
        return info

    def get_broker_runtime_info(self, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=encode_kv_table(self.runtime_info()))

