"""The real 4.9.8 ``mqadmin`` against the broker stub and its name server, and against a real 4.9 broker and
name server set up the same way (issue 14 §5; docs/broker_stub.md "mqadmin").

One stub pair (``python -m broker_stub namesrv`` + a stub master) and one real pair (``NamesrvStartup`` + a
real master), both cluster ``TestCluster``, broker ``broker-a``, start once for the module and get the same
load: 10 messages into ``MqStats`` (auto-created from TBW102 with 4 queues; queue ``i % 4``), a consumer
heartbeat of group ``mq_cg`` (subscribed to ``MqStats``, its connection kept open for the module) and a
committed offset of 1 on each queue. Every test runs one command on both sides at once and compares what
mqadmin printed: the same columns, rows, keys, queue counts and offsets. Differences are listed where a
test allows them (each is documented in docs/broker_stub.md "mqadmin").
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker_stub.javautil import fastjson_loads
from connector.client.producer import Producer
from connector.protocol.remoting import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from tests.interop.java_fixtures import wait_for_route
from tests.interop.peers import commit_consumer_offset
from tests.support.brokers import BrokerProcess, NameServerProcess, remoting_request
from tests.support.jvm_peers import REAL_BROKER_DEFAULTS, RealBroker, killed_at_exit
from tests.support.mqadmin import (
    MqadminRun,
    parse_colon_pairs,
    parse_equal_pairs,
    parse_table,
    run_mqadmin,
)

TOPIC = "MqStats"
GROUP = "mq_cg"
QUEUES = 4
SENT = 10
COMMITTED = 1
CLUSTER = "TestCluster"
BROKER = "broker-a"
LATE_ROUTE_WAIT_S = 35.0  # a failed route check waits this long to tell a late registration from a lost one
# GET_BROKER_RUNTIME_INFO keys only the stub reports (docs/broker_stub.md "Runtime-info keys added for
# replication"; scheduleMessageOffset_<level> for every level, upstream only for levels with a saved offset)
STUB_RUNTIME_KEYS = {"brokerRole", "brokerId", "push2SlaveMaxOffset", "haConnectionCount", "haConnections"}
# GET_BROKER_CONFIG keys only the stub reports (docs/broker_stub.md "Stub-only keys"), plus storePathCommitLog,
# which the stub reports with its effective value (4.9.8 leaves it out while unset)
STUB_CONFIG_KEYS = {"minInSyncSlaves", "inSyncReplicas", "maxTopicConfigNums", "maxSubscriptionGroupNums",
                    "haAllowedAddresses", "haReplicaAddresses", "metricsPromExporterPort", "metricsPromExporterHost",
                    "serverMaxConnections", "serverMaxPendingFrameBytes", "cutCorruptCommitLogOnRecover",
                    "autoMessageVersionOnTopicLen", "storePathCommitLog"}
# GET_BROKER_CONFIG values that name the side's own ports, folders and name server
SIDE_CONFIG_KEYS = {"listenPort", "haListenPort", "namesrvAddr", "storePathRootDir", "storePathCommitLog",
                    "rocketmqHome", "brokerIP1", "brokerIP2"}


@dataclass
class Side:
    """One name server + master pair and where its mqadmin runs keep their folders."""

    name: str
    namesrv: str
    broker: str
    store: Path
    workdir: Path
    log_tail: Callable[[], str] = lambda: "(no log)"  # the broker's log tail, for a failure's message
    runs: int = 0
    consumer: socket.socket | None = None  # the consumer group's heartbeat connection (module doc)
    decoder: FrameDecoder = field(default_factory=FrameDecoder)

    def mqadmin(self, *args: str, check: bool = True, credentials: tuple[str, str] | None = None) -> MqadminRun:
        self.runs += 1
        return run_mqadmin(list(args), namesrv=self.namesrv, workdir=self.workdir / f"mqadmin-{self.runs}",
                           check=check, credentials=credentials)


def both(sides: tuple[Side, Side], *args: str, check: bool = True,
         credentials: tuple[str, str] | None = None) -> tuple[MqadminRun, MqadminRun]:
    """The same mqadmin command on the stub and the real side at once: (stub run, real run). ``{broker}`` in
    an argument becomes the side's broker address."""
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(s.mqadmin, *(a.replace("{broker}", s.broker) for a in args), check=check,
                               credentials=credentials) for s in sides]
        return futures[0].result(), futures[1].result()


