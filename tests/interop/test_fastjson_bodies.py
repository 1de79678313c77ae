"""Issue 20: every JSON body the stub's name server and broker send is the text real fastjson 1.2.69 writes for the
same RocketMQ 4.9.8 object (docs/protocol.md §4.7).

Each case is an independent description (registrations, topic tables, commits, ...). The stub's own code turns it
into bytes; ``tests/java/FastjsonBodies.java`` builds the same objects with the real classes on the staged jars —
the name server cases through the real ``RouteInfoManager`` — and prints what ``RemotingSerializable.toJson(obj,
false/true)`` writes. All cases go to one JVM. Fixed cases cover each body type, maps big enough to make 4.9.8's
hash tables resize, and the characters fastjson escapes; hypothesis (derandomised, so every run checks the same
inputs) adds names with non-ASCII, quotes, backslashes and control characters, empty and large maps, random
doubles and longs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from broker_stub.metadata import (
    ConsumerOffsetManager,
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
)
from broker_stub.namesrv.route_info import RouteInfoManager
from broker_stub.outer_api import register_broker_body
from broker_stub.remoting.admin_bodies import (
    MessageQueue,
    encode_consume_queue_body,
    encode_consume_stats,
    encode_consumer_connection,
    encode_consumer_id_list,
    encode_group_list,
    encode_topic_stats_table,
)
from broker_stub.topic_config import TopicConfig, topic_config_wrapper
from connector.protocol.config_files import data_version_bean, encode_delay_offsets
from connector.protocol.fastjson import dumps
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode, encode_kv_table
from tests.support.java_tools import run_java

TOPIC_FIELDS = ("topicName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "order", "topicFilterType")


@dataclass
class _Peer:
    """The connection a request came over, as the name server's handlers read it (``peer_text``)."""

    peer_text: str


@dataclass
class Case:
    """One description for Java plus the texts the stub wrote for it (``name → text``, None = no body)."""

    kind: str
    spec: dict
    stub: dict[str, str | None] = field(default_factory=dict)


def _dv(counter_and_timestamp: list[int]) -> dict[str, int]:
    counter, timestamp = counter_and_timestamp
    return {"counter": counter, "timestamp": timestamp}


def _topic_table(topics: list[dict]) -> dict[str, TopicConfig]:
    return {t["topicName"]: TopicConfig(**t) for t in topics}


def _topic(name: str, queues: int = 4, perm: int = 6, sys_flag: int = 0, order: bool = False,
           filter_type: str = "SINGLE_TAG") -> dict:
    return {"topicName": name, "readQueueNums": queues, "writeQueueNums": queues, "perm": perm,
            "topicSysFlag": sys_flag, "order": order, "topicFilterType": filter_type}


# --- the stub's side of each kind -------------------------------------------------------------------------------

