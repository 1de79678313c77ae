"""connector.worker_warmup: the Python workers an app warms while its query starts are the ones its reads then use.

The shared session's Python workers are counted from /proc: the children of its pyspark daemons (the daemons
are children of the driver JVM). The test gives the session a worker pool of its own (Spark keeps one pool per
worker environment, and a SQL conf of the Python runners changes that environment), so that idle workers left
by earlier tests cannot serve the reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_stub.launcher import BrokerProcess
from connector.worker_warmup import start_warmup
from streaming_apps.apps import AppConfig
from streaming_apps.apps import start as start_app
from streaming_apps.spark_session import register_data_sources

pytestmark = pytest.mark.spark

#: a SQL conf that only the SQL Python runners put into the workers' environment (PYTHON_FAULTHANDLER_DIR): with it
#: on, the test's tasks get a pool of their own, neither earlier tests' nor an RDD job's (whose runner ignores it)
OWN_POOL_CONF = "spark.sql.execution.pyspark.udf.faulthandler.enabled"
TIMEOUT_S = 240


def _python_workers(jvm_pid: int) -> set[int]:
    """Process ids of the task workers forked by the pyspark daemons that the JVM ``jvm_pid`` started (the daemons
    of the planners' worker modules, ``pyspark.sql.worker.*``, fork workers of their own: not counted)."""
    parents, cmdlines = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdlines[int(entry.name)] = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    daemons = {pid for pid, ppid in parents.items()  # python -m pyspark.daemon pyspark.worker (not a planner's)
               if ppid == jvm_pid and cmdlines[pid].endswith(b"\0pyspark.daemon\0pyspark.worker\0")}
    return {pid for pid, ppid in parents.items() if ppid in daemons}


@pytest.fixture
def own_worker_pool(spark):
    register_data_sources(spark)
    previous = spark.conf.get(OWN_POOL_CONF)
    assert previous == "false", f"{OWN_POOL_CONF}={previous}: the test's pool would not be its own"
    spark.conf.set(OWN_POOL_CONF, "true")
    try:
        yield int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    finally:
        spark.conf.set(OWN_POOL_CONF, previous)


def test_the_bronze_reads_run_in_the_workers_the_warmup_started(spark, own_worker_pool, tmp_path):
    jvm_pid = own_worker_pool
    with BrokerProcess.start(tmp_path / "broker", mappedFileSizeCommitLog=1024 * 1024) as broker:
        from connector.client.producer import Producer

        with Producer(broker.remoting_addr, "warmup-test") as producer:
            for i in range(2000):
                producer.send("Warmup", f"message {i}".encode() * 40)
        before = _python_workers(jvm_pid)
        config = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=tmp_path / "work",
                           trigger="available-now", min_partitions=2, warm_workers=2)
        running = start_app(spark, config)
        try:
            assert running.wait(TIMEOUT_S), "bronze did not finish"
        finally:
            running.close()
        warmed = set(running.warmup.wait(TIMEOUT_S))
        assert running.warmup.error is None
        new = _python_workers(jvm_pid) - before
    rows = sum(int(p.get("numInputRows") or 0) for p in running.progress)
    assert rows == 2000
    assert len(warmed) == 2, f"two tasks, two workers: {warmed}"
    # the reads forked no worker of their own: every worker started during the run is a warmed one
    assert new == warmed, f"workers started during the run {sorted(new)}, warmed {sorted(warmed)}"


def test_no_warmup_without_workers(spark):
    assert start_warmup(spark, 0) is None


def test_a_warmup_that_fails_reports_its_error_and_raises_nothing(spark, own_worker_pool):
    warmup = start_warmup(spark, 1, ("connector.no_such_module",))
    assert warmup.wait(TIMEOUT_S) == []
    assert "no_such_module" in str(warmup.error)
