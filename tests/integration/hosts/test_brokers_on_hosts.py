"""Brokers on other hosts (issue 13 §2): a name server, two broker sets of a master and a slave, each on its own
network-namespace host with its own address (tests/support/netns.py), Spark's driver and local executors on the
lab's bridge address. Nothing listens or connects on loopback.

Checks: the addresses the brokers advertise (brokerIP1 for remoting, brokerIP2 for HA) reach the name server and
the slaves, which find their masters through it; ``format("hareplica")`` reads both sets from the slaves with
``readFrom=slave`` and ``minInSyncSlaves=1``; a master's host unplugged mid-query (a silent partition, no reset)
is waited out; a slave's host unplugged holds its set's batches at what the slave holds, and the lag shows.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from broker_stub.javautil import fastjson_loads
from broker_stub.launcher import BrokerProcess, NameServerProcess
from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode
from tests.integration.connector.conftest import run_stream
from tests.support.brokers import max_offset, remoting_request, runtime_info, wait_for, wait_for_offset
from tests.support.netns import NetworkLab

pytestmark = pytest.mark.spark

LISTEN_PORT = 10911  # RocketMQ's defaults: every host has its own address, so every broker can use them
NAMESRV_PORT = 9876
FILE = 256 * 1024
TOPIC = "HostOrders"


@pytest.fixture(scope="module")
def lab():
    with NetworkLab() as lab:
        yield lab


@pytest.fixture(scope="module")
def cluster(lab, tmp_path_factory):
    """{"namesrv", "a-master", "a-slave", "b-master", "b-slave"}: processes, each on its own host. broker-b's
    master advertises a second address as brokerIP2 (its HA address)."""
    procs: dict = {}
    hosts = {label: lab.host(label) for label in ("ns", "am", "as", "bm", "bs")}
    hosts["bm"].add_address(hosts["bm"].ip[:-1] + "5")  # e.g. 10.213.x.45 beside 10.213.x.40
    try:
        ns = NameServerProcess.start(tmp_path_factory.mktemp("namesrv"), host=hosts["ns"].ip, port=NAMESRV_PORT,
                                     command_prefix=hosts["ns"].prefix)
        procs["namesrv"] = ns
        for name, role, host in (("broker-a", "master", "am"), ("broker-a", "slave", "as"),
                                 ("broker-b", "master", "bm"), ("broker-b", "slave", "bs")):
            h = hosts[host]
            props = {"brokerName": name, "brokerIP1": h.ip, "listenPort": LISTEN_PORT, "namesrvAddr": ns.addr,
                     "mappedFileSizeCommitLog": FILE, "haSendHeartbeatInterval": 500}
            if role == "slave":
                props.update(brokerRole="SLAVE", brokerId=1)  # no haMasterAddress: learnt from the name server
            if h.extra_ips:
                props["brokerIP2"] = h.extra_ips[0]
            procs[f"{name[-1]}-{role}"] = BrokerProcess.start(tmp_path_factory.mktemp(f"{name}-{role}"),
                                                              command_prefix=h.prefix, **props)
        yield procs
    finally:
        for proc in procs.values():
            proc.kill9()


def produce(master, count: int, start: int = 0) -> list[bytes]:
    bodies = [b"%s-%06d:" % (master.props["brokerName"].encode(), i) + bytes(300) for i in range(start, start + count)]
    with Producer(master.remoting_addr, timeout_ms=15000) as producer:
        for body in bodies:
            producer.send(TOPIC, body)
    return bodies


def options(cluster, **extra) -> dict[str, str]:
    return {"brokers": f"broker-a={cluster['a-master'].ha_addr},broker-b={cluster['b-master'].ha_addr}"
                       f"/{cluster['b-master'].remoting_addr}",
            "slaves": f"broker-a={cluster['a-slave'].ha_addr},broker-b={cluster['b-slave'].ha_addr}",
            "subscribe": TOPIC, **extra}


def bodies_by_broker(rows) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for r in sorted(rows, key=lambda r: (r["broker"], r["commitLogOffset"])):
        out.setdefault(r["broker"], []).append(bytes(r["body"]))
    return out


def test_advertised_addresses_reach_the_name_server_and_the_slaves(lab, cluster):
    a_master, b_master = cluster["a-master"], cluster["b-master"]
    assert not any(p.host.startswith("127.") for p in cluster.values())
    produce(a_master, 1)
    produce(b_master, 1)
    for set_name, master in (("a", a_master), ("b", b_master)):
        slave = cluster[f"{set_name}-slave"]
        # the slave learnt the master's HA address (brokerIP2:haListenPort) from its registration
        wait_for(lambda s=slave, m=master: runtime_info(s.remoting_addr).get("haMasterAddress") == m.ha_addr,
                 f"{slave.host} to learn its master's HA address {master.ha_addr}")
    assert b_master.ha_host != b_master.host  # broker-b's HA address is its second address
    expected = {"broker-a": {0: a_master.remoting_addr, 1: cluster["a-slave"].remoting_addr},
                "broker-b": {0: b_master.remoting_addr, 1: cluster["b-slave"].remoting_addr}}

    def route_addrs():
        resp = remoting_request(cluster["namesrv"].addr,
                                RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}))
        if resp.code != 0:
            return None
        route = fastjson_loads(resp.body)
        return {bd["brokerName"]: {int(k): v for k, v in bd["brokerAddrs"].items()} for bd in route["brokerDatas"]}

    wait_for(lambda: route_addrs() == expected, f"the name server's route of {TOPIC} to list {expected}")


def test_read_both_sets_from_their_slaves_with_min_in_sync_slaves(hareplica_spark, cluster, tmp_path):
    sent = {"broker-a": produce(cluster["a-master"], 300), "broker-b": produce(cluster["b-master"], 300)}
    for s in "ab":
        wait_for_offset(cluster[f"{s}-slave"].remoting_addr, max_offset(cluster[f"{s}-master"].remoting_addr))
    run = run_stream(hareplica_spark, tmp_path / "cp", options(cluster, readFrom="slave", minInSyncSlaves="1"))
    got = bodies_by_broker(run.rows)
    for name, bodies in sent.items():
        assert got[name][-len(bodies):] == bodies
    assert {r["storeHost"].rsplit(":", 1)[0] for r in run.rows} == {cluster["a-master"].host, cluster["b-master"].host}


def test_master_host_unplugged_mid_query_is_waited_out(hareplica_spark, lab, cluster, tmp_path):
    a_master = cluster["a-master"]
    before = max_offset(a_master.remoting_addr)
    sent = produce(a_master, 2000)
    host = next(h for h in lab.hosts if h.ip == a_master.host)
    opts = options(cluster, startingOffsets=f'{{"broker-a": {before}, "broker-b": -1}}', maxBytesPerTrigger="65536",
                   readTimeoutMs="1500", connectTimeoutMs="500", maxOutageMs="30000")
    batches: list = []
    unplugged = threading.Event()

    def unplug_after_first_batch():
        wait_for(lambda: len(batches) >= 1, "the first micro-batch", timeout_s=120)
        host.link_down()
        unplugged.set()
        time.sleep(4)  # longer than readTimeoutMs: tasks and driver see the partition
        host.link_up()

    cutter = threading.Thread(target=unplug_after_first_batch, daemon=True)
    cutter.start()
    try:
        run = run_stream(hareplica_spark, tmp_path / "cp", opts, collected=batches)
    finally:
        host.link_up()
        cutter.join(timeout=10)
    assert unplugged.is_set() and len(run.batches) > 3
    assert bodies_by_broker(run.rows)["broker-a"] == sent  # nothing lost, nothing twice


def test_slave_host_unplugged_holds_its_set_at_what_the_slave_holds(hareplica_spark, lab, cluster, tmp_path):
    a_master, a_slave, b_master = cluster["a-master"], cluster["a-slave"], cluster["b-master"]
    opts = options(cluster, minInSyncSlaves="1", readTimeoutMs="1500", connectTimeoutMs="500")
    first = run_stream(hareplica_spark, tmp_path / "cp", opts)
    held = first.end_offsets[-1]["broker-a"]
    host = next(h for h in lab.hosts if h.ip == a_slave.host)
    host.link_down()
    try:
        produce(a_master, 50)
        produce(b_master, 5)
        wait_for_offset(cluster["b-slave"].remoting_addr, max_offset(b_master.remoting_addr))
        behind = run_stream(hareplica_spark, tmp_path / "cp", opts)
        assert [r["broker"] for r in behind.rows] == ["broker-b"] * 5  # nothing the unplugged slave does not hold
        assert behind.end_offsets[-1]["broker-a"] == held
        latest = json.loads(behind.progress[-1]["sources"][0]["latestOffset"])
        assert latest["broker-a"] == max_offset(a_master.remoting_addr) > held  # the lag shows in the progress
    finally:
        host.link_up()
    wait_for_offset(a_slave.remoting_addr, max_offset(a_master.remoting_addr))
    caught_up = run_stream(hareplica_spark, tmp_path / "cp", opts)
    assert len([r for r in caught_up.rows if r["broker"] == "broker-a"]) == 50