def stub_namesrv(spec: dict) -> dict[str, str | None]:
    rim = RouteInfoManager()
    peer = _Peer("127.0.0.1:1")
    for r in spec["registrations"]:
        wrapper = topic_config_wrapper(_topic_table(r["topics"]), _dv(r["dataVersion"]))
        header = {"brokerAddr": r["addr"], "brokerId": str(r["id"]), "brokerName": r["name"],
                  "clusterName": r["cluster"], "haServerAddr": r["addr"]}
        resp = rim.register_broker(peer, RemotingCommand.request(RequestCode.REGISTER_BROKER, header,
                                                                 register_broker_body(wrapper)))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    for r in spec["unregistrations"]:
        header = {"brokerAddr": r["addr"], "brokerId": str(r["id"]), "brokerName": r["name"],
                  "clusterName": r["cluster"]}
        rim.unregister_broker(peer, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header))
    out: dict[str, str | None] = {}
    for i, topic in enumerate(spec["routes"]):
        resp = rim.get_route_info_by_topic(peer, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                         {"topic": topic}))
        out[f"route:{i}"] = resp.body.decode("utf-8") if resp.code == ResponseCode.SUCCESS else None
    out["cluster"] = rim.get_broker_cluster_info(peer, RemotingCommand.request(
        RequestCode.GET_BROKER_CLUSTER_INFO)).body.decode("utf-8")
    out["topicList"] = rim.get_all_topic_list(peer, RemotingCommand.request(
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body.decode("utf-8")
    return out


def stub_topics(spec: dict) -> dict[str, str | None]:
    wrapper = topic_config_wrapper(_topic_table(spec["topics"]), _dv(spec["dataVersion"]))
    return {"compact": dumps(wrapper), "pretty": dumps(wrapper, pretty=True),
            "register": register_broker_body(wrapper).decode("utf-8")}


def stub_offsets(spec: dict, tmp_path) -> dict[str, str | None]:
    com = ConsumerOffsetManager(tmp_path / "no-consumerOffset.json")
    for group, topic, queue_id, offset in spec["commits"]:
        com.commit_offset(group, topic, queue_id, offset)
    return {"compact": com.encode(), "pretty": com.encode(pretty=True)}


def stub_groups(spec: dict, tmp_path) -> dict[str, str | None]:
    sgm = SubscriptionGroupManager(tmp_path / "no-subscriptionGroup.json", auto_create=False)
    for g in spec["groups"]:
        sgm.table[g["groupName"]] = SubscriptionGroupConfig(**g)
    sgm.data_version = _dv(spec["dataVersion"])
    return {"compact": sgm.encode(), "pretty": sgm.encode(pretty=True)}


def _queues(spec: dict) -> dict[MessageQueue, tuple[int, int, int]]:
    return {MessageQueue(t, b, q): (x, y, z) for t, b, q, x, y, z in spec["queues"]}


def stub_texts(case: Case, tmp_path) -> dict[str, str | None]:
    s = case.spec
    if case.kind == "namesrv":
        return stub_namesrv(s)
    if case.kind == "topics":
        return stub_topics(s)
    if case.kind == "offsets":
        return stub_offsets(s, tmp_path)
    if case.kind == "groups":
        return stub_groups(s, tmp_path)
    if case.kind == "delay":
        table = dict(map(tuple, s["offsets"]))
        return {"compact": encode_delay_offsets(table, pretty=False), "pretty": encode_delay_offsets(table)}
    if case.kind == "kvtable":
        return {"compact": encode_kv_table(dict(map(tuple, s["entries"])), s["initialCapacity"]).decode("utf-8")}
    if case.kind == "topicStats":
        queues = {mq: (mn, mx, ts) for mq, (mn, mx, ts) in _queues(s).items()}
        return {"compact": encode_topic_stats_table(queues).decode("utf-8")}
    if case.kind == "consumeStats":
        return {"compact": encode_consume_stats(_queues(s), s["consumeTps"]).decode("utf-8")}
    if case.kind == "consumerConnection":
        subs = {sub["topic"]: sub for sub in s["subscriptions"]}
        body = encode_consumer_connection([tuple(c) for c in s["connections"]], s["consumeType"], s["messageModel"],
                                          s["consumeFromWhere"], subs)
        return {"compact": body.decode("utf-8")}
    if case.kind == "groupList":
        return {"compact": encode_group_list(s["groups"]).decode("utf-8")}
    if case.kind == "consumerIdList":
        return {"compact": encode_consumer_id_list(s["ids"]).decode("utf-8")}
    if case.kind == "consumeQueue":
        body = encode_consume_queue_body(s["maxQueueIndex"], s["minQueueIndex"], [tuple(e) for e in s["entries"]])
        return {"compact": body.decode("utf-8")}
    if case.kind == "dataVersion":
        return {"compact": dumps(data_version_bean(_dv(s["dataVersion"])))}
    raise AssertionError(f"unknown case kind {case.kind}")


# --- fixed cases ------------------------------------------------------------------------------------------------

#: every character fastjson treats specially, plus neighbours it leaves alone
AWKWARD = "".join(map(chr, range(0x20))) + '"\\/\x7f\x80é\u2028\u2029\ufeff\uffff😀 \'<>&'


def _registration(cluster: str, addr: str, name: str, broker_id: int, topics: list[dict], counter: int = 1) -> dict:
    return {"cluster": cluster, "addr": addr, "name": name, "id": broker_id, "topics": topics,
            "dataVersion": [counter, 1700000000000 + counter]}


def fixed_cases() -> list[Case]:
    cases = []
    system = [_topic(n, q, p) for n, q, p in (("SELF_TEST_TOPIC", 1, 6), ("TBW102", 8, 7), ("BenchmarkTest", 1024, 6),
                                              ("DefaultCluster", 16, 7), ("broker-a", 1, 7),
                                              ("OFFSET_MOVED_EVENT", 1, 6), ("SCHEDULE_TOPIC_XXXX", 18, 6),
                                              ("DefaultCluster_REPLY_TOPIC", 1, 6))]
    # the route: one master, one slave; then several brokers and clusters, a slave at id 4 and 17
    regs = [_registration("DefaultCluster", "127.0.0.1:10911", "broker-a", 0, system),
            _registration("DefaultCluster", "127.0.0.1:10921", "broker-a", 1, system)]
    for i, name in enumerate(("broker-b", "broker-c", "bk-Aa", "bk-BB", "x" * 40)):
        topics = [_topic("TopicTest", 4 + i), _topic(f"only-{name}", 2, 6, 3, True, "MULTI_TAG")]
        regs.append(_registration(f"cluster-{i % 2}", f"10.0.0.{i}:10911", name, 0, topics))
        regs.append(_registration(f"cluster-{i % 2}", f"10.0.1.{i}:10911", name, 4 + 13 * (i % 2), topics))
    cases.append(Case("namesrv", {"registrations": regs, "unregistrations": [],
                                  "routes": ["TBW102", "TopicTest", "only-broker-b", "missing"]}))
    cases.append(Case("namesrv", {"registrations": regs, "unregistrations": [
        {"cluster": "cluster-1", "addr": "10.0.0.1:10911", "name": "broker-c", "id": 0},
        {"cluster": "DefaultCluster", "addr": "127.0.0.1:10911", "name": "broker-a", "id": 0}],
        "routes": ["TBW102", "TopicTest", "only-broker-c"]}))
    many = [_topic(f"topic-{i}", i % 7 + 1) for i in range(2000)]  # past 1536: ConcurrentHashMap(1024) resizes
    cases.append(Case("namesrv", {"registrations": [_registration("c", "h:1", "b", 0, many[:300])],
                                  "unregistrations": [], "routes": ["topic-7"]}))
    for topics in ([], system, many, [_topic(AWKWARD), _topic("ab" + AWKWARD[::-1], 1)]):
        cases.append(Case("topics", {"topics": topics, "dataVersion": [len(topics), 1700000000123]}))
    commits = [("g", "TopicTest", q, q * 1000) for q in range(100)]  # 100 queues: the Integer map resizes twice
    commits += [(f"group-{i}", f"topic-{i % 13}", i % 5, 2**40 + i) for i in range(700)]
    commits += [(AWKWARD, AWKWARD, 0, -1), ("%RETRY%g", "t", 3, 0)]
    cases.append(Case("offsets", {"commits": commits}))
    cases.append(Case("offsets", {"commits": []}))
    groups = [{"groupName": "please_rename_unique_group_name", "consumeEnable": False, "brokerId": 1,
               "whichBrokerWhenConsumeSlowly": 2**33, "retryMaxTimes": -1},
              {"groupName": AWKWARD}] + [{"groupName": f"CID_{i}"} for i in range(1600)]
    cases.append(Case("groups", {"groups": groups, "dataVersion": [7, 1700000000999]}))
    cases.append(Case("groups", {"groups": [], "dataVersion": [0, 0]}))
    cases.append(Case("delay", {"offsets": [[lvl, lvl * 11] for lvl in (3, 1, 18, 2)]}))
    cases.append(Case("delay", {"offsets": []}))
    cases.append(Case("delay", {"offsets": [[lvl, 5] for lvl in range(1, 100)]}))
    runtime = [(f"key{i}", str(i)) for i in range(60)] + [("commitLogDirCapacity", "Total : 1 GiB"),
                                                          (AWKWARD, AWKWARD)]
    cases.append(Case("kvtable", {"entries": runtime, "initialCapacity": 64}))
    cases.append(Case("kvtable", {"entries": [], "initialCapacity": 16}))
    queues = [("TopicTest", "broker-a", q, q, q * 7, 1700000000000 + q) for q in range(16)]
    queues += [(AWKWARD, "b", 0, 0, 0, 0), ("%RETRY%g", "broker-a", 0, 1, 2, 3)]
    cases.append(Case("topicStats", {"queues": queues}))
    cases.append(Case("topicStats", {"queues": []}))
    for tps in (0.0, 1.5, 1e7, 1.25e-5, 123456.789, 5e-324, 1.7976931348623157e308, 0.001, 9999999.999):
        cases.append(Case("consumeStats", {"queues": queues[:3], "consumeTps": tps}))
    subs = [{"topic": "TopicTest", "subString": "TagA || TagB", "tagsSet": ["TagA", "TagB"],
             "codeSet": [2598981, 2598982], "subVersion": 1700000000001, "expressionType": "TAG",
             "classFilterMode": False},
            {"topic": "%RETRY%g", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1,
             "expressionType": "TAG", "classFilterMode": False},
            {"topic": AWKWARD, "subString": "a > 1", "tagsSet": [AWKWARD], "codeSet": [-5],
             "subVersion": -1, "expressionType": "SQL92", "classFilterMode": True}]
    cases.append(Case("consumerConnection", {"connections": [["127.0.0.1@1234", "127.0.0.1:5555", "JAVA", 409]],
                                             "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                                             "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptions": subs}))
    cases.append(Case("consumerConnection", {"connections": [[AWKWARD, "h:1", "GO", 0]],
                                             "consumeType": "CONSUME_ACTIVELY", "messageModel": "BROADCASTING",
                                             "consumeFromWhere": "CONSUME_FROM_TIMESTAMP",
                                             "subscriptions": [dict(subs[0], topic=f"t{i}") for i in range(30)]}))
    cases.append(Case("groupList", {"groups": ["g1", "please_rename", AWKWARD] + [f"g{i}" for i in range(40)]}))
    cases.append(Case("groupList", {"groups": []}))
    cases.append(Case("consumerIdList", {"ids": ["127.0.0.1@1", AWKWARD]}))
    cases.append(Case("consumeQueue", {"maxQueueIndex": 10, "minQueueIndex": 0,
                                       "entries": [[0, 200, 2598981], [200, 180, -1], [2**40, 4, 0]]}))
    cases.append(Case("consumeQueue", {"maxQueueIndex": 0, "minQueueIndex": 0, "entries": []}))
    cases.append(Case("dataVersion", {"dataVersion": [1, 1700000000000]}))
    return cases


# --- randomised cases -------------------------------------------------------------------------------------------

NAMES = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
LONGS = st.integers(-2**63, 2**63 - 1)
INTS = st.integers(-2**31, 2**31 - 1)


@st.composite
def random_case(draw) -> Case:
    kind = draw(st.sampled_from(["namesrv", "topics", "offsets", "groups", "kvtable", "topicStats", "consumeStats",
                                 "consumerConnection", "groupList", "delay"]))
    if kind == "namesrv":
        names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
        regs = []
        for name in names:
            topics = [_topic(t, draw(st.integers(1, 16)), draw(st.sampled_from([2, 4, 6, 7])))
                      for t in draw(st.lists(NAMES, max_size=6, unique=True))]
            for broker_id in draw(st.lists(st.integers(0, 40), min_size=1, max_size=3, unique=True)):
                regs.append(_registration(draw(NAMES), draw(NAMES), name, broker_id, topics, draw(st.integers(0, 3))))
        routes = sorted({t["topicName"] for r in regs for t in r["topics"]})[:8] + [draw(NAMES)]
        return Case(kind, {"registrations": regs, "unregistrations": [], "routes": routes})
    if kind == "topics":
        names = draw(st.lists(NAMES, max_size=40, unique=True))
        topics = [_topic(n, draw(st.integers(0, 1024)), draw(st.integers(0, 15)), draw(INTS), draw(st.booleans()),
                         draw(st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]))) for n in names]
        return Case(kind, {"topics": topics, "dataVersion": [draw(LONGS), draw(LONGS)]})
    if kind == "offsets":
        commits = draw(st.lists(st.tuples(NAMES, NAMES, st.integers(0, 2**31 - 1) | st.integers(0, 70), LONGS),
                                max_size=60))
        return Case(kind, {"commits": commits})
    if kind == "groups":
        names = draw(st.lists(NAMES, max_size=30, unique=True))
        groups = [{"groupName": n, "consumeEnable": draw(st.booleans()), "retryQueueNums": draw(INTS),
                   "brokerId": draw(LONGS), "whichBrokerWhenConsumeSlowly": draw(LONGS)} for n in names]
        return Case(kind, {"groups": groups, "dataVersion": [draw(LONGS), draw(LONGS)]})
    if kind == "kvtable":
        entries = draw(st.lists(st.tuples(NAMES, st.text(max_size=20)), max_size=120, unique_by=lambda e: e[0]))
        return Case(kind, {"entries": entries, "initialCapacity": draw(st.sampled_from([16, 64]))})
    if kind in ("topicStats", "consumeStats"):
        queues = draw(st.lists(st.tuples(NAMES, NAMES, INTS, LONGS, LONGS, LONGS), max_size=40,
                               unique_by=lambda q: q[:3]))
        spec = {"queues": queues}
        if kind == "consumeStats":
            spec["consumeTps"] = draw(st.floats(allow_nan=False, allow_infinity=False))
        return Case(kind, spec)
    if kind == "consumerConnection":
        subs = [{"topic": t, "subString": draw(NAMES), "tagsSet": draw(st.lists(NAMES, max_size=8, unique=True)),
                 "codeSet": draw(st.lists(INTS, max_size=8, unique=True)), "subVersion": draw(LONGS),
                 "expressionType": draw(st.sampled_from(["TAG", "SQL92"])), "classFilterMode": draw(st.booleans())}
                for t in draw(st.lists(NAMES, max_size=20, unique=True))]
        conn = [draw(NAMES), draw(NAMES), draw(st.sampled_from(["JAVA", "CPP", "GO", "PYTHON"])), draw(INTS)]
        return Case(kind, {"connections": [conn], "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                           "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptions": subs})
    if kind == "groupList":
        return Case(kind, {"groups": draw(st.lists(NAMES, max_size=60, unique=True))})
    levels = draw(st.lists(st.integers(1, 200), max_size=60, unique=True))
    return Case("delay", {"offsets": [[lvl, draw(LONGS)] for lvl in levels]})


def random_cases(count: int) -> list[Case]:
    drawn: list[Case] = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(random_case())
    def collect(case: Case) -> None:
        drawn.append(case)

    collect()
    return drawn


# --- the comparison ---------------------------------------------------------------------------------------------

def java_texts(cases: list[Case], tmp_path) -> dict[int, dict[str, str | None]]:
    """Run FastjsonBodies once over every case; ``id → {name: text}``."""
    path = tmp_path / "cases.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i, case in enumerate(cases):
            f.write(json.dumps({"id": i, "kind": case.kind, **case.spec}, ensure_ascii=False) + "\n")
    run = run_java("FastjsonBodies", [str(path)], log_dir=tmp_path / "java", timeout_s=180)
    return {line["id"]: line["texts"] for line in run.lines}


def assert_same_bytes(cases: list[Case], tmp_path) -> int:
    """Every text the stub wrote equals Java's, byte for byte; returns the number of texts compared."""
    java = java_texts(cases, tmp_path)
    assert len(java) == len(cases), f"FastjsonBodies answered {len(java)} of {len(cases)} cases"
    bad, compared = [], 0
    for i, case in enumerate(cases):
        case.stub = stub_texts(case, tmp_path)
        for name, text in case.stub.items():
            compared += 1
            expected = java[i].get(name)
            if text != expected:
                at = next((j for j, (a, b) in enumerate(zip(text or "", expected or "", strict=False)) if a != b),
                          min(len(text or ""), len(expected or "")))
                bad.append(f"case {i} ({case.kind}) {name}: first difference at char {at}\n"
                           f"  stub: {(text or '')[max(0, at - 60):at + 60]!r}\n"
                           f"  java: {(expected or '')[max(0, at - 60):at + 60]!r}")
    assert not bad, f"{len(bad)} of {compared} texts differ from real fastjson:\n" + "\n".join(bad[:8])
    return compared


def test_every_body_type_is_byte_identical_to_real_fastjson(tmp_path):
    cases = fixed_cases()
    assert {c.kind for c in cases} == {"namesrv", "topics", "offsets", "groups", "delay", "kvtable", "topicStats",
                                       "consumeStats", "consumerConnection", "groupList", "consumerIdList",
                                       "consumeQueue", "dataVersion"}
    assert assert_same_bytes(cases, tmp_path) > 60


def test_randomised_contents_are_byte_identical_to_real_fastjson(tmp_path):
    cases = random_cases(300)
    assert len({c.kind for c in cases}) == 10
    assert assert_same_bytes(cases, tmp_path) > 300
