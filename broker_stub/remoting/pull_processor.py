"""PULL_MESSAGE (11): RocketMQ 4.9.8 ``PullMessageProcessor`` + ``PullRequestHoldService``, on masters and slaves:
TAG filters against the ConsumeQueue tagsCode (SQL92 refused), the slave suggestion, long polling, and the commit
offset stored on masters only.

Header, status → response code and ``suggestWhichBrokerId``: docs/protocol.md §4.6 and §5.3; held pulls woken by
arrivals on slaves too (§7.11): docs/broker_stub.md "Better than 4.9.8, same wire"; SQL92: docs/broker_stub.md
"What it does (RocketMQ 4.9.8 behaviour)", "SQL92 filters".
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from broker_stub.javautil import java_string_hash
from broker_stub.remoting.server import Processor, RequestContext
from connector.protocol.broker import PERM_READ
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.metadata import ConsumerOffsetManager, SubscriptionGroupManager
    from broker_stub.remoting.consumer_processor import ConsumerManager
    from broker_stub.store.message_store import DefaultMessageStore
    from broker_stub.store.stats import BrokerStats
    from broker_stub.topic_config import TopicConfigManager


class PullContext(Protocol):
    """What pull_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore
    broker_stats: BrokerStats
    topic_config_manager: TopicConfigManager
    consumer_offset_manager: ConsumerOffsetManager
    subscription_group_manager: SubscriptionGroupManager
    consumer_manager: ConsumerManager


log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1  # PullSysFlag
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
SUB_ALL = "*"
_REQUIRED = ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset")


class SubscriptionParseError(ValueError):
    """A subscription expression FilterAPI.build cannot parse."""


def build_tag_filter(subscription: str | None, expression_type: str | None = "TAG"):
    """FilterAPI.build for TAG expressions: None (match everything) or a predicate on the tagsCode.

    ``"*"`` or empty matches all; otherwise ``"a || b"`` → the Java hash codes of the trimmed tags, compared
    with the tagsCode's low 32 bits (``codeSet.contains(tagsCode.intValue())``). Raises
    SubscriptionParseError for a non-TAG expression type.
    """
    if expression_type and expression_type.upper() != "TAG":
        raise SubscriptionParseError(f"expression type {expression_type} is not TAG")
    text = (subscription or "").strip()
    if not text or text == SUB_ALL:
        return None
    codes = {java_string_hash(t.strip()) for t in text.split("||") if t.strip()}
    if not codes:
        return None

    def matches(tags_code: int) -> bool:
        low = tags_code & 0xFFFFFFFF
        return (low - (1 << 32) if low & 0x80000000 else low) in codes

    return matches


