"""Transaction check-back with a real RocketMQ 4.9.8 TransactionMQProducer, on the stub and on a real 4.9 broker
(issue 14 §3).

Two peers side by side, each a name server plus a master with short ``transactionTimeOut`` and
``transactionCheckInterval`` (1 s): the stub's, and real 4.9 processes (tests/support/jvm_peers.py).
``JavaTransactionProducer`` (tests/java) sends messages whose local transaction answers UNKNOW; the broker must
ask back (CHECK_TRANSACTION_STATE), the listener answers UNKNOW to the first check and COMMIT to the second.
Then a real push consumer (``JavaConsumer``) gets every message exactly once with its body, and the CommitLog
holds, per message, the same records on both peers: the half message, one renewed copy per check
(TRANSACTION_CHECK_TIMES 1, 2), the committed message and one op record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from connector.protocol.commitlog import MessageRecord
from tests.interop.java_fixtures import HALF_TOPIC, OP_HALF_TOPIC, assert_exactly_once, wait_for_route
from tests.support.brokers import BrokerProcess, NameServerProcess, read_commitlog
from tests.support.java_tools import JavaRun, run_java
from tests.support.jvm_peers import RealBroker

TOPIC = "TxByJava"
MESSAGES = 3
BROKER = {"brokerClusterName": "TxCluster", "brokerName": "broker-tx", "mappedFileSizeCommitLog": 1 << 20,
          "transactionTimeOut": 1000, "transactionCheckInterval": 1000}
TRANSACTION_TYPE_MASK = 0xC


@dataclass
class PeerRuns:
    """One peer's results: the producer's run, the consumer's run and the CommitLog records."""

    producer: JavaRun
    consumer: JavaRun
    records: list[MessageRecord]

    def sent(self) -> dict[str, str]:
        """{UNIQ_KEY: body sha256} of the messages the producer sent."""
        return {line["msgId"]: line["bodySha256"] for line in self.producer.lines if line["event"] == "send"}


def _scenario(ns_addr: str, commitlog_dir: Path, log_root: Path) -> PeerRuns:
    wait_for_route(ns_addr)
    producer = run_java("JavaTransactionProducer", [f"namesrv={ns_addr}", f"topic={TOPIC}", "group=pg_tx_java",
                                                    f"count={MESSAGES}", "checks=UNKNOW,COMMIT", "timeoutMs=60000"],
                        log_dir=log_root / "producer", timeout_s=90, check=False)
    wait_for_route(ns_addr, TOPIC)
    consumer = run_java("JavaConsumer", ["mode=push", f"namesrv={ns_addr}", f"topic={TOPIC}", "group=cg_tx_java",
                                         f"count={MESSAGES}", "timeoutMs=60000"],
                        props={"rocketmq.client.rebalance.waitInterval": "1000"}, log_dir=log_root / "consumer",
                        timeout_s=90, check=False)
    records = [r for r in read_commitlog(commitlog_dir, check_crc=False) if isinstance(r, MessageRecord)]
    return PeerRuns(producer, consumer, records)


@pytest.fixture(scope="module")
def stub_runs(tmp_path_factory) -> PeerRuns:
    root = tmp_path_factory.mktemp("tx-stub")
    with NameServerProcess.start(root / "namesrv") as ns, \
            BrokerProcess.start(root / "master", namesrvAddr=ns.addr, **BROKER) as master:
        return _scenario(ns.addr, master.commitlog_dir, root / "clients")


@pytest.fixture(scope="module")
def real_runs(real_namesrv, tmp_path_factory) -> PeerRuns:
    root = tmp_path_factory.mktemp("tx-real")
    with RealBroker.start(root / "master", brokerRole="ASYNC_MASTER", namesrvAddr=real_namesrv.addr,
                          **BROKER) as master:
        return _scenario(real_namesrv.addr, master.commitlog_dir, root / "clients")


@pytest.fixture(params=["stub", "real"])
def runs(request) -> PeerRuns:
    return request.getfixturevalue(f"{request.param}_runs")


def _record_sequence(runs: PeerRuns) -> dict[str, list[tuple]]:
    """Per message (UNIQ_KEY): its records as (topic, transaction type bits, TRANSACTION_CHECK_TIMES), in
    CommitLog order."""
    out: dict[str, list[tuple]] = {}
    for rec in runs.records:
        if rec.uniq_key in runs.sent():
            out.setdefault(rec.uniq_key, []).append(
                (rec.topic, rec.sys_flag & TRANSACTION_TYPE_MASK, rec.properties.get("TRANSACTION_CHECK_TIMES")))
    return out


def test_unknown_then_commit_is_checked_back_and_delivered_exactly_once(runs):
    producer = runs.producer
    assert producer.returncode == 0, producer.describe()
    sends = [line for line in producer.lines if line["event"] == "send"]
    assert [(s["status"], s["localTransactionState"]) for s in sends] == [("SEND_OK", "UNKNOW")] * MESSAGES
    checks = [line for line in producer.lines if line["event"] == "check"]
    by_message = {s["msgId"]: [c for c in checks if c["transactionId"] == s["msgId"]] for s in sends}
    for uniq_key, seen in by_message.items():
        assert [(c["checkTimes"], c["answer"]) for c in seen] == [("1", "UNKNOW"), ("2", "COMMIT_MESSAGE")], uniq_key
        assert {(c["topic"], c["bodySha256"]) for c in seen} == {(TOPIC, runs.sent()[uniq_key])}
    assert_exactly_once(runs.consumer, runs.sent(), TOPIC)
    committed = [r for r in runs.records if r.topic == TOPIC]
    assert sorted(r.uniq_key for r in committed) == sorted(runs.sent())  # stored once each
    sequences = _record_sequence(runs)
    for uniq_key in runs.sent():
        assert sequences[uniq_key] == [(HALF_TOPIC, 0, None), (HALF_TOPIC, 0, "1"), (HALF_TOPIC, 0, "2"),
                                       (TOPIC, 0x8, "2")], uniq_key
    assert len([r for r in runs.records if r.topic == OP_HALF_TOPIC]) == MESSAGES


def test_the_stub_checks_back_as_the_real_broker(stub_runs, real_runs):
    def shape(runs: PeerRuns) -> list[list[tuple]]:
        return sorted(_record_sequence(runs).values())
    assert shape(stub_runs) == shape(real_runs)
    for runs in (stub_runs, real_runs):
        ops = sorted(int(r.body) for r in runs.records if r.topic == OP_HALF_TOPIC)
        halves = {r.queue_offset: r for r in runs.records if r.topic == HALF_TOPIC}
        assert all(halves[o].properties.get("TRANSACTION_CHECK_TIMES") == "2" for o in ops)  # the copy committed
