"""The broker stub as SLAVE of a real RocketMQ 5.x master in classic master/slave mode (issue 13 §3).

One real 5.x ASYNC_MASTER (jvm/rocketmq-5.pom.xml; DefaultHAService: no controller, no DLedger, no name
server) and one stub SLAVE pinned to its HA address, 1 MiB CommitLog files. The stub slave copies the 5.x
CommitLog byte for byte across roll-overs, as it does a 4.9 master's (test_stub_slave_of_real_master.py).
"""

from __future__ import annotations

import pytest

from tests.interop.peers import (
    FILE_SIZE,
    MiB,
    assert_same_commitlog_span,
    attach_slave,
    produce_bytes,
    wait_same_max_offset,
)
from tests.support.brokers import BrokerProcess, commitlog_files
from tests.support.jvm_peers import RealBroker, killed_at_exit


@pytest.fixture(scope="module")
def real_5_master(tmp_path_factory):
    with killed_at_exit(RealBroker.start(tmp_path_factory.mktemp("real-5-master"), version="5",
                                         brokerRole="ASYNC_MASTER", namesrvAddr="",
                                         mappedFileSizeCommitLog=FILE_SIZE)) as master:
        yield master


@pytest.fixture(scope="module")
def stub_slave(tmp_path_factory, real_5_master):
    with BrokerProcess.start(tmp_path_factory.mktemp("stub-slave"), brokerRole="SLAVE", brokerId=1,
                             haMasterAddress=real_5_master.ha_addr, mappedFileSizeCommitLog=FILE_SIZE) as slave:
        attach_slave(real_5_master.remoting_addr, slave.remoting_addr)
        yield slave


def test_real_5_broker_runs_classic_master_slave_mode(real_5_master):
    assert real_5_master.version == "5"
    assert real_5_master.props["enableControllerMode"] == "false"
    assert real_5_master.props["enableDLegerCommitLog"] == "false"
    assert "rocketmq-5" in real_5_master.command()[real_5_master.command().index("-cp") + 1]


def test_stub_slave_copies_real_5_master_commitlog_across_rollovers(real_5_master, stub_slave):
    sent = produce_bytes(real_5_master.remoting_addr, int(3.3 * MiB), seed=13)  # every send SEND_OK
    end = wait_same_max_offset(real_5_master.remoting_addr, stub_slave.remoting_addr)

    assert end > 3 * FILE_SIZE, f"only {end} bytes: fewer than 3 roll-overs"
    assert len([n for n in commitlog_files(stub_slave.commitlog_dir) if int(n) < end]) >= 4
    assert_same_commitlog_span(real_5_master.commitlog_dir, stub_slave.commitlog_dir, end=end)
    assert len(sent) > 1000
