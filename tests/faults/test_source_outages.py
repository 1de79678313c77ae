"""``format("hareplica")`` through a master outage: SIGKILL the stub master while the query runs, restart it
on the same store later, and the running query finishes without a restart, with every record of the
CommitLog exactly once (docs/source.md "Broker outages")."""

from __future__ import annotations

import threading

import pytest

from connector.protocol.commitlog import MessageRecord
from tests.integration.connector.conftest import brokers_option
from tests.integration.connector.test_source_cluster import FILE, produce
from tests.support.brokers import read_commitlog

pytestmark = pytest.mark.spark

QUERY_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def source_spark(spark):
    """The shared Spark session with format("hareplica") registered."""
    from streaming_apps.spark_session import register_data_sources

    register_data_sources(spark)
    return spark


def _run_with_outage(spark, master, checkpoint, *, kill_batch: int, before_collect: bool, down_s: float) -> list:
    """Run an AvailableNow query (one mapped file per batch); in batch ``kill_batch`` SIGKILL the master
    (before the batch's rows are read, so a task meets the outage, or after, so the driver's planning of
    the next batch does) and restart it ``down_s`` seconds later. Returns ``[(batchId, rows)]``."""
    delivered: list = []
    restarted: list[threading.Timer] = []

    def per_batch(df, batch_id):
        if batch_id == kill_batch and before_collect:
            _kill_and_restart_later(master, down_s, restarted)
        delivered.append((batch_id, [r.asDict() for r in df.select("commitLogOffset", "topic", "bodyCRC").collect()]))
        if batch_id == kill_batch and not before_collect:
            _kill_and_restart_later(master, down_s, restarted)

    options = {"brokers": brokers_option(master), "maxBytesPerTrigger": str(FILE), "connectTimeoutMs": "1000",
               "readTimeoutMs": "3000"}  # reconnectBackoffMs, reconnectBackoffMaxMs, maxOutageMs: defaults
    query = (spark.readStream.format("hareplica").options(**options).load().writeStream
             .foreachBatch(per_batch).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), f"the query did not finish; last progress {query.lastProgress}"
        assert query.exception() is None
    finally:
        if query.isActive:
            query.stop()
        for timer in restarted:
            timer.join(60)
    assert restarted, "the master was never killed"
    return delivered


def _kill_and_restart_later(master, down_s: float, timers: list) -> None:
    master.kill9()
    timer = threading.Timer(down_s, master.restart)
    timer.start()
    timers.append(timer)


def _assert_exactly_the_commitlog(delivered: list, master) -> None:
    assert [b for b, _ in delivered] == list(range(len(delivered)))  # one run, no batch replayed or skipped
    rows = sorted((r for _, rows in delivered for r in rows), key=lambda r: r["commitLogOffset"])
    offsets = [r["commitLogOffset"] for r in rows]
    assert len(offsets) == len(set(offsets)), "a record was delivered twice"
    stored = [rec for rec in read_commitlog(master.commitlog_dir) if isinstance(rec, MessageRecord)]
    assert offsets == [rec.commit_log_offset for rec in stored], "lost or extra records against the CommitLog"
    assert [(r["topic"], r["bodyCRC"]) for r in rows] == [(rec.topic, rec.body_crc) for rec in stored]


def test_master_down_30_s_mid_batch_is_waited_out_by_the_task(source_spark, broker_factory, tmp_path):
    master = broker_factory("master", mappedFileSizeCommitLog=FILE)
    produce(master, 250)
    delivered = _run_with_outage(source_spark, master, tmp_path / "cp", kill_batch=1, before_collect=True,
                                 down_s=30)
    assert len(delivered) >= 4
    _assert_exactly_the_commitlog(delivered, master)


def test_master_down_between_batches_is_waited_out_by_the_driver(source_spark, broker_factory, tmp_path):
    master = broker_factory("master", mappedFileSizeCommitLog=FILE)
    produce(master, 250)
    delivered = _run_with_outage(source_spark, master, tmp_path / "cp", kill_batch=1, before_collect=False,
                                 down_s=8)
    assert len(delivered) >= 4
    _assert_exactly_the_commitlog(delivered, master)


def test_read_from_slave_reads_around_a_master_killed_mid_query(source_spark, broker_factory, tmp_path):
    from tests.integration.connector.test_source_cluster import start_pair
    from tests.support.brokers import max_offset, wait_for_offset

    master, slave = start_pair(broker_factory)
    produce(master, 200)
    wait_for_offset(slave.remoting_addr, max_offset(master.remoting_addr))
    delivered: list = []

    def per_batch(df, batch_id):
        if batch_id == 1:
            master.kill9()  # not restarted: the rest is planned and read from the slave
        delivered.append((batch_id, [r.asDict() for r in df.select("commitLogOffset", "topic", "bodyCRC").collect()]))

    options = {"brokers": brokers_option(master), "slaves": f"broker-a={slave.ha_addr}", "readFrom": "slave",
               "maxBytesPerTrigger": str(FILE), "connectTimeoutMs": "1000", "readTimeoutMs": "3000"}
    query = (source_spark.readStream.format("hareplica").options(**options).load().writeStream
             .foreachBatch(per_batch).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), f"the query did not finish; last progress {query.lastProgress}"
        assert query.exception() is None
    finally:
        if query.isActive:
            query.stop()
    assert len(delivered) >= 4 and not master.is_running()
    _assert_exactly_the_commitlog(delivered, slave)
