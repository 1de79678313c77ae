"""Message lookups by key and by offset: RocketMQ 4.9.8 ``QueryMessageProcessor``.

* QUERY_MESSAGE (12): header ``topic``, ``key``, ``maxNum``, ``beginTimestamp``, ``endTimestamp`` (epoch
  ms) → the records the message index (broker_stub/store/index.py) holds for ``topic#key`` in that time
  range, concatenated in CommitLog order as the body (the client decodes them like a pull result); the
  response header carries ``indexLastUpdateTimestamp`` and ``indexLastUpdatePhyoffset`` (the newest index
  file's end). With the ext field ``_UNIQUE_KEY_QUERY=true`` (``queryMsgByUniqueKey``: the key is a
  UNIQ_KEY) ``maxNum`` is replaced by ``defaultQueryMaxNum``. Nothing found: QUERY_NOT_FOUND (22) "can not
  find message, maybe time range not correct". At most ``maxMsgsNumBatch`` records per query.
* VIEW_MESSAGE_BY_ID (33): header ``offset`` (a CommitLog offset, as decoded by the client from an offset
  message id) → the one record stored there as the body; SYSTEM_ERROR "can not find message by the offset,
  N" when nothing is readable there.

Masters and slaves answer both (each reads its own store and index).
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
