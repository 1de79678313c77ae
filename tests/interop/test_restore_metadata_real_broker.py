"""A real RocketMQ 4.9.8 broker started on a store restored from the lake serves every topic with its queue numbers
and permission, every subscription group, and each consumer group resumes from its committed offset (docs/restore.md
"The broker's metadata", "Disaster recovery: a new master").

A real 4.9.8 master gets topics from ``mqadmin updateTopic`` (6 and 3 queues, one read-only), a subscription group
from ``mqadmin updateSubGroup``; two real 4.9.8 consumer groups (lite pull) consume part of the
messages and stop, which commits their offsets; scheduled messages are sent and still parked. ``hareplica run
bronze`` (available-now, system topics included) lands the CommitLog and, with its metadata sync, the master's
metadata; the master and its store are destroyed; ``hareplica restore`` writes a new store; a real 4.9.8 broker that
creates neither topics nor groups by itself starts on it.
"""

from __future__ import annotations

import shutil
from collections import defaultdict

import pytest

from connector.client.producer import Producer
from connector.protocol.remoting import RequestCode
from tests.faults.test_cli_errors import hareplica
from tests.interop.java_fixtures import wait_for_route
from tests.interop.peers import FILE_SIZE, metadata_table
from tests.support.java_tools import run_java
from tests.support.jvm_peers import RealBroker, killed_at_exit
from tests.support.mqadmin import run_mqadmin

BROKER = "broker-a"
ORDERS, AUDIT, READ_ONLY = "RtOrders", "RtAudit", "RtReadOnly"
QUEUES = {ORDERS: 6, AUDIT: 3}
SENT = {ORDERS: 60, AUDIT: 30}  # messages per topic, spread evenly over the queues
CONSUMED = {ORDERS: ("cg_orders", 25), AUDIT: ("cg_audit", 12)}  # group, messages to consume before the loss
SUB_GROUP = "rt_sub_group"
DELAYED = 4  # scheduled messages of ORDERS, delay level 6 (2 min): still parked when the master is destroyed
DELAY_LEVEL = 6


def _consume(namesrv: str, topic: str, group: str, count: int, log_dir, timeout_s: int = 90) -> list[dict]:
    """``count`` deliveries (or a few more: a poll's batch is printed whole) of ``topic`` to a real 4.9.8 lite pull
    consumer of ``group``, which commits what it handed over and shuts down (its offsets persisted to the
    broker)."""
    run = run_java("JavaConsumer", ["mode=litepull", f"namesrv={namesrv}", f"topic={topic}", f"group={group}",
                                    f"count={count}", f"timeoutMs={timeout_s * 1000}", "commitSync=true"],
                   props={"rocketmq.client.rebalance.waitInterval": "1000"}, log_dir=log_dir, timeout_s=timeout_s + 30,
                   check=False)
    assert run.returncode == 0 and len(run.lines) >= count, run.describe()
    return run.lines


