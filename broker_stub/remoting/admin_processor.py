"""GET_BROKER_CONFIG (26) and GET_BROKER_RUNTIME_INFO (28): RocketMQ 4.9.8 ``AdminBrokerProcessor``.

* GET_BROKER_CONFIG: body = every config key as ``key=value`` lines (``MixAll.properties2String``), UTF-8;
  extFields ``version`` = the configuration DataVersion JSON.
* GET_BROKER_RUNTIME_INFO: body = KVTable JSON ``{"table": {...}}`` with every key a 4.9.8 master reports
  (``tests/fixtures/rocketmq-4.9.8/runtime_info.json``), computed live: ``commitLogMinOffset``/
  ``commitLogMaxOffset`` reflect appends immediately (whole records only). ``scheduleMessageOffset_<level>``
  is reported for every delay level as ``"0,<messages in that SCHEDULE_TOPIC_XXXX queue>"`` — the stub does
  not deliver delayed messages, so nothing has been delivered (0); upstream lists only levels that have
  delivered something.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from broker_stub.remoting.server import RequestContext
from broker_stub.store.commit_log import RMQ_SYS_SCHEDULE_TOPIC
from broker_stub.store.message_store import human_readable_byte_count
from connector.protocol.remoting import (
    MQ_VERSION_V4_9_8,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_kv_table,
    encode_properties_body,
)

if TYPE_CHECKING:
    from broker_stub.broker import BrokerController

BROKER_VERSION_DESC = "V4_9_8"


class AdminBrokerProcessor:
    """Serves the admin requests of issue 2 for one :class:`BrokerController`."""

    CODES = (RequestCode.GET_BROKER_CONFIG, RequestCode.GET_BROKER_RUNTIME_INFO)

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller

    def __call__(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.GET_BROKER_CONFIG:
            return self.get_broker_config(request)
        return self.get_broker_runtime_info(request)

    def get_broker_config(self, request: RemotingCommand) -> RemotingCommand:
        body = encode_properties_body(self.controller.config.all_properties())
        version = json.dumps(self.controller.config_data_version, separators=(",", ":"))
        return request.response(ResponseCode.SUCCESS, {"version": version}, body=body)

    def runtime_info(self) -> dict[str, str]:
        """The GET_BROKER_RUNTIME_INFO table (string values)."""
        c = self.controller
        store = c.message_store
        bc = c.config.broker
        info = store.runtime_info()
        table = store.commit_log.topic_queue_table
        for level in range(1, len(c.config.store.delay_levels_ms()) + 1):
            max_offset = table.get(f"{RMQ_SYS_SCHEDULE_TOPIC}-{level - 1}", 0)
            info[f"scheduleMessageOffset_{level}"] = f"0,{max_offset}"
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
            "dispatchBehindBytes": "0",
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
        return info

    def get_broker_runtime_info(self, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=encode_kv_table(self.runtime_info()))

