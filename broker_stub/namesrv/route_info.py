"""The name server's route tables and request handlers (RocketMQ 4.9.8 ``RouteInfoManager`` +
``DefaultRequestProcessor``, docs/protocol.md §3.1, §4.3) — enough for 4.9 clients to find brokers and for slaves to
learn their master.

Requests served. Answer bodies are the bytes 4.9.8's name server writes for the same tables (fastjson text,
docs/protocol.md §4.7): the tables are ``HashMap``s, so bodies list brokers, queues and topics in Java's hash
order, not sorted — ``topicQueueTable`` ``HashMap(1024)`` of topic → ``HashMap`` brokerName → QueueData,
``brokerAddrTable`` ``HashMap(128)``, ``clusterAddrTable`` ``HashMap(32)`` of ``HashSet``; brokerIds are
``Long`` keys, written bare.

* REGISTER_BROKER (103): header ``brokerAddr, brokerId, brokerName, clusterName, haServerAddr, compressed,
  bodyCrc32``; body ``RegisterBrokerBody`` (``topicConfigSerializeWrapper`` + ``filterServerList``). A
  master's topics become queue routes (when it registers first or its topic ``dataVersion`` changed). The
  answer's header carries, for a slave whose master is registered, ``masterAddr`` and the master's
  ``haServerAddr``. A non-zero ``bodyCrc32`` that does not match → SYSTEM_ERROR ("crc32 not match").
  ``compressed=true`` bodies are refused (the stub's brokers never compress).
* UNREGISTER_BROKER (104): header ``brokerAddr, clusterName, brokerName, brokerId``.
* GET_ROUTEINFO_BY_TOPIC (105): header ``topic`` → ``TopicRouteData``
  ``{"brokerDatas":[{"brokerAddrs":{0:addr,1:addr},"brokerName","cluster"}],"filterServerTable":{},
  "queueDatas":[{"brokerName","perm","readQueueNums","topicSysFlag","writeQueueNums"}]}`` (brokerDatas and
  queueDatas in the hash order of the topic's brokerName map, brokerAddrs a clone of the broker's map), or
  TOPIC_NOT_EXIST.
* GET_BROKER_CLUSTER_INFO (106): ``{"brokerAddrTable":{name:BrokerData},"clusterAddrTable":{cluster:[names]}}``.
* GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): ``{"topicList":[...]}`` (a ``HashSet`` filled from topicQueueTable).
* GET_KV_CONFIG (101): the stub keeps no KV config: QUERY_NOT_FOUND, as for an unknown key upstream.

A broker disappears when the connection it registered over closes (``onChannelDestroy``) or after
``BROKER_CHANNEL_EXPIRED_TIME_MS`` (120 s) without a registration (``scanNotActiveBroker``, every 10 s).
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass, field

from broker_stub.javautil import fastjson_loads
from broker_stub.remoting.server import RequestContext
from connector.protocol.broker import MASTER_ID, PERM_READ_WRITE
from connector.protocol.fastjson import Bean, JavaSet, encode
from connector.protocol.java_hash_map import (
    JavaConcurrentHashMap,
    JavaHashMapTable,
    hash_map_copy_capacity,
    hash_map_order,
    java_long_hash,
    java_string_hash,
)
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000
SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS = 10_000
# RouteInfoManager's HashMap initial capacities (Java iteration order depends on them)
TOPIC_QUEUE_TABLE_CAPACITY = 1024
BROKER_ADDR_TABLE_CAPACITY = 128
CLUSTER_ADDR_TABLE_CAPACITY = 32


@dataclass
class _BrokerLiveInfo:
    last_update_ms: float
    data_version: dict
    channel: str
    ha_server_addr: str | None


@dataclass
class _BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_bean(self, clone: bool = False) -> Bean:
        """BrokerData; ``brokerAddrs`` (``HashMap<Long, String>``) in Java order — of the registered map, or with
        ``clone`` of its ``HashMap.clone()`` (smaller table), as pickupTopicRouteData sends it."""
        ids = hash_map_order(list(self.broker_addrs), java_long_hash)
        if clone:
            ids = hash_map_order(ids, java_long_hash, hash_map_copy_capacity(len(ids)))
        return Bean(cluster=self.cluster, brokerName=self.broker_name,
                    brokerAddrs={i: self.broker_addrs[i] for i in ids})


class RouteInfoManager:
    """Route tables of one name server (see module doc). Handlers are plain methods, called on the loop."""

    CODES = (RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER, RequestCode.GET_ROUTEINFO_BY_TOPIC,
             RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
             RequestCode.GET_KV_CONFIG)

    def __init__(self) -> None:
        self.topic_queue_table: dict[str, dict[str, dict]] = {}  # topic → brokerName → QueueData
        self.broker_addr_table: dict[str, _BrokerData] = {}
        self.cluster_addr_table: dict[str, dict[str, None]] = {}  # cluster → brokerNames (an ordered set)
        # clusterAddrTable is filled with computeIfAbsent, whose order depends on the call history
        self._cluster_order = JavaHashMapTable(java_string_hash, CLUSTER_ADDR_TABLE_CAPACITY)
        self.broker_live_table: dict[str, _BrokerLiveInfo] = {}

    # --- dispatch ------------------------------------------------------------------------------------
    def __call__(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        handler = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
        }[request.code]
        return handler(ctx, request)

    # --- REGISTER_BROKER / UNREGISTER_BROKER ---------------------------------------------------------
    def register_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        try:
            broker_addr, broker_name, cluster = ext["brokerAddr"], ext["brokerName"], ext["clusterName"]
            broker_id = int(ext["brokerId"])
            body_crc = int(ext.get("bodyCrc32") or 0)
        except (KeyError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad REGISTER_BROKER header: {exc!r}")
        if body_crc and request.body and zlib.crc32(request.body) & 0x7FFFFFFF != body_crc:
            log.warning("receive registerBroker request, crc32 not match peer=%s", ctx.peer_text)
            return request.response(ResponseCode.SYSTEM_ERROR, remark="crc32 not match")
        if (ext.get("compressed") or "false").lower() == "true":
            return request.response(ResponseCode.SYSTEM_ERROR, remark="compressed RegisterBrokerBody not supported")
        wrapper: dict = {}
        if request.body:
            try:
                body = fastjson_loads(request.body)
                wrapper = body.get("topicConfigSerializeWrapper") or {}
            except (UnicodeDecodeError, ValueError, AttributeError) as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad RegisterBrokerBody: {exc}")
        data_version = wrapper.get("dataVersion") or {"counter": 0, "timestamp": 0}
        self.cluster_addr_table.setdefault(cluster, {})[broker_name] = None
        self._cluster_order.compute_if_absent(cluster)
        bd = self.broker_addr_table.get(broker_name)
        if bd is None:
            bd = self.broker_addr_table[broker_name] = _BrokerData(cluster, broker_name)
        for other_id in [i for i, a in bd.broker_addrs.items() if a == broker_addr and i != broker_id]:
            del bd.broker_addrs[other_id]  # "Switch slave to master": same address, new id
        register_first = bd.broker_addrs.get(broker_id) is None
        bd.broker_addrs[broker_id] = broker_addr
        previous = self.broker_live_table.get(broker_addr)
        if broker_id == MASTER_ID and (register_first or previous is None or previous.data_version != data_version):
            table = wrapper.get("topicConfigTable") if isinstance(wrapper, dict) else None
            table = table if isinstance(table, dict) else {}
            # the body's table is decoded into a ConcurrentHashMap, which the name server then iterates
            for topic in JavaConcurrentHashMap.order(list(table), java_string_hash):
                tc = table[topic]
                self._create_and_update_queue_data(broker_name, tc if isinstance(tc, dict) else {"topicName": topic})
        if previous is None:
            log.info("new broker registered brokerAddr=%s brokerName=%s brokerId=%d haServerAddr=%s", broker_addr,
                     broker_name, broker_id, ext.get("haServerAddr"))
        self.broker_live_table[broker_addr] = _BrokerLiveInfo(time.monotonic() * 1000, data_version, ctx.peer_text,
                                                              ext.get("haServerAddr"))
        fields = {}
        if broker_id != MASTER_ID:
            master_addr = bd.broker_addrs.get(MASTER_ID)
            live = self.broker_live_table.get(master_addr) if master_addr else None
            if live is not None:
                fields = {"haServerAddr": live.ha_server_addr, "masterAddr": master_addr}
        return request.response(ResponseCode.SUCCESS, fields)

    def _create_and_update_queue_data(self, broker_name: str, tc: dict) -> None:
        topic = str(tc.get("topicName"))
        queue_data = {"brokerName": broker_name, "perm": int(tc.get("perm", PERM_READ_WRITE)),
                      "readQueueNums": int(tc.get("readQueueNums", 16)),
                      "topicSysFlag": int(tc.get("topicSysFlag", 0)),
                      "writeQueueNums": int(tc.get("writeQueueNums", 16))}
        table = self.topic_queue_table.setdefault(topic, {})
        if table.get(broker_name) != queue_data:
            table[broker_name] = queue_data
            log.info("topic route updated topic=%s brokerName=%s queueData=%s", topic, broker_name, queue_data)

    def unregister_broker(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        try:
            self._remove(ext["brokerAddr"], ext["brokerName"], int(ext["brokerId"]), ext["clusterName"],
                         "unregistered")
        except (KeyError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, remark=f"bad UNREGISTER_BROKER header: {exc!r}")
        return request.response(ResponseCode.SUCCESS)

    def _remove(self, broker_addr: str, broker_name: str, broker_id: int, cluster: str | None, why: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        bd = self.broker_addr_table.get(broker_name)
        if bd is not None and bd.broker_addrs.get(broker_id) == broker_addr:
            del bd.broker_addrs[broker_id]
            log.info("broker removed (%s) brokerAddr=%s brokerName=%s brokerId=%d", why, broker_addr, broker_name,
                     broker_id)
        if bd is not None and not bd.broker_addrs:
            del self.broker_addr_table[broker_name]
            for names in self.cluster_addr_table.values():
                names.pop(broker_name, None)
            for c in [c for c, names in self.cluster_addr_table.items() if not names]:
                del self.cluster_addr_table[c]
                self._cluster_order.remove(c)
            for topic in list(self.topic_queue_table):
                self.topic_queue_table[topic].pop(broker_name, None)
                if not self.topic_queue_table[topic]:
                    del self.topic_queue_table[topic]

    def _remove_by_addr(self, broker_addr: str, why: str) -> None:
        for bd in list(self.broker_addr_table.values()):
            for broker_id, addr in list(bd.broker_addrs.items()):
                if addr == broker_addr:
                    self._remove(addr, bd.broker_name, broker_id, bd.cluster, why)
        self.broker_live_table.pop(broker_addr, None)

    def on_channel_destroy(self, channel: str) -> None:
        """A connection closed: brokers that registered over it are gone (RouteInfoManager.onChannelDestroy)."""
        for addr in [a for a, live in self.broker_live_table.items() if live.channel == channel]:
            self._remove_by_addr(addr, "channel closed")

    def scan_not_active_broker(self) -> None:
        """Drop brokers silent for more than 120 s."""
        limit = time.monotonic() * 1000 - BROKER_CHANNEL_EXPIRED_TIME_MS
        for addr in [a for a, live in self.broker_live_table.items() if live.last_update_ms < limit]:
            self._remove_by_addr(addr, f"no registration for {BROKER_CHANNEL_EXPIRED_TIME_MS} ms")

    # --- queries -------------------------------------------------------------------------------------
    def pickup_topic_route_data(self, topic: str) -> Bean | None:
        """TopicRouteData of ``topic`` (module doc), None when no queue or broker is known for it."""
        queue_map = self.topic_queue_table.get(topic)
        if not queue_map:
            return None
        names = hash_map_order(list(queue_map), java_string_hash)  # HashMap<brokerName, QueueData> order
        names = hash_map_order(names, java_string_hash)  # the HashSet brokerNameSet filled from its keys
        broker_datas = [self.broker_addr_table[n].to_bean(clone=True) for n in names if n in self.broker_addr_table]
        if not broker_datas:
            return None
        queue_datas = [Bean(queue_map[n]) for n in hash_map_order(list(queue_map), java_string_hash)]
        return Bean(brokerDatas=broker_datas, filterServerTable={}, queueDatas=queue_datas)

    def get_route_info_by_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = (request.ext_fields or {}).get("topic", "")
        route = self.pickup_topic_route_data(topic)
        if route is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    remark=f"No topic route info in name server for the topic: {topic}")
        return request.response(ResponseCode.SUCCESS, body=encode(route))

    def cluster_info(self) -> Bean:
        """ClusterInfo: ``brokerAddrTable`` and ``clusterAddrTable`` as the name server's maps iterate."""
        names = hash_map_order(list(self.broker_addr_table), java_string_hash, BROKER_ADDR_TABLE_CAPACITY)
        clusters = self._cluster_order.keys()
        return Bean(brokerAddrTable={n: self.broker_addr_table[n].to_bean() for n in names},
                    clusterAddrTable={c: JavaSet(hash_map_order(list(self.cluster_addr_table[c]), java_string_hash))
                                      for c in clusters})

    def get_broker_cluster_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=encode(self.cluster_info()))

    def topic_list(self) -> Bean:
        """TopicList: a fresh ``HashSet`` filled from topicQueueTable's keys (``brokerAddr`` null, left out)."""
        topics = hash_map_order(list(self.topic_queue_table), java_string_hash, TOPIC_QUEUE_TABLE_CAPACITY)
        return Bean(topicList=JavaSet(hash_map_order(topics, java_string_hash)))

    def get_all_topic_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=encode(self.topic_list()))

    def get_kv_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        return request.response(ResponseCode.QUERY_NOT_FOUND,
                                remark=f"No config item, Namespace: {ext.get('namespace')} Key: {ext.get('key')}")