def _heartbeat(side: Side) -> None:
    """HEART_BEAT of consumer group ``mq_cg`` (push, clustering, subscribed to ``MqStats``) on the side's
    consumer connection, opened the first time and kept open (a real broker drops the group when it closes;
    both drop it 120 s after its last heartbeat)."""
    if side.consumer is None:
        host, _, port = side.broker.rpartition(":")
        side.consumer = socket.create_connection((host, int(port)), timeout=10)
    sub = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*", "subVersion": 1,
           "tagsSet": [], "topic": TOPIC}
    data = {"clientID": "127.0.0.1@mqadmin-test", "producerDataSet": [],
            "consumerDataSet": [{"groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                                 "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                                 "subscriptionDataSet": [sub]}]}
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(data).encode())
    side.consumer.sendall(cmd.encode())
    reply = None
    while reply is None:  # a real broker may first send NOTIFY_CONSUMER_IDS_CHANGED (40), a request to us
        chunk = side.consumer.recv(65536)
        assert chunk, f"{side.name} closed the heartbeat connection"
        reply = next((f for f in side.decoder.feed(chunk) if f.is_response and f.opaque == cmd.opaque), None)
    assert reply.code == ResponseCode.SUCCESS, f"HEART_BEAT to {side.name}: {reply.code} {reply.remark}"


def _load(side: Side) -> None:
    """The module's load on one side (see module doc)."""
    with Producer(side.broker, "mq_pg") as producer:
        for i in range(SENT):
            producer.send(TOPIC, f"mqadmin-{i}".encode(), queue_id=i % QUEUES)
    _heartbeat(side)
    for queue_id in range(QUEUES):
        commit_consumer_offset(side.broker, GROUP, TOPIC, queue_id, COMMITTED)
    wait_for_route(side.namesrv, TOPIC, timeout_s=40)
    wait_for_route(side.namesrv, f"%RETRY%{GROUP}", timeout_s=40)


@pytest.fixture(scope="module")
def sides(tmp_path_factory, real_namesrv) -> Iterator[tuple[Side, Side]]:
    """(stub side, real side), loaded (module doc)."""
    root = tmp_path_factory.mktemp("mqadmin")
    with NameServerProcess.start(root / "stub-namesrv") as ns, \
            BrokerProcess.start(root / "stub-broker", namesrvAddr=ns.addr,  # RealBroker's value (tests/support)
                                waitTimeMillsInSendQueue=REAL_BROKER_DEFAULTS["waitTimeMillsInSendQueue"]) as stub, \
            killed_at_exit(RealBroker.start(root / "real-broker", namesrvAddr=real_namesrv.addr)) as real:
        pair = (Side("stub", ns.addr, stub.remoting_addr, stub.store_dir, root / "stub-mqadmin", stub.log_tail),
                Side("real", real_namesrv.addr, real.remoting_addr, real.store_dir, root / "real-mqadmin",
                     real.log_tail))
        for side in pair:
            wait_for_route(side.namesrv, "TBW102", timeout_s=40)
        try:
            for side in pair:
                _load(side)
            yield pair
        finally:
            for side in pair:
                if side.consumer is not None:
                    side.consumer.close()


def test_cluster_list(sides):
    stub, real = both(sides, "clusterList")
    (s_cols, s_rows), (r_cols, r_rows) = parse_table(stub.stdout), parse_table(real.stdout)
    assert s_cols == r_cols == ["Cluster Name", "Broker Name", "BID", "Addr", "Version", "InTPS(LOAD)",
                                "OutTPS(LOAD)", "PCWait(ms)", "Hour", "SPACE"]
    assert len(s_rows) == len(r_rows) == 1, (stub.stdout, real.stdout)
    for row, side in ((s_rows[0], sides[0]), (r_rows[0], sides[1])):
        assert row[:5] == [CLUSTER, BROKER, "0", side.broker, "V4_9_8"], row
        assert re.fullmatch(r"\d+\.\d\d\(\d+,\d+ms\)", row[5]) and re.fullmatch(r"\d+\.\d\d\(\d+,\d+ms\)", row[6])
        assert 0 <= float(row[9]) <= 1
    # #Hour = hours since earliestMessageTimeStamp. 4.9.8 reads that timestamp only when 2 × maxMessageSize
    # (8 MiB) follow commitLogMinOffset in its file, else reports -1, so a small store shows the hours since
    # 1970; the stub reports the first message's store time (docs/broker_stub.md "mqadmin").
    assert float(s_rows[0][8]) < 1
    assert abs(float(r_rows[0][8]) - time.time() / 3600) < 1


