"""connector.client.admin and connector.client.ha against real broker-stub masters (no Spark)."""

from __future__ import annotations

import json
import threading

import pytest

from connector.client.admin import BrokerAdminClient
from connector.client.ha import HARangeFetcher, prefetch_receives
from connector.errors import BrokerAdminError, DataLossError
from connector.options.settings import FetchSettings
from tests.integration.connector.conftest import FIXTURE_MAX_OFFSET, MAPPED_FILE_SIZE, start_fixture_master
from tests.support.brokers import runtime_info, wait_for
from tests.support.decoding import decode_commitlog_range


def test_admin_reads_offsets_and_config_of_the_stub(fixture_master):
    with BrokerAdminClient(fixture_master.remoting_addr, 5000) as admin:
        assert admin.commit_log_offsets() == (0, FIXTURE_MAX_OFFSET)
        assert admin.commit_log_min_offset() == 0
        assert admin.commit_log_max_offset() == FIXTURE_MAX_OFFSET
        assert admin.mapped_file_size() == MAPPED_FILE_SIZE
        config = admin.broker_config()
        assert config["brokerRole"] == "ASYNC_MASTER"
        assert admin.ha_protocol(config) == "classic"
        assert admin.runtime_info()["brokerVersionDesc"] == "V4_9_8"
        with pytest.raises(BrokerAdminError, match=f"request \\(9999\\) to broker {fixture_master.remoting_addr} "
                                                   "answered code 3"):
            admin.invoke(9999)
        assert admin.commit_log_max_offset() == FIXTURE_MAX_OFFSET  # the connection recovers


def test_admin_error_names_address_and_request():
    with BrokerAdminClient("127.0.0.1:1", 500) as admin:
        with pytest.raises(BrokerAdminError, match=r"GET_BROKER_RUNTIME_INFO \(28\) to broker 127.0.0.1:1 failed"):
            admin.commit_log_offsets()


@pytest.mark.parametrize("start, end", [(0, MAPPED_FILE_SIZE), (554616, FIXTURE_MAX_OFFSET), (0, FIXTURE_MAX_OFFSET),
                                        (2097152, 2097152 + 40000)])
def test_fetched_ranges_equal_the_commitlog_bytes(fixture_master, fixture_commitlog, start, end):
    with BrokerAdminClient(fixture_master.remoting_addr, 5000) as admin, \
            HARangeFetcher(fixture_master.ha_addr, start, end, offsets_probe=admin.commit_log_offsets,
                           settings=FetchSettings(heartbeat_interval_ms=200)) as fetcher:
        chunks = list(fetcher)
    assert chunks[0][0] == start
    assert all(a[0] + len(a[1]) == b[0] for a, b in zip(chunks, chunks[1:], strict=False))
    assert b"".join(c for _, c in chunks) == fixture_commitlog[start:end]
    # the only offset ever reported is the range start (1 for a range from 0): nothing is acknowledged
    assert (fetcher.min_reported_offset, fetcher.max_reported_offset) == (max(start, 1), max(start, 1))


def test_fetch_and_decode_the_whole_fixture_equals_messages(fixture_master, messages):
    fetcher = HARangeFetcher(fixture_master.ha_addr, 0, FIXTURE_MAX_OFFSET)
    batches = list(decode_commitlog_range(fetcher, 0, FIXTURE_MAX_OFFSET, MAPPED_FILE_SIZE, broker="broker-a"))
    offsets = [o for b in batches for o in b.column("commitLogOffset").to_pylist()]
    assert offsets == [m["commitLogOffset"] for m in messages]
    assert [i for b in batches for i in b.column("msgId").to_pylist()] == [m["msgId"] for m in messages]


@pytest.fixture(scope="module")
def lossy_master(tmp_path_factory, fixture_dir):
    """A stub master that no longer has file 0 (as after retention): commitLogMinOffset = 1048576."""
    broker = start_fixture_master(tmp_path_factory.mktemp("lossy-master"), fixture_dir,
                                  files=[f"{i * MAPPED_FILE_SIZE:020d}" for i in (1, 2, 3)])
    try:
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            broker.kill9()


