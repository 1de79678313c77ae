"""The bronze app on a Spark standalone cluster whose executors run the packed environment (docs/deployment.md).

A stub master holds ~6 MiB of messages in 512 KiB mapped files (a dozen micro-batches). Each test runs
the app as users submit it, in its own process session with a clean environment: ``hareplica run bronze --master spark://...
--archives ENV#environment --conf spark.pyspark.python=./environment/bin/python``, or ``spark-submit``
of ``streaming_apps/submit.py`` with the driver on the packed environment too. The bronze table is read
back with deltalake and compared with the broker's CommitLog: every message once, same body.

While an app runs, a watcher records the Python processes under the cluster's folder, so the tests see
that the executors' Python workers were ``./environment/bin/python`` in their executor folders.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.package import EXECUTOR_PYTHON
from tests.cluster.app_runs import (
    PythonWatcher,
    app_args,
    app_names,
    batches,
    executor_workers,
    finish,
    kill_session,
    new_executor_dirs,
    packed_run,
    start,
    tail,
)
from tests.cluster.standalone import executor_tasks, spark_home

pytestmark = pytest.mark.cluster

MAPPED_FILE_SIZE = 512 * 1024  # a micro-batch ends at a mapped-file start (docs/source.md "Batches")
MESSAGES = 12_000
BODY_BYTES = 384
MAX_BYTES_PER_TRIGGER = 512 * 1024
WAIT_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("cluster-broker"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "cluster-test") as producer:
            futures = [producer.send_async(f"ClusterTopic{i % 3}", i.to_bytes(4, "big") * (BODY_BYTES // 4))
                       for i in range(MESSAGES)]
            assert {f.result(timeout=120).send_status for f in futures} == {"SEND_OK"}
        yield b


@pytest.fixture(scope="module")
def commitlog(broker) -> dict[int, bytes]:
    """``{commitLogOffset: body}`` of every message in the broker's CommitLog."""
    out = {rec.commit_log_offset: rec.body for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
    assert len(out) == MESSAGES
    return out


def bronze_args(broker, cluster, workdir: Path, *extra: str) -> list[str]:
    return app_args("bronze", broker, cluster, workdir, MAX_BYTES_PER_TRIGGER, *extra)


def hareplica_run(broker, cluster, env_archive, workdir: Path) -> list[str]:
    return packed_run(bronze_args(broker, cluster, workdir), env_archive)


def assert_bronze_exactly_once(table: Path, commitlog: dict[int, bytes]) -> None:
    rows = DeltaTable(str(table)).to_pyarrow_table(columns=["commitLogOffset", "body"]).to_pylist()
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert not set(commitlog) - set(counts), f"{len(set(commitlog) - set(counts))} messages lost"
    assert not set(counts) - set(commitlog), "rows that are no message of the CommitLog"
    assert max(counts.values()) == 1, f"{sum(1 for c in counts.values() if c > 1)} messages twice"
    assert all(commitlog[r["commitLogOffset"]] == r["body"] for r in rows), "bodies as stored"


def wait_until(predicate, what: str, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while not (value := predicate()):
        assert proc.poll() is None, f"the app ended (exit {proc.returncode}) before {what}:\n{tail(log)}"
        assert time.monotonic() < deadline, f"no {what} in {WAIT_TIMEOUT_S} s:\n{tail(log)}"
        time.sleep(0.05)
    return value


def test_a_worker_then_the_driver_killed_mid_batch_lose_and_duplicate_nothing(
        broker, commitlog, spark_cluster, env_archive, tmp_path):
    """``hareplica run`` from the packed environment on the cluster, a Worker and then the driver SIGKILLed, the
    same command again: every message once, and the executors ran the archive's Python."""
    workdir, log = tmp_path / "wd", tmp_path / "bronze.log"
    checkpoint = workdir / "checkpoints" / "bronze"
    victim, survivor = 1, 2
    with PythonWatcher(spark_cluster.root) as watcher:  # both runs
        proc = start(hareplica_run(broker, spark_cluster, env_archive, workdir), log, tmp_path)
        try:
            first_app = app_names(spark_cluster)

            def victim_mid_task():  # a batch committed, and the victim's executor of this app runs a task
                dirs = [d for d in spark_cluster.executor_dirs(victim) if d.parent.name not in first_app]
                if not dirs or not batches(checkpoint, "commits"):
                    return None
                started, finished = executor_tasks(dirs[-1])
                return started - finished

            in_flight = wait_until(victim_mid_task, "a task running on Worker 1 after batch 0", proc, log)
            spark_cluster.workers[victim].kill()  # the Worker, its executor and its Python workers
            spark_cluster.workers[victim].proc.wait(timeout=30)
            done_at_kill = max(batches(checkpoint, "commits"))

            # the survivor reruns the lost tasks and the query goes on; then the driver dies mid-batch
            wait_until(lambda: max(batches(checkpoint, "commits")) >= done_at_kill + 2, "two more batches", proc, log)
            wait_until(lambda: max(batches(checkpoint, "offsets")) > max(batches(checkpoint, "commits")),
                       "a batch in flight", proc, log)
            kill_session(proc)
        finally:
            kill_session(proc)
            if spark_cluster.workers[victim].proc.poll() is not None:
                spark_cluster.start_worker(victim)
        planned, committed = batches(checkpoint, "offsets"), batches(checkpoint, "commits")
        assert max(planned) > max(committed), "the driver died with a batch planned and not committed"
        survivor_dir = [d for d in spark_cluster.executor_dirs(survivor) if d.parent.name not in first_app][-1]
        assert max(executor_tasks(survivor_dir)[1]) > max(in_flight), "the survivor ran tasks after the kill"
        rows_before = DeltaTable(str(workdir / "tables" / "bronze")).to_pyarrow_table(columns=["commitLogOffset"])
        assert 0 < rows_before.num_rows < len(commitlog), "the first run stopped midway"

        # resubmitted with the same checkpoint: catches up and stops
        known = app_names(spark_cluster)
        finish(start(hareplica_run(broker, spark_cluster, env_archive, workdir), log, tmp_path), log)
    assert_bronze_exactly_once(workdir / "tables" / "bronze", commitlog)
    assert executor_workers(watcher, spark_cluster), f"no executor ran Python from the archive: {watcher.seen}"
    finished = set().union(*(executor_tasks(d)[1] for dirs in new_executor_dirs(spark_cluster, known).values()
                             for d in dirs))
    assert len(finished) >= 4, "the catch-up's micro-batches ran their tasks on the Workers' executors"


def test_spark_submit_runs_the_bronze_app_with_driver_and_executors_on_the_packed_environment(
        broker, commitlog, spark_cluster, env_archive, tmp_path):
    # the driver's folder holds ./environment as the archive unpacks (here: the venv that was packed)
    (tmp_path / "environment").symlink_to(env_archive.env_dir, target_is_directory=True)
    site = Path("environment") / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster.url,
           "--archives", f"{env_archive.path}#environment", "--conf", f"spark.pyspark.python={EXECUTOR_PYTHON}",
           "--conf", f"spark.pyspark.driver.python={EXECUTOR_PYTHON}", str(site / "streaming_apps" / "submit.py"),
           "--log-level", "WARNING", *bronze_args(broker, spark_cluster, tmp_path / "wd")]
    log = tmp_path / "submit.log"
    with PythonWatcher(tmp_path.parent) as watcher, PythonWatcher(spark_cluster.root) as executors:
        finish(start(cmd, log, tmp_path), log)
    assert_bronze_exactly_once(tmp_path / "wd" / "tables" / "bronze", commitlog)
    drivers = {(argv0, cwd) for argv0, cwd, role in watcher.seen if role.endswith("submit.py")}
    assert drivers == {(EXECUTOR_PYTHON, str(tmp_path))}, "the driver ran on the packed environment"
    assert executor_workers(executors, spark_cluster), f"no executor ran Python from the archive: {executors.seen}"
