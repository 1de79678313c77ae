"""A real RocketMQ 4.9.8 SLAVE replicating from the broker stub's master (issue 10 §2a).

One real name server, one stub ASYNC_MASTER and one real SLAVE per module, both with 1 MiB CommitLog files.
The real slave learns the stub master's HA and remoting addresses from the real name server (the stub's
registration answer), copies the CommitLog byte for byte across file roll-overs, survives a clean restart
and a SIGKILL while the master keeps writing, and pulls the stub's metadata (topics, consumer offsets,
subscription groups, delay offsets) into its own ``config/*.json``.
"""

from __future__ import annotations

import threading

import pytest

from connector.protocol.remoting import RequestCode
from tests.interop.peers import (
    FILE_SIZE,
    MiB,
    assert_same_commitlog_span,
    attach_slave,
    commit_consumer_offset,
    delay_offsets_text,
    metadata_table,
    produce_bytes,
    read_config_file,
    wait_same_max_offset,
)
from tests.support.brokers import BrokerProcess, commitlog_files, max_offset, wait_for
from tests.support.jvm_peers import RealBroker, killed_at_exit


@pytest.fixture(scope="module")
def stub_master(tmp_path_factory, real_namesrv):
    with BrokerProcess.start(tmp_path_factory.mktemp("stub-master"), brokerRole="ASYNC_MASTER",
                             namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE) as master:
        yield master


@pytest.fixture(scope="module")
def real_slave(tmp_path_factory, real_namesrv, stub_master):
    # haSendHeartbeatInterval 1000: the real slave's first report comes 1 s after connecting, not 5 s
    with killed_at_exit(RealBroker.start(tmp_path_factory.mktemp("real-slave"), brokerRole="SLAVE", brokerId=1,
                                         namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE,
                                         haSendHeartbeatInterval=1000)) as slave:
        attach_slave(stub_master.remoting_addr, slave.remoting_addr)
        yield slave


def test_real_slave_copies_stub_commitlog_across_rollovers_restart_and_sigkill(stub_master, real_slave):
    produce_bytes(stub_master.remoting_addr, int(1.2 * MiB), seed=1)
    wait_same_max_offset(stub_master.remoting_addr, real_slave.remoting_addr)

    real_slave.stop()  # clean shutdown; the master writes on meanwhile
    produce_bytes(stub_master.remoting_addr, int(0.8 * MiB), seed=2, start_seq=10_000)
    real_slave.restart()
    wait_same_max_offset(stub_master.remoting_addr, real_slave.remoting_addr)

    # SIGKILL while a load is being replicated, restart on the same store
    base = max_offset(stub_master.remoting_addr)
    load = threading.Thread(target=produce_bytes, args=(stub_master.remoting_addr, int(0.8 * MiB)),
                            kwargs={"seed": 3, "start_seq": 20_000})
    load.start()
    wait_for(lambda: max_offset(real_slave.remoting_addr) > base + 128 * 1024, "the slave to copy part of the load",
             timeout_s=60, interval_s=0.01)
    real_slave.kill9()
    load.join(timeout=60)
    assert not load.is_alive()
    real_slave.restart()
    produce_bytes(stub_master.remoting_addr, int(0.8 * MiB), seed=4, start_seq=30_000)
    end = wait_same_max_offset(stub_master.remoting_addr, real_slave.remoting_addr)

    assert end > 3 * FILE_SIZE, f"only {end} bytes: fewer than 3 roll-overs"
    assert len(commitlog_files(real_slave.commitlog_dir)) >= 4
    assert_same_commitlog_span(stub_master.commitlog_dir, real_slave.commitlog_dir, end=end)


def test_real_slave_syncs_topics_consumer_and_delay_offsets_and_groups_from_stub(stub_master, real_slave):
    produce_bytes(stub_master.remoting_addr, 64 * 1024, topics=("InteropMeta",), seed=5, start_seq=40_000)
    # the stub delivers no delayed messages (docs/broker_stub.md), so its delay offset table stays empty
    delay_text = delay_offsets_text(stub_master.remoting_addr)
    assert delay_text
    commit_consumer_offset(stub_master.remoting_addr, "interop_cg", "InteropMeta", 1, 7)
    commit_consumer_offset(stub_master.remoting_addr, "interop_cg", "InteropMeta", 3, 2)

    offsets_path = real_slave.config_dir / "consumerOffset.json"
    wait_for(lambda: (read_config_file(offsets_path) or {}).get("offsetTable", {}).get("InteropMeta@interop_cg"),
             "the real slave's consumerOffset.json to hold interop_cg", timeout_s=40, interval_s=0.5)
    slave_offsets = read_config_file(offsets_path)["offsetTable"]["InteropMeta@interop_cg"]
    assert {int(k): v for k, v in slave_offsets.items()} == {1: 7, 3: 2}

    master_topics = metadata_table(stub_master.remoting_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
    topics_path = real_slave.config_dir / "topics.json"
    wait_for(lambda: "InteropMeta" in (read_config_file(topics_path) or {}).get("topicConfigTable", {}),
             "the real slave's topics.json to hold InteropMeta", timeout_s=40, interval_s=0.5)
    slave_topics = read_config_file(topics_path)
    assert slave_topics["topicConfigTable"] == master_topics["topicConfigTable"]
    assert slave_topics["dataVersion"] == master_topics["dataVersion"]

    master_groups = metadata_table(stub_master.remoting_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    slave_groups = read_config_file(real_slave.config_dir / "subscriptionGroup.json")
    assert slave_groups["subscriptionGroupTable"] == master_groups["subscriptionGroupTable"]

    delay_path = real_slave.config_dir / "delayOffset.json"
    wait_for(lambda: delay_path.exists() and delay_path.read_text(encoding="utf-8") == delay_text,
             "the real slave's delayOffset.json to equal the stub master's", timeout_s=40, interval_s=0.5)