def test_fetching_deleted_bytes_is_data_loss(lossy_master):
    with BrokerAdminClient(lossy_master.remoting_addr, 5000) as admin:
        assert admin.commit_log_offsets() == (MAPPED_FILE_SIZE, FIXTURE_MAX_OFFSET)
        fetcher = HARangeFetcher(lossy_master.ha_addr, 554616, MAPPED_FILE_SIZE + 5000, broker="broker-a",
                                 offsets_probe=admin.commit_log_offsets)
        with pytest.raises(DataLossError, match=r"no longer holds CommitLog bytes \[554616, 1048576\).*"
                                                r"commitLogMinOffset is 1048576"):
            list(fetcher)


def test_fetching_deleted_bytes_without_fail_on_data_loss_skips_to_the_min_offset(lossy_master, fixture_commitlog):
    end = MAPPED_FILE_SIZE + 70000
    with BrokerAdminClient(lossy_master.remoting_addr, 5000) as admin:
        fetcher = HARangeFetcher(lossy_master.ha_addr, 0, end, broker="broker-a", fail_on_data_loss=False,
                                 offsets_probe=admin.commit_log_offsets)
        chunks = list(fetcher)
    assert fetcher.lost_ranges == [(0, MAPPED_FILE_SIZE)]
    assert chunks[0] == (MAPPED_FILE_SIZE, b"")
    assert b"".join(c for _, c in chunks) == fixture_commitlog[MAPPED_FILE_SIZE:end]


# --- receive-ahead thread (connector.source reads through it) ---------------------------------------------
def test_prefetched_chunks_are_the_fetchers_chunks(fixture_master, fixture_commitlog):
    start, end = 554616, FIXTURE_MAX_OFFSET
    with HARangeFetcher(fixture_master.ha_addr, start, end) as fetcher:
        chunks = [chunk for spans in prefetch_receives(fetcher, depth=2) for chunk in spans]
    assert chunks[0][0] == start
    assert all(a[0] + len(a[1]) == b[0] for a, b in zip(chunks, chunks[1:], strict=False))
    assert b"".join(c for _, c in chunks) == fixture_commitlog[start:end]
    assert not [t for t in threading.enumerate() if t.name.startswith("ha-prefetch")]


def test_prefetch_needs_owned_chunks(fixture_master):
    with pytest.raises(ValueError, match="keep_views=True"):
        next(prefetch_receives(HARangeFetcher(fixture_master.ha_addr, 0, 10, keep_views=False), depth=4))


def test_prefetch_raises_the_fetchers_error_in_the_consumer(lossy_master):
    with BrokerAdminClient(lossy_master.remoting_addr, 5000) as admin:
        fetcher = HARangeFetcher(lossy_master.ha_addr, 554616, MAPPED_FILE_SIZE + 5000, broker="broker-a",
                                 offsets_probe=admin.commit_log_offsets)
        with pytest.raises(DataLossError, match=r"no longer holds CommitLog bytes \[554616, 1048576\)"):
            list(prefetch_receives(fetcher, depth=4))


def test_closing_the_consumer_early_cancels_the_fetch_and_its_connection(fixture_master):
    fetcher = HARangeFetcher(fixture_master.ha_addr, 0, FIXTURE_MAX_OFFSET)
    receives = prefetch_receives(fetcher, depth=1)
    first = next(receives)[0]
    assert first[0] == 0
    wait_for(lambda: json.loads(runtime_info(fixture_master.remoting_addr)["haConnections"]), "the fetch's connection")
    receives.close()  # Spark stops reading a partition (task killed, limit reached)
    assert fetcher.cancelled and fetcher.delivered < FIXTURE_MAX_OFFSET
    assert not [t for t in threading.enumerate() if t.name.startswith("ha-prefetch")]
    wait_for(lambda: json.loads(runtime_info(fixture_master.remoting_addr)["haConnections"]) == [],
             "the master to drop the cancelled connection")
