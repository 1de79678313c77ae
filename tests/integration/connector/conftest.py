"""Fixtures for the source's integration tests: stub masters serving the golden CommitLog, fresh stub
masters for producing, and a helper that runs a ``format("hareplica")`` stream to completion."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.brokers import FIXTURE_MASTER_PROPS, BrokerProcess, write_delivered_delay_offsets
from tests.support.fixtures import broker_factory  # noqa: F401 - re-exported fixture

MAPPED_FILE_SIZE = 1048576
FIXTURE_MAX_OFFSET = 3402931
QUERY_TIMEOUT_S = 180


def brokers_option(broker: BrokerProcess, name: str = "broker-a") -> str:
    """The ``brokers`` option for one stub: short form when its HA port is listenPort + 1."""
    if broker.ha_port == broker.listen_port + 1:
        return f"{name}={broker.ha_addr}"
    return f"{name}={broker.ha_addr}/{broker.remoting_addr}"


def start_fixture_master(workdir: Path, fixture_dir: Path, files: list[str] | None = None) -> BrokerProcess:
    """A stub ASYNC_MASTER whose store holds copies of the fixture CommitLog files (all, or ``files``)."""
    commitlog = workdir / "commitlog"
    commitlog.mkdir(parents=True)
    for f in sorted((fixture_dir / "commitlog").iterdir()):
        if files is None or f.name in files:
            shutil.copyfile(f, commitlog / f.name)
    write_delivered_delay_offsets(workdir / "store", fixture_dir)
    return BrokerProcess.start(workdir, mappedFileSizeCommitLog=MAPPED_FILE_SIZE, storePathCommitLog=str(commitlog),
                               haSendHeartbeatInterval=1000, **FIXTURE_MASTER_PROPS)


@pytest.fixture(scope="module")
def fixture_master(tmp_path_factory, fixture_dir) -> Iterator[BrokerProcess]:
    """A stub master serving the four golden CommitLog files unchanged (module-wide, never written to)."""
    broker = start_fixture_master(tmp_path_factory.mktemp("fixture-master"), fixture_dir)
    try:
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            broker.kill9()


@pytest.fixture(scope="module")
def fixture_commitlog(fixture_dir) -> bytes:
    """The golden CommitLog files back to back (byte i = CommitLog offset i)."""
    return b"".join(f.read_bytes() for f in sorted((fixture_dir / "commitlog").iterdir()))


@pytest.fixture(scope="module")
def messages(fixture_dir) -> list[dict]:
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="session")
def hareplica_spark(spark):
    """The shared Spark session with ``format("hareplica")`` registered."""
    try:
        from streaming_apps.spark_session import register_data_sources

        register_data_sources(spark)
    except ImportError:
        from connector.source import HAReplicaDataSource

        spark.dataSource.register(HAReplicaDataSource)
    return spark


class StreamRun:
    """What one streaming run produced: batches ``[(batchId, [row dict])]`` and the query progress."""

    def __init__(self, batches, progress):
        self.batches = batches
        self.progress = progress

    @property
    def rows(self) -> list[dict]:
        return [r for _, rows in self.batches for r in rows]

    @property
    def end_offsets(self) -> list[dict]:
        """Each batch's end offset per broker (the record fingerprints it also carries left out)."""
        return [{k: v for k, v in json.loads(p["sources"][0]["endOffset"]).items() if not k.startswith("@")}
                for p in self.progress]


def run_stream(spark, checkpoint: Path, options: dict[str, str], *, fail_on_batch: int | None = None,
               collected: list | None = None, timeout_s: float = QUERY_TIMEOUT_S) -> StreamRun:
    """Run ``readStream.format("hareplica")`` with Trigger.AvailableNow into a foreachBatch collector.

    Rows come back as dicts with timestamps as epoch ms (``unix_millis``). ``fail_on_batch`` makes the
    sink raise in that batch (a crash before the batch commits); ``collected`` receives the batches as
    they complete, also when the query then fails. Raises StreamingQueryException when the query
    fails; fails the test when it does not finish within ``timeout_s``.
    """
    batches: list[tuple[int, list[dict]]] = [] if collected is None else collected

    def collect(df, batch_id):
        if fail_on_batch is not None and batch_id == fail_on_batch:
            raise RuntimeError(f"simulated crash in batch {batch_id}")
        out = df.selectExpr("*", "unix_millis(bornTimestamp) AS bornMs", "unix_millis(storeTimestamp) AS storeMs")
        batches.append((batch_id, [r.asDict(recursive=False) for r in out.collect()]))

    reader = spark.readStream.format("hareplica")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        finished = query.awaitTermination(timeout_s)
        assert finished, f"streaming query did not finish within {timeout_s} s; progress: {query.lastProgress}"
    finally:
        if query.isActive:
            query.stop()
    return StreamRun(batches, query.recentProgress)
