"""The stub's extra GET_BROKER_RUNTIME_INFO keys (round-2 contract between the broker stub and the source)."""

from __future__ import annotations

import json
import time

from connector.client.producer import Producer
from tests.support.brokers import HASocket, max_offset, runtime_info

CONNECTION_KEYS = {"peer", "slaveRequestOffset", "slaveAckOffset", "maxReportedOffset", "lagBytes",
                   "msSinceLastRead", "requestedOffsetMissing", "bytesSent"}


def _wait_for(predicate, what: str, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def test_master_reports_role_and_every_ha_connection(broker_factory):
    broker = broker_factory(brokerRole="SYNC_MASTER", haSendHeartbeatInterval=200)
    with Producer(broker.remoting_addr) as p:
        for _ in range(5):
            p.send("ContractTopic", b"x" * 1000, wait_store_msg_ok=False)
    end = max_offset(broker.remoting_addr)
    info = runtime_info(broker.remoting_addr)
    assert info["brokerRole"] == "SYNC_MASTER"
    assert info["brokerId"] == "0"
    assert info["haConnectionCount"] == "0"
    assert json.loads(info["haConnections"]) == []
    assert info["push2SlaveMaxOffset"] == "0"

    with HASocket(broker.ha_addr) as ha:
        ha.report(1000)
        frames = ha.read_until(end)
        assert frames[-1].end_offset == end
        ha.report(2000)  # an ack below what was pushed
        ha.report(1500)  # a lower ack later: maxReportedOffset keeps the highest

        def connection():
            conns = json.loads(runtime_info(broker.remoting_addr)["haConnections"])
            return conns[0] if conns and conns[0]["slaveAckOffset"] == 1500 else None

        conn = _wait_for(connection, "the ack 1500 to show in haConnections")
        assert CONNECTION_KEYS <= set(conn)
        assert conn["slaveRequestOffset"] == 1000
        assert conn["maxReportedOffset"] == 2000
        assert conn["lagBytes"] == end - 1500
        assert conn["bytesSent"] == end - 1000
        assert conn["requestedOffsetMissing"] is False
        assert 0 <= conn["msSinceLastRead"] < 10_000
        host, _, port = conn["peer"].rpartition(":")
        assert host == "127.0.0.1" and int(port) == ha.sock.getsockname()[1]
        info = runtime_info(broker.remoting_addr)
        assert info["haConnectionCount"] == "1"
        assert info["push2SlaveMaxOffset"] == "2000"
        assert "haMasterAddress" not in info and "slaveConnected" not in info