def test_topic_list(sides):
    stub, real = both(sides, "topicList")
    topics = set(stub.stdout.split())
    assert topics == set(real.stdout.split())
    assert {TOPIC, f"%RETRY%{GROUP}", "TBW102", "SCHEDULE_TOPIC_XXXX", CLUSTER, BROKER} <= topics
    stub, real = both(sides, "topicList", "-c")
    (s_cols, s_rows), (r_cols, r_rows) = parse_table(stub.stdout), parse_table(real.stdout)
    assert s_cols == r_cols == ["Cluster Name", "Topic", "Consumer Group"]
    assert sorted(s_rows) == sorted(r_rows)
    assert [CLUSTER, TOPIC, GROUP] in s_rows  # QUERY_TOPIC_CONSUME_BY_WHO
    assert all(row[0] == CLUSTER for row in s_rows)


def test_topic_route(sides):
    stub, real = both(sides, "topicRoute", "-t", TOPIC)
    routes = [fastjson_loads(run.stdout) for run in (stub, real)]
    for route, side in zip(routes, sides, strict=True):
        assert route["brokerDatas"] == [{"brokerAddrs": {"0": side.broker}, "brokerName": BROKER,
                                         "cluster": CLUSTER}]
        assert route["queueDatas"] == [{"brokerName": BROKER, "perm": 6, "readQueueNums": QUEUES, "topicSysFlag": 0,
                                        "writeQueueNums": QUEUES}]
    stub, real = both(sides, "topicRoute", "-t", "NoSuchTopic", check=False)
    assert stub.failed and real.failed
    assert "CODE: 17  DESC: No topic route info in name server for the topic: NoSuchTopic" in stub.cause
    assert stub.cause == real.cause


def test_topic_status(sides):
    stub, real = both(sides, "topicStatus", "-t", TOPIC)
    (s_cols, s_rows), (r_cols, r_rows) = parse_table(stub.stdout), parse_table(real.stdout)
    assert s_cols == r_cols == ["Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"]
    expected = [[BROKER, str(q), "0", str(len(range(q, SENT, QUEUES)))] for q in range(QUEUES)]
    assert [row[:4] for row in s_rows] == [row[:4] for row in r_rows] == expected
    for row in s_rows + r_rows:  # the store time of each queue's last message, e.g. 2026-11-25 19:01:16,172
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", row[4]), row


def test_broker_status(sides):
    stub, real = both(sides, "brokerStatus", "-b", "{broker}")
    s, r = parse_colon_pairs(stub.stdout), parse_colon_pairs(real.stdout)

    def keys(table: dict[str, str]) -> set[str]:  # commitLogDiskRatio_<folder> names the side's folder
        return {k for k in table if not k.startswith(("commitLogDiskRatio_", "scheduleMessageOffset_"))}

    assert keys(r) <= keys(s), f"keys the stub lacks: {sorted(keys(r) - keys(s))}"
    assert keys(s) - keys(r) <= STUB_RUNTIME_KEYS, f"undocumented stub keys: {sorted(keys(s) - keys(r))}"
    assert f"commitLogDiskRatio_{sides[0].store / 'commitlog'}" in s
    assert f"commitLogDiskRatio_{sides[1].store / 'commitlog'}" in r
    for key in ("brokerVersionDesc", "brokerVersion", "commitLogMinOffset", "commitLogMaxOffset",
                "msgPutTotalTodayNow", "dispatchBehindBytes", "sendThreadPoolQueueCapacity"):
        assert s[key] == r[key], f"{key}: stub {s[key]!r} real {r[key]!r}"
    assert int(s["commitLogMaxOffset"]) > 0 and s["brokerVersionDesc"] == "V4_9_8"


