"""Topic and consumer administration on the broker stub (issue 14 §5) with the stub's own Python client:
UPDATE_AND_CREATE_TOPIC (17), GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_CONSUMER_CONNECTION_LIST (203), QUERY_TOPIC_CONSUME_BY_WHO (300).

Before: each was answered REQUEST_CODE_NOT_SUPPORTED. The real 4.9.8 mqadmin against the stub and a real
broker is tests/interop/test_mqadmin.py; here the stub-only parts: slaves, refusals, ACL.
"""

from __future__ import annotations

import json

from broker_stub.javautil import fastjson_loads
from broker_stub.remoting.topic_admin_processor import SLAVE_REFUSAL
from connector.client.producer import Producer
from connector.protocol.acl import AclCredentials
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import remoting_request, wait_for

COMMON = {"mappedFileSizeCommitLog": 65536, "haSendHeartbeatInterval": 300}
ACL_EXC = "org.apache.rocketmq.acl.common.AclException: "


def create_topic(addr: str, topic: str, *, read: int = 4, write: int = 4, perm: int = 6,
                 credentials: AclCredentials | None = None, **extra) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC with the header mqadmin sends (CreateTopicRequestHeader)."""
    header = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": read, "writeQueueNums": write,
              "perm": perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false", **extra}
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header)
    if credentials is not None:
        credentials.sign(cmd.ext_fields, cmd.body)
    return remoting_request(addr, cmd)


def _topics_file(broker) -> dict:
    return fastjson_loads((broker.store_dir / "config" / "topics.json").read_text())["topicConfigTable"]


def _route(ns_addr: str, topic: str) -> RemotingCommand:
    return remoting_request(ns_addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))


def test_created_topic_is_persisted_routed_at_once_and_synced_to_the_slave(broker_factory, namesrv_factory):
    ns = namesrv_factory()
    master = broker_factory("master", namesrvAddr=ns.addr, **COMMON)
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, namesrvAddr=ns.addr, **COMMON)
    resp = create_topic(master.remoting_addr, "AdminTopic", read=3, write=5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    route = _route(ns.addr, "AdminTopic")  # registered before the answer: no wait
    assert route.code == ResponseCode.SUCCESS, route.remark
    assert fastjson_loads(route.body)["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 3,
                                                         "topicSysFlag": 0, "writeQueueNums": 5}]
    expected = {"order": False, "perm": 6, "readQueueNums": 3, "topicFilterType": "SINGLE_TAG",
                "topicName": "AdminTopic", "topicSysFlag": 0, "writeQueueNums": 5}
    assert _topics_file(master)["AdminTopic"] == expected
    wait_for(lambda: _topics_file(slave).get("AdminTopic") == expected, "the slave's topics.json to hold AdminTopic",
             timeout_s=30, interval_s=0.5)
    # an update replaces the config, the slave follows
    assert create_topic(master.remoting_addr, "AdminTopic", read=2, write=2, perm=4).code == ResponseCode.SUCCESS
    assert fastjson_loads(_route(ns.addr, "AdminTopic").body)["queueDatas"][0]["perm"] == 4
    wait_for(lambda: _topics_file(slave)["AdminTopic"]["writeQueueNums"] == 2, "the slave to copy the update",
             timeout_s=30, interval_s=0.5)
    refused = create_topic(slave.remoting_addr, "SlaveTopic")
    assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REFUSAL)
    assert "SlaveTopic" not in _topics_file(slave)


def test_bad_create_topic_requests_are_refused_as_4_9_8_refuses_them(broker_factory):
    addr = broker_factory(**COMMON).remoting_addr
    cases = {
        "TBW102": "The topic[TBW102] is conflict with system topic.",
        "rmq_sys_x": "The topic[rmq_sys_x] is conflict with system topic.",
        "bad topic": "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        "T" * 128: "The specified topic is longer than topic max length.",
    }
    for topic, remark in cases.items():
        resp = create_topic(addr, topic)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark), topic
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "NoPerm", "defaultTopic": "TBW102",
                                                                        "readQueueNums": 1, "writeQueueNums": 1})
    resp = remoting_request(addr, cmd)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <perm> is null")
    resp = create_topic(addr, "BadFilter", topicFilterType="NO_SUCH")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "TopicFilterType" in resp.remark
    stats = remoting_request(addr, RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoPerm"}))
    assert (stats.code, stats.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoPerm] not exist")


def test_create_topic_is_admin_only_on_an_acl_enabled_broker(broker_factory, tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: admin1234\n    secretKey: admin-secret\n    admin: true\n"
        "  - accessKey: user12345\n    secretKey: user-secret\n    defaultTopicPerm: PUB|SUB\n")
    addr = broker_factory(aclEnable="true", rocketmqHome=str(home), **COMMON).remoting_addr
    resp = create_topic(addr, "AclAdminTopic", credentials=AclCredentials("user12345", "user-secret"))
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, ACL_EXC + "Need admin permission for request "
                                        "code=17, but accessKey=user12345 is not")
    resp = create_topic(addr, "AclAdminTopic")
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, ACL_EXC + "No accessKey is configured")
    resp = create_topic(addr, "AclAdminTopic", credentials=AclCredentials("admin1234", "admin-secret"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def test_consumer_statistics_follow_heartbeats_and_offsets(broker_factory):
    addr = broker_factory(**COMMON).remoting_addr
    with Producer(addr) as p:
        for i in range(6):
            p.send("StatsTopic", b"s%d" % i, queue_id=i % 2)

    def ask(code: int, **header) -> RemotingCommand:
        return remoting_request(addr, RemotingCommand.request(code, header))

    resp = ask(RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="stats_cg")
    assert (resp.code, resp.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[stats_cg] not online")
    assert ask(RequestCode.GET_CONSUME_STATS, consumerGroup="stats_cg").body == b'{"consumeTps":0.0,"offsetTable":{}}'
    heartbeat = {"clientID": "10.0.0.9@77", "producerDataSet": [], "consumerDataSet": [{
        "groupName": "stats_cg", "consumeType": "CONSUME_ACTIVELY", "messageModel": "BROADCASTING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": "StatsTopic", "subString": "a || b", "tagsSet": ["a", "b"],
                                 "codeSet": [97, 98], "subVersion": 5, "expressionType": "TAG"}]}]}
    hb = RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode())
    assert remoting_request(addr, hb).code == ResponseCode.SUCCESS
    conn = fastjson_loads(ask(RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="stats_cg").body)
    assert [(c["clientId"], c["language"], c["version"]) for c in conn["connectionSet"]] == [("10.0.0.9@77", "JAVA",
                                                                                            409)]
    assert conn["connectionSet"][0]["clientAddr"].startswith("127.0.0.1:")
    assert (conn["consumeType"], conn["messageModel"], conn["consumeFromWhere"]) == (
        "CONSUME_ACTIVELY", "BROADCASTING", "CONSUME_FROM_FIRST_OFFSET")
    assert conn["subscriptionTable"]["StatsTopic"] == {"classFilterMode": False, "codeSet": [97, 98],
                                                       "expressionType": "TAG", "subString": "a || b",
                                                       "subVersion": 5, "tagsSet": ["a", "b"], "topic": "StatsTopic"}
    assert fastjson_loads(ask(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, topic="StatsTopic").body) == {
        "groupList": ["stats_cg"]}
    commit = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "offsets_only", "topic": "StatsTopic", "queueId": 1, "commitOffset": 2})
    assert remoting_request(addr, commit).code == ResponseCode.SUCCESS
    assert fastjson_loads(ask(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, topic="StatsTopic").body) == {
        "groupList": ["offsets_only", "stats_cg"]}
    body = ask(RequestCode.GET_CONSUME_STATS, consumerGroup="offsets_only").body.decode()
    # fastjson's MessageQueue keys in HashMap order; 4 queues (created from TBW102 with the client's 4), queue 1
    # holds 3 messages
    assert body.startswith('{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":2,')
    assert ('{"brokerName":"broker-a","queueId":0,"topic":"StatsTopic"}:{"brokerOffset":3,"consumerOffset":0,'
            '"lastTimestamp":0}') in body
    assert '{"brokerName":"broker-a","queueId":1,"topic":"StatsTopic"}:{"brokerOffset":3,"consumerOffset":2,' \
           '"lastTimestamp":1' in body
    assert body.count('"brokerOffset"') == 4
    # an online group with subscriptions: only subscribed topics are counted
    assert create_topic(addr, "NotSubscribed", read=1, write=1).code == ResponseCode.SUCCESS
    other = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "stats_cg", "topic": "NotSubscribed", "queueId": 0, "commitOffset": 1})
    assert remoting_request(addr, other).code == ResponseCode.SUCCESS
    assert ask(RequestCode.GET_CONSUME_STATS, consumerGroup="stats_cg").body == b'{"consumeTps":0.0,"offsetTable":{}}'
    body = ask(RequestCode.GET_CONSUME_STATS, consumerGroup="offsets_only", topic="StatsTopic").body.decode()
    assert body.count('"brokerOffset"') == 4
