"""The HA port's address lists (issue 15 item 2, docs/security.md "HA port"): ``haAllowedAddresses`` refuses
strangers at accept, ``haReplicaAddresses`` keeps readers' acks from releasing SYNC_MASTER waits.

Before: anyone reaching the HA port read the whole CommitLog, and a client reporting the max offset made a
SYNC_MASTER with no slave answer SEND_OK (50 of 50 sends). Loopback addresses 127.0.0.x stand for hosts.
"""

from __future__ import annotations

import socket
import threading

import pytest

from broker_stub.ha.allow_list import HAAddressPolicy
from connector.client.producer import Producer
from connector.protocol.ha import TransferFrameReader, encode_report
from tests.support.brokers import BrokerStartError, HASocket, runtime_info, wait_for


def _connect_from(source_ip: str, addr: str) -> socket.socket:
    host, _, port = addr.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=5, source_address=(source_ip, 0))


class AckingReader(threading.Thread):
    """Reads the HA stream from ``source_ip`` and acks every frame's end at once, as a slave would."""

    def __init__(self, source_ip: str, ha_addr: str) -> None:
        super().__init__(daemon=True)
        self.sock = _connect_from(source_ip, ha_addr)
        self.sock.sendall(encode_report(0))
        self.stop = threading.Event()
        self.acked = 0

    def run(self) -> None:
        reader = TransferFrameReader()
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            reader.feed(data)
            while (frame := reader.next_frame()) is not None:
                if not frame.is_heartbeat:
                    self.acked = frame.end_offset
                    self.sock.sendall(encode_report(frame.end_offset))

    def close(self) -> None:
        self.stop.set()
        self.join(timeout=5)
        self.sock.close()


def _sync_send_statuses(broker, n: int) -> list[str]:
    statuses = []
    with Producer(broker.remoting_addr) as p:
        for i in range(n):
            statuses.append(p.send("SyncTopic", b"m%d" % i).send_status)
    return statuses


def test_stranger_is_refused_at_accept_and_listed_reader_reads(broker_factory):
    broker = broker_factory(haAllowedAddresses="127.0.0.1, 127.0.0.2/32")
    with Producer(broker.remoting_addr) as p:
        p.send("AllowTopic", b"x" * 100)
    end = int(runtime_info(broker.remoting_addr)["commitLogMaxOffset"])
    stranger = _connect_from("127.0.0.9", broker.ha_addr)
    stranger.sendall(encode_report(0))
    stranger.settimeout(5)
    try:
        assert stranger.recv(1 << 16) == b"", "a stranger got CommitLog bytes"
    except ConnectionResetError:
        pass
    finally:
        stranger.close()
    with HASocket(broker.ha_addr) as ha:  # 127.0.0.1 is listed
        ha.report(1)
        assert ha.read_until(end)[-1].end_offset == end
    assert "ha connection refused: peer 127.0.0.9:" in broker.log_path.read_text()


def test_acks_from_a_non_replica_do_not_release_a_sync_wait(broker_factory):
    broker = broker_factory(brokerRole="SYNC_MASTER", slaveTimeout=1000, haReplicaAddresses="127.0.0.2")
    with Producer(broker.remoting_addr) as p:
        p.send("SyncTopic", b"first")
    fake = AckingReader("127.0.0.1", broker.ha_addr)
    fake.start()
    try:
        wait_for(lambda: fake.acked > 0, "the fake reader to read and ack")
        statuses = _sync_send_statuses(broker, 5)
        assert "SEND_OK" not in statuses, statuses
        end = int(runtime_info(broker.remoting_addr)["commitLogMaxOffset"])
        # it does ack all of it (on a loaded machine the last frame may arrive after the 1 s slaveTimeout)
        wait_for(lambda: fake.acked == end, f"the fake reader to ack up to {end}")
    finally:
        fake.close()
    replica = AckingReader("127.0.0.2", broker.ha_addr)  # the listed replica releases the waits
    replica.start()
    try:
        wait_for(lambda: replica.acked > 0, "the replica to read and ack")
        assert _sync_send_statuses(broker, 5) == ["SEND_OK"] * 5
    finally:
        replica.close()


def test_bad_address_list_refuses_to_start(broker_factory):
    with pytest.raises(BrokerStartError, match=r"haAllowedAddresses: '10\.0\.0\.300' is not an IP address"):
        broker_factory(haAllowedAddresses="10.0.0.1,10.0.0.300")


def test_policy_matches_addresses_networks_and_ipv4_mapped_peers():
    policy = HAAddressPolicy("10.0.0.0/24;::1", "10.0.0.11")
    assert policy.admit("10.0.0.200", 1) and policy.admit("::ffff:10.0.0.5", 1) and policy.admit("::1", 1)
    assert not policy.admit("10.0.1.1", 1) and not policy.admit("not-an-ip", 1)
    assert policy.refused_total == 2
    assert policy.is_replica("10.0.0.11") and not policy.is_replica("10.0.0.12")
    assert HAAddressPolicy().admit("192.0.2.1", 1) and HAAddressPolicy().is_replica("192.0.2.1")