def test_consumer_progress(sides):
    for side in sides:  # the consumer stays online however long the tests before took
        _heartbeat(side)
    stub, real = both(sides, "consumerProgress")
    (s_cols, s_rows), (r_cols, r_rows) = parse_table(stub.stdout), parse_table(real.stdout)
    assert s_cols == r_cols == ["Group", "Count", "Version", "Type", "Model", "TPS", "Diff Total"]
    diff_total = SENT - QUEUES * COMMITTED
    assert s_rows == r_rows == [[GROUP, "1", "V4_9_8", "PUSH", "CLUSTERING", "0", str(diff_total)]]

    stub, real = both(sides, "consumerProgress", "-g", GROUP)
    (s_cols, s_rows), (r_cols, r_rows) = parse_table(stub.stdout), parse_table(real.stdout)
    assert s_cols == r_cols == ["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff",
                                "LastTime"]
    expected = [[TOPIC, BROKER, str(q), str(n), str(COMMITTED), str(n - COMMITTED)]
                for q in range(QUEUES) for n in [len(range(q, SENT, QUEUES))]]
    assert [row[:6] for row in s_rows] == [row[:6] for row in r_rows] == expected
    for row in s_rows + r_rows:  # the store time of the last consumed message
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row[6]), row
    for run in (stub, real):
        assert f"Diff Total: {diff_total}" in run.stdout and "Consume TPS: 0.00" in run.stdout

    stub, real = both(sides, "consumerProgress", "-g", "no_such_group", check=False)
    assert stub.failed and real.failed and stub.cause == real.cause
    assert "No topic route info in name server for the topic: %RETRY%no_such_group" in stub.cause


def test_get_broker_config(sides):
    stub, real = both(sides, "getBrokerConfig", "-b", "{broker}")
    s, r = parse_equal_pairs(stub.stdout), parse_equal_pairs(real.stdout)
    assert stub.stdout.startswith(f"============{sides[0].broker}============")
    assert len(r) > 150
    assert set(r) - set(s) <= {"rocketmqHome"}, f"keys the stub lacks: {sorted(set(r) - set(s))}"
    assert set(s) - set(r) <= STUB_CONFIG_KEYS, f"undocumented stub keys: {sorted(set(s) - set(r))}"
    differ = {k: (s[k], r[k]) for k in set(s) & set(r) - SIDE_CONFIG_KEYS if s[k] != r[k]}
    assert not differ, f"values that differ (stub, real): {differ}"
    assert s["listenPort"] == sides[0].broker.rpartition(":")[2] and s["namesrvAddr"] == sides[0].namesrv


def _queue_data(side: Side, topic: str) -> dict:
    resp = remoting_request(side.namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  {"topic": topic}))
    assert resp.code == ResponseCode.SUCCESS, f"{side.name}: no route of {topic}: {resp.code} {resp.remark}"
    return fastjson_loads(resp.body)["queueDatas"][0]


def _assert_route(side: Side, topic: str, expected: dict) -> None:
    """The name server's queue data of ``topic`` is ``expected`` right after mqadmin's answer. When it is not, the
    failure says which side, whether the route became right later (a registration that came late, or an older one
    that came after it; the broker registers again every 30 s) and the broker's log tail."""
    got = _queue_data(side, topic)
    if got == expected:
        return
    deadline, later = time.monotonic() + LATE_ROUTE_WAIT_S, got
    while later != expected and time.monotonic() < deadline:
        time.sleep(0.5)
        later = _queue_data(side, topic)
    when = ("became right within" if later == expected else "still differs after") + f" {LATE_ROUTE_WAIT_S:.0f} s"
    raise AssertionError(f"{side.name}: route of {topic} right after the answer {got}, expected {expected}; "
                         f"it {when}\n{side.log_tail()}")


def _topic_file_entry(side: Side, topic: str) -> dict:
    table = fastjson_loads((side.store / "config" / "topics.json").read_text(encoding="utf-8"))
    return table["topicConfigTable"][topic]


