"""A source offset is one :class:`SourceOffset` from ``latestOffset`` to the checkpoint JSON (issue 54,
connector/source/driver/offsets.py): Spark's Python data source API hands the reader JSON objects as dicts, the
reader converts them once per call on the way in and once on the way out, and the planner works on the object.
On a real stub master (broker-a), through the real HAReplicaStreamReader."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from connector.client.producer import Producer
from connector.source import HAReplicaDataSource, HAReplicaStreamReader
from connector.source.driver.batches import MAX_OFFSET_KEY
from connector.source.driver.offsets import FINGERPRINT_KEY, SourceOffset
from tests.support.brokers import max_offset
from tests.support.fixtures import broker_factory  # noqa: F401 - fixture


@pytest.fixture
def master_a(broker_factory):  # noqa: F811 - the fixture imported above
    broker = broker_factory("a", mappedFileSizeCommitLog=65536)
    send(broker, 3)
    return broker


def send(broker, count: int) -> None:
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        for i in range(count):
            producer.send("OffsetTopic", b"m%d" % i)


def reader_of(broker) -> HAReplicaStreamReader:
    return HAReplicaStreamReader(HAReplicaDataSource({"brokers": f"broker-a={broker.ha_addr}"}).source_options)


@pytest.fixture
def conversions(monkeypatch) -> dict[str, int]:
    """How many times SourceOffset.from_json and SourceOffset.to_json ran (counted, then the real ones run)."""
    counts = {"from_json": 0, "to_json": 0}
    from_json, to_json = SourceOffset.from_json.__func__, SourceOffset.to_json

    def counted_from_json(cls, value):
        counts["from_json"] += 1
        return from_json(cls, value)

    def counted_to_json(self):
        counts["to_json"] += 1
        return to_json(self)

    monkeypatch.setattr(SourceOffset, "from_json", classmethod(counted_from_json))
    monkeypatch.setattr(SourceOffset, "to_json", counted_to_json)
    return counts


def test_latest_offset_converts_spark_s_offset_once_in_and_once_out(master_a, conversions):
    """Before, one end offset went dict -> SourceOffset -> dict several times inside one latestOffset (the planner
    took and returned dicts and each step converted again)."""
    reader = reader_of(master_a)
    try:
        first = reader.latestOffset({"broker-a": 0}, ReadAllAvailable())
        assert conversions == {"from_json": 1, "to_json": 1}
        send(master_a, 2)
        conversions.update(from_json=0, to_json=0)
        second = reader.latestOffset(json.loads(json.dumps(first)), ReadAllAvailable())  # as the offset log holds it
        assert conversions == {"from_json": 1, "to_json": 1}
        conversions.update(from_json=0, to_json=0)
        reader.partitions(first, second)
        reader.commit(second)
        assert conversions == {"from_json": 3, "to_json": 0}  # start and end of partitions, end of commit
    finally:
        reader.stop()
    assert second["broker-a"] == max_offset(master_a.remoting_addr) > first["broker-a"]
    assert list(second) == ["broker-a", FINGERPRINT_KEY, MAX_OFFSET_KEY]


def test_the_planner_takes_and_returns_source_offsets(master_a):
    """Before, BatchPlanner.next_end took a dict and returned a dict (a SourceOffset given failed)."""
    reader = reader_of(master_a)
    try:
        end = reader.planner.next_end(SourceOffset({"broker-a": 0}), None)
        same = reader.planner.next_end(end, None)
    finally:
        reader.stop()
    assert isinstance(end, SourceOffset) and end.positions == {"broker-a": max_offset(master_a.remoting_addr)}
    assert same is end, "nothing new: the start itself, so Spark runs no batch"


def test_a_checkpointed_offset_comes_back_byte_identical(master_a):
    """An offset from the offset log of a query (JSON text) with nothing new to read comes back as the same text,
    so Spark plans no batch and existing checkpoints resume; a checkpoint's ``@`` entries keep their order."""
    reader = reader_of(master_a)
    try:
        text = json.dumps(reader.latestOffset({"broker-a": 0}, ReadAllAvailable()))
        again = json.dumps(reader.latestOffset(json.loads(text), ReadAllAvailable()))
    finally:
        reader.stop()
    assert again == text
    stored = ('{"broker-a": 4120, "broker-b": 0, "@lastRecord": {"broker-a": [4000, 120, 1795329728520, 12345]}, '
              '"@masterSwitches": {"broker-b": []}, "@maxOffset": {"broker-a": 4120, "broker-b": 0}, '
              '"@newSetStarts": {"broker-b": 0}}')
    assert json.dumps(SourceOffset.from_json(json.loads(stored)).to_json()) == stored
