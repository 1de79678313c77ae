"""streaming_apps.worker_warmup: the Python workers an app warms while its query starts are the ones its reads then use,
and the read planner's worker it warms is the one the stream's first micro-batch plans in.

The shared session's Python workers are counted from /proc: the children of its pyspark daemons (the daemons
are children of the driver JVM). The test gives the session a worker pool of its own (Spark keeps one pool per
worker environment, and a SQL conf of the Python runners changes that environment), so that idle workers left
by earlier tests cannot serve the reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_stub.launcher import BrokerProcess
from streaming_apps.apps import AppConfig
from streaming_apps.apps import start as start_app
from streaming_apps.spark_session import register_data_sources
from streaming_apps.worker_warmup import start_warmup

pytestmark = pytest.mark.spark

#: a SQL conf that only the SQL Python runners put into the workers' environment (PYTHON_FAULTHANDLER_DIR): with it
#: on, the test's tasks get a pool of their own, neither earlier tests' nor an RDD job's (whose runner ignores it)
OWN_POOL_CONF = "spark.sql.execution.pyspark.udf.faulthandler.enabled"
TIMEOUT_S = 240


def _python_workers(jvm_pid: int, worker_module: bytes = b"pyspark.worker") -> set[int]:
    """Process ids of the workers forked by the pyspark daemons of ``worker_module`` that the JVM ``jvm_pid``
    started: by default the task workers (the daemons of the planners' worker modules, ``pyspark.sql.worker.*``,
    fork workers of their own: not counted)."""
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
               if ppid == jvm_pid and cmdlines[pid].endswith(b"\0pyspark.daemon\0" + worker_module + b"\0")}
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


PLANNER = b"pyspark.sql.worker.plan_data_source_read"


@pytest.fixture
def no_idle_planner_worker(spark):
    """The JVM's pid, its read planner's pool emptied first: the idle planner workers earlier tests left are killed
    (Spark drops a dead idle worker when it next takes one from the pool). The planner's pool cannot be made the
    test's own as the task workers' is: the stream's planning does not see the session's faulthandler conf."""
    import os
    import signal
    import time

    register_data_sources(spark)
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    idle = _python_workers(jvm_pid, PLANNER)
    for pid in idle:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + TIMEOUT_S
    while idle & _python_workers(jvm_pid, PLANNER):  # gone once their daemon has reaped them
        assert time.monotonic() < deadline, f"idle planner workers {idle} still there"
        time.sleep(0.05)
    return jvm_pid


def test_the_streams_first_planning_runs_in_the_planner_worker_the_warmup_started(spark, no_idle_planner_worker,
                                                                                   tmp_path):
    """The warm-up ends first, so its planner worker is idle when bronze starts: the stream must plan in it and
    start no planner worker of its own (without the planner's warm-up, the first micro-batch forks one)."""
    jvm_pid = no_idle_planner_worker
    with BrokerProcess.start(tmp_path / "broker", mappedFileSizeCommitLog=1024 * 1024) as broker:
        from connector.client.producer import Producer

        with Producer(broker.remoting_addr, "warmup-test") as producer:
            for i in range(200):
                producer.send("Warmup", f"message {i}".encode())
        warmup = start_warmup(spark, 1)
        warmup.wait(TIMEOUT_S)
        assert warmup.planner_error is None and warmup.error is None
        warmed = _python_workers(jvm_pid, PLANNER)
        config = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=tmp_path / "work",
                           trigger="available-now", warm_workers=0)
        running = start_app(spark, config)
        try:
            assert running.wait(TIMEOUT_S), "bronze did not finish"
        finally:
            running.close()
        after = _python_workers(jvm_pid, PLANNER)
    assert sum(int(p.get("numInputRows") or 0) for p in running.progress) == 200
    assert len(warmed) == 1, f"the warm-up planned in one new planner worker: {warmed}"
    assert after == warmed, f"planner workers after the stream: {sorted(after)}, the warm-up's: {sorted(warmed)}"


def test_a_planner_warmup_that_fails_reports_its_error_and_raises_nothing(spark, own_worker_pool):
    warmup = start_warmup(spark, 1, planner_modules=("connector.no_such_planner_module",))
    warmup.wait(TIMEOUT_S)
    assert warmup.error is None
    assert "no_such_planner_module" in str(warmup.planner_error)


def test_no_warmup_without_workers(spark):
    assert start_warmup(spark, 0) is None


def test_a_warmup_that_fails_reports_its_error_and_raises_nothing(spark, own_worker_pool):
    warmup = start_warmup(spark, 1, ("connector.no_such_module",))
    assert warmup.wait(TIMEOUT_S) == []
    assert "no_such_module" in str(warmup.error)
