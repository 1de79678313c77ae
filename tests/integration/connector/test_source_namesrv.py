"""``format("hareplica")`` pointed at a name server (``namesrvAddr``, issue 43, docs/source.md "Discovery"), on stub
processes: a stub name server and stub broker sets registered with it.

* the sets found through the route land every message once, and a set that registers while the query runs
  (1 s trigger) lands once from its first byte;
* a checkpoint written with ``brokers`` resumes with ``namesrvAddr`` and back: every message once, also when
  ``brokers`` names fewer sets than the checkpoint holds (six runs over three sets).
"""

from __future__ import annotations

import json

import pytest

from connector.client.producer import Producer
from tests.integration.connector.conftest import brokers_option, run_stream
from tests.support.brokers import max_offset, wait_for
from tests.support.fixtures import namesrv_factory  # noqa: F401 - fixture

pytestmark = pytest.mark.spark

COMMON = {"mappedFileSizeCommitLog": 64 * 1024, "haSendHeartbeatInterval": 300, "brokerClusterName": "StubCluster"}
TOPIC = "NamesrvTopic"


def produce(broker, name: str, first: int, count: int) -> set[bytes]:
    """``count`` messages with bodies ``<name>:<i>`` for i from ``first``; returns the bodies."""
    bodies = {f"{name}:{i}".encode() + bytes(300) for i in range(first, first + count)}
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        for body in sorted(bodies):
            producer.send(TOPIC, body)
    return bodies


def landed(rows: list[dict]) -> list[tuple[str, int]]:
    """(broker, commitLogOffset) of every row, each exactly once (a row landed twice fails)."""
    keys = [(r["broker"], r["commitLogOffset"]) for r in rows]
    assert len(keys) == len(set(keys)), "a record was landed twice"
    return keys


def _route_has(ns_addr: str, *names: str) -> bool:
    from connector.client.namesrv import NameServerClient

    with NameServerClient((ns_addr,)) as client:
        table = client.cluster_info()[1].broker_addr_table
    return all(n in table and table[n].master_addr for n in names)


def test_the_sets_of_the_route_land_once_and_a_new_set_lands_from_its_first_byte(hareplica_spark, broker_factory,
                                                                                 namesrv_factory, tmp_path):  # noqa: F811
    ns = namesrv_factory()
    a = broker_factory("a", namesrvAddr=ns.addr, brokerName="broker-a", **COMMON)
    b = broker_factory("b", namesrvAddr=ns.addr, brokerName="broker-b", **COMMON)
    wait_for(lambda: _route_has(ns.addr, "broker-a", "broker-b"), "both sets registered")
    sent = produce(a, "a", 0, 30) | produce(b, "b", 0, 20)

    batches: list[list[dict]] = []

    def collect(df, batch_id):
        batches.append([r.asDict(recursive=False) for r in df.select("broker", "commitLogOffset", "body").collect()])

    query = (hareplica_spark.readStream.format("hareplica").option("namesrvAddr", f"127.0.0.1:1;{ns.addr}")
             .option("namesrvPollIntervalMs", "500").option("subscribe", TOPIC)
             .load().writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="1 second").start())
    try:
        def bodies():
            return {bytes(r["body"]) for rows in batches for r in rows}

        wait_for(lambda: bodies() >= sent or None, "the two sets' messages", timeout_s=120, interval_s=0.2)
        c = broker_factory("c", namesrvAddr=ns.addr, brokerName="broker-c", **COMMON)
        sent |= produce(c, "c", 0, 25)
        sent |= produce(a, "a", 30, 5)
        wait_for(lambda: bodies() >= sent or None, "the third set's messages", timeout_s=120, interval_s=0.2)
        ends = {"broker-a": max_offset(a.remoting_addr), "broker-b": max_offset(b.remoting_addr),
                "broker-c": max_offset(c.remoting_addr)}

        def reached():  # the progress is posted after the batch's sink ran
            progress = query.lastProgress
            end = json.loads(progress["sources"][0]["endOffset"]) if progress else {}
            return {k: v for k, v in end.items() if not k.startswith("@")} == ends or None

        wait_for(reached, "the progress to show each set's end", timeout_s=60, interval_s=0.2)
        assert query.isActive, query.exception()
    finally:
        query.stop()
    rows = [r for rs in batches for r in rs]
    keys = landed(rows)
    assert {bytes(r["body"]) for r in rows} == sent
    c_offsets = sorted(off for broker, off in keys if broker == "broker-c")
    assert c_offsets[0] == 0 and len(c_offsets) == 25  # from its first byte


def test_a_checkpoint_of_brokers_resumes_with_namesrv_addr_and_back(hareplica_spark, broker_factory,
                                                                      namesrv_factory, tmp_path):  # noqa: F811
    ns = namesrv_factory()
    a = broker_factory("a", namesrvAddr=ns.addr, brokerName="broker-a", **COMMON)
    b = broker_factory("b", namesrvAddr=ns.addr, brokerName="broker-b", **COMMON)
    wait_for(lambda: _route_has(ns.addr, "broker-a", "broker-b"), "both sets registered")
    by_list = {"brokers": f"{brokers_option(a, 'broker-a')},{brokers_option(b, 'broker-b')}", "subscribe": TOPIC}
    by_route = {"namesrvAddr": ns.addr, "subscribe": TOPIC}
    cp = tmp_path / "cp"
    sent = produce(a, "a", 0, 10) | produce(b, "b", 0, 10)
    rows = run_stream(hareplica_spark, cp, by_list).rows
    sent |= produce(a, "a", 10, 10) | produce(b, "b", 10, 5)
    rows += run_stream(hareplica_spark, cp, by_route).rows
    sent |= produce(a, "a", 20, 3) | produce(b, "b", 15, 7)
    last = run_stream(hareplica_spark, cp, by_list)
    rows += last.rows
    landed(rows)
    missing = sorted(b.split(b"\0")[0].decode() for b in sent - {bytes(r["body"]) for r in rows})
    assert missing == [] and len(rows) == len(sent) == 45
    assert last.end_offsets[-1] == {"broker-a": max_offset(a.remoting_addr), "broker-b": max_offset(b.remoting_addr)}


