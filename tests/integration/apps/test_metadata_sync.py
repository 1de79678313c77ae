"""Issue 53: the broker metadata synced into the lake beside bronze, as a RocketMQ slave's SlaveSynchronize syncs it
(docs/metadata.md). Real broker-stub masters, ``hareplica run bronze`` (in process on the shared Spark session, and as
a process of its own for the SIGKILL), the four tables read back with deltalake and with Spark's format("delta").

- A topic created with UPDATE_AND_CREATE_TOPIC, a subscription group (created by a pull, autoCreateSubscriptionGroup)
  and a group's offsets committed with UPDATE_CONSUMER_OFFSET: the rows of the first snapshot; an unchanged snapshot
  lands no row; an advanced offset lands exactly its row; the lag query and ``hareplica status`` agree.
- The driver SIGKILLed between the topic table's commit and the next table's (fault point after-metadata-commit): the
  restart lands no snapshot twice.
- An ACL master: the source's accessKey/secretKey sign the requests and every table lands; unsigned, each refused
  request is one WARNING line, once.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from connector.delta.faults import FAULT_INJECTION_ENV, FAULT_MARKER_ENV
from connector.delta.metadata_tables import METADATA_TABLES, txn_app_id
from connector.delta.reading import read_table
from connector.protocol.acl import AclCredentials
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.storage import store
from streaming_apps.apps import AppConfig, run_app
from streaming_apps.metadata_sync import MetadataSync, SyncTarget, targets_of
from streaming_apps.spark_session import register_data_sources
from streaming_apps.status import collect_status, prometheus_text
from tests.support.brokers import pull, queue_offset, remoting_request
from tests.support.fixtures import namesrv_factory  # noqa: F401 - fixture: name-server stubs in tmp_path
from tests.support.processes import kill_at_marker

pytestmark = pytest.mark.spark

TOPIC = "MetaOrders"
GROUP = "meta_cg"
APP_TIMEOUT_S = 240
KILL_TIMEOUT_S = 180


def create_topic(addr: str, topic: str, queues: int = 4, credentials: AclCredentials | None = None) -> None:
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
    if credentials is not None:
        credentials.sign(cmd.ext_fields, cmd.body)
    resp = remoting_request(addr, cmd)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def commit_offset(addr: str, group: str, topic: str, queue_id: int, offset: int,
                  credentials: AclCredentials | None = None) -> None:
    """UPDATE_CONSUMER_OFFSET (15), as a consumer's offset store sends it."""
    cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset})
    if credentials is not None:
        credentials.sign(cmd.ext_fields, cmd.body)
    resp = remoting_request(addr, cmd)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def send(addr: str, topic: str, n: int, credentials: AclCredentials | None = None) -> None:
    from connector.client.producer import Producer

    with Producer(addr, "meta-test", credentials=credentials) as producer:
        for i in range(n):
            assert producer.send(topic, f"meta-{i}".encode()).send_status == "SEND_OK"


def rows(tables_root: Path, name: str) -> list[dict]:
    path = tables_root / name
    return read_table(str(path)).to_pylist() if (path / "_delta_log").is_dir() else []


@pytest.fixture
def app_spark(spark):
    register_data_sources(spark)
    return spark


@pytest.fixture
def master(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=64 * 1024)
    create_topic(broker.remoting_addr, TOPIC)
    send(broker.remoting_addr, TOPIC, 40)
    resp, _ = pull(broker.remoting_addr, TOPIC, 0, 0, group=GROUP)  # creates the subscription group
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return broker