def _by_queue(lines: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for line in lines:
        out[line["queueId"]].append(line["queueOffset"])
    return {q: sorted(v) for q, v in out.items()}


@pytest.mark.spark
def test_a_real_broker_on_a_restored_store_gives_back_topics_groups_and_where_each_group_was(real_namesrv, tmp_path):
    ns = real_namesrv.addr
    master = RealBroker.start(tmp_path / "master", namesrvAddr=ns, brokerName=BROKER,
                              mappedFileSizeCommitLog=FILE_SIZE, autoCreateTopicEnable="false")
    with killed_at_exit(master):
        addr = master.remoting_addr
        for topic, queues, perm in ((ORDERS, 6, 6), (AUDIT, 3, 6), (READ_ONLY, 2, 4)):
            run_mqadmin(["updateTopic", "-b", addr, "-t", topic, "-r", str(queues), "-w", str(queues),
                         "-p", str(perm)], namesrv=ns, workdir=tmp_path / f"mqadmin-{topic}")
        run_mqadmin(["updateSubGroup", "-b", addr, "-g", SUB_GROUP, "-q", "2", "-r", "5"], namesrv=ns,
                    workdir=tmp_path / "mqadmin-group")
        for topic in QUEUES:
            wait_for_route(ns, topic)
        with Producer(addr, "rt_pg") as producer:
            futures = [producer.send_async(topic, f"{topic}-{i}".encode(), tags="t", queue_id=i % QUEUES[topic])
                       for topic in QUEUES for i in range(SENT[topic])]
            assert all(f.result(timeout=30).send_status == "SEND_OK" for f in futures)
        consumed = {}
        for topic, (group, count) in CONSUMED.items():
            consumed[topic] = _by_queue(_consume(ns, topic, group, count, tmp_path / f"consumer-{group}"))
        committed = metadata_table(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)["offsetTable"]
        for topic, (group, _) in CONSUMED.items():  # lite pull commits what it handed over: a prefix per queue
            offsets = {int(q): int(o) for q, o in committed[f"{topic}@{group}"].items()}
            assert {q: list(range(o)) for q, o in offsets.items() if o} == consumed[topic], (topic, offsets)
        with Producer(addr, "rt_pg") as producer:
            parked = {producer.send(ORDERS, f"delayed-{i}".encode(), queue_id=i % QUEUES[ORDERS],
                                    delay_level=DELAY_LEVEL).msg_id for i in range(DELAYED)}
        topics_before = metadata_table(addr, RequestCode.GET_ALL_TOPIC_CONFIG)["topicConfigTable"]
        groups_before = metadata_table(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)["subscriptionGroupTable"]
        bronze = hareplica("run", "bronze", "--workdir", str(tmp_path / "lake"), "--trigger", "available-now",
                           "--brokers", f"{BROKER}={master.ha_addr}/{addr}", "--option",
                           "includeSystemTopics=true", cwd=tmp_path)
        assert bronze.returncode == 0, bronze.stderr[-3000:]
        master.kill9()
    shutil.rmtree(master.store_dir)  # the disaster: the master and its disks are gone

    table = str(tmp_path / "lake" / "tables" / "bronze")
    store = tmp_path / "restored" / "store"
    restore = hareplica("restore", table, "--broker-name", BROKER, "--store-dir", str(store), cwd=tmp_path)
    assert restore.returncode == 0, restore.stdout + restore.stderr[-3000:]
    assert "metadata of snapshot" in restore.stdout and "0 capped" in restore.stdout, restore.stdout
    broker = RealBroker.start(tmp_path / "restored", namesrvAddr=ns, brokerName=BROKER, storePathRootDir=str(store),
                              mappedFileSizeCommitLog=FILE_SIZE, autoCreateTopicEnable="false",
                              autoCreateSubscriptionGroup="false")
    with killed_at_exit(broker):
        topics = metadata_table(broker.remoting_addr, RequestCode.GET_ALL_TOPIC_CONFIG)["topicConfigTable"]
        for topic, queues, perm in ((ORDERS, 6, 6), (AUDIT, 3, 6), (READ_ONLY, 2, 4)):
            assert (topics[topic]["readQueueNums"], topics[topic]["writeQueueNums"], topics[topic]["perm"]) == (
                queues, queues, perm), topics[topic]
        assert {name: topics[name] for name in topics_before} == topics_before  # every topic, as the master had it
        groups = metadata_table(broker.remoting_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert {name: groups["subscriptionGroupTable"][name] for name in groups_before} == groups_before
        assert (groups_before[SUB_GROUP]["retryQueueNums"], groups_before[SUB_GROUP]["retryMaxTimes"]) == (2, 5)
        for topic in QUEUES:
            wait_for_route(ns, topic)
        for topic, (group, _) in CONSUMED.items():
            unread = {(q, o) for q in range(QUEUES[topic]) for o in range(SENT[topic] // QUEUES[topic])
                      if o not in consumed[topic].get(q, [])}
            late = DELAYED if topic == ORDERS else 0  # the parked messages come due on the new broker
            lines = _consume(ns, topic, group, len(unread) + late, tmp_path / f"after-{group}", timeout_s=240)
            assert len(lines) == len(unread) + late, [(x["queueId"], x["queueOffset"]) for x in lines]
            delivered = [x for x in lines if x["msgId"] in parked]
            assert {x["msgId"] for x in delivered} == (parked if late else set())
            assert sorted((x["queueId"], x["queueOffset"]) for x in lines if x not in delivered) == sorted(unread)
