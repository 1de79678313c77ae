"""connector.source planning that needs no broker: partition slicing, pickling, read limits, schema."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes

from connector.client.admin import BrokerAdminClient
from connector.errors import BrokerAdminError, DataLossError, HAReplicaOptionError
from connector.options.parse import SourceOptions
from connector.source import HAReplicaDataSource, HAReplicaInputPartition, HAReplicaStreamReader
from connector.source.driver.batches import apply_byte_limit
from connector.source.driver.brokers import BrokerSetView, ServerOffsets
from connector.source.driver.offsets import SourceOffset
from connector.source.task.partition_reader import PartitionReader

MB = 1048576


def no_history_reads(r: HAReplicaStreamReader) -> None:
    """Planning without brokers: no HA reads for fingerprints or history checks (test_history covers them)."""
    r.planner.verified_begin = lambda broker, view, start, begin, min_offset, max_offset: begin
    r.planner.with_fingerprints = lambda start, spans, ends: SourceOffset(dict(ends))


def reader(**opts) -> HAReplicaStreamReader:
    r = HAReplicaStreamReader(SourceOptions.from_options({"brokers": "broker-a=127.0.0.1:10912,broker-b=h:20912",
                                                          **opts}))
    # what the driver learns from GET_BROKER_CONFIG / GET_BROKER_RUNTIME_INFO
    for broker, size, min_offset in ((r.options.brokers[0], MB, 0), (r.options.brokers[1], 4 * MB, 4 * MB)):
        view = BrokerSetView(broker.name, size)
        view.master = ServerOffsets(broker, "master", min_offset, 10 * MB)
        view.slaves = [ServerOffsets(s, "slave", min_offset, 10 * MB) for s in r.options.slaves_of(broker.name)]
        r.planner.brokers.views[broker.name] = view
    no_history_reads(r)
    return r


def spans(parts):
    return [(p.broker, p.start, p.end) for p in parts]


def test_one_partition_per_broker_and_mapped_file_slice():
    r = reader()
    parts = r.partitions({"broker-a": 554616, "broker-b": 4 * MB}, {"broker-a": 3402931, "broker-b": 9 * MB + 7})
    assert spans(parts) == [
        ("broker-a", 554616, MB), ("broker-a", MB, 2 * MB), ("broker-a", 2 * MB, 3 * MB), ("broker-a", 3 * MB, 3402931),
        ("broker-b", 4 * MB, 8 * MB), ("broker-b", 8 * MB, 9 * MB + 7)]
    p = parts[0]
    assert (p.ha_addr, p.remoting_addr, p.mapped_file_size) == ("127.0.0.1:10912", "127.0.0.1:10911", MB)
    assert parts[-1].ha_addr == "h:20912" and parts[-1].remoting_addr == "h:20911"
    assert p.fetch == r.options.fetch


def test_empty_ranges_plan_no_partition():
    r = reader()
    assert r.partitions({"broker-a": 5, "broker-b": 4 * MB}, {"broker-a": 5, "broker-b": 4 * MB}) == []


def test_partitions_and_reader_pickle_without_connections():
    r = reader()
    r.planner.brokers.admins["127.0.0.1:1"] = BrokerAdminClient("127.0.0.1:1", 100)
    part = r.partitions({"broker-a": 0}, {"broker-a": 10})[0]
    assert isinstance(part, HAReplicaInputPartition)
    assert pickle.loads(pickle.dumps(part)) == part
    clone = pickle.loads(pickle.dumps(r))  # what a task gets: read() only, no options, planner or connection
    assert type(clone) is PartitionReader and vars(clone) == {}


def test_start_below_the_min_offset_is_data_loss_or_skipped():
    r = reader()
    with pytest.raises(DataLossError, match=r"broker broker-b .* CommitLog bytes \[0, 4194304\).*failOnDataLoss"):
        r.partitions({"broker-a": 0, "broker-b": 0}, {"broker-a": 0, "broker-b": 5 * MB})
    lenient = reader(failOnDataLoss="false")
    assert spans(lenient.partitions({"broker-b": 0}, {"broker-b": 5 * MB})) == [
        ("broker-b", 4 * MB, 5 * MB)]


def limit(r: HAReplicaStreamReader, spans: dict[str, tuple[int, int]], max_bytes: int) -> dict[str, int]:
    return apply_byte_limit(r.options.brokers, r.planner.brokers.views, spans, max_bytes)


def test_byte_limit_cuts_at_the_first_known_boundary_and_splits_by_backlog():
    r = reader()
    r.planner.brokers.views["broker-a"].add_boundary(700000)
    r.planner.brokers.views["broker-a"].add_boundary(900000)
    # broker-a has 3 MB of backlog, broker-b none: the whole budget goes to broker-a
    ends = limit(r, {"broker-a": (554616, 3402931), "broker-b": (4 * MB, 4 * MB)}, 100000)
    assert ends == {"broker-a": 700000, "broker-b": 4 * MB}  # an observed commitLogMaxOffset
    ends = limit(r, {"broker-a": (554616, 3402931), "broker-b": (4 * MB, 4 * MB)}, 400000)
    assert ends["broker-a"] == MB  # the next mapped-file start
    ends = limit(r, {"broker-a": (0, 3 * MB), "broker-b": (4 * MB, 7 * MB)}, 2 * MB)
    assert ends == {"broker-a": MB, "broker-b": 7 * MB}  # share 1 MB each, cut at file starts / the max
    assert limit(r, {"broker-a": (0, 10), "broker-b": (4 * MB, 4 * MB + 5)}, 100) == {
        "broker-a": 10, "broker-b": 4 * MB + 5}


def test_default_read_limit():
    assert reader().getDefaultReadLimit() == ReadAllAvailable()
    assert reader(maxBytesPerTrigger="12345").getDefaultReadLimit() == ReadMaxBytes(12345)


def test_data_source_validates_options_when_created():
    src = HAReplicaDataSource({"brokers": "broker-a=127.0.0.1:10912"})
    assert HAReplicaDataSource.name() == "hareplica"
    assert src.schema().fieldNames()[0] == "topic"
    assert isinstance(src.streamReader(src.schema()), HAReplicaStreamReader)
    with pytest.raises(HAReplicaOptionError, match="option brokers"):
        HAReplicaDataSource({})
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    assert src.streamReader(src.schema()).columns is None and src.streamReader(None).columns is None
    subset = StructType([StructField("body", BinaryType()), StructField("topic", StringType())])
    assert src.streamReader(subset).columns == ("body", "topic")  # a subset, in the schema's order
    with pytest.raises(HAReplicaOptionError, match=r"option schema=.*nosuch is not a column of format"):
        src.streamReader(StructType([StructField("nosuch", StringType())]))
    with pytest.raises(HAReplicaOptionError, match="column topic is string, not bigint"):
        src.streamReader(StructType([StructField("topic", LongType())]))


def test_unreachable_broker_fails_planning_naming_address_and_request():
    with socket_free_port() as port:
        r = HAReplicaStreamReader(SourceOptions.from_options({"brokers": f"broker-a=127.0.0.1:{port + 1}",
                                                              "readTimeoutMs": "500", "maxOutageMs": "300"}))
    with pytest.raises(BrokerAdminError, match=f"broker broker-a remoting 127.0.0.1:{port}: unreachable for .*"
                                               f"maxOutageMs=300; last error: GET_BROKER_CONFIG \\(26\\) to broker "
                                               f"127.0.0.1:{port} failed"):
        r.initialOffset()


class socket_free_port:
    """A loopback port that nothing listens on (bound, read, released)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def __exit__(self, *exc) -> None:
        return None



def test_a_batch_read_is_unsettled_while_a_partition_start_is_within_the_ack_window():
    from connector.source.driver.ranges import unsettled

    view = BrokerSetView("broker-a", 1000, ack_window_ms=1000)
    view.note_master_max(3500, now_s=0.0)  # [0, 3500) first seen at 0 s
    assert unsettled(view, 0, 3500, 0, 0.5)  # the partition of file 3000 would acknowledge bytes below it
    assert not unsettled(view, 0, 900, 0, 0.5)  # one partition, at the log's first byte
    assert unsettled(view, 3200, 3500, 0, 0.5)  # one partition, at a start a producer may still wait on
    assert not unsettled(view, 3200, 3200, 0, 0.5)  # empty: no partition
    assert not unsettled(view, 0, 3500, 0, 1.0) and not unsettled(view, 3200, 3500, 0, 1.0)  # the window passed