def test_offsets_advancing_across_snapshots_land_the_right_rows_read_by_both_engines(app_spark, master, tmp_path):
    addr = master.remoting_addr
    max0 = queue_offset(addr, TOPIC, 0)
    assert max0 > 3
    commit_offset(addr, GROUP, TOPIC, 0, 2)
    commit_offset(addr, GROUP, TOPIC, 1, 0)
    cfg = AppConfig(app="bronze", brokers=f"broker-a={master.ha_addr}", workdir=tmp_path, trigger="available-now")
    root = Path(cfg.tables_root)

    result = run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert result.rows == 40
    topics = {r["topicName"]: r for r in rows(root, "broker_topic_configs")}
    assert {(t["readQueueNums"], t["writeQueueNums"], t["perm"], t["order"], t["deleted"])
            for name, t in topics.items() if name == TOPIC} == {(4, 4, 6, False, False)}
    assert json.loads(topics[TOPIC]["config"])["topicName"] == TOPIC
    assert "TBW102" in topics  # every topic of the master, the system ones too
    groups = {r["groupName"]: r for r in rows(root, "broker_subscription_groups")}
    assert groups[GROUP]["retryMaxTimes"] == 16 and groups[GROUP]["consumeEnable"] is True
    offsets = rows(root, "broker_consumer_offsets")
    max1 = queue_offset(addr, TOPIC, 1)
    assert sorted((r["group"], r["topic"], r["queueId"], r["offset"], r["maxOffset"], r["snapshotId"])
                  for r in offsets) == [(GROUP, TOPIC, 0, 2, max0, 1), (GROUP, TOPIC, 1, 0, max1, 1)]
    assert all(r["broker"] == "broker-a" for t in METADATA_TABLES for r in rows(root, t.name))
    assert rows(root, "broker_delay_offsets") == []  # no delayed message yet: the table exists, empty
    assert store.delta_table(str(root / "broker_delay_offsets")).transaction_version(txn_app_id("broker-a")) == 1
    counts = {t.name: len(rows(root, t.name)) for t in METADATA_TABLES}

    # an unchanged master: a second run lands no row
    run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert {t.name: len(rows(root, t.name)) for t in METADATA_TABLES} == counts

    # the group consumed further: exactly its row, in a later snapshot
    commit_offset(addr, GROUP, TOPIC, 0, max0)
    run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    offsets = rows(root, "broker_consumer_offsets")
    new = [r for r in offsets if r["snapshotId"] > 1]
    assert [(r["queueId"], r["offset"], r["maxOffset"]) for r in new] == [(0, max0, max0)]
    assert {t.name: len(rows(root, t.name)) for t in METADATA_TABLES} == {**counts, "broker_consumer_offsets": 3}

    # Spark's own Delta reader reads the same rows
    def untimed(row: dict) -> tuple:  # Spark gives timestamps in the session's zone, without one
        return tuple(sorted((k, v) for k, v in row.items() if k != "snapshotTime"))

    for table in METADATA_TABLES:
        df = app_spark.read.format("delta").load(str(root / table.name))
        assert df.schema.fieldNames() == table.schema.names
        assert sorted(untimed(r.asDict()) for r in df.collect()) == sorted(untimed(r) for r in rows(root, table.name))

    # the documented lag query (docs/metadata.md "Consumer lag"): per queue over time
    app_spark.read.format("delta").load(str(root / "broker_consumer_offsets")).createOrReplaceTempView(
        "broker_consumer_offsets")
    lag = app_spark.sql("""
        SELECT snapshotTime, `group`, topic, queueId, maxOffset - `offset` AS lag
        FROM broker_consumer_offsets WHERE NOT deleted ORDER BY snapshotTime, queueId""").collect()
    assert [(r["queueId"], r["lag"]) for r in lag] == [(0, max0 - 2), (1, max1), (0, 0)]

    # hareplica status: the lag now per group and topic, and its gauge
    status = collect_status([], tables_root=root)
    assert [(e["broker"], e["group"], e["topic"], e["lag"], e["queues"]) for e in status["consumerLag"]] == [
        ("broker-a", GROUP, TOPIC, max1, 2)]
    assert (f'hareplica_consumer_lag_messages{{broker="broker-a",group="{GROUP}",topic="{TOPIC}"}} '
            f"{float(max1)}") in prometheus_text(status)


