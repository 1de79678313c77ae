"""ConsumeQueues built by the reput service, PULL_MESSAGE, consumer offsets, GET_MAX/MIN_OFFSET (issue 3 item 5)."""

from __future__ import annotations

import struct
import threading

from broker_stub.javautil import java_string_hash
from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import (
    max_offset,
    pull,
    queue_offset,
    remoting_request,
    wait_for,
    wait_for_offset,
)

TOPIC = "PullTopic"
FILE = 64 * 1024


def _send(addr: str, n: int, *, size: int = 700) -> dict[int, list]:
    """n messages over the 4 queues, tags t0/t1/t2; returns {queueId: [(tag, body), ...]} in queue order."""
    sent: dict[int, list] = {q: [] for q in range(4)}
    with Producer(addr) as p:
        for i in range(n):
            q, tag, body = i % 4, f"t{i % 3}", f"m{i:05d}".encode() + b"." * size
            r = p.send(TOPIC, body, tags=tag, queue_id=q)
            assert r.queue_id == q and r.queue_offset == len(sent[q])
            sent[q].append((tag, body))
    return sent


def _dispatched(addr: str, sent: dict[int, list]) -> None:
    wait_for(lambda: all(queue_offset(addr, TOPIC, q) == len(v) for q, v in sent.items()), "the ConsumeQueues")


def test_pull_returns_each_queue_in_order_and_the_consume_queue_layout(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE, mappedFileSizeConsumeQueue=200)  # 10 entries a file
    sent = _send(broker.remoting_addr, 60)
    _dispatched(broker.remoting_addr, sent)
    for q, msgs in sent.items():
        assert queue_offset(broker.remoting_addr, TOPIC, q, which="min") == 0
        got, offset = [], 0
        while offset < len(msgs):
            resp, records = pull(broker.remoting_addr, TOPIC, q, offset, max_msgs=4)
            assert resp.code == ResponseCode.SUCCESS and resp.remark == "FOUND"
            assert int(resp.ext_fields["maxOffset"]) == len(msgs)
            assert int(resp.ext_fields["suggestWhichBrokerId"]) == 0
            assert [r.queue_offset for r in records] == list(range(offset, offset + len(records)))
            offset = int(resp.ext_fields["nextBeginOffset"])
            got += records
        assert [(r.tags, r.body) for r in got] == msgs
        assert {r.topic for r in got} == {TOPIC} and {r.queue_id for r in got} == {q}
    # ConsumeQueue files: 20-byte entries (offset, size, tags hash), 200-byte files named by logical offset
    cq_dir = broker.store_dir / "consumequeue" / TOPIC / "0"
    names = sorted(p.name for p in cq_dir.iterdir())
    assert names[:2] == ["00000000000000000000", "00000000000000000200"]
    data = b"".join((cq_dir / n).read_bytes() for n in names)
    first = pull(broker.remoting_addr, TOPIC, 0, 0, max_msgs=1)[1][0]
    assert struct.unpack_from(">qiq", data, 0) == (first.physical_offset, first.store_size,
                                                   java_string_hash(first.tags))


def test_tag_filter_and_offset_statuses(broker_factory):
    broker = broker_factory()
    addr = broker.remoting_addr
    sent = _send(addr, 24)
    _dispatched(addr, sent)
    resp, records = pull(addr, TOPIC, 0, 0, subscription="t1 || t2")
    assert resp.code == ResponseCode.SUCCESS
    assert [(r.tags, r.body) for r in records] == [m for m in sent[0] if m[0] in ("t1", "t2")]
    end = len(sent[0])
    resp, _ = pull(addr, TOPIC, 0, end)
    assert (resp.code, resp.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    resp, _ = pull(addr, TOPIC, 0, end + 5)
    assert (resp.code, resp.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
    assert int(resp.ext_fields["nextBeginOffset"]) == end
    resp, _ = pull(addr, TOPIC, 3, 0, subscription="nothing-matches")
    assert (resp.code, resp.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert int(resp.ext_fields["nextBeginOffset"]) == len(sent[3])  # the filtered entries are skipped
    resp, _ = pull(addr, "NoSuchTopic", 0, 0)
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    resp, _ = pull(addr, TOPIC, 9, 0)  # beyond the topic's 4 read queues
    assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId[9] is illegal" in resp.remark
    assert queue_offset(addr, TOPIC, 3, which="max") == len(sent[3])
    assert queue_offset(addr, "NoSuchTopic", 0, which="max") == 0
    assert queue_offset(addr, "NoSuchTopic", 0, which="min") == 0


def test_long_polling_pull_is_answered_by_the_next_message(broker_factory):
    broker = broker_factory()
    addr = broker.remoting_addr
    sent = _send(addr, 4)
    _dispatched(addr, sent)
    result: dict = {}

    def held_pull():
        result["resp"], result["records"] = pull(addr, TOPIC, 2, 1, suspend_ms=20000, timeout_s=30)

    t = threading.Thread(target=held_pull)
    t.start()
    wait_for(lambda: "resp" not in result and t.is_alive(), "the pull to be held")
    with Producer(addr) as p:
        p.send(TOPIC, b"wake up", tags="late", queue_id=2)
    t.join(timeout=30)
    assert not t.is_alive(), "the held pull was not answered"
    assert result["resp"].code == ResponseCode.SUCCESS
    assert [r.body for r in result["records"]] == [b"wake up"]


def test_consumer_offsets_query_update_and_persist(broker_factory):
    broker = broker_factory()
    addr = broker.remoting_addr

    def query(q: int) -> RemotingCommand:
        return remoting_request(addr, RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "cg1", "topic": TOPIC, "queueId": q}))

    resp = query(0)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "0"  # never consumed, never cleaned
    resp = remoting_request(addr, RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "cg1", "topic": TOPIC, "queueId": 1, "commitOffset": 17}))
    assert resp.code == ResponseCode.SUCCESS
    sent = _send(addr, 8)
    _dispatched(addr, sent)
    pull(addr, TOPIC, 2, 1, group="cg1", commit_offset=1)  # a pull's commit offset is stored on a master
    assert query(1).ext_fields["offset"] == "17"
    assert query(2).ext_fields["offset"] == "1"
    broker.stop()
    broker.restart()
    assert query(1).ext_fields["offset"] == "17"
    body = remoting_request(addr, RemotingCommand.request(RequestCode.GET_ALL_CONSUMER_OFFSET)).body
    assert b'"PullTopic@cg1"' in body


