"""END_TRANSACTION (37): the end of a RocketMQ 4.9.8 transactional send (``EndTransactionProcessor``). The half
message is read back and checked, a commit stores it in its real topic and queue, and commit and rollback write
an op record to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``; answers to transaction checks
(:mod:`broker_stub.store.transaction_check`) are served the same way.

The header, the checks and both records' fields: docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)",
"Transactions".
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

from broker_stub.javautil import JavaHashMap, parse_boolean
from broker_stub.remoting.server import Processor, RequestContext
from broker_stub.store.commit_log import MessageExtBrokerInner, PutMessageStatus
from connector.protocol.commitlog import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    HostAddress,
    MessageRecord,
)
from connector.protocol.commitlog.properties import PROPERTY_PRODUCER_GROUP
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.topics import RMQ_SYS_TRANS_OP_HALF_TOPIC

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.store.message_store import DefaultMessageStore


class EndTransactionContext(Protocol):
    """What end_transaction_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore


log = logging.getLogger(__name__)

REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVETAG
_OK_STATUSES = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
                PutMessageStatus.SLAVE_NOT_AVAILABLE)


def committed_message(half: MessageRecord) -> MessageExtBrokerInner:
    """The message a commit stores for ``half`` (a RMQ_SYS_TRANS_HALF_TOPIC record), before the CommitLog
    assigns its offsets and store timestamp.

    Raises KeyError / ValueError when the half message lacks a valid REAL_TOPIC or REAL_QID property.
    """
    props = JavaHashMap.from_properties_string(half.properties_raw.decode("utf-8"))
    properties_string = props.to_properties_string()
    topic = props.get(PROPERTY_REAL_TOPIC)
    if topic is None:
        raise KeyError(f"half message at {half.commit_log_offset} has no {PROPERTY_REAL_TOPIC} property")
    queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID) or "")
    props.remove(PROPERTY_REAL_TOPIC)
    props.remove(PROPERTY_REAL_QUEUE_ID)
    return MessageExtBrokerInner(
        topic=topic, queue_id=queue_id, body=half.body, flag=half.flag, properties=props,
        properties_string=properties_string,
        sys_flag=(half.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE,
        born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
        reconsume_times=half.reconsume_times, prepared_transaction_offset=half.commit_log_offset)


def op_message(half: MessageRecord, store_host: HostAddress, now_ms: int) -> MessageExtBrokerInner:
    """The RMQ_SYS_TRANS_OP_HALF_TOPIC record that marks ``half`` as done (commit or rollback)."""
    props = JavaHashMap()
    props.put(PROPERTY_TAGS, REMOVE_TAG)
    props.put(PROPERTY_WAIT_STORE_MSG_OK, "true")
    return MessageExtBrokerInner(
        topic=RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id=half.queue_id, body=str(half.queue_offset).encode("ascii"),
        flag=0, properties=props, properties_string=props.to_properties_string(), sys_flag=0,
        born_timestamp=now_ms, born_host=store_host, store_host=store_host)


class EndTransactionProcessor:
    """Serves END_TRANSACTION (see the module doc)."""

    CODES = (RequestCode.END_TRANSACTION,)

    def __init__(self, context: EndTransactionContext) -> None:
        self.context = context
        self.store_host = HostAddress.parse(context.config.store_host)

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on."""
        return dict.fromkeys(self.CODES, self.end_transaction)

    def end_transaction(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if self.context.config.is_slave:
            log.warning("message store is slave mode, so end transaction is forbidden peer=%s", ctx.peer_text)
            return request.response(ResponseCode.SLAVE_NOT_AVAILABLE)
        ext = request.ext_fields
        try:
            group = ext["producerGroup"]
            state_offset = int(ext["tranStateTableOffset"])
            commit_log_offset = int(ext["commitLogOffset"])
            kind = int(ext["commitOrRollback"])
        except (KeyError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad END_TRANSACTION header field: {exc}")
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            if kind == TRANSACTION_NOT_TYPE:
                log.info("end transaction with unknown state, nothing to do peer=%s check=%s", ctx.peer_text,
                         parse_boolean(ext.get("fromTransactionCheck") or "false"))
            return None
        half = self.context.message_store.commit_log.look_message_by_offset(commit_log_offset)
        error = _check_half(half, group, state_offset, commit_log_offset)
        if error is not None:
            log.warning("end transaction refused peer=%s commitLogOffset=%d reason=%s", ctx.peer_text,
                        commit_log_offset, error)
            return request.response(ResponseCode.SYSTEM_ERROR, remark=error)
        assert half is not None
        if kind == TRANSACTION_COMMIT_TYPE:
            try:
                msg = committed_message(half)
            except (KeyError, ValueError) as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad half message: {exc}")
            put = self.context.message_store.commit_log.put_message(msg)
            if put.status not in _OK_STATUSES:
                return request.response(ResponseCode.SYSTEM_ERROR, remark=f"storing the committed message "
                                        f"failed: {put.status.name}")
        self.context.message_store.commit_log.put_message(
            op_message(half, self.store_host, time.time_ns() // 1_000_000))
        return request.response(ResponseCode.SUCCESS)

def _check_half(half: MessageRecord | None, group: str, state_offset: int, commit_log_offset: int) -> str | None:
    """EndTransactionProcessor.checkPrepareMessage: None when ``half`` matches the request, else the remark."""
    if half is None:
        return "Find prepared transaction message failed"
    if half.properties.get(PROPERTY_PRODUCER_GROUP) != group:
        return "The producer group wrong"
    if half.queue_offset != state_offset:
        return "The transaction state table offset wrong"
    if half.commit_log_offset != commit_log_offset:
        return "The commit log offset wrong"
    return None
