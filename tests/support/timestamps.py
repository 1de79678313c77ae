"""Checking the offset of a time (connector.source.driver.timestamps) against a broker's whole CommitLog, for the
stub and real-broker tests alike: the records' (offset, storeTimestamp) read once over HA, the four kinds of time
(before the first record, between two, equal to one, past the last), the answer and the requests counted."""

from __future__ import annotations

import pytest

from connector.errors import HAReplicaOptionError
from connector.options.declaration import READ_FROM_MASTER
from connector.options.parse import SourceOptions
from connector.protocol.commitlog import MessageRecord, iter_records
from connector.source.driver.batches import BatchPlanner
from connector.source.driver.brokers import DriverReads, bounds, fetch_range
from connector.source.driver.timestamps import (
    MAX_QUEUE_REQUESTS_PER_ROUND,
    NARROW_ROUNDS,
    TimeSearch,
    file_starts,
    max_header_reads,
)


def stored(broker_option: str, ha_addr: str, mapped_file_size: int) -> list[tuple[int, int]]:
    """``(commitLogOffset, storeTimestamp)`` of every message of the broker's CommitLog, in CommitLog order."""
    planner = BatchPlanner(SourceOptions.from_options({"brokers": broker_option}))
    try:
        low, high = bounds(planner.brokers.refresh(planner.options.brokers[0]))
    finally:
        planner.close()
    out = []
    for start in range(low - low % mapped_file_size, high, mapped_file_size):
        lo, hi = max(start, low), min(start + mapped_file_size, high)
        data = fetch_range(SourceOptions.from_options({"brokers": broker_option}).fetch, ha_addr, lo, hi,
                           broker="broker-a", server_is_slave=False)
        out += [(r.commit_log_offset, r.store_timestamp) for r in iter_records(data, base_offset=lo)
                if isinstance(r, MessageRecord)]
    return out


def times_to_check(records: list[tuple[int, int]]) -> dict[str, tuple[int, int | None]]:
    """name -> (time, expected offset): before the first record, between two (in the middle of the log), equal to a
    record that follows an older one (in the last third), and past the last (None)."""
    steps = [i for i in range(1, len(records)) if records[i][1] > records[i - 1][1] + 1]
    between = steps[len(steps) // 2]
    equal = next(i for i in range(2 * len(records) // 3, len(records)) if records[i][1] > records[i - 1][1])
    return {"before the first": (records[0][1] - 60_000, records[0][0]),
            "between two": (records[between - 1][1] + 1, records[between][0]),
            "equal to one": (records[equal][1], records[equal][0]),
            "past the last": (records[-1][1] + 1, None)}


def check_searches(broker_option: str, records: list[tuple[int, int]], *, window_bytes: int) -> list[dict]:
    """Every time of :func:`times_to_check` searched with :class:`TimeSearch` (ConsumeQueue narrowing once a gap is
    above ``window_bytes``): the right offset, and no more requests than the stated bounds. Returns the counts."""
    planner = BatchPlanner(SourceOptions.from_options({"brokers": broker_option}))
    counts = []
    try:
        view = planner.brokers.refresh(planner.options.brokers[0])
        low, high = bounds(view)
        files = len(file_starts(low, high, view.mapped_file_size))
        for name, (ms, expected) in times_to_check(records).items():
            reads = DriverReads(planner.options.fetch, view, planner.brokers.protocol(view.name),
                                planner.options.read_from != READ_FROM_MASTER)
            search = TimeSearch(reads, view, low, high, queues_addr=view.master.endpoint.remoting_addr,
                                window_bytes=window_bytes)
            assert search.offset_of(ms) == expected, name
            c = search.counts
            assert c.header_reads <= max_header_reads(files), (name, c)
            assert c.window_reads <= 1, (name, c)
            assert c.queue_requests <= NARROW_ROUNDS * MAX_QUEUE_REQUESTS_PER_ROUND, (name, c)
            counts.append({"time": name, **vars(c)})
    finally:
        planner.close()
    return counts


def check_initial_offsets(broker_option: str, records: list[tuple[int, int]], max_offset: int) -> None:
    """``startingTimestamp`` through the planner: each time's offset; past the last record an error naming the
    broker, the time and the max offset (strategy error), or the max offset (strategy latest)."""
    cases = times_to_check(records)
    for name, (ms, expected) in cases.items():
        for strategy in ("error", "latest"):
            planner = BatchPlanner(SourceOptions.from_options({
                "brokers": broker_option, "startingTimestamp": str(ms),
                "startingOffsetsByTimestampStrategy": strategy}))
            try:
                if expected is None and strategy == "error":
                    with pytest.raises(HAReplicaOptionError) as err:
                        planner.initial_offsets()
                    assert str(err.value).startswith(f"option startingTimestamp={ms}: broker broker-a holds no "
                                                     f"record stored at or after {ms} ms (commitLogMaxOffset "
                                                     f"{max_offset})"), str(err.value)
                else:
                    want = max_offset if expected is None else expected
                    assert planner.initial_offsets() == {"broker-a": want}, (name, strategy)
            finally:
                planner.close()
