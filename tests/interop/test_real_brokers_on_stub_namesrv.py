"""Real RocketMQ 4.9 brokers registered with the broker stub's name server.

A real master and a real slave register with ``python -m broker_stub namesrv``: the stub name server
answers the real slave's registration with the master's HA and remoting addresses, so the real slave
replicates byte for byte and syncs its metadata from the master; GET_ROUTEINFO_BY_TOPIC of the stub name
server lists both real brokers with their queues.
"""

from __future__ import annotations

from connector.protocol.remoting import RequestCode
from tests.interop.java_fixtures import wait_for_route
from tests.interop.peers import (
    FILE_SIZE,
    MiB,
    assert_same_commitlog_span,
    metadata_table,
    produce_bytes,
    read_config_file,
    wait_same_max_offset,
)
from tests.support.brokers import NameServerProcess, wait_for
from tests.support.jvm_peers import RealBroker


def test_real_master_and_slave_find_each_other_through_the_stub_name_server(tmp_path):
    with NameServerProcess.start(tmp_path / "stub-namesrv") as ns, \
            RealBroker.start(tmp_path / "real-master", namesrvAddr=ns.addr,
                             mappedFileSizeCommitLog=FILE_SIZE) as master:
        produce_bytes(master.remoting_addr, 1, topics=("InteropRoute",), seed=0, start_seq=-1)
        with RealBroker.start(tmp_path / "real-slave", brokerRole="SLAVE", brokerId=1, namesrvAddr=ns.addr,
                              mappedFileSizeCommitLog=FILE_SIZE, haSendHeartbeatInterval=1000) as slave:
            wait_same_max_offset(master.remoting_addr, slave.remoting_addr)  # HA address from the stub
            produce_bytes(master.remoting_addr, int(1.5 * MiB), topics=("InteropRoute",), seed=31)
            end = wait_same_max_offset(master.remoting_addr, slave.remoting_addr)
            assert_same_commitlog_span(master.commitlog_dir, slave.commitlog_dir, end=end)

            route = wait_for_route(ns.addr, "InteropRoute", broker_ids={0, 1}, timeout_s=40)
            addrs = {int(k): v for bd in route["brokerDatas"] for k, v in bd["brokerAddrs"].items()}
            assert addrs == {0: master.remoting_addr, 1: slave.remoting_addr}
            assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] \
                == [("broker-a", 4, 4)]

            # the slave's metadata sync uses the master address the stub name server returned
            master_topics = metadata_table(master.remoting_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
            topics_path = slave.config_dir / "topics.json"
            wait_for(lambda: "InteropRoute" in (read_config_file(topics_path) or {}).get("topicConfigTable", {}),
                     "the real slave's topics.json to hold InteropRoute", timeout_s=40, interval_s=0.5)
            assert read_config_file(topics_path)["topicConfigTable"] == master_topics["topicConfigTable"]
