"""``format("hareplica")`` pointed at a real RocketMQ 4.9.8 name server (``namesrvAddr`` alone, issue 43,
docs/source.md "Discovery").

One real 4.9.8 name server and two real 4.9.8 broker sets (``broker-a``, ``broker-b``), each an ASYNC_MASTER and a
SLAVE registered with it, shared by the module. The route is 4.9.8's own ClusterInfo body (fastjson, bare brokerId
keys) and each member's HA port is the ``haListenPort`` its GET_BROKER_CONFIG reports. A query given nothing but
``namesrvAddr`` lands every message of both sets once; with ``readFrom=slave`` every partition is read from the
slave the route names, and the rows are the same.
"""

from __future__ import annotations

import pytest

from connector.options.parse import SourceOptions
from connector.source import HAReplicaStreamReader
from tests.integration.connector.conftest import run_stream
from tests.interop.peers import FILE_SIZE, attach_slave, produce_bytes, wait_same_max_offset
from tests.support.brokers import wait_for
from tests.support.jvm_peers import RealBroker

pytestmark = pytest.mark.spark

SETS = ("broker-a", "broker-b")


@pytest.fixture(scope="module")
def real_sets(tmp_path_factory, real_namesrv):
    """``{name: (master, slave, [(topic, body)] sent)}`` once each slave holds its master's log."""
    started = []
    try:
        out = {}
        for i, name in enumerate(SETS):
            common = dict(brokerName=name, namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE)
            master = RealBroker.start(tmp_path_factory.mktemp(f"{name}-master"), brokerRole="ASYNC_MASTER", **common)
            started.append(master)
            slave = RealBroker.start(tmp_path_factory.mktemp(f"{name}-slave"), brokerRole="SLAVE", brokerId=1,
                                     haSendHeartbeatInterval=1000, **common)
            started.append(slave)
            attach_slave(master.remoting_addr, slave.remoting_addr)
            sent = produce_bytes(master.remoting_addr, 150_000 + 50_000 * i, topics=(f"Route{i}",), seed=40 + i)
            wait_same_max_offset(master.remoting_addr, slave.remoting_addr)
            out[name] = (master, slave, sent)
        yield out
    finally:
        for broker in started:
            broker.kill9()


def _route_complete(ns_addr: str) -> bool:
    from connector.client.namesrv import NameServerClient

    with NameServerClient((ns_addr,)) as client:
        table = client.cluster_info()[1].broker_addr_table
    return all(name in table and len(table[name].broker_addrs) == 2 for name in SETS)


def _assert_every_message_once(rows: list[dict], real_sets) -> None:
    keys = [(r["broker"], r["commitLogOffset"]) for r in rows]
    assert len(keys) == len(set(keys)), "a record was landed twice"
    for name, (_, _, sent) in real_sets.items():
        topics = {t for t, _ in sent}
        got = sorted((r["topic"], bytes(r["body"])) for r in rows if r["broker"] == name and r["topic"] in topics)
        assert got == sorted(sent), f"{name}: {len(got)} rows of the sent topics, {len(sent)} messages sent"


def test_namesrv_addr_alone_lands_every_message_of_both_sets_once(hareplica_spark_session, real_namesrv, real_sets,
                                                                   tmp_path):
    wait_for(lambda: _route_complete(real_namesrv.addr), "both sets with their slaves in the route", timeout_s=60)
    run = run_stream(hareplica_spark_session, tmp_path / "cp", {"namesrvAddr": real_namesrv.addr})
    _assert_every_message_once(run.rows, real_sets)
    assert set(run.end_offsets[-1]) == set(SETS)


def test_read_from_slave_reads_the_slaves_the_route_names(hareplica_spark_session, real_namesrv, real_sets,
                                                           tmp_path):
    wait_for(lambda: _route_complete(real_namesrv.addr), "both sets with their slaves in the route", timeout_s=60)
    options = {"namesrvAddr": real_namesrv.addr, "readFrom": "slave"}
    reader = HAReplicaStreamReader(SourceOptions.from_options(options))
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        parts = reader.partitions(start, end)
    finally:
        reader.stop()
    slaves = {name: slave.ha_addr for name, (_, slave, _) in real_sets.items()}
    assert parts and {(p.broker, p.ha_addr, p.server_role) for p in parts} == {
        (name, addr, "slave") for name, addr in slaves.items()}
    run = run_stream(hareplica_spark_session, tmp_path / "cp", options)
    _assert_every_message_once(run.rows, real_sets)
