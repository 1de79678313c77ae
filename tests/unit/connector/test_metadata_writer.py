"""The metadata tables' rows (connector.delta.metadata_writer, streaming_apps.metadata_sync.snapshot_items): a row
only for a changed, new or gone item; a snapshot lands once per (broker set, snapshotId) in a real Delta table read
back with deltalake; a refused request's table gets no rows (nothing of it is marked deleted)."""

from __future__ import annotations

from connector.client.broker_metadata import MetadataSnapshot
from connector.delta.metadata_tables import (
    BROKER_CONSUMER_OFFSETS,
    BROKER_DELAY_OFFSETS,
    BROKER_TOPIC_CONFIGS,
    txn_app_id,
)
from connector.delta.metadata_writer import append_snapshot, changed_rows, read_state
from connector.delta.reading import read_table
from connector.errors import MetadataRequestRefused
from connector.storage import store
from streaming_apps.metadata_sync import snapshot_items

T0_US = 1_780_000_000_000_000


def test_rows_only_for_changed_new_and_gone_items_and_a_gone_item_once():
    table = BROKER_DELAY_OFFSETS
    state = {(1,): {"offset": 3, "deleted": False}, (2,): {"offset": 0, "deleted": False},
             (3,): {"offset": 9, "deleted": True}}
    rows = changed_rows(table, state, {(1,): {"offset": 3}, (2,): {"offset": 4}, (4,): {"offset": 1}})
    assert rows == [{"delayLevel": 2, "offset": 4, "deleted": False}, {"delayLevel": 4, "offset": 1, "deleted": False}]
    # level 2 gone: one row with its last value and deleted; level 3 was already deleted: none
    rows = changed_rows(table, state, {(1,): {"offset": 3}})
    assert rows == [{"delayLevel": 2, "offset": 0, "deleted": True}]
    # a deleted item that comes back is a row again; an unchanged snapshot is no row
    assert changed_rows(table, state, {(1,): {"offset": 3}, (2,): {"offset": 0}, (3,): {"offset": 9}}) == [
        {"delayLevel": 3, "offset": 9, "deleted": False}]
    assert changed_rows(table, {k: v for k, v in state.items() if not v["deleted"]},
                        {(1,): {"offset": 3}, (2,): {"offset": 0}}) == []


def test_snapshot_lands_once_and_the_state_reads_back(tmp_path):
    location = str(tmp_path / BROKER_CONSUMER_OFFSETS.name)
    items = {("g1", "T", 0): {"offset": 2, "maxOffset": 10}, ("g1", "T", 1): {"offset": 0, "maxOffset": 0}}
    rows = changed_rows(BROKER_CONSUMER_OFFSETS, {}, items)
    assert append_snapshot(location, BROKER_CONSUMER_OFFSETS, "broker-a", 1, T0_US, rows)
    assert not append_snapshot(location, BROKER_CONSUMER_OFFSETS, "broker-a", 1, T0_US, rows)  # a replay
    state = read_state(location, BROKER_CONSUMER_OFFSETS, "broker-a")
    assert state.last_snapshot == 1
    assert state.items == {k: {**v, "deleted": False} for k, v in items.items()}
    advanced = {**items, ("g1", "T", 0): {"offset": 7, "maxOffset": 12}}
    rows = changed_rows(BROKER_CONSUMER_OFFSETS, state.items, advanced)
    assert [(r["queueId"], r["offset"]) for r in rows] == [(0, 7)]
    assert append_snapshot(location, BROKER_CONSUMER_OFFSETS, "broker-a", 2, T0_US + 10_000_000, rows)
    assert not append_snapshot(location, BROKER_CONSUMER_OFFSETS, "broker-a", 3, T0_US, [])  # nothing: no commit
    landed = read_table(location).to_pylist()
    assert sorted((r["snapshotId"], r["queueId"], r["offset"], r["maxOffset"]) for r in landed) == [
        (1, 0, 2, 10), (1, 1, 0, 0), (2, 0, 7, 12)]
    assert {r["broker"] for r in landed} == {"broker-a"}
    dt = store.delta_table(location)
    assert dt.transaction_version(txn_app_id("broker-a")) == 2 and dt.version() == 1
    assert read_state(location, BROKER_CONSUMER_OFFSETS, "broker-b").last_snapshot is None  # per broker set


def test_a_refused_request_leaves_its_table_out_of_the_snapshot():
    refused = MetadataRequestRefused("GET_ALL_CONSUMER_OFFSET (43) to broker x answered code 16: denied",
                                     "GET_ALL_CONSUMER_OFFSET", 16, "denied")
    snap = MetadataSnapshot("broker-a", "127.0.0.1:10911", 0,
                            topics={"T": {"topicName": "T", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                                          "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}},
                            delay_offsets={1: 5}, failures={"GET_ALL_CONSUMER_OFFSET": refused})
    items = snapshot_items(snap)
    assert set(items) == {BROKER_TOPIC_CONFIGS.name, BROKER_DELAY_OFFSETS.name}
    topic = items[BROKER_TOPIC_CONFIGS.name][("T",)]
    assert (topic["readQueueNums"], topic["perm"], topic["order"], topic["topicFilterType"]) == (4, 6, False,
                                                                                                 "SINGLE_TAG")
    assert topic["config"].startswith('{"order":false,"perm":6,')
