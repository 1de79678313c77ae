"""Consumer retries with a real RocketMQ 4.9.8 push consumer, on the stub and on a real 4.9 broker (issue 14 §2).

Two peers side by side, each a name server plus an ASYNC_MASTER with the same short delay levels (every level
1 s): the stub's, and real 4.9 processes (tests/support/jvm_peers.py). The same messages are sent to each by the
Python producer, then ``JavaRetryConsumer`` (tests/java) consumes them twice per peer:

* group ``cg_retry`` answers RECONSUME_LATER twice, then CONSUME_SUCCESS: every message is delivered three
  times (reconsumeTimes 0, 1, 2) under its own topic and id, the copies carrying RETRY_TOPIC and
  ORIGIN_MESSAGE_ID (the first delivery's offset msgId);
* group ``cg_dlq`` always answers RECONSUME_LATER with maxReconsumeTimes 2: three deliveries, then the message is
  in ``%DLQ%cg_dlq``, where a plain ``JavaConsumer`` finds each one exactly once (reconsumeTimes 3, DELAY=0).

The client must never fall back to re-sending the copy itself (its "sendMessageBack Exception" log line), and
the stub's answers must match the real broker's: the same deliveries with the same properties, the same
topic configs, and the same CommitLog records per message (topic, queue, sysFlag, reconsumeTimes, properties).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_stub.javautil import fastjson_loads
from connector.client.producer import Producer
from connector.protocol.commitlog import MessageRecord
from connector.protocol.remoting import RemotingCommand, RequestCode
from tests.interop.java_fixtures import wait_for_route
from tests.support.brokers import BrokerProcess, NameServerProcess, read_commitlog, remoting_request
from tests.support.java_tools import JavaRun, client_log_tail, run_java
from tests.support.jvm_peers import RealBroker

TOPIC = "RetriedByJava"
MESSAGES = 3
FAIL_TIMES = 2  # cg_retry: RECONSUME_LATER for reconsumeTimes 0 and 1
MAX_RECONSUME_TIMES = 2  # cg_dlq
LEVELS = " ".join(["1s"] * 18)
BROKER = {"brokerClusterName": "RetryCluster", "brokerName": "broker-retry", "messageDelayLevel": LEVELS,
          "mappedFileSizeCommitLog": 1 << 20}
# set by the client or naming one peer's address, offsets or time: compared by meaning, not by value
PEER_SPECIFIC = {"UNIQ_KEY", "ORIGIN_MESSAGE_ID", "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}


@dataclass
class PeerRuns:
    """One peer's results: what was sent ({UNIQ_KEY: body index}), the two consumer runs, the DLQ reader's run,
    the peer's topic table and its CommitLog records."""

    sent: dict[str, int]
    retry: JavaRun
    dlq: JavaRun
    dlq_reader: JavaRun
    topics: dict
    records: list[MessageRecord]


def _bodies() -> list[bytes]:
    return [f"retry body {i} 数据".encode() * (i + 1) for i in range(MESSAGES)]


