"""The pure rules of connector.source.driver.timestamps: the bisection, the files searched, the walk of the last gap
(issue 44, time), on records encoded as RocketMQ 4.9.8 writes them."""

from __future__ import annotations

import math

import pytest

from connector.errors import CommitLogFormatError
from connector.protocol.commitlog import encode_record
from connector.source.driver.timestamps import file_starts, first_at_or_after, lower_bound, max_header_reads

FILE = 1 << 20


def records(times: list[int], base: int = 0) -> bytes:
    out = b""
    for ms in times:
        out += encode_record(commit_log_offset=base + len(out), topic="orders", body=b"x" * 40, store_timestamp=ms)
    return out


@pytest.mark.parametrize("count", [0, 1, 2, 7, 8, 1000])
def test_lower_bound_finds_the_first_key_at_or_past_the_target_in_log2_asks(count):
    keys = [10 * (i // 2) for i in range(count)]  # pairs of equal keys
    for target in (-1, 0, 5, 10, 10 * count):
        asked = []
        got = lower_bound(count, lambda i, seen=asked: seen.append(i) or keys[i], target)
        assert got == next((i for i, k in enumerate(keys) if k >= target), count)
        assert len(asked) <= math.ceil(math.log2(count + 1))


def test_file_starts_are_the_min_offset_then_each_later_file():
    assert file_starts(0, 0, FILE) == []
    assert file_starts(0, FILE, FILE) == [0]
    assert file_starts(3 * FILE, 5 * FILE + 7, FILE) == [3 * FILE, 4 * FILE, 5 * FILE]
    assert max_header_reads(3) == 2 + 3 * 8


def test_the_walk_returns_the_first_record_stored_at_or_after_the_time():
    data = records([100, 200, 200, 300])
    size = len(records([100]))
    assert first_at_or_after(data, 0, 50, FILE) == 0
    assert first_at_or_after(data, 0, 200, FILE) == size  # equal: the first of the two
    assert first_at_or_after(data, 0, 201, FILE) == 3 * size
    assert first_at_or_after(data, 0, 301, FILE) is None


def test_a_clock_that_stepped_back_gives_the_first_record_in_commitlog_order_of_the_walk():
    """storeTimestamps 100, 300, 200, 400: for 250 the walk stops at 300 (the first at or after it in CommitLog
    order), although a later record (200) is older — docs/source.md "Starting at a time"."""
    data = records([100, 300, 200, 400])
    assert first_at_or_after(data, 0, 250, FILE) == len(records([100]))


def test_bytes_that_are_not_a_record_are_named_by_offset():
    data = records([100, 200])
    with pytest.raises(CommitLogFormatError, match="no record starts here .* at CommitLog offset 4096, field TOTAL"):
        first_at_or_after(b"\x00\x00\x00\x90\x12\x34\x56\x78" + data, 4096, 150, FILE)