def test_a_set_out_of_the_route_keeps_its_offset_and_continues_when_back(hareplica_spark, broker_factory,
                                                                         namesrv_factory, tmp_path):  # noqa: F811
    """broker-b is stopped: its registration connection closes and the stub name server drops it at once
    (``onChannelDestroy``, as 4.9.8's does; no expiry is shortened). The query goes on with broker-a alone, every
    end offset keeping broker-b's offset, and reads broker-b on from there once it is started again."""
    ns = namesrv_factory()
    a = broker_factory("a", namesrvAddr=ns.addr, brokerName="broker-a", **COMMON)
    b = broker_factory("b", namesrvAddr=ns.addr, brokerName="broker-b", **COMMON)
    wait_for(lambda: _route_has(ns.addr, "broker-a", "broker-b"), "both sets registered")
    sent = produce(a, "a", 0, 10) | produce(b, "b", 0, 10)
    batches: list[list[dict]] = []
    ends: list[dict] = []

    def collect(df, batch_id):
        batches.append([r.asDict(recursive=False) for r in df.select("broker", "commitLogOffset", "body").collect()])

    def bodies():
        return {bytes(r["body"]) for rows in batches for r in rows}

    query = (hareplica_spark.readStream.format("hareplica").option("namesrvAddr", ns.addr)
             .option("namesrvPollIntervalMs", "200").option("subscribe", TOPIC)
             .load().writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="1 second").start())
    try:
        wait_for(lambda: bodies() >= sent or None, "both sets' first messages", timeout_s=120, interval_s=0.2)
        b_end = max_offset(b.remoting_addr)
        b.stop()
        wait_for(lambda: not _route_has(ns.addr, "broker-b"), "the name server to drop broker-b")
        sent |= produce(a, "a", 10, 10)
        wait_for(lambda: bodies() >= sent or None, "broker-a's messages while broker-b is out", timeout_s=120,
                 interval_s=0.2)

        def progress_end():
            progress = query.lastProgress
            end = json.loads(progress["sources"][0]["endOffset"]) if progress else {}
            return end if end.get("broker-a") == max_offset(a.remoting_addr) else None

        ends.append(wait_for(progress_end, "a batch planned without broker-b", timeout_s=60, interval_s=0.2))
        b.restart()
        sent |= produce(b, "b", 10, 10)
        wait_for(lambda: bodies() >= sent or None, "broker-b's messages once it is back", timeout_s=120,
                 interval_s=0.2)
        assert query.isActive, query.exception()
    finally:
        query.stop()
    rows = [r for rs in batches for r in rs]
    keys = landed(rows)
    assert {bytes(r["body"]) for r in rows} == sent and len(rows) == 40
    assert ends[0]["broker-b"] == b_end  # kept in the checkpoint while out of the route
    assert min(off for broker, off in keys if broker == "broker-b" and off >= b_end) == b_end


def test_six_runs_switching_between_brokers_and_namesrv_addr_over_three_sets_land_every_record_once(
        hareplica_spark, broker_factory, namesrv_factory, tmp_path):  # noqa: F811
    """One checkpoint, six runs (issue 49): every set by ``brokers``; two of them (broker-c paused); the route;
    one set; the route; every set by ``brokers`` again. Before, the second run's end offset lost broker-c and the
    third run read broker-c from its first byte again: the first run's broker-c records landed twice."""
    ns = namesrv_factory()
    sets = {name: broker_factory(name, namesrvAddr=ns.addr, brokerName=f"broker-{name}", **COMMON) for name in "abc"}
    wait_for(lambda: _route_has(ns.addr, "broker-a", "broker-b", "broker-c"), "the three sets registered")

    def by_list(*names: str) -> dict[str, str]:
        return {"brokers": ",".join(brokers_option(sets[n], f"broker-{n}") for n in names), "subscribe": TOPIC}

    by_route = {"namesrvAddr": ns.addr, "subscribe": TOPIC}
    runs = [by_list("a", "b", "c"), by_list("a", "b"), by_route, by_list("a"), by_route, by_list("a", "b", "c")]
    cp, sent, rows, ends = tmp_path / "cp", set(), [], []
    for i, options in enumerate(runs):
        for name, broker in sets.items():
            sent |= produce(broker, name, 10 * i, 10)
        run = run_stream(hareplica_spark, cp, options)
        rows += run.rows
        ends.append(run.end_offsets[-1] if run.end_offsets else None)
    landed(rows)
    finals = {f"broker-{n}": max_offset(b.remoting_addr) for n, b in sets.items()}
    assert ends[1]["broker-c"] == ends[0]["broker-c"]  # paused, kept in the checkpoint
    assert set(ends[3]) == {"broker-a", "broker-b", "broker-c"}
    assert ends[-1] == finals
    missing = sent - {bytes(r["body"]) for r in rows}
    assert not missing and len(rows) == len(sent) == 180