class PullRequestHoldService:
    """Held (long-polling) pulls per (topic, queueId), woken by ConsumeQueue arrivals."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}

    def notify_arrivals(self, queues: set[tuple[str, int]]) -> None:
        for key in queues:
            for fut in self._waiters.pop(key, ()):
                if not fut.done():
                    fut.set_result(True)

    async def wait(self, topic: str, queue_id: int, timeout_s: float) -> bool:
        """Wait for an arrival in the queue; False after ``timeout_s``."""
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        key = (topic, queue_id)
        self._waiters.setdefault(key, set()).add(fut)
        try:
            return await asyncio.wait_for(fut, timeout=max(timeout_s, 0))
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(fut)
                if not waiters:
                    self._waiters.pop(key, None)


class PullMessageProcessor:
    """Serves PULL_MESSAGE for one broker (see module doc)."""

    CODES = (RequestCode.PULL_MESSAGE,)

    def __init__(self, context: PullContext) -> None:
        self.context = context
        self.hold_service = PullRequestHoldService()
        context.message_store.arrival_listeners.append(self.hold_service.notify_arrivals)

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on."""
        return dict.fromkeys(self.CODES, self.pull_message)

    def pull_message(self, ctx: RequestContext, request: RemotingCommand):
        ext = request.ext_fields or {}
        missing = [k for k in _REQUIRED if ext.get(k) is None]
        if missing:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"the custom field <{missing[0]}> is null")
        try:
            header = {k: ext[k] for k in ext}
            for k in ("queueId", "maxMsgNums", "sysFlag"):
                header[k] = int(ext[k])
            for k in ("queueOffset", "commitOffset"):
                header[k] = int(ext[k])
            header["suspendTimeoutMillis"] = int(ext.get("suspendTimeoutMillis") or 0)
            header["subVersion"] = int(ext.get("subVersion") or 0)
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad pull request header: {exc}")
        prepared = self._check(ctx, request, header)
        if isinstance(prepared, RemotingCommand):
            return prepared
        tag_filter, group_cfg = prepared
        return self._pull(request, header, tag_filter, group_cfg)

    def _check(self, ctx: RequestContext, request: RemotingCommand, header: dict):
        c = self.context
        bc = c.config.broker
        if not bc.brokerPermission & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION,
                                    remark=f"the broker[{bc.brokerIP1}] pulling message is forbidden")
        group = header["consumerGroup"]
        group_cfg = c.subscription_group_manager.find(group)
        if group_cfg is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    remark=f"subscription group [{group}] does not exist")
        if not group_cfg.consumeEnable:
            return request.response(ResponseCode.NO_PERMISSION, remark=f"subscription group no permission, {group}")
        topic = header["topic"]
        tc = c.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    remark=f"topic[{topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION,
                                    remark=f"the topic[{topic}] pulling message is forbidden")
        queue_id = header["queueId"]
        if queue_id < 0 or queue_id >= tc.readQueueNums:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=(
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.readQueueNums}] "
                f"consumer:[{ctx.peer_text}]"))
        if header["sysFlag"] & FLAG_SUBSCRIPTION:
            subscription, expression_type = header.get("subscription"), header.get("expressionType")
        else:
            sub = c.consumer_manager.find_subscription(group, topic)
            if sub is None:
                return request.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                        remark="the consumer's subscription not exist")
            subscription, expression_type = sub.get("subString"), sub.get("expressionType")
        if expression_type and expression_type.upper() != "TAG" and not bc.enablePropertyFilter:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                remark=f"The broker does not support consumer to filter message by {expression_type}")
        try:
            tag_filter = build_tag_filter(subscription, expression_type)
        except SubscriptionParseError:
            return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                    remark="parse the consumer's subscription failed")
        return tag_filter, group_cfg

    def _pull(self, request: RemotingCommand, header: dict, tag_filter, group_cfg):
        response, not_found = self._get(request, header, tag_filter, group_cfg)
        bc = self.context.config.broker
        if not_found and header["sysFlag"] & FLAG_SUSPEND:
            timeout_ms = header["suspendTimeoutMillis"] if bc.longPollingEnable else bc.shortPollingTimeMills
            return self._hold(request, header, tag_filter, group_cfg, timeout_ms)
        self._store_commit_offset(header)
        return response

    async def _hold(self, request: RemotingCommand, header: dict, tag_filter, group_cfg, timeout_ms: int):
        self._store_commit_offset(header)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            if not await self.hold_service.wait(header["topic"], header["queueId"], remaining):
                break
            response, not_found = self._get(request, header, tag_filter, group_cfg)
            if not not_found:
                return response
        response, _ = self._get(request, header, tag_filter, group_cfg)
        return response

    def _store_commit_offset(self, header: dict) -> None:
        c = self.context
        if header["sysFlag"] & FLAG_COMMIT_OFFSET and not c.config.is_slave:
            c.consumer_offset_manager.commit_offset(header["consumerGroup"], header["topic"], header["queueId"],
                                                    header["commitOffset"])

    def _get(self, request: RemotingCommand, header: dict, tag_filter, group_cfg) -> tuple[RemotingCommand, bool]:
        c = self.context
        result = c.message_store.get_message(header["topic"], header["queueId"], header["queueOffset"],
                                             header["maxMsgNums"], tag_filter)
        if c.config.broker.slaveReadEnable:
            suggest = group_cfg.whichBrokerWhenConsumeSlowly if result.suggest_pulling_from_slave \
                else group_cfg.brokerId
        else:
            suggest = 0
        status = result.status
        if status == "FOUND":
            code = ResponseCode.SUCCESS
        elif status in ("NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE"):
            code = ResponseCode.PULL_OFFSET_MOVED if header["queueOffset"] != 0 else ResponseCode.PULL_NOT_FOUND
        elif status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY"):
            code = ResponseCode.PULL_OFFSET_MOVED
        elif status in ("OFFSET_OVERFLOW_ONE", "OFFSET_FOUND_NULL"):
            code = ResponseCode.PULL_NOT_FOUND
        else:  # NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        if code == ResponseCode.PULL_OFFSET_MOVED:
            log.info("pull offset moved group=%s topic=%s queueId=%d requestOffset=%d nextBeginOffset=%d status=%s",
                     header["consumerGroup"], header["topic"], header["queueId"], header["queueOffset"],
                     result.next_begin_offset, status)
        fields = {"suggestWhichBrokerId": suggest, "nextBeginOffset": result.next_begin_offset,
                  "minOffset": result.min_offset, "maxOffset": result.max_offset}
        body = b"".join(result.messages) if code == ResponseCode.SUCCESS else b""
        if code == ResponseCode.SUCCESS:
            c.broker_stats.on_get(len(result.messages))
        return request.response(code, fields, body=body, remark=status), code == ResponseCode.PULL_NOT_FOUND
