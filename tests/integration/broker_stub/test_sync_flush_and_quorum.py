"""SYNC_FLUSH group commit, flush + replica waits together, and the minInSyncSlaves quorum (issue 3 items 1, 3)."""

from __future__ import annotations

import json

from connector.client.producer import Producer
from tests.support.brokers import HASocket, max_offset, runtime_info, wait_for, wait_for_offset


def _attach(broker) -> HASocket:
    ha = HASocket(broker.ha_addr)
    end = max_offset(broker.remoting_addr)
    ha.report(end)
    assert ha.read_frame(timeout_s=5).master_phy_offset == end  # registered and answered
    return ha


def _next_data_frame(ha: HASocket):
    while True:
        frame = ha.read_frame(timeout_s=5)
        if not frame.is_heartbeat:
            return frame


def test_sync_flush_answers_only_after_the_bytes_are_on_disk(broker_factory):
    # a periodic flush that would never run during the test: only the group commit can flush
    broker = broker_factory(flushDiskType="SYNC_FLUSH", flushIntervalCommitLog=600000)
    with Producer(broker.remoting_addr) as p:
        for i in range(20):
            assert p.send("FlushTopic", bytes([i]) * 5000).send_status == "SEND_OK"
            assert runtime_info(broker.remoting_addr)["remainHowManyDataToFlush"] == "0 B"
        futures = [p.send_async("FlushTopic", b"g" * 3000) for _ in range(50)]  # concurrent: group commits
        assert {f.result(timeout=30).send_status for f in futures} == {"SEND_OK"}
        assert runtime_info(broker.remoting_addr)["remainHowManyDataToFlush"] == "0 B"


def test_async_flush_leaves_bytes_unflushed_until_the_interval(broker_factory):
    broker = broker_factory(flushDiskType="ASYNC_FLUSH", flushIntervalCommitLog=600000,
                            flushCommitLogThoroughInterval=600000)
    with Producer(broker.remoting_addr) as p:
        p.send("FlushTopic", b"a" * 5000)
    assert runtime_info(broker.remoting_addr)["remainHowManyDataToFlush"] != "0 B"


def test_sync_master_with_sync_flush_combines_both_waits(broker_factory):
    broker = broker_factory(brokerRole="SYNC_MASTER", flushDiskType="SYNC_FLUSH", slaveTimeout=600,
                            haSendHeartbeatInterval=200)
    with Producer(broker.remoting_addr, timeout_ms=10000) as p:
        # no slave: the replica status wins over the (successful) flush, at once
        r = p.send("BothTopic", b"no slave")
        assert r.send_status == "SLAVE_NOT_AVAILABLE"
        assert runtime_info(broker.remoting_addr)["remainHowManyDataToFlush"] == "0 B"
        with _attach(broker) as ha:
            fut = p.send_async("BothTopic", b"acked")
            ha.report(_next_data_frame(ha).end_offset)
            assert fut.result(timeout=10).send_status == "SEND_OK"
            r = p.send("BothTopic", b"never acked")  # flushed, but the replica times out
            assert r.send_status == "FLUSH_SLAVE_TIMEOUT"
            assert runtime_info(broker.remoting_addr)["remainHowManyDataToFlush"] == "0 B"


def test_in_sync_replicas_two_needs_two_distinct_acks(broker_factory):
    broker = broker_factory(brokerRole="SYNC_MASTER", minInSyncSlaves=2, slaveTimeout=800,
                            haSendHeartbeatInterval=200)
    with Producer(broker.remoting_addr, timeout_ms=10000) as p:
        with _attach(broker) as first:
            assert p.send("QuorumTopic", b"one slave").send_status == "SLAVE_NOT_AVAILABLE"
            _next_data_frame(first)
            first.report(max_offset(broker.remoting_addr))
            with _attach(broker) as second:
                fut = p.send_async("QuorumTopic", b"two acks")
                end = _next_data_frame(first).end_offset
                assert _next_data_frame(second).end_offset == end
                first.report(end)
                wait_for(lambda: end in [c["slaveAckOffset"] for c in
                                         json.loads(runtime_info(broker.remoting_addr)["haConnections"])],
                         "the first ack to register")
                # one ack is not enough: the send stays pending until the second slave acks
                assert not fut.done()
                second.report(end)
                assert fut.result(timeout=10).send_status == "SEND_OK"
                fut = p.send_async("QuorumTopic", b"only one ack")
                end = _next_data_frame(first).end_offset
                first.report(end)
                assert fut.result(timeout=10).send_status == "FLUSH_SLAVE_TIMEOUT"
            # the second slave left: waits answer SLAVE_NOT_AVAILABLE at once, not after slaveTimeout
            wait_for(lambda: runtime_info(broker.remoting_addr)["haConnectionCount"] == "1", "the close to register")
            assert p.send("QuorumTopic", b"one left").send_status == "SLAVE_NOT_AVAILABLE"


def test_in_sync_replicas_two_with_two_real_slaves(broker_factory):
    common = {"mappedFileSizeCommitLog": 65536, "haSendHeartbeatInterval": 300}
    master = broker_factory("master", brokerRole="SYNC_MASTER", inSyncReplicas=2, slaveTimeout=5000, **common)
    slaves = [broker_factory(f"slave{i}", brokerRole="SLAVE", brokerId=i, haMasterAddress=master.ha_addr, **common)
              for i in (1, 2)]
    wait_for(lambda: runtime_info(master.remoting_addr)["haConnectionCount"] == "2", "both slaves to connect")
    with Producer(master.remoting_addr, timeout_ms=15000) as p:
        statuses = {f.result(timeout=30).send_status
                    for f in [p.send_async("QuorumTopic", b"q" * 4000) for _ in range(40)]}
    assert statuses == {"SEND_OK"}
    end = max_offset(master.remoting_addr)
    for s in slaves:
        wait_for_offset(s.remoting_addr, end)
