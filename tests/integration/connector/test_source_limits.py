"""Batch sizes on the driver against a stub master: ``maxBytesPerTrigger`` ends a backfill's batches at
ConsumeQueue record boundaries within 1 MiB past the budget (not at the next mapped-file start), and
``minBytesPerTrigger`` / ``maxTriggerDelay`` hold a trickle back, under both of Spark's calling conventions
(4.2+: ``latestOffset(start, limit)``; 4.0/4.1: ``latestOffset()``, connector/spark_compat.py); docs/source.md
"Limits"."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from connector.client.producer import Producer
from connector.options.parse import SourceOptions
from connector.source import HAReplicaStreamReader, read_partition
from connector.source.driver.batches import BUDGET_SLACK_BYTES, apply_byte_limit
from tests.integration.connector.conftest import brokers_option
from tests.support.brokers import max_offset, read_commitlog

MB = 1 << 20
FILE = 4 * MB


def produce(broker, count: int, size: int, *, first: int = 0) -> None:
    """``count`` messages of ``size`` random (so incompressible) body bytes over two topics (4 queues each)."""
    bodies = random.Random(first)
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        futures = [producer.send_async(("orders", "payments")[i % 2], bodies.randbytes(size), wait_store_msg_ok=False)
                   for i in range(count)]
        for future in futures:
            future.result(timeout=60)


def reader_of(broker, **options) -> HAReplicaStreamReader:
    return HAReplicaStreamReader(SourceOptions.from_options({"brokers": brokers_option(broker), **options}))


def test_a_three_file_backfill_cut_to_a_third_of_a_file_never_ends_a_batch_past_budget_plus_1_mib(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE)
    produce(broker, 360, 32 * 1024)  # 32 KiB records filling most of three 4 MiB files
    total = max_offset(broker.remoting_addr)
    assert 2 * FILE < total <= 3 * FILE
    records = [r for r in read_commitlog(broker.commitlog_dir) if hasattr(r, "topic")]
    starts = {r.commit_log_offset for r in records} | {total}
    budget = FILE // 3
    reader = reader_of(broker, maxBytesPerTrigger=str(budget))
    start = reader.initialOffset()
    sizes, rows = [], []
    while start["broker-a"] < total:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        size = end["broker-a"] - start["broker-a"]
        assert 0 < size <= budget + BUDGET_SLACK_BYTES, (start, end)
        assert end["broker-a"] in starts  # a record boundary the ConsumeQueues named (or the max offset)
        rows += [pa.Table.from_batches(list(read_partition(p))) for p in reader.partitions(start, end)]
        reader.commit(end)
        sizes.append(size)
        start = end
    assert len(sizes) >= 8  # about total / budget
    table = pa.concat_tables(rows)
    assert table.column("commitLogOffset").to_pylist() == [r.commit_log_offset for r in records]  # exactly once
    # what the driver alone knows (mapped-file starts, sampled max offsets) would end the first batch at the
    # file's end, 4 MiB: 2.7 MiB past the budget
    fresh = reader_of(broker, maxBytesPerTrigger=str(budget))
    fresh.planner.brokers.refresh(fresh.options.brokers[0])
    views = fresh.planner.brokers.views
    assert apply_byte_limit(fresh.options.brokers, views, {"broker-a": (0, total)}, budget) == {"broker-a": FILE}
    fresh.stop()
    reader.stop()


@pytest.mark.parametrize("spark", ["4.2", "4.0"])
def test_min_bytes_per_trigger_holds_a_trickle_until_enough_bytes_or_the_delay(broker_factory, spark):
    broker = broker_factory(mappedFileSizeCommitLog=FILE)
    produce(broker, 1, 1000)
    reader = reader_of(broker, minBytesPerTrigger="2500", maxTriggerDelay="1h")
    now = [1000.0]
    reader.planner.clock = lambda: now[0]

    def next_end(start: dict) -> dict:
        if spark == "4.0":  # no start, no limit: the reader continues from the last range Spark showed it
            return reader.latestOffset()
        return reader.latestOffset(start, reader.getDefaultReadLimit())

    def run(start: dict, end: dict) -> None:
        reader.partitions(start, end)
        reader.commit(end)

    start = reader.initialOffset()
    first = next_end(start)  # no batch yet: the backlog goes at once, whatever its size
    assert first["broker-a"] == max_offset(broker.remoting_addr) > start["broker-a"]
    run(start, first)
    produce(broker, 1, 1000, first=1)  # ~1.1 KB new: held
    assert next_end(first) == first
    produce(broker, 2, 1000, first=2)  # ~3.3 KB new: enough
    second = next_end(first)
    assert second["broker-a"] == max_offset(broker.remoting_addr) > first["broker-a"]
    run(first, second)
    produce(broker, 1, 1000, first=4)
    now[0] += 3599
    assert next_end(second) == second  # held while less than maxTriggerDelay passed since the last batch
    now[0] += 1
    third = next_end(second)  # then the trickle goes
    assert third["broker-a"] == max_offset(broker.remoting_addr) > second["broker-a"]
    reader.stop()


def test_min_bytes_never_holds_trigger_available_now(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE)
    produce(broker, 1, 1000)
    reader = reader_of(broker, minBytesPerTrigger="1000000")
    start = reader.initialOffset()
    first = reader.latestOffset(start, reader.getDefaultReadLimit())
    produce(broker, 1, 1000, first=1)
    assert reader.latestOffset(first, reader.getDefaultReadLimit()) == first  # a processing-time trigger waits
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset(first, reader.getDefaultReadLimit())["broker-a"] == max_offset(broker.remoting_addr)
    reader.stop()