def test_slave_builds_its_own_consume_queues_and_serves_pulls(broker_factory):
    common = {"mappedFileSizeCommitLog": FILE, "haSendHeartbeatInterval": 300}
    master = broker_factory("master", **common)
    sent = _send(master.remoting_addr, 160, size=1500)
    end = max_offset(master.remoting_addr)
    assert end > 2 * FILE
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr, **common)
    wait_for_offset(slave.remoting_addr, end)
    # topics reach a slave by the metadata sync (3 s after start), as in 4.9.8
    wait_for(lambda: pull(slave.remoting_addr, TOPIC, 0, 0)[0].code != ResponseCode.TOPIC_NOT_EXIST,
             "the slave's topic config sync")
    # the slave started at the master's last file (report 0): its queues begin with placeholder entries
    first_kept = end - end % FILE
    for q, msgs in sent.items():
        wait_for(lambda q=q, msgs=msgs: queue_offset(slave.remoting_addr, TOPIC, q) == len(msgs),
                 f"queue {q} on the slave")
        low = queue_offset(slave.remoting_addr, TOPIC, q, which="min")
        resp, records = pull(slave.remoting_addr, TOPIC, q, low, max_msgs=32)
        assert resp.code == ResponseCode.SUCCESS
        assert int(resp.ext_fields["suggestWhichBrokerId"]) == 0  # slaveReadEnable=false: go back to the master
        assert records[0].physical_offset >= first_kept
        assert [(r.tags, r.body) for r in records] == msgs[low:low + len(records)]
        if low > 0:
            resp, _ = pull(slave.remoting_addr, TOPIC, q, 0)
            assert resp.code == ResponseCode.PULL_OFFSET_MOVED and resp.remark == "OFFSET_TOO_SMALL"
            # a slave keeps the requested offset (offsetCheckInSlave=false)
            assert int(resp.ext_fields["nextBeginOffset"]) == 0


def test_slave_read_suggestion_follows_access_message_in_memory_max_ratio(broker_factory):
    # accessMessageInMemoryMaxRatio=0: every message counts as "not in memory" → suggest the slave (brokerId 1
    # = whichBrokerWhenConsumeSlowly) and use the on-disk batch limits (8 messages)
    broker = broker_factory(slaveReadEnable=True, accessMessageInMemoryMaxRatio=0)
    sent = _send(broker.remoting_addr, 80)
    _dispatched(broker.remoting_addr, sent)
    resp, records = pull(broker.remoting_addr, TOPIC, 0, 0, max_msgs=32)
    assert resp.code == ResponseCode.SUCCESS and len(records) == 8  # maxTransferCountOnMessageInDisk
    assert int(resp.ext_fields["suggestWhichBrokerId"]) == 1
    other = broker_factory("other", slaveReadEnable=True)  # default ratio: in memory → the group's brokerId 0
    sent = _send(other.remoting_addr, 8)
    _dispatched(other.remoting_addr, sent)
    resp, records = pull(other.remoting_addr, TOPIC, 0, 0, max_msgs=32)
    assert len(records) == 2 and int(resp.ext_fields["suggestWhichBrokerId"]) == 0
