"""The metadata sync against a real RocketMQ 4.9.8 master found through a real 4.9.8 name server (docs/metadata.md):
the answers of the four SlaveSynchronize requests as the Java broker writes them (fastjson, bare integer keys) land
in the four tables with the values the broker holds — a topic created with UPDATE_AND_CREATE_TOPIC, a subscription
group created with UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, a group's offset committed with UPDATE_CONSUMER_OFFSET (and
its queue's max offset of the same snapshot), the delay level of a delivered delayed message — and a later round
lands exactly the offset that moved."""

from __future__ import annotations

import json

from connector.client.producer import Producer
from connector.delta.reading import read_table
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from streaming_apps.metadata_sync import MetadataSync, SyncTarget, targets_of
from tests.support.brokers import queue_offset, remoting_request, wait_for
from tests.support.jvm_peers import RealBroker, killed_at_exit

TOPIC = "MetaReal"
GROUP = "meta_real_cg"


def _ok(addr: str, code: int, header: dict | None = None, body: bytes = b"") -> None:
    resp = remoting_request(addr, RemotingCommand.request(code, header, body))
    assert resp.code == ResponseCode.SUCCESS, f"{code}: {resp.code} {resp.remark}"


def _rows(root, name: str) -> list[dict]:
    return read_table(str(root / name)).to_pylist()


def test_a_real_masters_metadata_lands_with_the_values_it_holds(real_namesrv, tmp_path):
    with killed_at_exit(RealBroker.start(tmp_path / "broker", namesrvAddr=real_namesrv.addr)) as broker:
        addr = broker.remoting_addr
        _ok(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 2, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
        _ok(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            body=json.dumps({"groupName": GROUP, "retryMaxTimes": 5, "consumeBroadcastEnable": False}).encode())
        with Producer(addr, "meta-real") as producer:
            for i in range(10):
                assert producer.send(TOPIC, f"m{i}".encode(), queue_id=i % 2).send_status == "SEND_OK"
            assert producer.send(TOPIC, b"later", delay_level=1).send_status == "SEND_OK"
        _ok(addr, RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 3})
        targets = targets_of({"namesrvAddr": real_namesrv.addr})
        wait_for(lambda: targets() == [SyncTarget("broker-a", addr)], "the real name server's route to the master",
                 timeout_s=60, interval_s=0.5)
        root = tmp_path / "tables"
        sync = MetadataSync(str(root), targets)

        def delivered() -> bool:  # the delayed message due after 1 s, its level's offset moved
            sync.sync_once()
            return any(r["delayLevel"] == 1 and r["offset"] >= 1 for r in _rows(root, "broker_delay_offsets"))
        wait_for(delivered, "delay level 1's offset in broker_delay_offsets", timeout_s=60, interval_s=1.0)

        topics = {r["topicName"]: r for r in _rows(root, "broker_topic_configs")}
        mine = topics[TOPIC]
        assert (mine["readQueueNums"], mine["writeQueueNums"], mine["perm"], mine["order"], mine["deleted"]) == (
            4, 2, 6, False, False)
        assert json.loads(mine["config"])["topicFilterType"] == "SINGLE_TAG"
        assert {"TBW102", "SCHEDULE_TOPIC_XXXX"} <= set(topics)
        groups = {r["groupName"]: r for r in _rows(root, "broker_subscription_groups")}
        assert (groups[GROUP]["retryMaxTimes"], groups[GROUP]["consumeBroadcastEnable"]) == (5, False)
        assert "TOOLS_CONSUMER" in groups  # the groups every 4.9.8 broker creates
        # a row per snapshot in which the offset or the queue's max offset moved (the delivered delayed message
        # went to a queue of the topic too), the last one with the queue's max offset now
        offsets = sorted((r for r in _rows(root, "broker_consumer_offsets") if r["group"] == GROUP),
                         key=lambda r: r["snapshotId"])
        max0 = queue_offset(addr, TOPIC, 0)
        assert {(r["topic"], r["queueId"], r["offset"]) for r in offsets} == {(TOPIC, 0, 3)}
        assert [r["maxOffset"] for r in offsets] == sorted({r["maxOffset"] for r in offsets})
        assert offsets[-1]["maxOffset"] == max0 and offsets[0]["maxOffset"] >= 5

        # the group consumed further: the next round lands exactly that row
        _ok(addr, RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": max0})
        before = {t: len(_rows(root, t)) for t in ("broker_topic_configs", "broker_subscription_groups")}
        sync.sync_once()
        new = [r for r in _rows(root, "broker_consumer_offsets") if r["group"] == GROUP
               and r["snapshotId"] > offsets[-1]["snapshotId"]]
        assert [(r["queueId"], r["offset"], r["maxOffset"]) for r in new] == [(0, max0, max0)]
        assert {t: len(_rows(root, t)) for t in before} == before
