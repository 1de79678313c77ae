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

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.package import EXECUTOR_PYTHON
from tests.cluster.standalone import DRIVER_ONLY_ENV, executor_tasks, spark_home

pytestmark = pytest.mark.cluster

MAPPED_FILE_SIZE = 512 * 1024  # a micro-batch ends at a mapped-file start (docs/source.md "Batches")
MESSAGES = 12_000
BODY_BYTES = 384
MAX_BYTES_PER_TRIGGER = 512 * 1024
RUN_TIMEOUT_S = 240
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


def clean_env() -> dict[str, str]:
    """This environment without the driver-only Python variables; Spark binds to 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if k not in DRIVER_ONLY_ENV}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def bronze_args(broker, cluster, workdir: Path, *extra: str) -> list[str]:
    return ["run", "bronze", "--brokers", f"broker-a={broker.ha_addr}", "--workdir", str(workdir),
            "--trigger", "available-now", "--master", cluster.url, "--maintenance-every", "0",
            "--max-bytes-per-trigger", str(MAX_BYTES_PER_TRIGGER), "--min-partitions", "2", *extra]


def hareplica_run(broker, cluster, env_archive, workdir: Path) -> list[str]:
    return [sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING",
            *bronze_args(broker, cluster, workdir, "--archives", f"{env_archive.path}#environment",
                         "--conf", f"spark.pyspark.python={EXECUTOR_PYTHON}")]


def start(cmd: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=clean_env(), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the process's whole session (driver, its JVM, its Python workers) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def finish(proc: subprocess.Popen, log: Path) -> None:
    try:
        code = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        kill_session(proc)
    assert code == 0, f"the app exited {code}:\n{tail(log)}"


def tail(path: Path, n: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"


class PythonWatcher:
    """Records ``(argv[0], cwd)`` of every Python worker process (pyspark.daemon / pyspark.worker) and of every
    ``python .../submit.py`` driver whose working directory is under ``root``, every 0.1 s, inside ``with``."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.seen: set[tuple[str, str, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    cwd = os.readlink(f"/proc/{pid}/cwd")
                except OSError:
                    continue
                role = next((a.decode() for a in argv if a in (b"pyspark.daemon", b"pyspark.worker")), None)
                if len(argv) > 1 and argv[1].endswith(b"submit.py"):  # python .../submit.py ARGS
                    role = argv[1].decode()
                if role and cwd.startswith(self.root):
                    self.seen.add((argv[0].decode(), cwd, role))

    def __enter__(self) -> PythonWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def assert_bronze_exactly_once(table: Path, commitlog: dict[int, bytes]) -> None:
    rows = DeltaTable(str(table)).to_pyarrow_table(columns=["commitLogOffset", "body"]).to_pylist()
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert not set(commitlog) - set(counts), f"{len(set(commitlog) - set(counts))} messages lost"
    assert not set(counts) - set(commitlog), "rows that are no message of the CommitLog"
    assert max(counts.values()) == 1, f"{sum(1 for c in counts.values() if c > 1)} messages twice"
    assert all(commitlog[r["commitLogOffset"]] == r["body"] for r in rows), "bodies as stored"


def executor_workers(watcher: PythonWatcher, cluster) -> set[int]:
    """The Workers whose executor folders ran Python workers from ``./environment/bin/python``."""
    found = set()
    for argv0, cwd, role in watcher.seen:
        for index in cluster.workers:
            if role.startswith("pyspark.") and cwd.startswith(str(cluster.work_dir(index)) + os.sep):
                assert argv0 == EXECUTOR_PYTHON, f"an executor's Python worker ran {argv0}, not the shipped one"
                assert (Path(cwd) / "environment" / "bin" / "python").exists()
                found.add(index)
    return found


def test_hareplica_run_on_the_cluster_lands_every_message_once_from_the_packed_environment(
        broker, commitlog, spark_cluster, env_archive, tmp_path):
    log = tmp_path / "bronze.log"
    with PythonWatcher(spark_cluster.root) as watcher:
        finish(start(hareplica_run(broker, spark_cluster, env_archive, tmp_path / "wd"), log, tmp_path), log)
    assert_bronze_exactly_once(tmp_path / "wd" / "tables" / "bronze", commitlog)
    assert executor_workers(watcher, spark_cluster), f"no executor ran Python from the archive: {watcher.seen}"
    finished = set().union(*(executor_tasks(d)[1] for i in spark_cluster.workers
                             for d in spark_cluster.executor_dirs(i)[-1:]))
    assert len(finished) >= 4, "the micro-batches' tasks ran on the Workers' executors"


def batches(checkpoint: Path, kind: str) -> set[int]:
    """Batch ids in the checkpoint's ``offsets`` (planned) or ``commits`` (done) log."""
    folder = checkpoint / kind
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def wait_until(predicate, what: str, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while not (value := predicate()):
        assert proc.poll() is None, f"the app ended (exit {proc.returncode}) before {what}:\n{tail(log)}"
        assert time.monotonic() < deadline, f"no {what} in {WAIT_TIMEOUT_S} s:\n{tail(log)}"
        time.sleep(0.05)
    return value


def test_a_worker_then_the_driver_killed_mid_batch_lose_and_duplicate_nothing(
        broker, commitlog, spark_cluster, env_archive, tmp_path):
    workdir, log = tmp_path / "wd", tmp_path / "bronze.log"
    checkpoint = workdir / "checkpoints" / "bronze"
    victim, survivor = 1, 2
    proc = start(hareplica_run(broker, spark_cluster, env_archive, workdir), log, tmp_path)
    try:
        first_app = {d.parent.name for i in spark_cluster.workers for d in spark_cluster.executor_dirs(i)}

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
    finish(start(hareplica_run(broker, spark_cluster, env_archive, workdir), log, tmp_path), log)
    assert_bronze_exactly_once(workdir / "tables" / "bronze", commitlog)


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
