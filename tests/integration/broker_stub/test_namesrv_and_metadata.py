"""Name server (issue 3 item 7), slave metadata sync (item 6), and the client steps of a 4.9 Java producer."""

from __future__ import annotations

import json

from broker_stub.javautil import fastjson_loads
from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import (
    max_offset,
    remoting_request,
    runtime_info,
    wait_for,
    wait_for_offset,
)

COMMON = {"mappedFileSizeCommitLog": 65536, "haSendHeartbeatInterval": 300, "brokerClusterName": "StubCluster"}


def _route(ns_addr: str, topic: str) -> RemotingCommand:
    return remoting_request(ns_addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))


def _cluster(ns_addr: str) -> dict:
    resp = remoting_request(ns_addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert resp.code == ResponseCode.SUCCESS
    return fastjson_loads(resp.body)


def test_slave_learns_its_master_from_the_name_server_and_replicates(broker_factory, namesrv_factory):
    ns = namesrv_factory()
    master = broker_factory("master", namesrvAddr=ns.addr, **COMMON)
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, namesrvAddr=ns.addr, **COMMON)  # no haMasterAddress
    wait_for(lambda: runtime_info(slave.remoting_addr)["haMasterAddress"] == master.ha_addr,
             "the slave to learn haServerAddr from REGISTER_BROKER")
    with Producer(master.remoting_addr) as p:
        for i in range(40):
            p.send("RoutedTopic", b"r" * 2000, tags=f"t{i % 2}")
    end = max_offset(master.remoting_addr)
    wait_for_offset(slave.remoting_addr, end)
    cluster = _cluster(ns.addr)
    assert cluster["clusterAddrTable"] == {"StubCluster": ["broker-a"]}
    assert cluster["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": master.remoting_addr,
                                                                   "1": slave.remoting_addr}


def test_java_producer_steps_route_heartbeat_send_unregister(broker_factory, namesrv_factory):
    """What DefaultMQProducer does: route of TBW102 / the topic from the name server, HEART_BEAT, send, unregister."""
    ns = namesrv_factory()
    master = broker_factory("master", namesrvAddr=ns.addr, **COMMON)
    wait_for(lambda: _route(ns.addr, "TBW102").code == ResponseCode.SUCCESS, "the master's first registration")
    raw = _route(ns.addr, "TBW102").body.decode("utf-8")
    # issue 20: fastjson's compact text, brokerId keys bare — what clients outside Java parse
    assert raw == ('{"brokerDatas":[{"brokerAddrs":{0:"' + master.remoting_addr + '"},"brokerName":"broker-a",'
                   '"cluster":"StubCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
                   '"perm":7,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'), raw
    route = fastjson_loads(raw)
    assert route["brokerDatas"] == [{"brokerAddrs": {"0": master.remoting_addr}, "brokerName": "broker-a",
                                     "cluster": "StubCluster"}]
    assert route["queueDatas"][0]["writeQueueNums"] == 8 and route["queueDatas"][0]["perm"] == 7  # inherit bit
    assert _route(ns.addr, "NewTopic").code == ResponseCode.TOPIC_NOT_EXIST
    heartbeat = {"clientID": "127.0.0.1@4242", "producerDataSet": [{"groupName": "pg"}], "consumerDataSet": []}
    resp = remoting_request(master.remoting_addr, RemotingCommand.request(
        RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode()))
    assert resp.code == ResponseCode.SUCCESS
    with Producer(master.remoting_addr) as p:
        assert p.send("NewTopic", b"auto-created from TBW102").send_status == "SEND_OK"
    resp = remoting_request(master.remoting_addr, RemotingCommand.request(
        RequestCode.UNREGISTER_CLIENT, {"clientID": "127.0.0.1@4242", "producerGroup": "pg"}))
    assert resp.code == ResponseCode.SUCCESS
    # creating a topic makes the broker register again at once (not only every registerNameServerPeriod)
    wait_for(lambda: _route(ns.addr, "NewTopic").code == ResponseCode.SUCCESS, "the route of the new topic")
    queue = fastjson_loads(_route(ns.addr, "NewTopic").body)["queueDatas"][0]
    assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (4, 4, 6)
    master.stop()  # a clean stop unregisters
    wait_for(lambda: _route(ns.addr, "TBW102").code == ResponseCode.TOPIC_NOT_EXIST,
             "the stopped broker to unregister")


def test_killed_broker_disappears_from_routes_when_its_connection_closes(broker_factory, namesrv_factory):
    ns = namesrv_factory()
    master = broker_factory("master", namesrvAddr=ns.addr, **COMMON)
    wait_for(lambda: _route(ns.addr, "TBW102").code == ResponseCode.SUCCESS, "registration")
    master.kill9()
    wait_for(lambda: _cluster(ns.addr)["brokerAddrTable"] == {}, "the killed broker to be removed")


def test_slave_syncs_topics_offsets_delay_offsets_and_groups(broker_factory, namesrv_factory):
    ns = namesrv_factory()
    master = broker_factory("master", namesrvAddr=ns.addr, **COMMON)
    with Producer(master.remoting_addr) as p:
        p.send("SyncedTopic", b"x")
    for q, off in ((0, 5), (2, 9)):
        remoting_request(master.remoting_addr, RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "syncGroup", "topic": "SyncedTopic", "queueId": q,
                                                 "commitOffset": off}))
    heartbeat = {"clientID": "c1", "producerDataSet": [], "consumerDataSet": [
        {"groupName": "syncGroup", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
         "subscriptionDataSet": [{"topic": "SyncedTopic", "subString": "*", "expressionType": "TAG"}]}]}
    assert remoting_request(master.remoting_addr, RemotingCommand.request(
        RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode())).code == ResponseCode.SUCCESS
    # GET_ALL_TOPIC_CONFIG is served on the VIP port (listenPort - 2) as well
    vip = remoting_request(master.vip_addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert vip.code == ResponseCode.SUCCESS and "SyncedTopic" in fastjson_loads(vip.body)["topicConfigTable"]
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, namesrvAddr=ns.addr, **COMMON)
    config = slave.store_dir / "config"
    wait_for(lambda: (config / "subscriptionGroup.json").exists() and (config / "delayOffset.json").exists(),
             "the first sync (3 s after start)", timeout_s=20)
    topics = fastjson_loads((config / "topics.json").read_text())
    master_topics = fastjson_loads(vip.body)
    assert topics["dataVersion"] == master_topics["dataVersion"]
    assert set(topics["topicConfigTable"]) == set(master_topics["topicConfigTable"])
    assert {"SyncedTopic", "%RETRY%syncGroup"} <= set(topics["topicConfigTable"])
    offsets = fastjson_loads((config / "consumerOffset.json").read_text())["offsetTable"]
    assert offsets["SyncedTopic@syncGroup"] == {"0": 5, "2": 9}
    groups = fastjson_loads((config / "subscriptionGroup.json").read_text())
    assert "syncGroup" in groups["subscriptionGroupTable"]
    master_groups = fastjson_loads(remoting_request(master.remoting_addr, RemotingCommand.request(
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert groups["dataVersion"] == master_groups["dataVersion"]
    assert fastjson_loads((config / "delayOffset.json").read_text()) == {"offsetTable": {}}
    # the slave answers consumer-offset queries from the synced table
    resp = remoting_request(slave.remoting_addr, RemotingCommand.request(
        RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "syncGroup", "topic": "SyncedTopic", "queueId": 2}))
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "9"
