"""The broker stub as SLAVE of a real RocketMQ 4.9 master (issue 10 §2b; the stub's producer → real master, §2g).

One real name server, one real ASYNC_MASTER and one stub SLAVE per module, 1 MiB CommitLog files. The stub
slave learns its master from the real name server, copies the CommitLog byte for byte across roll-overs,
and its metadata sync ends with the real master's topics, subscription groups, consumer offsets and delay
offsets.
"""

from __future__ import annotations

import pytest

from connector.client.producer import Producer
from connector.protocol.remoting import RequestCode
from tests.interop.peers import (
    FILE_SIZE,
    MiB,
    assert_same_commitlog_span,
    attach_slave,
    commit_consumer_offset,
    delay_offsets_with_level_1,
    metadata_table,
    produce_bytes,
    wait_same_max_offset,
)
from tests.support.brokers import BrokerProcess, commitlog_files, pull, wait_for
from tests.support.jvm_peers import RealBroker, killed_at_exit


@pytest.fixture(scope="module")
def real_master(tmp_path_factory, real_namesrv):
    with killed_at_exit(RealBroker.start(tmp_path_factory.mktemp("real-master"), brokerRole="ASYNC_MASTER",
                                         namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE)) as master:
        yield master


@pytest.fixture(scope="module")
def stub_slave(tmp_path_factory, real_namesrv, real_master):
    with BrokerProcess.start(tmp_path_factory.mktemp("stub-slave"), brokerRole="SLAVE", brokerId=1,
                             namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE) as slave:
        attach_slave(real_master.remoting_addr, slave.remoting_addr)
        yield slave


def test_stub_slave_copies_real_master_commitlog_across_rollovers(real_master, stub_slave):
    sent = produce_bytes(real_master.remoting_addr, int(3.3 * MiB), seed=11)  # every send SEND_OK
    end = wait_same_max_offset(real_master.remoting_addr, stub_slave.remoting_addr)

    assert end > 3 * FILE_SIZE, f"only {end} bytes: fewer than 3 roll-overs"
    assert len([n for n in commitlog_files(stub_slave.commitlog_dir) if int(n) < end]) >= 4
    assert_same_commitlog_span(real_master.commitlog_dir, stub_slave.commitlog_dir, end=end)
    assert len(sent) > 1000


def _tables(addr: str) -> dict[str, dict]:
    return {"topics": metadata_table(addr, RequestCode.GET_ALL_TOPIC_CONFIG),
            "groups": metadata_table(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
            "offsets": metadata_table(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)}


def test_stub_slave_syncs_topics_groups_consumer_and_delay_offsets_of_real_master(real_master, stub_slave):
    master = real_master.remoting_addr
    with Producer(master, "interop_pg") as producer:
        assert producer.send("InteropMetaB", b"soon", delay_level=1).send_status == "SEND_OK"  # 1 s delay
        for i in range(8):
            assert producer.send("InteropMetaB", b"m%d" % i, queue_id=i % 4).send_status == "SEND_OK"
    pull(master, "InteropMetaB", 0, 0, group="interop_cg_b")  # creates the subscription group
    commit_consumer_offset(master, "interop_cg_b", "InteropMetaB", 0, 2)
    commit_consumer_offset(master, "interop_cg_b", "InteropMetaB", 2, 1)
    # the delayed message comes due after 1 s and the master's delay offset of level 1 moves
    delay_text = wait_for(lambda: delay_offsets_with_level_1(master), "the real master's delay offset of level 1",
                          timeout_s=30, interval_s=0.5)

    expected = _tables(master)
    assert "InteropMetaB" in expected["topics"]["topicConfigTable"]
    assert "interop_cg_b" in expected["groups"]["subscriptionGroupTable"]
    assert "InteropMetaB@interop_cg_b" in expected["offsets"]["offsetTable"]

    def synced() -> bool:
        got = _tables(stub_slave.remoting_addr)
        return (got["topics"] == expected["topics"] and got["groups"] == expected["groups"]
                and got["offsets"]["offsetTable"] == expected["offsets"]["offsetTable"]
                and _delay_file(stub_slave) == delay_text)
    wait_for(synced, "the stub slave's tables to equal the real master's", timeout_s=40, interval_s=0.5)

    got = _tables(stub_slave.remoting_addr)
    assert got["topics"]["topicConfigTable"] == expected["topics"]["topicConfigTable"]
    assert got["topics"]["dataVersion"] == expected["topics"]["dataVersion"]
    assert got["groups"] == expected["groups"]
    assert got["offsets"]["offsetTable"] == expected["offsets"]["offsetTable"]
    assert _delay_file(stub_slave) == delay_text


def _delay_file(slave: BrokerProcess) -> str | None:
    try:
        return (slave.store_dir / "config" / "delayOffset.json").read_text(encoding="utf-8")
    except OSError:
        return None
