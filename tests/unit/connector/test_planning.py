"""connector.source.driver.brokers and the driver rules of connector.source that need no broker: boundaries,
replicated-only batch ends (minInSyncSlaves), reading from slaves, server choice per partition."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from connector.options.parse import SourceOptions
from connector.source import HAReplicaStreamReader
from connector.source.driver.brokers import MAX_KNOWN_BOUNDARIES_PER_BROKER, BrokerSetView, ServerOffsets, bounds
from connector.source.driver.offsets import SourceOffset

MB = 1048576


def positions(offset: dict) -> dict:
    """The broker offsets of an end offset, its ``@`` entries left out."""
    return SourceOffset.from_json(offset).positions


def no_history_reads(r: HAReplicaStreamReader) -> None:
    """Planning without brokers: no HA reads for fingerprints or history checks (test_history covers them)."""
    r.planner.verified_begin = lambda broker, view, start, begin, min_offset, max_offset: begin
    r.planner.with_fingerprints = lambda start, spans, ends: SourceOffset(dict(ends))


def view_with(*, size: int = MB, master=(0, 10 * MB), slaves=(), boundaries=()) -> BrokerSetView:
    options = SourceOptions.from_options({"brokers": "a=10.0.0.1:10912",
                                          "slaves": ",".join(f"a=10.0.0.{11 + i}:10912" for i in range(3))})
    v = BrokerSetView("a", size)
    v.master = ServerOffsets(options.brokers[0], "master", *master)
    v.slaves = [ServerOffsets(endpoint, "slave", *offsets) if offsets else ServerOffsets(endpoint, "slave", error="x")
                for endpoint, offsets in zip(options.slaves, slaves, strict=False)]
    for b in boundaries:
        v.add_boundary(b)
    return v


def test_floor_boundary_uses_file_starts_samples_and_the_batch_start():
    v = view_with(boundaries=[300, 700000, 1500000])
    assert v.floor_boundary(800000, at_least=0) == 700000  # a master sample
    assert v.floor_boundary(1400000, at_least=0) == MB  # the file start beats the older sample
    assert v.floor_boundary(1600000, at_least=0) == 1500000
    assert v.floor_boundary(200, at_least=100) == 100  # never below the batch start
    assert v.floor_boundary(50, at_least=100) == 100
    assert v.floor_boundary(700000, at_least=0) == 700000  # a boundary itself


def test_ceil_boundary_and_forgetting():
    v = view_with(boundaries=[700000, 900000])
    assert v.ceil_boundary(600000, 3 * MB) == 700000
    assert v.ceil_boundary(950000, 3 * MB) == MB
    assert v.ceil_boundary(950000, 960000) == 960000
    v.forget_boundaries(below=800000)
    assert v.boundaries == [900000]
    v.forget_boundaries()
    assert v.boundaries == []


def test_boundaries_are_bounded_and_keep_the_newest():
    v = view_with()
    for i in range(MAX_KNOWN_BOUNDARIES_PER_BROKER + 10):
        v.add_boundary(1000 + i)
    v.add_boundary(1000 + 5000)
    assert len(v.boundaries) == MAX_KNOWN_BOUNDARIES_PER_BROKER
    assert v.boundaries[-1] == 6000 and v.boundaries[0] == 1000 + 11


def test_replicated_offset_is_the_n_th_highest_slave():
    v = view_with(slaves=[(0, 500), (0, 900), None])
    assert v.replicated_offset(1) == 900
    assert v.replicated_offset(2) == 500
    assert v.replicated_offset(3) is None  # the third slave did not answer
    assert v.best_slave().max_offset == 900


def test_server_for_prefers_the_fullest_slave_holding_the_range():
    v = view_with(master=(0, 5 * MB), slaves=[(2 * MB, 4 * MB), (3 * MB, 5 * MB)])
    assert v.server_for(0, MB, prefer_slave=False).role == "master"
    assert v.server_for(3 * MB, 4 * MB, prefer_slave=True).endpoint.ha_addr == "10.0.0.12:10912"
    assert v.server_for(2 * MB, 3 * MB, prefer_slave=True).endpoint.ha_addr == "10.0.0.11:10912"
    assert v.server_for(0, MB, prefer_slave=True).role == "master"  # no slave holds history before 2 MB


def make_reader(view: BrokerSetView, **opts) -> HAReplicaStreamReader:
    options = SourceOptions.from_options({"brokers": "a=10.0.0.1:10912", "slaves": "a=10.0.0.11:10912,"
                                          "a=10.0.0.12:10912,a=10.0.0.13:10912", **opts})
    r = HAReplicaStreamReader(options)
    r.planner.brokers.views["a"] = view
    r.planner.brokers.refresh = lambda broker, slaves=None: view  # what the brokers answered is in `view`
    no_history_reads(r)
    return r


def test_min_replicas_ends_the_batch_at_a_boundary_that_enough_slaves_hold():
    # master at 3 MB + 500; slaves at 2.5 MB+7 (inside a record) and 1 MB+300; samples 2 MB+100, 2 MB+9000
    v = view_with(master=(0, 3 * MB + 500), slaves=[(0, 2 * MB + 7 + MB // 2), (0, MB + 300), None],
                  boundaries=[2 * MB + 100, 2 * MB + 9000, 3 * MB + 500])
    one = make_reader(v, minInSyncSlaves="1").latestOffset({"a": 5000}, ReadAllAvailable())
    assert positions(one) == {"a": 2 * MB + 9000}
    # two replicas: the second slave is at 1 MB + 300, inside file 1: its start is the boundary
    assert positions(make_reader(v, minInSyncSlaves="2").latestOffset({"a": 5000}, ReadAllAvailable())) == {"a": MB}
    # three replicas: one slave is unreachable, so the batch cannot advance
    assert positions(make_reader(v, minInSyncSlaves="3").latestOffset({"a": 5000}, ReadAllAvailable())) == {"a": 5000}
    assert positions(make_reader(v).latestOffset({"a": 5000}, ReadAllAvailable())) == {"a": 3 * MB + 500}


def test_read_from_slave_ends_batches_at_what_the_best_slave_holds_and_reads_from_it():
    v = view_with(master=(0, 3 * MB + 500), slaves=[(2 * MB, 2 * MB + 7000), (0, MB + 300), None],
                  boundaries=[2 * MB + 100, 3 * MB + 500])
    r = make_reader(v, readFrom="slave")
    # the best slave lacks the history below 2 MB, so the batch is not bounded by it from offset 5000...
    assert positions(r.latestOffset({"a": 5000}, ReadAllAvailable())) == {"a": 3 * MB + 500}
    # ... but once the query is inside what it holds, the batch ends at a boundary it holds
    assert positions(r.latestOffset({"a": 2 * MB}, ReadAllAvailable())) == {"a": 2 * MB + 100}
    parts = r.partitions({"a": 5000}, {"a": 2 * MB + 100})
    assert [(p.start, p.end, p.ha_addr, p.server_role) for p in parts] == [
        (5000, MB, "10.0.0.12:10912", "slave"),  # the second slave holds [0, 1 MB + 300)
        (MB, 2 * MB, "10.0.0.1:10912", "master"),  # no slave holds file 1 completely
        (2 * MB, 2 * MB + 100, "10.0.0.11:10912", "slave")]
    assert [p.remoting_addr for p in parts] == ["10.0.0.12:10911", "10.0.0.1:10911", "10.0.0.11:10911"]


def test_read_from_master_never_uses_slaves():
    v = view_with(master=(0, 3 * MB), slaves=[(0, 3 * MB)])
    parts = make_reader(v).partitions({"a": 0}, {"a": 3 * MB})
    assert {(p.ha_addr, p.server_role) for p in parts} == {("10.0.0.1:10912", "master")}


def test_available_now_target_caps_the_batch():
    v = view_with(master=(0, 3 * MB), boundaries=[3 * MB])
    r = make_reader(v)
    r.planner.trigger_target = {"a": 2 * MB}
    assert positions(r.latestOffset({"a": 0}, ReadAllAvailable())) == {"a": 2 * MB}


def test_report_latest_offset_is_the_master_max_per_broker():
    v = view_with(master=(0, 3 * MB + 5))
    assert make_reader(v).reportLatestOffset() == {"a": 3 * MB + 5}


@pytest.mark.parametrize("unreachable_master", [True, False])
def test_bounds_come_from_slaves_when_the_master_is_unreachable(unreachable_master):
    v = view_with(master=(0, 3 * MB), slaves=[(MB, 2 * MB), (0, 2 * MB + 9)])
    if unreachable_master:
        v.master = ServerOffsets(v.master.endpoint, "master", error="refused")
        assert bounds(v) == (0, 2 * MB + 9)
    else:
        assert bounds(v) == (0, 3 * MB)


# --- SYNC_MASTER: no partition start acknowledges bytes a producer may still be waiting for -----------
def test_ack_window_from_the_broker_config():
    from connector.source import ack_window_ms

    assert ack_window_ms({"brokerRole": "ASYNC_MASTER"}) == 0
    assert ack_window_ms({}) == 0
    assert ack_window_ms({"brokerRole": "SYNC_MASTER"}) == 6000  # syncFlushTimeout 5000 + margin 1000
    assert ack_window_ms({"brokerRole": "SYNC_MASTER", "slaveTimeout": "700", "syncFlushTimeout": "300"}) == 1700
    assert ack_window_ms({"brokerRole": "SLAVE", "slaveTimeout": "700"}) == 0


def test_settled_offset_follows_master_samples_older_than_the_window():
    v = view_with()
    v.ack_window_ms = 2000
    assert v.settled_offset(100.0) == -1
    v.note_master_max(3 * MB + 10, 100.0)
    v.note_master_max(5 * MB + 10, 101.5)
    assert v.settled_offset(101.9) == -1
    assert v.settled_offset(102.0) == 3 * MB + 10
    assert v.settled_offset(103.6) == 5 * MB + 10
    plain = view_with()
    assert plain.settled_offset(0.0) > 10 ** 15  # not a SYNC_MASTER: everything is settled


def test_ack_safe_end_cuts_at_the_first_unsettled_file_start():
    v = view_with()
    v.ack_window_ms = 2000
    v.note_master_max(6 * MB, 100.0)
    # nothing settled yet: a batch from 0.5 MB may not contain a partition starting at 1 MB
    assert v.ack_safe_end(MB // 2, 6 * MB, 100.5) == MB
    assert v.ack_safe_end(MB // 2, MB - 5, 100.5) == MB - 5  # a single-file batch needs no cut
    assert v.ack_safe_end(MB, 6 * MB, 100.5) == 2 * MB  # the batch start itself is landed already
    v.note_master_max(9 * MB + 5, 101.0)
    assert v.ack_safe_end(MB // 2, 9 * MB + 5, 102.5) == 7 * MB  # bytes below 6 MB have settled
    assert v.ack_safe_end(MB // 2, 9 * MB + 5, 103.0) == 9 * MB + 5


def test_latest_offset_on_a_sync_master_ends_at_the_first_unsettled_file_start():
    v = view_with(master=(0, 3 * MB + 500), boundaries=[3 * MB + 500])
    v.ack_window_ms = 60_000
    r = make_reader(v)
    assert positions(r.latestOffset({"a": 5000}, ReadAllAvailable())) == {"a": MB}
    v.ack_window_ms = 0
    assert positions(r.latestOffset({"a": 5000}, ReadAllAvailable())) == {"a": 3 * MB + 500}


def test_a_slaves_reput_offset_becomes_a_boundary_when_two_samples_agree():
    v = view_with()
    endpoint = v.master.endpoint
    first = ServerOffsets(endpoint, "slave", 0, 2 * MB + 70, dispatch_behind=30)
    v.note_slave_sample(None, first)
    assert v.boundaries == []  # one sample is not enough
    moved = ServerOffsets(endpoint, "slave", 0, 2 * MB + 90, dispatch_behind=30)
    v.note_slave_sample(first, moved)
    assert v.boundaries == []  # the slave moved between samples
    v.note_slave_sample(moved, ServerOffsets(endpoint, "slave", 0, 2 * MB + 90, dispatch_behind=30))
    assert v.boundaries == [2 * MB + 60]
    v.note_slave_sample(moved, ServerOffsets(endpoint, "slave", 0, 2 * MB + 90))  # not reported: nothing learnt
    assert v.boundaries == [2 * MB + 60]
    assert v.floor_boundary(2 * MB + 90, at_least=0) == 2 * MB + 60
