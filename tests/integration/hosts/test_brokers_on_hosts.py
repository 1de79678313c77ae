"""Brokers on other hosts (issue 13 §2): a name server, two broker sets of a master and a slave, each on its own
network-namespace host with its own address (tests/support/netns.py), Spark's driver on the lab's bridge address.
Nothing listens or connects on loopback.

Checks: the addresses the brokers advertise (brokerIP1 for remoting, brokerIP2 for HA) reach the name server and
the slaves, which find their masters through it; ``format("hareplica")`` reads both sets from the slaves with
``readFrom=slave`` and ``minInSyncSlaves=1``; a master's host unplugged mid-query (a silent partition, no reset)
is waited out; a slave's host unplugged holds its set's batches at what the slave holds, and the lag shows.
Those run on the tests' shared local session; the last test submits the bronze app to a Spark standalone cluster
whose Master is on the bridge address and whose two Workers, with their executors, each run on a host of their
own (tests/cluster/standalone.py), and finds every message of both sets once in the table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from broker_stub.javautil import fastjson_loads
from broker_stub.launcher import BrokerProcess, NameServerProcess
from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from tests.cluster.app_runs import PythonWatcher, clean_env, finish
from tests.cluster.standalone import StandaloneCluster, executor_tasks
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


def hareplica_status(capsys, status_dir, brokers: str) -> dict:
    """``hareplica status STATUS_DIR --brokers ... --json``, run in-process, as a dict."""
    from streaming_apps.cli import main

    capsys.readouterr()
    main(["status", str(status_dir), "--brokers", brokers, "--json"])
    return json.loads(capsys.readouterr().out)


def test_slave_host_unplugged_holds_its_set_at_what_the_slave_holds(hareplica_spark, lab, cluster, tmp_path, capsys):
    from streaming_apps.progress_listener import ProgressFileListener

    a_master, a_slave, b_master = cluster["a-master"], cluster["a-slave"], cluster["b-master"]
    opts = options(cluster, minInSyncSlaves="1", readTimeoutMs="1500", connectTimeoutMs="500")
    first = run_stream(hareplica_spark, tmp_path / "cp", opts)
    held = first.end_offsets[-1]["broker-a"]
    host = next(h for h in lab.hosts if h.ip == a_slave.host)
    host.link_down()
    listener = ProgressFileListener(tmp_path / "status" / "hosts.jsonl")  # what the apps write for `status`
    try:
        produce(a_master, 50)
        produce(b_master, 5)
        wait_for_offset(cluster["b-slave"].remoting_addr, max_offset(b_master.remoting_addr))
        hareplica_spark.streams.addListener(listener)
        behind = run_stream(hareplica_spark, tmp_path / "cp", opts)
        assert [r["broker"] for r in behind.rows] == ["broker-b"] * 5  # nothing the unplugged slave does not hold
        assert behind.end_offsets[-1]["broker-a"] == held
        latest = json.loads(behind.progress[-1]["sources"][0]["latestOffset"])
        lag = max_offset(a_master.remoting_addr) - held
        assert latest["broker-a"] - held == lag > 0  # the lag shows in the progress...
        wait_for(lambda: sum(r.get("event") == "progress" for r in listener.records) >= len(behind.progress),
                 "the progress listener's lines of every batch")
        status = next(iter(hareplica_status(capsys, tmp_path / "status", opts["brokers"])["queries"].values()))
        assert status["last"]["sources"][0]["lagBytes"]["broker-a"] == lag  # ... and in `hareplica status`
        assert status["liveLagBytes"]["broker-a"] == lag
    finally:
        hareplica_spark.streams.removeListener(listener)
        host.link_up()
    wait_for_offset(a_slave.remoting_addr, max_offset(a_master.remoting_addr))
    caught_up = run_stream(hareplica_spark, tmp_path / "cp", opts)
    assert len([r for r in caught_up.rows if r["broker"] == "broker-a"]) == 50


EXECUTOR_CLASS = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"
HA_ACCEPTED = re.compile(r"ha connection accepted peer=([0-9.]+):\d+")


@pytest.fixture(scope="module")
def spark_on_hosts(lab, tmp_path_factory):
    """``(cluster, {worker index: NetHost})``: a standalone Master on the bridge address, Workers 1 and 2 (with
    their executors) each on its own namespace host, bound to that host's address."""
    spark = StandaloneCluster(tmp_path_factory.mktemp("spark-on-hosts"), host=lab.driver_ip)
    hosts = {index: lab.host(f"w{index}") for index in (1, 2)}
    try:
        spark.start_master()
        for index, host in hosts.items():
            spark.start_worker(index, host=host.ip, command_prefix=host.prefix)
        yield spark, hosts
    finally:
        spark.stop()


