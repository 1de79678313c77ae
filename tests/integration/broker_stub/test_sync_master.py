"""SYNC_MASTER replica waits (docs/protocol.md §2.8–2.10), resolved by HA acks from a raw socket acting as the slave."""

from __future__ import annotations

from connector.client.producer import Producer
from connector.protocol.ha import TransferFrame
from tests.support.brokers import HASocket, max_offset


def _attach_slave(broker) -> HASocket:
    """An HA connection that has reported the max offset; returns once the broker has answered it."""
    slave = HASocket(broker.ha_addr)
    end = max_offset(broker.remoting_addr)
    slave.report(end)
    hb = slave.read_frame(timeout_s=5)  # a heartbeat proves the connection is registered and reported
    assert hb.is_heartbeat and hb.master_phy_offset == end
    return slave


def _data_frame(slave: HASocket) -> TransferFrame:
    while True:
        frame = slave.read_frame(timeout_s=5)
        if not frame.is_heartbeat:
            return frame


def test_no_slave_answers_slave_not_available_with_the_message_stored(broker_factory):
    broker = broker_factory(brokerRole="SYNC_MASTER", slaveTimeout=60000)
    with Producer(broker.remoting_addr) as p:
        r = p.send("SyncTopic", b"alone")
    assert r.send_status == "SLAVE_NOT_AVAILABLE"
    assert max_offset(broker.remoting_addr) > int(r.offset_msg_id[-16:], 16)  # stored on the master anyway


def test_acked_by_a_slave_is_send_ok_and_unacked_times_out(broker_factory):
    broker = broker_factory(brokerRole="SYNC_MASTER", slaveTimeout=800, haSendHeartbeatInterval=200)
    with _attach_slave(broker) as slave, Producer(broker.remoting_addr, timeout_ms=10000) as p:
        fut = p.send_async("SyncTopic", b"replicate me")
        frame = _data_frame(slave)
        assert b"replicate me" in frame.body
        slave.report(frame.end_offset)
        assert fut.result(timeout=10).send_status == "SEND_OK"
        # the slave stays connected (reports keep it alive) but never acks the next message
        r = p.send("SyncTopic", b"never acked")
        assert r.send_status == "FLUSH_SLAVE_TIMEOUT"
        assert b"never acked" in _data_frame(slave).body
        # WAIT=false does not wait for a replica
        assert p.send("SyncTopic", b"no wait", wait_store_msg_ok=False).send_status == "SEND_OK"


def test_losing_the_last_slave_answers_waiting_sends_at_once(broker_factory):
    broker = broker_factory(brokerRole="SYNC_MASTER", slaveTimeout=60000, haSendHeartbeatInterval=200)
    with Producer(broker.remoting_addr, timeout_ms=30000) as p:
        slave = _attach_slave(broker)
        fut = p.send_async("SyncTopic", b"waiting")
        _data_frame(slave)
        slave.close()
        assert fut.result(timeout=10).send_status == "SLAVE_NOT_AVAILABLE"
