"""SYNC_MASTER send statuses, the stub's master and a real RocketMQ 4.9 master side by side (issue 10 §2e).

Each master runs as SYNC_MASTER with ``slaveTimeout=2000`` and gets a real 4.9 SLAVE (``haMasterAddress``
pinned). The stub's Python producer sends to both through the same steps:

1. no slave has ever connected → SLAVE_NOT_AVAILABLE;
2. the slave is attached → SEND_OK;
3. the slave is frozen (SIGSTOP: its connection stays open, no ack comes) → FLUSH_SLAVE_TIMEOUT after
   ``slaveTimeout``;
4. a send waiting for the frozen slave when the slave dies (SIGKILL closes its connection): the one
   documented difference (docs/broker_stub.md "Better than 4.9.8, same wire"; docs/real_peers.md) — the
   stub answers SLAVE_NOT_AVAILABLE at once, 4.9 waits out ``slaveTimeout`` and answers FLUSH_SLAVE_TIMEOUT;
5. the slave is gone → SLAVE_NOT_AVAILABLE.

The message is stored on the master whatever the status.
"""

from __future__ import annotations

import pytest

from connector.client.producer import Producer
from tests.support.brokers import BrokerProcess, max_offset, wait_for
from tests.support.jvm_peers import RealBroker

SLAVE_TIMEOUT_MS = 2000
# step 4: a send pending on the last slave when that slave's connection closes
PENDING_WHEN_LAST_SLAVE_LEAVES = {"stub": "SLAVE_NOT_AVAILABLE", "real": "FLUSH_SLAVE_TIMEOUT"}


def _start_master(kind: str, workdir):
    props = {"brokerRole": "SYNC_MASTER", "slaveTimeout": SLAVE_TIMEOUT_MS, "mappedFileSizeCommitLog": 1 << 20}
    if kind == "stub":
        return BrokerProcess.start(workdir, **props)
    return RealBroker.start(workdir, **props)


def _send(producer: Producer, master_addr: str, body: bytes) -> str:
    """Send one message and return its status; checks the master stored it whatever the status."""
    before = max_offset(master_addr)
    status = producer.send("InteropSync", body).send_status
    assert max_offset(master_addr) > before, f"{status}: the master did not store the message"
    return status


@pytest.mark.parametrize("kind", ["stub", "real"])
def test_sync_master_statuses_with_slave_up_none_frozen_and_lost(kind, tmp_path):
    with _start_master(kind, tmp_path / f"{kind}-master") as master, \
            Producer(master.remoting_addr, "interop_sync_pg", timeout_ms=10_000) as producer:
        statuses = {"no slave yet": _send(producer, master.remoting_addr, b"first")}

        with RealBroker.start(tmp_path / "real-slave", brokerRole="SLAVE", brokerId=1,
                              haMasterAddress=master.ha_addr, haSendHeartbeatInterval=1000,
                              mappedFileSizeCommitLog=1 << 20) as slave:
            wait_for(lambda: producer.send("InteropSync", b"attach").send_status == "SEND_OK",
                     "a SEND_OK once the real slave is attached", timeout_s=30, interval_s=0.2)
            statuses["slave up"] = _send(producer, master.remoting_addr, b"up")

            slave.sigstop()
            statuses["slave frozen"] = _send(producer, master.remoting_addr, b"frozen")

            before = max_offset(master.remoting_addr)
            pending = producer.send_async("InteropSync", b"pending")
            # stored means the master already waits for the replica ack: only then close the connection
            wait_for(lambda: max_offset(master.remoting_addr) > before, "the pending message to be stored")
            slave.kill9()
            statuses["pending when the slave dies"] = pending.result(timeout=SLAVE_TIMEOUT_MS / 1000 + 10).send_status

            statuses["slave gone"] = wait_for(
                lambda: (s := _send(producer, master.remoting_addr, b"gone")) == "SLAVE_NOT_AVAILABLE" and s,
                "SLAVE_NOT_AVAILABLE once the master saw the connection close", timeout_s=10, interval_s=0.2)

    assert statuses == {
        "no slave yet": "SLAVE_NOT_AVAILABLE",
        "slave up": "SEND_OK",
        "slave frozen": "FLUSH_SLAVE_TIMEOUT",
        "pending when the slave dies": PENDING_WHEN_LAST_SLAVE_LEAVES[kind],
        "slave gone": "SLAVE_NOT_AVAILABLE",
    }