class ExecutorWatcher(PythonWatcher):
    """Records every Spark executor JVM working under ``root`` (a Worker's executor folder), every 0.1 s inside
    ``with``, as ``(network namespace inode, --hostname, --driver-url)`` from ``/proc/PID/ns/net`` and its
    command line."""

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    netns = os.stat(f"/proc/{pid}/ns/net").st_ino
                    cwd = os.readlink(f"/proc/{pid}/cwd")
                except OSError:
                    continue
                if EXECUTOR_CLASS in argv and cwd.startswith(self.root):
                    args = [a.decode() for a in argv]
                    self.seen.add((netns, args[args.index("--hostname") + 1], args[args.index("--driver-url") + 1]))


def ha_peers(master: BrokerProcess, from_byte: int) -> set[str]:
    """Addresses of the HA connections ``master`` accepted after byte ``from_byte`` of its log."""
    return set(HA_ACCEPTED.findall(master.log_path.read_bytes()[from_byte:].decode(errors="replace")))


def test_bronze_on_a_cluster_whose_executors_run_on_their_own_hosts(lab, cluster, spark_on_hosts, tmp_path):
    spark, hosts = spark_on_hosts
    masters = {"broker-a": cluster["a-master"], "broker-b": cluster["b-master"]}
    for master in masters.values():
        produce(master, 600)
    log_from = {name: m.log_path.stat().st_size for name, m in masters.items()}
    workdir, log = tmp_path / "wd", tmp_path / "bronze.log"
    cmd = [sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING", "run", "bronze",
           "--brokers", options(cluster)["brokers"], "--workdir", str(workdir), "--trigger", "available-now",
           "--master", spark.url, "--maintenance-every", "0", "--max-bytes-per-trigger", str(2 * FILE),
           "--min-partitions", "2", "--conf", f"spark.driver.host={lab.driver_ip}",
           "--conf", f"spark.pyspark.python={sys.executable}"]  # the executors' Python: this venv (same disk)
    with ExecutorWatcher(spark.root) as executors, open(log, "ab") as out:
        app = subprocess.Popen(cmd, cwd=tmp_path, env={**clean_env(), "SPARK_LOCAL_IP": lab.driver_ip}, stdout=out,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            finish(app, log)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{spark.logs()}") from None

    rows = DeltaTable(str(workdir / "tables" / "bronze")).to_pyarrow_table(
        columns=["broker", "commitLogOffset", "body"]).to_pylist()
    counts = Counter((r["broker"], r["commitLogOffset"]) for r in rows)
    assert max(counts.values()) == 1, "a message landed twice"
    stored = {(name, rec.commit_log_offset): rec.body for name, m in masters.items()
              for _, rec in iter_commitlog_dir(m.commitlog_dir)}
    assert set(counts) == set(stored), f"{len(set(stored) - set(counts))} lost, {len(set(counts) - set(stored))} extra"
    assert all(stored[(r["broker"], r["commitLogOffset"])] == r["body"] for r in rows), "bodies as stored"

    # the executors ran in the Workers' namespaces (not the driver's), bound to their hosts' addresses, and
    # reached the driver at the bridge address and the masters' HA ports from there
    driver_url = f"spark://CoarseGrainedScheduler@{lab.driver_ip}:"
    assert {(ns, ip) for ns, ip, _ in executors.seen} == {(h.netns_inode, h.ip) for h in hosts.values()}
    assert os.stat("/proc/self/ns/net").st_ino not in {h.netns_inode for h in hosts.values()}
    assert all(url.startswith(driver_url) for _, _, url in executors.seen), executors.seen
    worker_ips = {h.ip for h in hosts.values()}
    for name, master in masters.items():
        peers = ha_peers(master, log_from[name])
        assert peers & worker_ips, f"no executor read {name}'s HA port: {peers}"
        # besides: the set's slave, and the driver reading each batch end's last record (docs/source.md
        # "Rewritten history")
        assert peers <= worker_ips | {cluster[f"{name[-1]}-slave"].host, lab.driver_ip}, peers
    finished = set().union(*(executor_tasks(d)[1] for i in hosts for d in spark.executor_dirs(i)))
    assert len(finished) >= 2, "the micro-batches' tasks ran on the executors"
