"""``minPartitions`` / ``maxBytesPerPartition``: one mapped file read by several InputPartitions, split at record
boundaries the broker's ConsumeQueues give (QUERY_CONSUME_QUEUE), against a stub master (issue 12 item 1).

Before: one mapped file was always one InputPartition (one task, one core), and the options were unknown.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from connector.client.consume_queue import ConsumeQueueReader
from connector.client.producer import Producer
from connector.errors import HAReplicaOptionError
from connector.options.parse import SourceOptions
from connector.source import HAReplicaStreamReader, read_partition
from connector.source.driver.partitions import MIN_PARTITION_BYTES, find_boundaries, partition_counts, pick_splits
from tests.integration.connector.conftest import brokers_option, run_stream
from tests.support.brokers import max_offset

MB = 1 << 20
FILE = 64 * MB


def produce(broker, count: int, size: int = 1000) -> list[tuple[str, bytes]]:
    """``count`` messages of ``size`` bytes over two topics (4 queues each); (topic, body) in send order."""
    sent = []
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        futures = []
        for i in range(count):
            topic = ("orders", "payments")[i % 2]
            body = (b"%08d" % i) * (size // 8)
            futures.append(producer.send_async(topic, body, wait_store_msg_ok=False))
            sent.append((topic, body))
        for f in futures:
            f.result(timeout=60)
    return sent


@pytest.fixture(scope="module")
def big_master(tmp_path_factory):
    """A stub master with ~8 MiB of 1 KB messages inside its first 64 MiB mapped file."""
    broker = BrokerProcess.start(tmp_path_factory.mktemp("splits"), mappedFileSizeCommitLog=FILE)
    sent = produce(broker, 7000)
    yield broker, sent
    broker.stop()


def planned(broker, **options):
    r = HAReplicaStreamReader(SourceOptions.from_options({"brokers": brokers_option(broker), **options}))
    start = r.initialOffset()
    end = r.latestOffset(start, r.getDefaultReadLimit())
    return r.partitions(start, end), end


def rows_of(partition) -> pa.Table:
    return pa.Table.from_batches(list(read_partition(partition)))


def test_min_partitions_splits_one_mapped_file_at_record_boundaries(big_master):
    broker, sent = big_master
    end = max_offset(broker.remoting_addr)
    assert end < FILE
    whole, _ = planned(broker)
    assert len(whole) == 1  # one mapped file: one partition without the option
    parts, _ = planned(broker, minPartitions="4")
    assert len(parts) == 4
    assert parts[0].start == 0 and parts[-1].end == end
    assert all(a.end == b.start for a, b in zip(parts, parts[1:], strict=False))
    assert all(abs((p.end - p.start) - end / 4) < end / 16 for p in parts)  # near-equal pieces
    tables = [rows_of(p) for p in parts]
    for p, t in zip(parts, tables, strict=True):  # each piece starts and ends on a record of its own
        offsets = t.column("commitLogOffset").to_pylist()
        assert offsets[0] == p.start and offsets[-1] + t.column("storeSize").to_pylist()[-1] == p.end
    rows = pa.concat_tables(tables)
    assert [(t, bytes(b)) for t, b in zip(rows.column("topic").to_pylist(), rows.column("body").to_pylist(),
                                          strict=True)] == sent


def test_max_bytes_per_partition_caps_every_piece(big_master):
    broker, _ = big_master
    parts, _ = planned(broker, maxBytesPerPartition=str(3 * MB))
    assert len(parts) >= 3 and all(p.end - p.start <= 3 * MB + 64 * 1024 for p in parts)


def test_consume_queue_boundaries_are_record_starts(big_master):
    broker, _ = big_master
    end = max_offset(broker.remoting_addr)
    record_starts = set(rows_of(planned(broker)[0][0]).column("commitLogOffset").to_pylist())
    with ConsumeQueueReader(broker.remoting_addr, 5000) as reader:
        found = find_boundaries(reader, 0, end, [end // 3, 2 * end // 3], 16 * 1024)
        assert found and set(found) <= record_starts
        assert min(abs(b - end // 3) for b in found) <= 16 * 1024
        queues = dict(((q.topic, q.queue_id), q) for q in reader.ranges(reader.queues()))
        orders0 = queues[("orders", 0)]
        assert orders0.min_index == 0 and orders0.max_index > 0
        assert reader.entries([(orders0, orders0.max_index, 4)]) == [[]]  # past the end: no body, no entries


class _CountingReader(ConsumeQueueReader):
    """The real reader, counting the queues whose range it asks for (GET_MIN_OFFSET and GET_MAX_OFFSET each)."""

    asked = 0

    def ranges(self, queues):
        queues = list(queues)
        self.asked += len(queues)
        return super().ranges(queues)


def test_the_split_search_asks_system_queues_only_when_user_topics_leave_a_point_open(big_master):
    """Every micro-batch with a split plans it: asking the ranges of all of a broker's queues (over a thousand
    system queues on a stub or a 4.9.8 broker, nearly all empty) took about 60 ms of the driver's Python per
    micro-batch. The user topics' queues are asked first, and here they suffice."""
    from connector.protocol.topics import is_system_topic

    broker, _ = big_master
    end = max_offset(broker.remoting_addr)
    with _CountingReader(broker.remoting_addr, 5000) as reader:
        queues = reader.queues()
        user = [q for q in queues if not is_system_topic(q[0])]
        assert len(queues) > 4 * len(user), "the broker holds many more system queues than user queues"
        found = find_boundaries(reader, 0, end, [end // 3, 2 * end // 3], 16 * 1024)
        assert min(abs(b - end // 3) for b in found) <= 16 * 1024
        assert min(abs(b - 2 * end // 3) for b in found) <= 16 * 1024
        assert reader.asked <= len(user)


def test_split_query_lands_every_message_once(hareplica_spark, big_master, tmp_path):
    broker, sent = big_master
    run = run_stream(hareplica_spark, tmp_path / "cp", {"brokers": brokers_option(broker), "minPartitions": "3"})
    rows = sorted(run.rows, key=lambda r: r["commitLogOffset"])
    assert [(r["topic"], bytes(r["body"])) for r in rows] == sent


def test_partition_counts_and_picks():
    assert partition_counts([64 * MB, 16 * MB], 5, None) == [4, 1]
    assert partition_counts([64 * MB], None, 10 * MB) == [7]
    assert partition_counts([3 * MB], 8, None) == [3]  # never below MIN_PARTITION_BYTES a piece
    assert partition_counts([64 * MB, 64 * MB], 2, None) == [1, 1]  # already enough
    assert pick_splits(0, 8 * MB, 4, [1, 2 * MB + 5, 4 * MB - 9, 6 * MB + 1, 8 * MB]) == [2 * MB + 5, 4 * MB - 9,
                                                                                          6 * MB + 1]
    assert pick_splits(0, 8 * MB, 4, [4 * MB]) == [4 * MB]  # one boundary known: one split
    assert pick_splits(0, 4 * MB, 4, [MB - 1, 2 * MB]) == [2 * MB]  # a piece under 1 MiB is not planned
    assert MIN_PARTITION_BYTES == MB


@pytest.mark.parametrize("option,value", [("minPartitions", "0"), ("maxBytesPerPartition", "-5"),
                                          ("minPartitions", "many")])
def test_bad_split_options_are_named(option, value):
    with pytest.raises(HAReplicaOptionError, match=option):
        SourceOptions.from_options({"brokers": "broker-a=127.0.0.1:10912", option: value})


def test_apps_default_min_partitions_to_the_local_cores(tmp_path):
    from streaming_apps.apps.common import AppConfig
    from streaming_apps.spark_session import local_cores

    assert [local_cores(m) for m in ("local", "local[2]", "local[3, 2]", "spark://h:7077")] == [1, 2, 3, None]
    assert AppConfig(app="bronze", brokers="b=h:1", workdir=tmp_path, min_partitions=2).source_option_map()[
        "minPartitions"] == "2"
    assert "minPartitions" not in AppConfig(app="bronze", brokers="b=h:1", workdir=tmp_path).source_option_map()


def test_sync_master_splits_only_below_bytes_no_producer_still_waits_for(broker_factory):
    """A split partition's first HA report acknowledges every byte below its start (docs/source.md
    "Acknowledgements"), so on a SYNC_MASTER a split comes only once those bytes are older than the replica wait."""
    broker = broker_factory(brokerRole="SYNC_MASTER", mappedFileSizeCommitLog=FILE, slaveTimeout=300,
                            syncFlushTimeout=300)
    produce(broker, 5000)
    r = HAReplicaStreamReader(SourceOptions.from_options({"brokers": brokers_option(broker), "minPartitions": "4"}))
    start = r.initialOffset()
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert len(r.partitions(start, end)) == 1  # just appended: a producer may still wait for these bytes
    time.sleep(1.5)  # max(slaveTimeout, syncFlushTimeout) + the 1 s margin
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert len(r.partitions(start, end)) == 4


def test_bronze_direct_landing_of_split_partitions_lands_every_message_once(hareplica_spark, big_master, tmp_path):
    """The bronze app's direct landing (each task writes its own Parquet files) with four tasks in one mapped file."""
    from streaming_apps.apps import AppConfig, run_app
    from streaming_apps.query import query_tables

    broker, sent = big_master
    cfg = AppConfig(app="bronze", brokers=brokers_option(broker), workdir=tmp_path, trigger="available-now",
                    min_partitions=4)
    result = run_app(hareplica_spark, cfg, max_runtime_s=300)
    rows = query_tables("SELECT topic, body, commitLogOffset FROM bronze ORDER BY commitLogOffset",
                        {"bronze": str(cfg.table_path("bronze"))}).to_pylist()
    assert result.rows == len(sent) and [(r["topic"], r["body"]) for r in rows] == sent
    assert len({r["commitLogOffset"] for r in rows}) == len(sent)
    assert len(DeltaTable(str(cfg.table_path("bronze"))).file_uris()) >= 4  # one task per piece wrote its files
