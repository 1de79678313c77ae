"""Transaction check-back (RocketMQ 4.9.8 ``TransactionalMessageCheckService`` +
``TransactionalMessageServiceImpl.check``), run by a master only: walks each half queue, discards or renews
unresolved half messages and sends CHECK_TRANSACTION_STATE (39) to a live producer of their group.

Op records (written by :mod:`broker_stub.remoting.end_transaction_processor`), the walk, the discard rules and
the deliberate simplifications: docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)", "Transactions"
and "Transaction checks".
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from broker_stub.javautil import JavaHashMap
from broker_stub.store.commit_log import MessageExtBrokerInner, PutMessageStatus
from connector.protocol.broker import PERM_READ, PERM_WRITE
from connector.protocol.commitlog import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageRecord,
    encode_record,
    offset_msg_id,
)
from connector.protocol.consume_queue import CQ_ENTRY, CQ_STORE_UNIT_SIZE
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.protocol.topics import (
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.metadata import ConsumerOffsetManager
    from broker_stub.store.message_store import DefaultMessageStore
    from broker_stub.topic_config import TopicConfigManager


class TransactionCheckContext(Protocol):
    """What transaction_check uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore
    topic_config_manager: TopicConfigManager
    consumer_offset_manager: ConsumerOffsetManager


log = logging.getLogger(__name__)

CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"  # MixAll.CID_SYS_RMQ_TRANS: the system group holding check progress
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVETAG
TCMT_QUEUE_NUMS = 1  # DefaultTransactionalMessageCheckListener: queues of TRANS_CHECK_MAX_TIME_TOPIC
MAX_PROCESS_TIME_LIMIT_MS = 60_000  # one queue's walk stops after this long


class ProducerChannel(Protocol):
    """A client connection the broker can send a one-way request on (RequestContext)."""

    def invoke_oneway(self, request: RemotingCommand) -> bool: ...


def _java_long(text: str | None) -> int:
    """TransactionalMessageServiceImpl.getLong: the number, −1 when it does not parse."""
    try:
        return int(text or "")
    except ValueError:
        return -1


def check_request(half: MessageRecord, props: JavaHashMap) -> RemotingCommand:
    """The CHECK_TRANSACTION_STATE request for ``half`` (the new copy; ``props`` its property map).

    Header ``tranStateTableOffset`` (queue offset), ``commitLogOffset``, ``offsetMsgId``, ``msgId`` and
    ``transactionId`` (both UNIQ_KEY); body = MessageDecoder.encode of the message with topic and queue id
    set back to REAL_TOPIC / REAL_QID. Raises ValueError when REAL_QID is not a number.
    """
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    header = {"tranStateTableOffset": half.queue_offset, "commitLogOffset": half.commit_log_offset,
              "offsetMsgId": offset_msg_id(half.store_host, half.commit_log_offset), "msgId": uniq,
              "transactionId": uniq}
    body = encode_record(
        commit_log_offset=half.commit_log_offset, topic=props.get(PROPERTY_REAL_TOPIC) or "",
        body=half.body, queue_id=int(props.get(PROPERTY_REAL_QUEUE_ID) or ""), flag=half.flag,
        queue_offset=half.queue_offset, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp,
        born_host=half.born_host, store_timestamp=half.store_timestamp, store_host=half.store_host,
        reconsume_times=half.reconsume_times, prepared_transaction_offset=half.prepared_transaction_offset,
        properties=props.to_properties_string(), body_crc_value=half.body_crc)
    return RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header, body, oneway=True)


def renewed_half(half: MessageRecord, props: JavaHashMap) -> MessageExtBrokerInner:
    """TransactionalMessageBridge.renewHalfMessageInner: ``half`` stored again with property map ``props``."""
    return MessageExtBrokerInner(
        topic=half.topic, queue_id=half.queue_id, body=half.body, flag=0, properties=props,
        properties_string=props.to_properties_string(), sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host)


def discarded_message(half: MessageRecord, props: JavaHashMap, queue_id: int) -> MessageExtBrokerInner:
    """DefaultTransactionalMessageCheckListener.toMessageExtBrokerInner: the TRANS_CHECK_MAX_TIME_TOPIC copy."""
    return MessageExtBrokerInner(
        topic=RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, queue_id=queue_id, body=half.body, flag=half.flag,
        properties=props, properties_string=props.to_properties_string(), sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
        reconsume_times=half.reconsume_times)


