"""Delayed delivery with the real RocketMQ 4.9.8 client, on the stub and on a real 4.9 broker (issue 14 §1).

Two peers side by side, each a name server plus a master with ``messageDelayLevel=1s 2s 3s``: the stub's, and
real 4.9 processes (tests/support/jvm_peers.py). ``JavaDelayClient`` (tests/java) starts a push consumer, then
sends two messages at each delay level 1..3 with a real producer. Checked on each peer: every delayed message
is delivered exactly once with its body, never before its level's delay (neither the consumer's receipt after
the send nor the re-put record's store time after the message's born time) and within a bounded time after
it; the stub's deliveries carry the same properties as the real broker's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.java_fixtures import wait_for_route
from tests.support.brokers import BrokerProcess, NameServerProcess
from tests.support.java_tools import JavaRun, run_java
from tests.support.jvm_peers import RealBroker

TOPIC = "DelayedByJava"
LEVEL_DELAY_MS = {1: 1000, 2: 2000, 3: 3000}
PER_LEVEL = 2
LATEST_EXTRA_MS = 10_000  # a delivery later than its delay by more than this fails the test
BROKER = {"brokerClusterName": "DelayCluster", "brokerName": "broker-delay", "mappedFileSizeCommitLog": 1 << 20,
          "messageDelayLevel": "1s 2s 3s"}
# set by the client or naming one peer's address, offsets or time: compared by name only
PEER_SPECIFIC = {"UNIQ_KEY", "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}


def _run(ns_addr: str, log_root: Path) -> JavaRun:
    wait_for_route(ns_addr)
    return run_java("JavaDelayClient", [f"namesrv={ns_addr}", f"topic={TOPIC}", "group=cg_delay_java",
                                        "levels=1,2,3", f"perLevel={PER_LEVEL}", "timeoutMs=60000"],
                    props={"rocketmq.client.rebalance.waitInterval": "1000"}, log_dir=log_root, timeout_s=90,
                    check=False)


@pytest.fixture(scope="module")
def stub_run(tmp_path_factory) -> JavaRun:
    root = tmp_path_factory.mktemp("delay-stub")
    with NameServerProcess.start(root / "namesrv") as ns, \
            BrokerProcess.start(root / "master", namesrvAddr=ns.addr, **BROKER):
        return _run(ns.addr, root / "client")


@pytest.fixture(scope="module")
def real_run(real_namesrv, tmp_path_factory) -> JavaRun:
    root = tmp_path_factory.mktemp("delay-real")
    with RealBroker.start(root / "master", brokerRole="ASYNC_MASTER", namesrvAddr=real_namesrv.addr, **BROKER):
        return _run(real_namesrv.addr, root / "client")


def _delayed(run: JavaRun) -> tuple[dict[str, dict], list[dict]]:
    """The delayed sends by msgId and the deliveries of delayed messages."""
    sends = {line["msgId"]: line for line in run.lines if line["event"] == "send" and line["level"] > 0}
    deliveries = [line for line in run.lines if line["event"] == "delivery" and line["tags"] == "Later"]
    return sends, deliveries


@pytest.mark.parametrize("peer", ["stub", "real"])
def test_every_delayed_message_arrives_once_after_its_delay(peer, request):
    run: JavaRun = request.getfixturevalue(f"{peer}_run")
    assert run.returncode == 0, run.describe()
    sends, deliveries = _delayed(run)
    assert sorted(s["level"] for s in sends.values()) == sorted(list(LEVEL_DELAY_MS) * PER_LEVEL)
    assert all(s["status"] == "SEND_OK" for s in sends.values())
    got = sorted(d["msgId"] for d in deliveries)
    assert got == sorted(sends), f"deliveries {got} of sends {sorted(sends)}\n{run.describe()}"  # once each
    for d in deliveries:
        sent = sends[d["msgId"]]
        delay = LEVEL_DELAY_MS[sent["level"]]
        assert (d["topic"], d["level"], d["bodySha256"]) == (TOPIC, str(sent["level"]), sent["bodySha256"])
        assert d["storeTimestamp"] - d["bornTimestamp"] >= delay, d  # re-put no earlier than its delay
        assert delay <= d["receivedAt"] - sent["sentAt"] <= delay + LATEST_EXTRA_MS, d


def test_the_stub_delivers_as_the_real_broker(stub_run, real_run):
    def shape(run: JavaRun) -> list[tuple]:
        sends, deliveries = _delayed(run)
        return sorted((sends[d["msgId"]]["level"], d["bodySha256"],
                       tuple(sorted(k for k in d["properties"] if k not in PEER_SPECIFIC)),
                       tuple(sorted((k, v) for k, v in d["properties"].items()
                                    if k in ("DELAY", "REAL_TOPIC", "TAGS", "WAIT")))) for d in deliveries)
    assert shape(stub_run) == shape(real_run)
