"""Restore gives back the broker's metadata: ``config/topics.json``, ``subscriptionGroup.json`` and
``consumerOffset.json`` from the metadata tables beside the bronze table, as RocketMQ 4.9.8 writes them
(docs/restore.md "The broker's metadata").

The bronze table is the golden 4.9.8 CommitLog's rows (tests/integration/restore/conftest.py); the metadata tables are
written with deltalake in the contract's schemas (connector/delta/metadata_tables.py), a commit per snapshot, as the
metadata sync lands them. The expected texts are literal: fastjson's pretty text (tabs, bare Integer keys, the
ConcurrentHashMap order the shared encoders compute; those encoders are checked against real fastjson by
tests/interop/test_fastjson_bodies.py).
"""

from __future__ import annotations

import filecmp
import json
import os
from datetime import timedelta

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from connector.delta.metadata_tables import (
    BROKER_CONSUMER_OFFSETS,
    BROKER_SUBSCRIPTION_GROUPS,
    BROKER_TOPIC_CONFIGS,
    MetadataTable,
)
from connector.restore import restore_commitlog
from streaming_apps.cli import main

BROKER = "broker-a"


def _topic(name: str, queues: int, perm: int = 6) -> dict:
    config = {"order": False, "perm": perm, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
              "topicName": name, "topicSysFlag": 0, "writeQueueNums": queues}
    return {"topicName": name, "readQueueNums": queues, "writeQueueNums": queues, "perm": perm,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
            "config": json.dumps(config, separators=(",", ":")), "deleted": False}


def _group(name: str, broadcast: bool = True, config: bool = True) -> dict:
    row = {"groupName": name, "consumeEnable": True, "consumeFromMinEnable": True, "consumeBroadcastEnable": broadcast,
           "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
           "notifyConsumerIdsChangedEnable": True, "deleted": False}
    row["config"] = json.dumps({k: v for k, v in row.items() if k != "deleted"}, separators=(",", ":")) \
        if config else None
    return row


def _offset(group: str, topic: str, queue: int, offset: int) -> dict:
    return {"group": group, "topic": topic, "queueId": queue, "offset": offset, "maxOffset": None, "deleted": False}


def _land(root, table: MetadataTable, snapshot: int, at, rows: list[dict]) -> None:
    if rows:
        full = [{"broker": BROKER, "snapshotId": snapshot, "snapshotTime": at, **row} for row in rows]
        write_deltalake(str(root / table.name), pa.Table.from_pylist(full, schema=table.schema), mode="append")


@pytest.fixture(scope="module")
def lake(rows, tmp_path_factory):
    """(bronze table path, the snapshots' times): the golden rows as bronze and three snapshots beside it — the
    first a second after the first record, the second ten seconds later (a topic deleted, one made read-only, one
    created, a group changed, offsets advanced, some beyond what the log holds), the third a minute after the last
    record (an offset beyond the log)."""
    root = tmp_path_factory.mktemp("lake")
    write_deltalake(str(root / "bronze"), rows)
    stamps = rows.column("storeTimestamp").to_pylist()
    t1 = stamps[0] + timedelta(seconds=1)
    t2 = t1 + timedelta(seconds=10)
    t3 = stamps[-1] + timedelta(seconds=60)
    _land(root, BROKER_TOPIC_CONFIGS, 1, t1, [_topic("FixOrders611", 4), _topic("Q8Topic_11", 8),
                                              _topic("tOqx", 4), _topic("OldTopic", 2)])
    _land(root, BROKER_SUBSCRIPTION_GROUPS, 1, t1, [_group("cg_a"), _group("cg_b", config=False)])
    _land(root, BROKER_CONSUMER_OFFSETS, 1, t1, [
        _offset("cg_a", "FixOrders611", q, o) for q, o in enumerate((10, 5, 3, 7))] + [
        _offset("cg_b", "Q8Topic_11", 0, 4)])
    old = _topic("OldTopic", 2)
    old["deleted"] = True
    _land(root, BROKER_TOPIC_CONFIGS, 2, t2, [old, _topic("Q8Topic_11", 8, perm=4), _topic("NewTopic", 2)])
    _land(root, BROKER_SUBSCRIPTION_GROUPS, 2, t2, [_group("cg_b", broadcast=False, config=False)])
    _land(root, BROKER_CONSUMER_OFFSETS, 2, t2, [
        _offset("cg_a", "FixOrders611", 0, 40), _offset("cg_b", "Q8Topic_11", 1, 13),
        _offset("cg_b", "Q8Topic_11", 7, 30), _offset("cg_a", "NewTopic", 0, 5)])
    _land(root, BROKER_CONSUMER_OFFSETS, 3, t3, [_offset("cg_a", "FixOrders611", 0, 99)])
    return str(root / "bronze"), (t1, t2, t3)