def test_driver_killed_between_two_tables_commits_lands_no_snapshot_twice(app_spark, master, tmp_path):
    addr = master.remoting_addr
    commit_offset(addr, GROUP, TOPIC, 0, 3)
    workdir = tmp_path / "work"
    marker = tmp_path / "fault.json"
    log_path = tmp_path / "bronze.out"
    env = {**os.environ, FAULT_INJECTION_ENV: "after-metadata-commit:1:broker_topic_configs",
           FAULT_MARKER_ENV: str(marker)}
    cmd = [sys.executable, "-m", "streaming_apps.cli", "--log-level", "INFO", "run", "bronze", "--brokers",
           f"broker-a={master.ha_addr}", "--workdir", str(workdir), "--trigger", "1s", "--maintenance-every", "0"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    point = json.loads(kill_at_marker(proc, marker, log_path, what="the topic table's commit of snapshot 1",
                                      timeout_s=KILL_TIMEOUT_S))
    assert point["table"].endswith("broker_topic_configs") and point["batchId"] == 1
    root = workdir / "tables"
    first = rows(root, "broker_topic_configs")
    assert first and {r["snapshotId"] for r in first} == {1}
    assert rows(root, "broker_consumer_offsets") == []  # killed before its commit

    cfg = AppConfig(app="bronze", brokers=f"broker-a={master.ha_addr}", workdir=workdir, trigger="available-now")
    run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    topics = rows(root, "broker_topic_configs")
    assert sorted(map(str, topics)) == sorted(map(str, first)), "the restart landed the topics again"
    assert max(Counter(r["topicName"] for r in topics).values()) == 1
    offsets = rows(root, "broker_consumer_offsets")
    assert [(r["snapshotId"], r["queueId"], r["offset"]) for r in offsets] == [(2, 0, 3)]
    for table in METADATA_TABLES:
        dt = store.delta_table(str(root / table.name))
        assert dt.transaction_version(txn_app_id("broker-a")) == (1 if table.name == "broker_topic_configs" else 2)


PLAIN_ACL = """\
accounts:
  - accessKey: reader1
    secretKey: reader-secret-123
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    admin: true
"""
READER = AclCredentials("reader1", "reader-secret-123")


def test_acl_master_signed_requests_land_every_table_unsigned_each_refusal_is_one_line_once(
        app_spark, broker_factory, tmp_path, caplog):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    broker = broker_factory(aclEnable="true", rocketmqHome=str(home))
    create_topic(broker.remoting_addr, TOPIC, credentials=READER)
    send(broker.remoting_addr, TOPIC, 10, credentials=READER)
    commit_offset(broker.remoting_addr, GROUP, TOPIC, 0, 1, credentials=READER)

    # unsigned: every request refused, each named once in one WARNING line; nothing lands, nothing raises
    unsigned = MetadataSync(str(tmp_path / "unsigned"), lambda: [SyncTarget("broker-a", broker.remoting_addr)])
    with caplog.at_level(logging.WARNING, logger="streaming_apps.metadata_sync"):
        unsigned.sync_once()
        unsigned.sync_once()
    lines = [r.getMessage() for r in caplog.records if r.name == "streaming_apps.metadata_sync"]
    refused = [line for line in lines if "GET_ALL_CONSUMER_OFFSET" in line]
    assert len(refused) == 1 and "\n" not in refused[0], lines
    assert "broker-a" in refused[0] and "AclException: No accessKey is configured" in refused[0]
    assert len(lines) == 4, lines  # the four requests, each once over two rounds
    assert unsigned.rounds == 2 and not (tmp_path / "unsigned").exists()

    # signed with the source's accessKey/secretKey: bronze and every table land
    cfg = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=tmp_path / "signed",
                    trigger="available-now", source_options={"accessKey": "reader1", "secretKey": "reader-secret-123"})
    assert run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S).rows == 10
    root = Path(cfg.tables_root)
    assert [(r["group"], r["queueId"], r["offset"]) for r in rows(root, "broker_consumer_offsets")] == [(GROUP, 0, 1)]
    assert TOPIC in {r["topicName"] for r in rows(root, "broker_topic_configs")}
    assert rows(root, "broker_subscription_groups")