class TransactionalMessageCheckService:
    """Checks half messages left open (see the module doc). ``start()`` / ``await stop()``; ``check()``
    runs one pass.

    Args:
        context: the broker (its store, consumer offsets, topic configs and ``BrokerConfig``).
        find_channel: ``group → connection`` of a live producer of that group, or None.
    """

    def __init__(self, context: TransactionCheckContext, find_channel: Callable[[str], ProducerChannel | None]) -> None:
        self.context = context
        self.store = context.message_store
        self.find_channel = find_channel
        self.checks_sent = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="TransactionalMessageCheckService")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping regardless
                pass

    async def _run(self) -> None:
        bc = self.context.config.broker
        while True:
            await asyncio.sleep(bc.transactionCheckInterval / 1000)
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the service must keep running
                log.exception("transaction check pass failed")

    def _offset(self, topic: str, queue_id: int) -> int:
        """TransactionalMessageBridge.fetchConsumeOffset: the group's offset, else the queue's min offset."""
        offset = self.context.consumer_offset_manager.query_offset(CID_SYS_RMQ_TRANS, topic, queue_id)
        return offset if offset != -1 else self.store.get_min_offset_in_queue(topic, queue_id)

    def _read(self, topic: str, queue_id: int, offset: int) -> MessageRecord | None:
        """The message at ``offset`` of the queue, None past its end or when unreadable."""
        cq = self.store.cq_store.find(topic, queue_id)
        buf = cq.get_index_buffer(offset) if cq is not None else None
        if not buf or len(buf) < CQ_STORE_UNIT_SIZE:
            return None
        offset_py, _size, _tags = CQ_ENTRY.unpack_from(buf, 0)
        return self.store.commit_log.look_message_by_offset(offset_py)

    def check(self) -> None:
        """One pass over every half queue (runs on the event loop, never awaits); each queue's walk ignores
        messages stored after it began."""
        queues = sorted(q for (t, q) in list(self.store.cq_store.table) if t == RMQ_SYS_TRANS_HALF_TOPIC)
        for queue_id in queues:
            self._check_queue(queue_id, time.time_ns() // 1_000_000)

    def _op_removals(self, queue_id: int, op_offset: int, half_offset: int) -> tuple[dict[int, int], list[int]]:
        """fillOpRemoveMap over every op record from ``op_offset``: (half offset → op offset still to match,
        op offsets already done)."""
        remove: dict[int, int] = {}
        done: list[int] = []
        end = self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id)
        for op_queue_offset in range(op_offset, end):
            op = self._read(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, op_queue_offset)
            if op is None or op.tags != REMOVE_TAG:
                continue
            half_queue_offset = _java_long(op.body.decode("utf-8", "replace"))
            if half_queue_offset < half_offset:
                done.append(op_queue_offset)
            else:
                remove[half_queue_offset] = op_queue_offset
        return remove, done

    def _check_queue(self, queue_id: int, start_ms: int) -> None:
        bc = self.context.config.broker
        half_offset = self._offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id)
        op_offset = self._offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            return
        remove, done = self._op_removals(queue_id, op_offset, half_offset)
        i = half_offset
        began = time.monotonic()
        while (time.monotonic() - began) * 1000 <= MAX_PROCESS_TIME_LIMIT_MS:
            if i in remove:
                done.append(remove.pop(i))
                i += 1
                continue
            half = self._read(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, i)
            if half is None:
                break
            props = JavaHashMap.from_properties_string(half.properties_raw.decode("utf-8"))
            now_ms = time.time_ns() // 1_000_000
            if self._need_discard(props) or now_ms - half.born_timestamp > \
                    self.context.config.store.fileReservedTime * 3_600_000:
                self._discard(half, props)
                i += 1
                continue
            if half.store_timestamp >= start_ms:
                break
            age = now_ms - half.born_timestamp
            immunity_text = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            immunity = bc.transactionTimeOut
            if immunity_text is not None:
                seconds = _java_long(immunity_text)
                immunity = bc.transactionTimeOut if seconds == -1 else seconds * 1000
                if age < immunity:
                    if not self._check_prepare_queue_offset(half, props, remove, done):
                        break
                    i += 1
                    continue
            elif 0 <= age < immunity:
                break
            if age > immunity or age <= -1:
                if not self._put_back_and_check(half, props):
                    break
            else:  # exactly at the immunity time: upstream reads more op records first; look next pass
                break
            i += 1
        offsets = self.context.consumer_offset_manager
        if i != half_offset:
            offsets.commit_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, queue_id, i)
        new_op_offset = op_offset
        for op_queue_offset in sorted(done):  # calculateOpOffset
            if op_queue_offset != new_op_offset:
                break
            new_op_offset += 1
        if new_op_offset != op_offset:
            offsets.commit_offset(CID_SYS_RMQ_TRANS, RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)

    def _need_discard(self, props: JavaHashMap) -> bool:
        """needDiscard: True once checked ``transactionCheckMax`` times; else counts this check in ``props``."""
        text = props.get(PROPERTY_TRANSACTION_CHECK_TIMES)
        times = 1
        if text is not None:
            times = _java_long(text)
            if times >= self.context.config.broker.transactionCheckMax:
                return True
            times += 1
        props.put(PROPERTY_TRANSACTION_CHECK_TIMES, str(times))
        return False

    def _discard(self, half: MessageRecord, props: JavaHashMap) -> None:
        """resolveDiscardMsg: keep the message in TRANS_CHECK_MAX_TIME_TOPIC (a failed put is logged)."""
        tcm = self.context.topic_config_manager
        if tcm.create_topic_in_send_message_back_method(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, TCMT_QUEUE_NUMS,
                                                        PERM_READ | PERM_WRITE) is None:
            log.error("half message discard failed: topic %s cannot be created", RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)
            return
        queue_id = random.randrange(99_999_999) % TCMT_QUEUE_NUMS
        put = self.store.commit_log.put_message(discarded_message(half, props, queue_id))
        log.info("half message discarded after transactionCheckMax checks commitLogOffset=%d realTopic=%s "
                 "status=%s", half.commit_log_offset, props.get(PROPERTY_REAL_TOPIC), put.status.name)

    def _check_prepare_queue_offset(self, half: MessageRecord, props: JavaHashMap, remove: dict[int, int],
                                    done: list[int]) -> bool:
        """checkPrepareQueueOffset for a message still immune: done when its first copy was ended, else
        stored again (with TRAN_PREPARED_QUEUE_OFFSET) to be looked at later; False when that put failed."""
        prepared = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if prepared is not None:
            first = _java_long(prepared)
            if first == -1:
                return False
            if first in remove:
                done.append(remove.pop(first))
                return True
        else:
            props.put(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(half.queue_offset))
        put = self.store.commit_log.put_message(renewed_half(half, props))
        return put.status == PutMessageStatus.PUT_OK

    def _put_back_and_check(self, half: MessageRecord, props: JavaHashMap) -> bool:
        """putBackHalfMsgQueue then resolveHalfMsg; False when the put failed (the walk stops there)."""
        put = self.store.commit_log.put_message(renewed_half(half, props))
        if put.status != PutMessageStatus.PUT_OK or put.result is None:
            log.error("half message put back failed commitLogOffset=%d status=%s", half.commit_log_offset,
                      put.status.name)
            return False
        copy = MessageRecord(
            commit_log_offset=put.result.wrote_offset, store_size=0, body_crc=half.body_crc, queue_id=half.queue_id,
            flag=half.flag, queue_offset=put.result.logics_offset, sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp, born_host=half.born_host, store_timestamp=half.store_timestamp,
            store_host=half.store_host, reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.prepared_transaction_offset, body=half.body, topic=half.topic,
            properties_raw=half.properties_raw)
        group = props.get(PROPERTY_PRODUCER_GROUP) or ""
        channel = self.find_channel(group)
        if channel is None:
            log.warning("transaction check not sent: no live producer of group=%s commitLogOffset=%d", group,
                        copy.commit_log_offset)
            return True
        try:
            request = check_request(copy, props)
        except ValueError as exc:
            log.error("transaction check not sent: bad half message commitLogOffset=%d error=%s",
                      copy.commit_log_offset, exc)
            return True
        if channel.invoke_oneway(request):
            self.checks_sent += 1
            log.info("transaction check sent group=%s tranStateTableOffset=%d commitLogOffset=%d times=%s", group,
                     copy.queue_offset, copy.commit_log_offset, props.get(PROPERTY_TRANSACTION_CHECK_TIMES))
        return True