def _scenarios(ns_addr: str, remoting_addr: str, commitlog_dir: Path, log_root: Path) -> PeerRuns:
    sent = {}
    with Producer(remoting_addr, "pg_retry") as producer:
        for i, body in enumerate(_bodies()):
            result = producer.send(TOPIC, body, tags=f"T{i}", keys=[f"k{i}"], properties={"n": f"值{i}"},
                                   queue_id=i % 2)
            assert result.send_status == "SEND_OK"
            sent[result.msg_id] = i
    wait_for_route(ns_addr, TOPIC)
    common = [f"namesrv={ns_addr}", f"topic={TOPIC}", "timeoutMs=90000"]
    props = {"rocketmq.client.rebalance.waitInterval": "1000"}
    retry = run_java("JavaRetryConsumer", [*common, "group=cg_retry", f"count={MESSAGES * (FAIL_TIMES + 1)}",
                                           f"failTimes={FAIL_TIMES}"],
                     props=props, log_dir=log_root / "retry", timeout_s=120, check=False)
    deliveries = MESSAGES * (MAX_RECONSUME_TIMES + 1)
    dlq = run_java("JavaRetryConsumer", [*common, "group=cg_dlq", f"count={deliveries}", "failTimes=-1",
                                         f"maxReconsumeTimes={MAX_RECONSUME_TIMES}"],
                   props=props, log_dir=log_root / "dlq", timeout_s=120, check=False)
    wait_for_route(ns_addr, "%DLQ%cg_dlq")
    reader = run_java("JavaConsumer", ["mode=push", f"namesrv={ns_addr}", "topic=%DLQ%cg_dlq", "group=cg_dlq_reader",
                                       f"count={MESSAGES}", "timeoutMs=60000"],
                      props=props, log_dir=log_root / "dlq-reader", timeout_s=90, check=False)
    resp = remoting_request(remoting_addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    topics = fastjson_loads(resp.body)["topicConfigTable"]
    records = [r for r in read_commitlog(commitlog_dir, check_crc=False) if isinstance(r, MessageRecord)]
    return PeerRuns(sent, retry, dlq, reader, topics, records)


@pytest.fixture(scope="module")
def stub_runs(tmp_path_factory) -> PeerRuns:
    root = tmp_path_factory.mktemp("retry-stub")
    with NameServerProcess.start(root / "namesrv") as ns, \
            BrokerProcess.start(root / "master", namesrvAddr=ns.addr, **BROKER) as master:
        wait_for_route(ns.addr)
        return _scenarios(ns.addr, master.remoting_addr, master.commitlog_dir, root / "clients")


@pytest.fixture(scope="module")
def real_runs(real_namesrv, tmp_path_factory) -> PeerRuns:
    root = tmp_path_factory.mktemp("retry-real")
    with RealBroker.start(root / "master", brokerRole="ASYNC_MASTER", namesrvAddr=real_namesrv.addr,
                          **BROKER) as master:
        wait_for_route(real_namesrv.addr)
        return _scenarios(real_namesrv.addr, master.remoting_addr, master.commitlog_dir, root / "clients")


@pytest.fixture(params=["stub", "real"])
def runs(request) -> PeerRuns:
    return request.getfixturevalue(f"{request.param}_runs")


def _by_message(run: JavaRun, sent: dict[str, int]) -> dict[int, list[dict]]:
    """Deliveries per message (body index), in delivery order."""
    out: dict[int, list[dict]] = {}
    for line in run.lines:
        out.setdefault(sent[line["msgId"]], []).append(line)
    return out


def _no_fallback(run: JavaRun) -> None:
    """The client handed every message back with CONSUMER_SEND_MSG_BACK, never by re-sending it itself."""
    assert "sendMessageBack Exception" not in client_log_tail(run.log_dir, chars=10**7), run.describe()


def _check_copies(deliveries: list[dict]) -> None:
    first = deliveries[0]
    assert "RETRY_TOPIC" not in first["properties"] and "ORIGIN_MESSAGE_ID" not in first["properties"]
    for later in deliveries[1:]:
        assert later["properties"]["RETRY_TOPIC"] == TOPIC
        assert later["properties"]["ORIGIN_MESSAGE_ID"] == first["offsetMsgId"]
        assert later["offsetMsgId"] != first["offsetMsgId"]  # a new stored copy


def test_reconsume_later_redelivers_until_success(runs):
    assert runs.retry.returncode == 0, runs.retry.describe()
    _no_fallback(runs.retry)
    bodies = [hashlib.sha256(b).hexdigest() for b in _bodies()]
    per_message = _by_message(runs.retry, runs.sent)
    assert sorted(per_message) == list(range(MESSAGES))
    for index, deliveries in per_message.items():
        assert [d["reconsumeTimes"] for d in deliveries] == [0, 1, 2]
        assert [d["status"] for d in deliveries] == ["RECONSUME_LATER", "RECONSUME_LATER", "CONSUME_SUCCESS"]
        assert {d["topic"] for d in deliveries} == {TOPIC}  # the client shows a retried copy under its topic
        assert {d["bodySha256"] for d in deliveries} == {bodies[index]}
        _check_copies(deliveries)


def test_past_max_reconsume_times_the_dead_letter_queue_gets_it(runs):
    assert runs.dlq.returncode == 0, runs.dlq.describe()
    _no_fallback(runs.dlq)
    per_message = _by_message(runs.dlq, runs.sent)
    assert sorted(per_message) == list(range(MESSAGES))
    for deliveries in per_message.values():
        assert [d["reconsumeTimes"] for d in deliveries] == [0, 1, 2]
        _check_copies(deliveries)
    reader = runs.dlq_reader
    assert reader.returncode == 0, reader.describe()
    assert sorted(runs.sent[line["msgId"]] for line in reader.lines) == list(range(MESSAGES))  # each once
    assert {(line["topic"], line["reconsumeTimes"]) for line in reader.lines} == {("%DLQ%cg_dlq", 3)}
    first_ids = {runs.sent[d["msgId"]]: d["offsetMsgId"] for d in runs.dlq.lines if d["reconsumeTimes"] == 0}
    dead = [r for r in runs.records if r.topic == "%DLQ%cg_dlq"]
    assert len(dead) == MESSAGES
    for rec in dead:
        props = rec.properties
        assert (props["DELAY"], props["RETRY_TOPIC"], props["WAIT"]) == ("0", TOPIC, "false")
        assert props["ORIGIN_MESSAGE_ID"] == first_ids[runs.sent[rec.uniq_key]]


def _comparable(deliveries: list[dict]) -> list[tuple]:
    return [(d["topic"], d["reconsumeTimes"], d["status"],
             {k: v for k, v in d["properties"].items() if k not in PEER_SPECIFIC}) for d in deliveries]


def _stored(runs: PeerRuns) -> dict[int, list[tuple]]:
    """Per message (body index): its CommitLog records as (topic, queueId, sysFlag, reconsumeTimes,
    properties without peer-specific values), in CommitLog order."""
    out: dict[int, list[tuple]] = {}
    for rec in runs.records:
        if rec.uniq_key in runs.sent:
            props = {k: v for k, v in rec.properties.items() if k not in PEER_SPECIFIC}
            out.setdefault(runs.sent[rec.uniq_key], []).append(
                (rec.topic, rec.queue_id, rec.sys_flag, rec.reconsume_times, props))
    return out


def test_the_stub_answers_as_the_real_broker(stub_runs, real_runs):
    for attr in ("retry", "dlq"):
        stub, real = _by_message(getattr(stub_runs, attr), stub_runs.sent), \
            _by_message(getattr(real_runs, attr), real_runs.sent)
        assert {i: _comparable(d) for i, d in stub.items()} == {i: _comparable(d) for i, d in real.items()}, attr
    for topic in ("%RETRY%cg_retry", "%RETRY%cg_dlq", "%DLQ%cg_dlq"):
        stub_cfg, real_cfg = stub_runs.topics[topic], real_runs.topics[topic]
        keys = ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "topicFilterType", "order")
        assert {k: stub_cfg[k] for k in keys} == {k: real_cfg[k] for k in keys}, topic
    assert _stored(stub_runs) == _stored(real_runs)
