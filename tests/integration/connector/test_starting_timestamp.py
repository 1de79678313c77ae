"""``startingTimestamp`` against stub masters (issue 44, time): the offset of a time is the first record in CommitLog
order whose storeTimestamp is >= it, found with a bounded number of requests — before the first record, between
two, equal to one, past the last (both strategies). Before: no such option. tests/interop/
test_source_real_timestamps.py asks a real 4.9.8 broker the same."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker_stub.launcher import BrokerProcess
from tests.integration.connector.conftest import FIXTURE_MAX_OFFSET, MAPPED_FILE_SIZE, brokers_option, run_stream
from tests.interop.peers import MiB, produce_bytes
from tests.support.brokers import max_offset
from tests.support.timestamps import check_initial_offsets, check_searches, stored, times_to_check


@pytest.fixture(scope="module")
def records(fixture_master, messages) -> list[tuple[int, int]]:
    found = stored(brokers_option(fixture_master), fixture_master.ha_addr, MAPPED_FILE_SIZE)
    assert found == [(m["commitLogOffset"], m["storeTimestamp"]) for m in messages]
    return found


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    """A stub master with about 2.5 MiB of messages in 1 MiB mapped files, its ConsumeQueues built as it stored
    them (the golden CommitLog's copies have none), and its records."""
    broker = BrokerProcess.start(tmp_path_factory.mktemp("times"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE)
    try:
        produce_bytes(broker.remoting_addr, int(2.5 * MiB), seed=44)
        yield broker, stored(brokers_option(broker), broker.ha_addr, MAPPED_FILE_SIZE)
    finally:
        broker.stop()


def test_the_offset_of_a_time_by_file_bisection_and_one_read(fixture_master, records):
    """Golden CommitLog, the default 1 MiB window: a header read per bisection step, one read of the gap."""
    counts = check_searches(brokers_option(fixture_master), records, window_bytes=1 << 20)
    assert all(c["queue_requests"] == 0 for c in counts) and max(c["header_reads"] for c in counts) <= 3


def test_the_consume_queues_narrow_the_gap_read(produced):
    """With a 16 KiB window the ConsumeQueues narrow a mapped file first: the same answers, a read of at most
    16 KiB (plus the record stored before the time) where the queues name records, requests within the bounds."""
    broker, found = produced
    counts = check_searches(brokers_option(broker), found, window_bytes=16 * 1024)
    inside = [c for c in counts if c["time"] in ("between two", "equal to one")]
    assert all(c["queue_requests"] > 0 and c["window_bytes"] <= 32 * 1024 for c in inside), inside


def test_starting_timestamp_gives_the_initial_offsets_and_the_strategies(fixture_master, records, produced):
    check_initial_offsets(brokers_option(fixture_master), records, FIXTURE_MAX_OFFSET)
    broker, found = produced
    check_initial_offsets(brokers_option(broker), found, max_offset(broker.remoting_addr))


@pytest.mark.spark
def test_a_stream_from_a_time_starts_at_the_first_record_stored_at_or_after_it(hareplica_spark, fixture_master,
                                                                               records, tmp_path):
    ms, offset = times_to_check(records)["between two"]
    run = run_stream(hareplica_spark, tmp_path / "cp", {"brokers": brokers_option(fixture_master),
                                                        "includeSystemTopics": "true",
                                                        "startingOffsetsByTimestamp": f'{{"broker-a": {ms}}}'})
    offsets = sorted(r["commitLogOffset"] for r in run.rows)
    assert offsets == [o for o, _ in records if o >= offset]
    assert min(r["storeMs"] for r in run.rows) >= ms


@pytest.mark.spark
def test_hareplica_run_passes_starting_timestamp_to_the_source(fixture_master, records, tmp_path):
    """``hareplica run bronze --starting-timestamp MS`` with MS past the last record: the query fails with the
    strategy-error line naming the option (the flag reached the source), exit 1."""
    ms = records[-1][1] + 1
    result = subprocess.run([sys.executable, "-m", "streaming_apps.cli", "run", "bronze", "--workdir",
                             str(tmp_path / "w"), "--trigger", "available-now", "--brokers",
                             brokers_option(fixture_master), "--starting-timestamp", str(ms)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    assert (f"option startingTimestamp={ms}: broker broker-a holds no record stored at or after {ms} ms "
            f"(commitLogMaxOffset {FIXTURE_MAX_OFFSET})") in result.stderr, result.stderr[-3000:]
