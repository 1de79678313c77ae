"""Message lookups by key and by offset: RocketMQ 4.9.8 ``QueryMessageProcessor``, QUERY_MESSAGE (12) over the
message index and VIEW_MESSAGE_BY_ID (33), answered by masters and slaves from their own store.

Headers, bodies and limits: docs/protocol.md §5.4; what ``mqadmin`` does with them: docs/broker_stub.md "What it
does (RocketMQ 4.9.8 behaviour)", "Message index".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from broker_stub.remoting.server import Processor, request_only
from connector.protocol.acl import UNIQUE_MSG_QUERY_FLAG
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

if TYPE_CHECKING:
    from broker_stub.config import BrokerStubConfig
    from broker_stub.store.message_store import DefaultMessageStore


class QueryMessageContext(Protocol):
    """What query_message_processor uses of the broker (BrokerController satisfies it; docs/architecture.md
    "The broker stub's shape")."""

    config: BrokerStubConfig
    message_store: DefaultMessageStore


_QUERY_FIELDS = ("topic", "key", "maxNum", "beginTimestamp", "endTimestamp")


class QueryMessageProcessor:
    """Serves QUERY_MESSAGE and VIEW_MESSAGE_BY_ID (see module doc)."""

    def __init__(self, context: QueryMessageContext) -> None:
        self.context = context

    def handlers(self) -> dict[int, Processor]:
        """The code → handler table the remoting server dispatches on."""
        return {RequestCode.QUERY_MESSAGE: request_only(self.query_message),
                RequestCode.VIEW_MESSAGE_BY_ID: request_only(self.view_message_by_id)}

    def query_message(self, request: RemotingCommand) -> RemotingCommand:
        """QUERY_MESSAGE (see module doc)."""
        ext = request.ext_fields or {}
        for name in _QUERY_FIELDS:
            if ext.get(name) is None:
                return request.response(ResponseCode.SYSTEM_ERROR, remark=f"the custom field <{name}> is null")
        try:
            max_num, begin, end = int(ext["maxNum"]), int(ext["beginTimestamp"]), int(ext["endTimestamp"])
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad query header: {exc}")
        store_cfg = self.context.config.store
        if ext.get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = store_cfg.defaultQueryMaxNum
        result = self.context.message_store.query_message(ext["topic"], ext["key"], max_num, begin, end)
        header = {"indexLastUpdateTimestamp": result.index_last_update_timestamp,
                  "indexLastUpdatePhyoffset": result.index_last_update_phyoffset}
        if result.messages:
            return request.response(ResponseCode.SUCCESS, header, body=b"".join(result.messages))
        return request.response(ResponseCode.QUERY_NOT_FOUND, header,
                                remark="can not find message, maybe time range not correct")

    def view_message_by_id(self, request: RemotingCommand) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID (see module doc)."""
        text = (request.ext_fields or {}).get("offset")
        if text is None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark="the custom field <offset> is null")
        try:
            offset = int(text)
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad offset: {exc}")
        data = self.context.message_store.select_one_message_by_offset(offset)
        if data is None:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"can not find message by the offset, {offset}")
        return request.response(ResponseCode.SUCCESS, body=data)


__all__ = ["QueryMessageProcessor"]