def test_namesrv_route_gives_the_masters_and_an_unreachable_master_is_one_line_and_asked_again(
        broker_factory, namesrv_factory, tmp_path, caplog):  # noqa: F811 - the fixture imported above
    from tests.support.brokers import free_port, wait_for

    ns = namesrv_factory()
    master = broker_factory("master", namesrvAddr=ns.addr)
    broker_factory("slave", brokerRole="SLAVE", brokerId=1, namesrvAddr=ns.addr)
    targets = targets_of({"namesrvAddr": ns.addr})
    wait_for(lambda: targets() == [SyncTarget("broker-a", master.remoting_addr)],
             "the route to name broker-a's master only", timeout_s=30, interval_s=0.2)
    sync = MetadataSync(str(tmp_path / "tables"), targets)
    sync.sync_once()
    assert sync.synced == {"broker-a": 1}
    assert "TBW102" in {r["topicName"] for r in rows(tmp_path / "tables", "broker_topic_configs")}

    gone = SyncTarget("broker-b", f"127.0.0.1:{free_port()}")
    down = MetadataSync(str(tmp_path / "down"), lambda: [gone], interval_ms=50)
    with caplog.at_level(logging.WARNING, logger="streaming_apps.metadata_sync"):
        down.start()
        wait_for(lambda: down.rounds >= 3, "three rounds against the unreachable master", timeout_s=30)
        down.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "streaming_apps.metadata_sync"]
    assert len(lines) == 1 and "broker-b" in lines[0] and "unreachable, asked again every 50 ms" in lines[0], lines
    assert not down.synced


def test_one_request_failing_is_one_line_and_the_other_tables_land(broker_factory, tmp_path, caplog):
    """A broker whose GET_ALL_DELAY_OFFSET answer is not delay offsets (a stub slave serves its delayOffset.json as
    it is when the file is not delay offsets): that request is one WARNING line, once; the three others land."""
    broker = broker_factory("slave", brokerRole="SLAVE", brokerId=1)
    (broker.store_dir / "config").mkdir(parents=True, exist_ok=True)
    (broker.store_dir / "config" / "delayOffset.json").write_text("not delay offsets")
    root = tmp_path / "tables"
    sync = MetadataSync(str(root), lambda: [SyncTarget("broker-a", broker.remoting_addr)])
    with caplog.at_level(logging.WARNING, logger="streaming_apps.metadata_sync"):
        sync.sync_once()
        sync.sync_once()
    lines = [r.getMessage() for r in caplog.records if r.name == "streaming_apps.metadata_sync"]
    assert len(lines) == 1 and "GET_ALL_DELAY_OFFSET" in lines[0] and "broker-a" in lines[0], lines
    assert "answer is not JSON" in lines[0]
    assert rows(root, "broker_topic_configs") and rows(root, "broker_subscription_groups")
    assert (root / "broker_consumer_offsets" / "_delta_log").is_dir()
    assert not (root / "broker_delay_offsets").exists()
    assert sync.synced == {"broker-a": 2}


def test_two_writers_of_one_broker_set_never_land_one_snapshot_id_twice_and_both_go_on(master, tmp_path):
    """Two syncs of the same set into the same tables (two bronze runs): a snapshotId the other one landed first is
    skipped (its txn is in the table), and the one that lost reads the tables again and lands the next id."""
    addr = master.remoting_addr
    root = tmp_path / "tables"
    a, b = (MetadataSync(str(root), lambda: [SyncTarget("broker-a", addr)]) for _ in range(2))
    commit_offset(addr, GROUP, TOPIC, 0, 1)
    a.sync_once()  # snapshot 1
    b.sync_once()  # reads the tables: nothing changed since 1; its next id is 2
    commit_offset(addr, GROUP, TOPIC, 0, 2)
    a.sync_once()  # snapshot 2
    commit_offset(addr, GROUP, TOPIC, 0, 3)
    b.sync_once()  # id 2 is taken: nothing lands
    b.sync_once()  # the tables read again: snapshot 3
    landed = sorted((r["snapshotId"], r["offset"]) for r in rows(root, "broker_consumer_offsets")
                    if r["group"] == GROUP and r["queueId"] == 0)
    assert landed == [(1, 1), (2, 2), (3, 3)]
