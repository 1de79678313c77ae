"""A stub SLAVE replicating from a stub master over the classic HA protocol (issue 3 items 1, 2, 4, 8)."""

from __future__ import annotations

import json

import pytest

from connector.client.producer import MQBrokerException, Producer
from tests.support.brokers import (
    assert_same_commitlog,
    max_offset,
    runtime_info,
    wait_for,
    wait_for_offset,
)

FILE = 64 * 1024


def _produce(addr: str, n: int, size: int = 3000, topic: str = "ReplTopic", tag: int = 0) -> list:
    with Producer(addr, timeout_ms=15000) as p:
        futures = [p.send_async(topic, bytes([(i + tag) % 251]) * size, tags=f"t{i % 3}") for i in range(n)]
        return [f.result(timeout=30) for f in futures]


def _start_pair(broker_factory, role: str = "ASYNC_MASTER", **extra):
    common = {"mappedFileSizeCommitLog": FILE, "haSendHeartbeatInterval": 300, **extra}
    master = broker_factory("master", brokerRole=role, **common)
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr, **common)
    # an empty slave's first report (0) means "the master's current last file": let the master take it
    # before anything is produced, so the slave starts at file 0 and its files equal the master's
    wait_for(lambda: [c["slaveRequestOffset"] for c in json.loads(runtime_info(master.remoting_addr)["haConnections"])]
             == [0], "the master to take the slave's first report")
    return master, slave


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER"])
def test_slave_replicates_byte_identical_across_file_rollover(broker_factory, role):
    master, slave = _start_pair(broker_factory, role)
    wait_for(lambda: runtime_info(slave.remoting_addr)["slaveConnected"] == "true", "the slave to connect")
    results = _produce(master.remoting_addr, 80)
    if role == "SYNC_MASTER":  # every send waited for the slave's ack
        assert {r.send_status for r in results} == {"SEND_OK"}
    end = max_offset(master.remoting_addr)
    assert end > 3 * FILE  # several files, so END_FILE blanks and roll-over are replicated
    wait_for_offset(slave.remoting_addr, end)
    info = runtime_info(slave.remoting_addr)
    assert info["brokerRole"] == "SLAVE" and info["brokerId"] == "1"
    assert info["haMasterAddress"] == master.ha_addr
    assert int(info["masterPhyOffset"]) == end
    assert info["commitLogMinOffset"] == "0"
    minfo = runtime_info(master.remoting_addr)
    conns = json.loads(minfo["haConnections"])
    assert len(conns) == 1 and conns[0]["slaveAckOffset"] == end and conns[0]["lagBytes"] == 0
    assert int(minfo["push2SlaveMaxOffset"]) == end
    slave.stop()
    master.stop()
    assert_same_commitlog(master.commitlog_dir, slave.commitlog_dir, end=end)


def test_slave_refuses_sends_with_service_not_available(broker_factory):
    _, slave = _start_pair(broker_factory)
    with Producer(slave.remoting_addr) as p, pytest.raises(MQBrokerException) as err:
        p.send("ReplTopic", b"to the slave")
    assert err.value.code == 14  # SERVICE_NOT_AVAILABLE
    assert max_offset(slave.remoting_addr) == 0


def test_empty_slave_starts_at_the_masters_current_last_file(broker_factory):
    master = broker_factory("master", mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=300)
    _produce(master.remoting_addr, 60)
    end = max_offset(master.remoting_addr)
    assert end > 2 * FILE
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr,
                           mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=300)
    wait_for_offset(slave.remoting_addr, end)
    info = runtime_info(slave.remoting_addr)
    assert int(info["commitLogMinOffset"]) == end - end % FILE  # upstream report-0 rule (docs/protocol.md §2.5)
    slave.stop()
    name = f"{end - end % FILE:020d}"
    assert (slave.commitlog_dir / name).read_bytes() == (master.commitlog_dir / name).read_bytes()
    assert sorted(p.name for p in slave.commitlog_dir.iterdir()) == [name]


def test_slave_restart_resumes_from_its_own_max_offset(broker_factory):
    master, slave = _start_pair(broker_factory)
    _produce(master.remoting_addr, 30)
    first = max_offset(master.remoting_addr)
    wait_for_offset(slave.remoting_addr, first)
    slave.stop()
    _produce(master.remoting_addr, 40, tag=7)  # written while the slave is down
    end = max_offset(master.remoting_addr)
    slave.restart()
    wait_for_offset(slave.remoting_addr, end)
    # resumed exactly where it stopped (the master drops the old connection when it reads its EOF)
    wait_for(lambda: [c["slaveRequestOffset"] for c in json.loads(runtime_info(master.remoting_addr)["haConnections"])]
             == [first], f"one HA connection on the master, started at {first}")
    slave.stop()
    master.stop()
    assert_same_commitlog(master.commitlog_dir, slave.commitlog_dir, end=end)


def test_master_restart_slave_reconnects_and_catches_up(broker_factory):
    master, slave = _start_pair(broker_factory)
    _produce(master.remoting_addr, 20)
    wait_for_offset(slave.remoting_addr, max_offset(master.remoting_addr))
    master.stop()
    wait_for(lambda: runtime_info(slave.remoting_addr)["slaveConnected"] == "false", "the slave to see the loss")
    master.restart()
    _produce(master.remoting_addr, 30, tag=3)
    end = max_offset(master.remoting_addr)
    wait_for_offset(slave.remoting_addr, end)
    assert runtime_info(slave.remoting_addr)["slaveConnected"] == "true"
    slave.stop()
    master.stop()
    assert_same_commitlog(master.commitlog_dir, slave.commitlog_dir, end=end)
