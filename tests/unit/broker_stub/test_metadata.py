"""Metadata tables, fastjson-compatible parsing, dataVersion rules."""

from __future__ import annotations

import json

import pytest

from broker_stub.config import BrokerConfig
from broker_stub.javautil import fastjson_loads
from broker_stub.metadata import ConsumerOffsetManager, SubscriptionGroupManager
from broker_stub.namesrv.route_info import RouteInfoManager
from broker_stub.store.retention import is_it_time_to_do
from broker_stub.topic_config import TopicConfigManager


def test_fastjson_bare_integer_keys_are_read():
    text = '{"offsetTable":{"TopicA@g1":{0:5,1:-7},"TopicB@g1":{ 12 : 3 }}, "s": "{1:2}, x"}'
    assert fastjson_loads(text) == {"offsetTable": {"TopicA@g1": {"0": 5, "1": -7}, "TopicB@g1": {"12": 3}},
                                    "s": "{1:2}, x"}
    assert fastjson_loads(b'[1, 2, {"a": [3]}]') == [1, 2, {"a": [3]}]  # numbers that are values stay numbers
    with pytest.raises(ValueError):
        fastjson_loads("{oops}")


def test_consumer_offsets_merge_from_a_fastjson_body_and_persist(tmp_path):
    m = ConsumerOffsetManager(tmp_path / "consumerOffset.json")
    m.commit_offset("g", "T", 3, 10)
    m.put_all(ConsumerOffsetManager.decode('{"offsetTable":{"T@g":{0:4},"U@g":{1:9}}}'))
    assert m.query_offset("g", "T", 0) == 4 and m.query_offset("g", "U", 1) == 9
    assert m.query_offset("g", "T", 3) == -1  # the master's entry for the key replaces the slave's
    m.persist()
    again = ConsumerOffsetManager(tmp_path / "consumerOffset.json")
    assert again.query_offset("g", "U", 1) == 9


def test_topic_and_group_tables_replaced_only_when_the_data_version_differs(tmp_path):
    master = TopicConfigManager(BrokerConfig(brokerName="b"), tmp_path / "m" / "topics.json")
    slave = TopicConfigManager(BrokerConfig(brokerName="b"), tmp_path / "s" / "topics.json")
    master.create_topic_in_send_message_method("NewTopic", "TBW102", "peer", 4, 0)
    wrapper = json.loads(master.encode())
    assert slave.replace_from_master(wrapper) is True
    assert "NewTopic" in slave.table and slave.data_version == master.data_version
    assert slave.replace_from_master(wrapper) is False  # same dataVersion: nothing to do
    groups = SubscriptionGroupManager(tmp_path / "g.json", auto_create=True)
    other = SubscriptionGroupManager(tmp_path / "g2.json", auto_create=False)
    assert other.find("cg") is None and groups.find("cg").whichBrokerWhenConsumeSlowly == 1
    assert other.replace_from_master(json.loads(groups.encode())) is True
    assert other.find("cg") is not None


def test_delete_when_hours():
    assert is_it_time_to_do("04", hour=4) and is_it_time_to_do("03;04", hour=3)
    assert not is_it_time_to_do("04", hour=5) and not is_it_time_to_do("99", hour=4)
    assert not is_it_time_to_do("x;", hour=0)


def test_name_server_tables_follow_register_and_channel_close():
    from broker_stub.remoting.server import RequestContext
    from connector.protocol.commitlog import HostAddress
    from connector.protocol.remoting import RemotingCommand, RequestCode

    ri = RouteInfoManager()
    ctx_m = RequestContext(HostAddress.parse("127.0.0.1:1"), "127.0.0.1:1")
    ctx_s = RequestContext(HostAddress.parse("127.0.0.1:2"), "127.0.0.1:2")
    body = json.dumps({"topicConfigSerializeWrapper": {"dataVersion": {"counter": 1, "timestamp": 5},
                       "topicConfigTable": {"T": {"topicName": "T", "readQueueNums": 2, "writeQueueNums": 2,
                                                  "perm": 6}}}, "filterServerList": []}).encode()

    def reg(ctx, broker_id, addr, ha):
        return ri(ctx, RemotingCommand.request(RequestCode.REGISTER_BROKER, {
            "brokerAddr": addr, "brokerId": broker_id, "brokerName": "b", "clusterName": "c",
            "haServerAddr": ha, "compressed": False, "bodyCrc32": 0}, body))

    assert reg(ctx_s, 1, "h:2", "h:3").ext_fields == {}  # no master yet
    assert reg(ctx_m, 0, "h:10", "h:11").code == 0
    assert reg(ctx_s, 1, "h:2", "h:3").ext_fields == {"haServerAddr": "h:11", "masterAddr": "h:10"}
    assert ri.pickup_topic_route_data("T")["brokerDatas"][0]["brokerAddrs"] == {0: "h:10", 1: "h:2"}
    ri.on_channel_destroy("127.0.0.1:1")
    assert ri.pickup_topic_route_data("T")["brokerDatas"][0]["brokerAddrs"] == {1: "h:2"}

