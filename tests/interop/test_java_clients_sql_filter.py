"""SQL92 subscriptions with real RocketMQ 4.9.8 consumers, refused by the stub as by a real 4.9 broker with
``enablePropertyFilter=false`` (issue 14 §6).

Two peers side by side, each a name server plus a master with the default ``enablePropertyFilter=false``: the
stub's, and real 4.9 processes (tests/support/jvm_peers.py). ``JavaSqlConsumer`` (tests/java) starts a push and
a lite-pull consumer subscribed with ``MessageSelector.bySql``: on both peers ``start()`` throws the broker's
CHECK_CLIENT_CONFIG refusal (code 1, SYSTEM_ERROR, "The broker does not support consumer to filter message by
SQL92"). A raw PULL_MESSAGE carrying an SQL92 subscription gets the same code and remark from both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.interop.java_fixtures import wait_for_route
from tests.support.brokers import BrokerProcess, NameServerProcess, remoting_request
from tests.support.java_tools import run_java
from tests.support.jvm_peers import RealBroker

TOPIC = "SqlFiltered"
SQL = "a BETWEEN 0 AND 3"
BROKER = {"brokerClusterName": "SqlCluster", "brokerName": "broker-sql", "mappedFileSizeCommitLog": 1 << 20}
REFUSAL = (ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")


def _scenario(ns_addr: str, remoting_addr: str, log_root: Path) -> dict:
    with Producer(remoting_addr, "pg_sql") as producer:
        assert producer.send(TOPIC, b"a=1", properties={"a": "1"}).send_status == "SEND_OK"
    wait_for_route(ns_addr, TOPIC)
    starts = {}
    for mode in ("push", "litepull"):
        run = run_java("JavaSqlConsumer", [f"mode={mode}", f"namesrv={ns_addr}", f"topic={TOPIC}",
                                           f"group=cg_sql_{mode}", f"sql={SQL}"],
                       log_dir=log_root / mode, timeout_s=60)
        starts[mode] = run.lines[0]
    header = {"consumerGroup": "cg_sql_push", "topic": TOPIC, "queueId": 0, "queueOffset": 0, "maxMsgNums": 32,
              "sysFlag": 0x4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": SQL, "subVersion": 0,
              "expressionType": "SQL92"}
    resp = remoting_request(remoting_addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header))
    return {"starts": starts, "pull": (resp.code, resp.remark)}


@pytest.fixture(scope="module")
def stub_result(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("sql-stub")
    with NameServerProcess.start(root / "namesrv") as ns, \
            BrokerProcess.start(root / "master", namesrvAddr=ns.addr, **BROKER) as master:
        wait_for_route(ns.addr)
        return _scenario(ns.addr, master.remoting_addr, root / "clients")


@pytest.fixture(scope="module")
def real_result(real_namesrv, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("sql-real")
    with RealBroker.start(root / "master", brokerRole="ASYNC_MASTER", namesrvAddr=real_namesrv.addr,
                          **BROKER) as master:
        wait_for_route(real_namesrv.addr)
        return _scenario(real_namesrv.addr, master.remoting_addr, root / "clients")


@pytest.mark.parametrize("peer", ["stub", "real"])
def test_an_sql92_consumer_is_refused_at_start(peer, request):
    result = request.getfixturevalue(f"{peer}_result")
    for mode, line in result["starts"].items():
        assert (line["started"], line["responseCode"], line["errorMessage"]) == (False, *REFUSAL), mode
    assert result["pull"] == REFUSAL


def test_the_stub_refuses_as_the_real_broker(stub_result, real_result):
    assert stub_result == real_result
