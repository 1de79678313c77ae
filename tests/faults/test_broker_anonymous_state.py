"""Bounded anonymous state of the broker stub (issue 15 item 3, docs/security.md "Names and caps").

Before: 1,500 anonymous heartbeat groups grew topics.json and subscriptionGroup.json without bound, one 8 MB
group name made topics.json 20 MB, and ``%RETRY%../../x`` was stored as a topic name.
"""

from __future__ import annotations

import json

from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import remoting_request


def _heartbeat(addr: str, *groups: str, producer_groups: tuple[str, ...] = ()) -> RemotingCommand:
    body = {"clientID": "127.0.0.1@anon",
            "consumerDataSet": [{"groupName": g, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                                 "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [],
                                 "unitMode": False} for g in groups],
            "producerDataSet": [{"groupName": g} for g in producer_groups]}
    return remoting_request(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(body).encode()))


def _tables(broker) -> tuple[dict, dict]:
    config = broker.store_dir / "config"
    topics = json.loads((config / "topics.json").read_text())["topicConfigTable"]
    sub_path = config / "subscriptionGroup.json"
    groups = json.loads(sub_path.read_text())["subscriptionGroupTable"] if sub_path.exists() else {}
    return topics, groups


def test_heartbeat_group_names_are_validated_and_nothing_bad_is_stored(broker_factory):
    broker = broker_factory()
    with Producer(broker.remoting_addr) as p:  # topics.json exists
        p.send("AnonTopic", b"x")
    for bad in ("../../x", "a/b", "g" * 256, "", " ", "grp\n", "é"):
        resp = _heartbeat(broker.remoting_addr, bad)
        if bad.strip():
            assert resp.code == ResponseCode.SYSTEM_ERROR, (bad[:20], resp.code, resp.remark)
            assert "consumer group" in (resp.remark or "") and "\n" not in resp.remark
    assert _heartbeat(broker.remoting_addr, "g" * 255, "good_group-1%|").code == ResponseCode.SUCCESS
    topics, groups = _tables(broker)
    assert not any("/" in t or "." in t or "\n" in t for t in topics), sorted(topics)
    assert "%RETRY%../../x" not in topics and "../../x" not in groups
    assert "%RETRY%" + "g" * 255 in topics and "%RETRY%good_group-1%|" in topics
    assert "illegal characters" in broker.log_path.read_text()


def test_heartbeat_and_auto_created_topics_are_capped(broker_factory):
    broker = broker_factory(maxSubscriptionGroupNums=20, maxTopicConfigNums=25)
    codes = [_heartbeat(broker.remoting_addr, f"anon_{i}").code for i in range(60)]
    assert ResponseCode.SYSTEM_ERROR in codes and codes[0] == ResponseCode.SUCCESS
    refused = _heartbeat(broker.remoting_addr, "one_more")
    assert refused.code == ResponseCode.SYSTEM_ERROR and "maxSubscriptionGroupNums=20" in refused.remark
    topics, groups = _tables(broker)
    assert len(groups) <= 20 and len(topics) <= 25
    with Producer(broker.remoting_addr) as p:
        sends = []
        for i in range(30):
            try:
                sends.append(p.send(f"AutoTopic{i}", b"x").send_status)
            except Exception as exc:  # noqa: BLE001 - the refusal is the point
                sends.append(str(exc))
    topics, _ = _tables(broker)
    assert len(topics) <= 25
    assert any("maxTopicConfigNums=25" in str(s) for s in sends), sends[-3:]
    # an existing topic still takes sends at the cap
    with Producer(broker.remoting_addr) as p:
        assert p.send(next(t for t in topics if t.startswith("AutoTopic")), b"y").send_status == "SEND_OK"
    assert "maxTopicConfigNums=25 reached" in broker.log_path.read_text()


def test_offsets_of_bad_names_and_groups_past_the_cap_are_not_stored(broker_factory):
    broker = broker_factory()
    with Producer(broker.remoting_addr) as p:
        p.send("OffTopic", b"x")

    def update(group: str, topic: str) -> RemotingCommand:
        return remoting_request(broker.remoting_addr, RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": 1}))

    assert update("cg_ok", "OffTopic").code == ResponseCode.SUCCESS
    assert update("../x", "OffTopic").code == ResponseCode.SYSTEM_ERROR
    assert update("cg_ok", "../y").code == ResponseCode.SYSTEM_ERROR
    capped = broker_factory("capped", maxSubscriptionGroupNums=11)  # the 7 system groups + 4

    def update_capped(group: str) -> int:
        return remoting_request(capped.remoting_addr, RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": "T", "queueId": 0, "commitOffset": 1})).code

    codes = [update_capped(f"cg_{i}") for i in range(8)]
    assert codes[:4] == [ResponseCode.SUCCESS] * 4
    assert codes[4:] == [ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST] * 4
