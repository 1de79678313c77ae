"""Broker sets a checkpoint holds but the query does not read now (issue 49, docs/source.md "Offsets, batches,
partitions"): with ``brokers``, a set left out is paused — its offset and fingerprint stay in every end offset —
and only ``dropBrokerSets`` removes it; a batch planned before a restart that moves a set no longer named fails
in one line instead of landing without that set's records. On a real stub master (broker-a); broker-c is only a
checkpoint entry here."""

from __future__ import annotations

import logging

import pytest

from connector.client.producer import Producer
from connector.errors import HAReplicaOptionError
from connector.options.parse import SourceOptions
from connector.source.driver.batches import BatchPlanner
from connector.source.driver.offsets import FINGERPRINT_KEY, SourceOffset
from tests.support.brokers import max_offset
from tests.support.fixtures import broker_factory  # noqa: F401 - fixture

C_PRINT = [4000, 120, 1795329728520, 12345]  # broker-c's fingerprint as a checkpoint holds it
offset = SourceOffset.from_json  # the planner takes offsets as SourceOffset; these tests write them as Spark's JSON


@pytest.fixture
def master_a(broker_factory):  # noqa: F811 - the fixture imported above
    broker = broker_factory("a", mappedFileSizeCommitLog=65536)
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        for i in range(3):
            producer.send("PausedTopic", b"m%d" % i)
    return broker


def planner_of(broker, **extra: str) -> BatchPlanner:
    return BatchPlanner(SourceOptions.from_options({"brokers": f"broker-a={broker.ha_addr}", **extra}))


def test_a_set_brokers_leaves_out_keeps_its_offset_and_fingerprint_and_is_logged_once(master_a, caplog):
    """Before, the end offset had no broker-c key: the next run naming broker-c read it from earliest again."""
    start = {"broker-a": 0, "broker-c": 4120, FINGERPRINT_KEY: {"broker-c": C_PRINT}}
    planner = planner_of(master_a)
    try:
        with caplog.at_level(logging.WARNING, logger="connector.source.driver.batches"):
            end = planner.end_offset(offset(start), None).to_json()
            again = planner.end_offset(offset(end), None).to_json()
    finally:
        planner.close()
    assert end["broker-a"] == max_offset(master_a.remoting_addr)
    assert end["broker-c"] == again["broker-c"] == 4120
    assert end[FINGERPRINT_KEY]["broker-c"] == again[FINGERPRINT_KEY]["broker-c"] == C_PRINT
    paused = [r.getMessage() for r in caplog.records if "broker-c" in r.getMessage()]
    assert len(paused) == 1 and "paused" in paused[0] and "4120" in paused[0] and "dropBrokerSets" in paused[0]


def test_drop_broker_sets_removes_the_set_and_cannot_name_a_set_read_now(master_a):
    start = {"broker-a": 0, "broker-c": 4120, FINGERPRINT_KEY: {"broker-c": C_PRINT}}
    planner = planner_of(master_a, dropBrokerSets="broker-c")
    try:
        end = planner.end_offset(offset(start), None).to_json()
    finally:
        planner.close()
    assert "broker-c" not in end and "broker-c" not in end.get(FINGERPRINT_KEY, {})
    with pytest.raises(HAReplicaOptionError, match=r"^option dropBrokerSets='broker-a': names broker-a, which "
                                                   r"brokers also names"):
        planner_of(master_a, dropBrokerSets="broker-a")
    with pytest.raises(HAReplicaOptionError, match=r"^option dropBrokerSets=' , ': names nothing"):
        planner_of(master_a, dropBrokerSets=" , ")


def test_a_replayed_batch_that_moves_a_set_brokers_no_longer_names_fails_naming_it(master_a):
    """A batch planned with broker-c, replayed after a restart whose brokers leaves broker-c out: before, its
    partitions skipped broker-c and the batch committed without broker-c's records of [4120, 9000)."""
    end_a = max_offset(master_a.remoting_addr)
    planner = planner_of(master_a)
    try:
        with pytest.raises(HAReplicaOptionError, match=r"broker set broker-c's CommitLog \[4120, 9000\).*name it "
                                                       r"again"):
            planner.partitions(offset({"broker-a": 0, "broker-c": 4120}), offset({"broker-a": end_a, "broker-c": 9000}),
                               None)
        with pytest.raises(HAReplicaOptionError, match=r"broker set broker-c's CommitLog \[its first byte, 9000\)"):
            # broker-c new in that batch
            planner.partitions(offset({"broker-a": 0}), offset({"broker-a": end_a, "broker-c": 9000}), None)
        # a batch that does not move broker-c runs
        parts = planner.partitions(offset({"broker-a": 0, "broker-c": 4120}),
                                   offset({"broker-a": end_a, "broker-c": 4120}), None)
    finally:
        planner.close()
    assert [(p.broker, p.start, p.end) for p in parts] == [("broker-a", 0, end_a)]


def test_a_set_without_an_offset_is_logged_once_per_query(master_a, caplog):
    """Before, the warning came twice for one batch: once when it was planned, once for its partitions."""
    planner = planner_of(master_a)
    try:
        with caplog.at_level(logging.WARNING, logger="connector.source.driver.batches"):
            end = planner.end_offset(offset({}), None)
            planner.partitions(offset({}), end, None)
    finally:
        planner.close()
    assert [r.getMessage() for r in caplog.records if "no offset in the checkpoint" in r.getMessage()] == [
        "broker broker-a has no offset in the checkpoint; starting at its commitLogMinOffset 0"]


def test_a_set_out_of_the_route_past_max_outage_keeps_its_offset_when_data_loss_is_allowed(caplog):
    """With namesrvAddr and failOnDataLoss=false a set gone longer than maxOutageMs was left out of the offset, and
    when it came back it started as a new set: from its first byte, landing its records again."""
    from connector.errors import DataLossError
    from connector.source.driver.discovery import Discovery

    options = SourceOptions.from_options({"namesrvAddr": "127.0.0.1:1", "maxOutageMs": "1000",
                                          "failOnDataLoss": "false"})
    discovery = Discovery(options)
    now = [100.0]
    discovery.clock = lambda: now[0]
    start = {"broker-a": 10, "broker-c": 4120, FINGERPRINT_KEY: {"broker-c": C_PRINT}}
    try:
        assert discovery.carry_absent(options, offset(start), offset({"broker-a": 20})).positions["broker-c"] == 4120
        now[0] += 5  # 5 s out of the route, past maxOutageMs
        with caplog.at_level(logging.WARNING, logger="connector.source.driver.discovery"):
            for _ in range(2):
                end = discovery.carry_absent(options, offset(start), offset({"broker-a": 30})).to_json()
                assert end["broker-c"] == 4120 and end[FINGERPRINT_KEY]["broker-c"] == C_PRINT
        (warning,) = [r.getMessage() for r in caplog.records if "broker-c" in r.getMessage()]
        assert "longer than maxOutageMs=1000" in warning and "dropBrokerSets=broker-c" in warning
        strict = SourceOptions.from_options({"namesrvAddr": "127.0.0.1:1", "maxOutageMs": "1000"})
        discovery.overdue.clear()
        with pytest.raises(DataLossError, match="dropBrokerSets=broker-c removes it"):
            discovery.carry_absent(strict, offset(start), offset({"broker-a": 30}))
    finally:
        discovery.close()
