"""The HA allow-list with a real RocketMQ 4.9 SLAVE (issue 15 item 2, docs/security.md "HA port").

A stub SYNC_MASTER lists only 127.0.0.1 in ``haAllowedAddresses`` and ``haReplicaAddresses``. The real slave
(connecting from 127.0.0.1) replicates byte for byte and its acks release the SYNC waits (SEND_OK); a stranger
connecting from 127.0.0.9 is closed at accept without a byte. The wire is unchanged.
"""

from __future__ import annotations

import socket

from connector.client.producer import Producer
from connector.protocol.ha import encode_report
from tests.interop.peers import FILE_SIZE, assert_same_commitlog_span, wait_same_max_offset
from tests.support.brokers import BrokerProcess, runtime_info
from tests.support.jvm_peers import RealBroker


def test_listed_real_slave_replicates_and_acks_a_stranger_is_refused(tmp_path, real_namesrv):
    with BrokerProcess.start(tmp_path / "stub-master", brokerRole="SYNC_MASTER", namesrvAddr=real_namesrv.addr,
                             mappedFileSizeCommitLog=FILE_SIZE, haAllowedAddresses="127.0.0.1",
                             haReplicaAddresses="127.0.0.1/32") as master:
        with Producer(master.remoting_addr) as p:  # no slave yet: a SYNC_MASTER answers SLAVE_NOT_AVAILABLE
            assert p.send("AllowListTopic", b"before").send_status == "SLAVE_NOT_AVAILABLE"
        with RealBroker.start(tmp_path / "real-slave", brokerRole="SLAVE", brokerId=1,
                              namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE,
                              haSendHeartbeatInterval=1000) as slave:
            wait_same_max_offset(master.remoting_addr, slave.remoting_addr)
            with Producer(master.remoting_addr) as p:
                statuses = [p.send("AllowListTopic", b"sync-%d" % i + b"x" * 2000).send_status
                            for i in range(600)]
            assert statuses == ["SEND_OK"] * 600  # the listed real slave's acks release every wait
            end = wait_same_max_offset(master.remoting_addr, slave.remoting_addr)
            assert end > FILE_SIZE
            assert_same_commitlog_span(master.commitlog_dir, slave.commitlog_dir, end=end)

            host, _, port = master.ha_addr.rpartition(":")
            stranger = socket.create_connection((host, int(port)), timeout=5, source_address=("127.0.0.9", 0))
            try:
                stranger.sendall(encode_report(0))
                try:
                    assert stranger.recv(1 << 16) == b"", "a stranger got CommitLog bytes"
                except ConnectionResetError:
                    pass
            finally:
                stranger.close()
            assert runtime_info(master.remoting_addr)["haConnectionCount"] == "1"  # only the real slave
        assert "ha connection refused: peer 127.0.0.9:" in master.log_path.read_text()