def test_update_topic(sides):
    stub, real = both(sides, "updateTopic", "-b", "{broker}", "-t", "MqCreated", "-r", "3", "-w", "5")
    for run, side in ((stub, sides[0]), (real, sides[1])):
        assert run.stdout.splitlines() == [
            f"create topic to {side.broker} success.",
            "TopicConfig [topicName=MqCreated, readQueueNums=3, writeQueueNums=5, perm=RW-, "
            "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]"]
        # registered with the name server before the answer, and persisted
        _assert_route(side, "MqCreated", {"brokerName": BROKER, "perm": 6, "readQueueNums": 3, "topicSysFlag": 0,
                                          "writeQueueNums": 5})
        assert _topic_file_entry(side, "MqCreated") == {
            "order": False, "perm": 6, "readQueueNums": 3, "topicFilterType": "SINGLE_TAG",
            "topicName": "MqCreated", "topicSysFlag": 0, "writeQueueNums": 5}

    stub, real = both(sides, "updateTopic", "-b", "{broker}", "-t", "MqCreated", "-r", "2", "-w", "2", "-p", "4")
    for run, side in ((stub, sides[0]), (real, sides[1])):
        assert "perm=R--" in run.stdout, run.describe()
        _assert_route(side, "MqCreated", {"brokerName": BROKER, "perm": 4, "readQueueNums": 2, "topicSysFlag": 0,
                                          "writeQueueNums": 2})
        assert _topic_file_entry(side, "MqCreated")["writeQueueNums"] == 2

    stub, real = both(sides, "updateTopic", "-c", CLUSTER, "-t", "MqClustered", "-w", "2", "-r", "2")
    for run, side in ((stub, sides[0]), (real, sides[1])):  # every master of the cluster (clusterList)
        assert run.stdout.startswith(f"create topic to {side.broker} success.\n"), run.describe()
        assert _queue_data(side, "MqClustered")["writeQueueNums"] == 2

    stub, real = both(sides, "updateTopic", "-b", "{broker}", "-t", "TBW102", check=False)
    assert stub.failed and real.failed and stub.cause == real.cause
    assert stub.cause.endswith("CODE: 1  DESC: The topic[TBW102] is conflict with system topic.")


PLAIN_ACL = """\
accounts:
  - accessKey: mqadmin1
    secretKey: admin-secret
    admin: true
  - accessKey: mquser01
    secretKey: user-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


def test_update_topic_is_admin_only_under_acl(tmp_path, sides):
    """With ``aclEnable=true`` and the same plain_acl.yml, mqadmin signing from ``conf/tools.yml``: the admin
    account creates a topic, a non-admin account and an unsigned mqadmin are refused with the same AclException."""
    stub_home = tmp_path / "stub-home"
    real_dir = tmp_path / "real-acl-broker"
    for conf in (stub_home / "conf", real_dir / "rocketmq_home" / "conf"):  # the real one: RealBroker's home
        conf.mkdir(parents=True)
        (conf / "plain_acl.yml").write_text(PLAIN_ACL)
    with BrokerProcess.start(tmp_path / "stub-acl-broker", aclEnable="true", rocketmqHome=str(stub_home)) as stub, \
            killed_at_exit(RealBroker.start(real_dir, aclEnable="true")) as real:
        acl_sides = (Side("stub", sides[0].namesrv, stub.remoting_addr, stub.store_dir, tmp_path / "stub-mqadmin"),
                     Side("real", sides[1].namesrv, real.remoting_addr, real.store_dir, tmp_path / "real-mqadmin"))
        create = ("updateTopic", "-b", "{broker}", "-t", "MqAclTopic")
        for credentials, refusal in ((("mquser01", "user-secret"),
                                      "Need admin permission for request code=17, but accessKey=mquser01 is not"),
                                     (None, "No accessKey is configured")):
            stub_run, real_run = both(acl_sides, *create, check=False, credentials=credentials)
            for run in (stub_run, real_run):
                assert run.failed, run.describe()
                assert f"CODE: 1  DESC: org.apache.rocketmq.acl.common.AclException: {refusal}" in run.cause, \
                    run.describe()
        both(acl_sides, *create, credentials=("mqadmin1", "admin-secret"))
        for side in acl_sides:
            assert _topic_file_entry(side, "MqAclTopic")["writeQueueNums"] == 8  # mqadmin's default