def _ms(at) -> int:
    return int(at.timestamp() * 1000)


def _config(store, name: str) -> str:
    return (store / "config" / name).read_text(encoding="utf-8")


def _topic_text(name: str, queues: int, perm: int = 6) -> str:
    return (f'\t\t"{name}":{{\n\t\t\t"order":false,\n\t\t\t"perm":{perm},\n\t\t\t"readQueueNums":{queues},\n'
            f'\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"{name}",\n\t\t\t"topicSysFlag":0,\n'
            f'\t\t\t"writeQueueNums":{queues}\n\t\t}}')


def _group_text(name: str, broadcast: bool = True) -> str:
    return (f'\t\t"{name}":{{\n\t\t\t"brokerId":0,\n\t\t\t"consumeBroadcastEnable":{str(broadcast).lower()},\n'
            f'\t\t\t"consumeEnable":true,\n\t\t\t"consumeFromMinEnable":true,\n\t\t\t"groupName":"{name}",\n'
            '\t\t\t"notifyConsumerIdsChangedEnable":true,\n\t\t\t"retryMaxTimes":16,\n\t\t\t"retryQueueNums":1,\n'
            '\t\t\t"whichBrokerWhenConsumeSlowly":1\n\t\t}')


def _version_text(counter: int, at) -> str:
    return f'\t"dataVersion":{{\n\t\t"counter":{counter},\n\t\t"timestamp":{_ms(at)}\n\t}},\n'


def test_the_whole_log_restores_with_the_last_snapshot_and_offsets_capped_to_its_consume_queues(lake, fixture_dir,
                                                                                                 tmp_path):
    table, (_, t2, t3) = lake
    plan = restore_commitlog(table, BROKER, tmp_path / "store")
    for name in sorted(os.listdir(fixture_dir / "commitlog")):  # the CommitLog as before, byte for byte
        assert filecmp.cmp(fixture_dir / "commitlog" / name, tmp_path / "store" / "commitlog" / name, shallow=False)
    store = tmp_path / "store"
    # the range runs to the table's last record: the last snapshot (a minute after it) holds; OldTopic was deleted
    assert _config(store, "topics.json") == (
        "{\n" + _version_text(2, t2) + '\t"topicConfigTable":{\n' + ",\n".join(
            [_topic_text("FixOrders611", 4), _topic_text("tOqx", 4), _topic_text("NewTopic", 2),
             _topic_text("Q8Topic_11", 8, perm=4)]) + "\n\t}\n}")
    assert _config(store, "subscriptionGroup.json") == (
        "{\n" + _version_text(2, t2) + '\t"subscriptionGroupTable":{\n' + ",\n".join(
            [_group_text("cg_a"), _group_text("cg_b", broadcast=False)]) + "\n\t}\n}")
    # capped: FixOrders611 queue 0 (99 → 43 entries), Q8Topic_11 queue 7 (30 → 9), NewTopic (no record: 5 → 0);
    # Q8Topic_11 queue 1 at its end (13) stays
    assert _config(store, "consumerOffset.json") == (
        '{\n\t"offsetTable":{\n\t\t"FixOrders611@cg_a":{0:43,1:5,2:3,3:7\n\t\t},\n'
        '\t\t"Q8Topic_11@cg_b":{0:4,1:13,7:9\n\t\t},\n\t\t"NewTopic@cg_a":{0:0\n\t\t}\n\t}\n}')
    assert _config(store, "delayOffset.json") == '{\n\t"offsetTable":{1:2,2:2,3:4\n\t}\n}'  # as before: bronze's
    m = plan.metadata
    assert (m.snapshot_id, m.snapshot_time_ms, m.topics, m.groups, m.offsets, m.capped) == (3, _ms(t3), 4, 2, 8, 3)
    assert sorted(os.listdir(store / "config")) == ["consumerOffset.json", "delayOffset.json", "subscriptionGroup.json",
                                                    "topics.json"]


def test_a_range_ending_earlier_restores_the_snapshot_before_its_end(lake, rows, tmp_path, capsys):
    table, (t1, _, _) = lake
    end = rows.column("storeTimestamp").to_pylist()[300]  # 4 s after the first snapshot, 6 s before the second
    assert main(["restore", table, "--broker-name", BROKER, "--store-dir", str(tmp_path / "s"),
                 "--to-timestamp", str(_ms(end))]) == 0
    out = capsys.readouterr().out
    assert "metadata of snapshot 1 (2026-11-22T06:41:53.271+00:00): 4 topic(s), 2 subscription group(s), 5 consumer " \
           "offset(s) (0 capped to the restored ConsumeQueues) into topics.json, subscriptionGroup.json, " \
           "consumerOffset.json" in out
    store = tmp_path / "s"
    assert _config(store, "topics.json") == (
        "{\n" + _version_text(1, t1) + '\t"topicConfigTable":{\n' + ",\n".join(
            [_topic_text("FixOrders611", 4), _topic_text("tOqx", 4), _topic_text("OldTopic", 2),
             _topic_text("Q8Topic_11", 8)]) + "\n\t}\n}")
    assert _config(store, "subscriptionGroup.json") == (
        "{\n" + _version_text(1, t1) + '\t"subscriptionGroupTable":{\n' + ",\n".join(
            [_group_text("cg_a"), _group_text("cg_b")]) + "\n\t}\n}")
    assert _config(store, "consumerOffset.json") == (
        '{\n\t"offsetTable":{\n\t\t"FixOrders611@cg_a":{0:10,1:5,2:3,3:7\n\t\t},\n'
        '\t\t"Q8Topic_11@cg_b":{0:4\n\t\t}\n\t}\n}')


def test_a_range_ending_before_the_first_snapshot_gets_no_metadata_and_says_so(lake, rows, tmp_path, capsys):
    table, _ = lake
    first = rows.column("storeTimestamp").to_pylist()[0]
    assert main(["restore", table, "--broker-name", BROKER, "--store-dir", str(tmp_path / "s"),
                 "--to-timestamp", str(_ms(first))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (f"info: the broker metadata tables beside {table} hold no snapshot of broker {BROKER} before "
                       "the restored range's end: the store gets no topics, subscription groups or consumer offsets")
    assert not (tmp_path / "s" / "config").exists() or os.listdir(tmp_path / "s" / "config") == ["delayOffset.json"]


def test_no_metadata_leaves_the_files_out(lake, fixture_dir, tmp_path, capsys):
    table, _ = lake
    assert main(["restore", table, "--broker-name", BROKER, "--store-dir", str(tmp_path / "s"), "--no-metadata"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith(f"restored broker {BROKER} [0, ")  # today's one line
    assert os.listdir(tmp_path / "s" / "config") == ["delayOffset.json"]
    for name in sorted(os.listdir(fixture_dir / "commitlog")):
        assert filecmp.cmp(fixture_dir / "commitlog" / name, tmp_path / "s" / "commitlog" / name, shallow=False)


def test_a_table_without_metadata_tables_restores_as_before_with_one_info_line(table, tmp_path, capsys):
    assert main(["restore", table, "--broker-name", BROKER, "--store-dir", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out.splitlines()
    beside = os.path.join(os.path.dirname(table), "broker_topic_configs")
    assert out[-1] == (f"info: no broker metadata tables beside {table} ({beside} is no Delta table): the store gets "
                       "no topics, subscription groups or consumer offsets")
    assert os.listdir(tmp_path / "s" / "config") == ["delayOffset.json"]


def test_the_metadata_tables_are_looked_for_under_the_bronze_tables_root(tmp_path, monkeypatch):
    from connector.restore.metadata import metadata_table_uri

    assert metadata_table_uri("s3://bucket/lake/tables/bronze/", BROKER_TOPIC_CONFIGS) == \
        "s3://bucket/lake/tables/broker_topic_configs"
    monkeypatch.chdir(tmp_path)
    assert metadata_table_uri("tables/bronze", BROKER_CONSUMER_OFFSETS) == \
        str(tmp_path / "tables" / "broker_consumer_offsets")


def test_the_spark_job_form_writes_the_same_config_files(lake, spark, tmp_path):
    from connector.restore import restore_commitlog_spark

    table, _ = lake
    one = restore_commitlog(table, BROKER, tmp_path / "one")
    tasks = restore_commitlog_spark(spark, table, BROKER, tmp_path / "tasks")
    assert (tasks.metadata.snapshot_id, tasks.metadata.capped) == (one.metadata.snapshot_id, one.metadata.capped)
    for name in ("topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json"):
        assert _config(tmp_path / "tasks", name) == _config(tmp_path / "one", name)
