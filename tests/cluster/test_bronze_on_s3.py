"""The bronze app on the Spark standalone cluster with its workdir on S3 and nothing else shared (issue 51).

The package's cluster (tests/cluster/conftest.py: a Master and two Workers, each with its own work dir, started
without the driver's environment) runs ``hareplica run bronze --workdir s3://hareplica-tests/<fresh prefix>`` from
the packed environment, as users submit it (tests/cluster/app_runs.py). The tables, the Spark checkpoint and the
progress file are on the session's S3 server (S3Proxy, tests/support/s3_server.py); the driver runs in a folder
of its own and gets the server's endpoint and keys as ``AWS_*`` variables, which neither the Workers nor their
executors have: the executors upload their Parquet files with the settings the writer carries to them. A stub
master holds ~8.5 MiB of messages in 3 MiB mapped files (three micro-batches of two tasks, one on each Worker's
one core, and a short fourth). The bronze table is read back with deltalake and the server's storage options and
compared with the broker's CommitLog: every message once, same body.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyarrow import fs as pafs

from broker_stub.launcher import BrokerProcess
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from tests.cluster.app_runs import (
    RUN_TIMEOUT_S,
    PythonWatcher,
    app_args,
    app_names,
    clean_env,
    executor_workers,
    kill_session,
    new_executor_dirs,
    packed_run,
    tail,
)
from tests.cluster.standalone import executor_tasks
from tests.support.s3_server import TEST_BUCKET

pytestmark = pytest.mark.cluster

MAPPED_FILE_SIZE = 3 * 1024 * 1024  # a micro-batch ends at a mapped-file start (docs/source.md "Batches"), and
MESSAGES = 18_000  # --min-partitions 2 splits a mapped file into two tasks of at least 1 MiB each
BODY_BYTES = 384
MAX_BYTES_PER_TRIGGER = MAPPED_FILE_SIZE


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("s3-cluster-broker"),
                             mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "cluster-s3-test") as producer:
            futures = [producer.send_async(f"ClusterS3Topic{i % 3}", i.to_bytes(4, "big") * (BODY_BYTES // 4))
                       for i in range(MESSAGES)]
            assert {f.result(timeout=120).send_status for f in futures} == {"SEND_OK"}
        yield b


@pytest.fixture(scope="module")
def commitlog(broker) -> dict[int, bytes]:
    """``{commitLogOffset: body}`` of every message in the broker's CommitLog."""
    out = {rec.commit_log_offset: rec.body for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
    assert len(out) == MESSAGES
    return out


def storage_variables(pid: int) -> set[str]:
    """The names of the variables in process ``pid``'s environment that object-store settings are read from
    (:data:`connector.storage.config.STORAGE_KEYS` and their aliases)."""
    from connector.storage.config import ENVIRONMENT_ALIASES, STORAGE_KEYS

    read = set(STORAGE_KEYS).union(*ENVIRONMENT_ALIASES.values())
    names = (entry.split(b"=", 1)[0].decode() for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
    return {name for name in names if name in read}


def run_driver(cmd: list[str], env: dict[str, str], log: Path, cwd: Path) -> float:
    """Run ``cmd`` in ``cwd`` in its own session (output to ``log``), with :func:`clean_env` plus ``env``; its
    session is killed afterwards. Returns the run's seconds; it must have exited 0."""
    started = time.monotonic()
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env={**clean_env(), **env}, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        kill_session(proc)
    assert code == 0, f"the app exited {code}:\n{tail(log)}"
    return time.monotonic() - started


def test_bronze_with_its_workdir_on_s3_lands_every_message_once_from_the_workers(
        broker, commitlog, spark_cluster, env_archive, s3_server, tmp_path):
    prefix = f"{TEST_BUCKET}/cluster-bronze/{uuid.uuid4().hex[:12]}"
    workdir = f"s3://{prefix}"
    driver_dir = tmp_path / "driver"  # the driver's own folder: none of the Workers' work dirs
    driver_dir.mkdir()
    # the Workers (and so their executors) have no credentials and no endpoint of their own
    for index, worker in spark_cluster.workers.items():
        assert not storage_variables(worker.proc.pid), f"worker-{index} was started with object-store settings"
    known = app_names(spark_cluster)
    cmd = packed_run(app_args("bronze", broker, spark_cluster, workdir, MAX_BYTES_PER_TRIGGER), env_archive)
    log = tmp_path / "bronze.log"
    with PythonWatcher(spark_cluster.root) as executors:
        seconds = run_driver(cmd, s3_server.env(), log, driver_dir)
    print(f"bronze on the cluster, workdir on S3: {seconds:.1f} s")

    # every message once, as stored, in the table on S3
    table = DeltaTable(f"{workdir}/tables/bronze", storage_options=s3_server.storage_options())
    rows = table.to_pyarrow_table(columns=["commitLogOffset", "body"]).to_pylist()
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert not set(commitlog) - set(counts), f"{len(set(commitlog) - set(counts))} messages lost"
    assert not set(counts) - set(commitlog), "rows that are no message of the CommitLog"
    assert max(counts.values()) == 1, f"{sum(1 for c in counts.values() if c > 1)} messages twice"
    assert all(commitlog[r["commitLogOffset"]] == r["body"] for r in rows), "bodies as stored"

    # the tasks ran on both Workers, in the archive's Python, and wrote nothing but to S3
    assert executor_workers(executors, spark_cluster) == set(spark_cluster.workers), executors.seen
    dirs = new_executor_dirs(spark_cluster, known)
    finished = {index: set().union(*(executor_tasks(d)[1] for d in found)) for index, found in dirs.items()}
    assert all(finished.values()), f"tasks finished per Worker: {finished}"
    for found in dirs.values():
        for folder in found:
            assert not [p for p in folder.rglob("*.parquet") if "environment" not in p.parts], folder
    assert not list(driver_dir.rglob("*.parquet")), "the driver's folder holds no table"
    # the checkpoint and the progress file are on S3 too; the driver's folder keeps only its log
    fs = s3_server.filesystem()
    commits = fs.get_file_info(pafs.FileSelector(f"{prefix}/checkpoints/bronze/commits"))
    assert len([i for i in commits if i.is_file]) >= 3, "a micro-batch per mapped file, committed on S3"
    assert fs.get_file_info(f"{prefix}/status/bronze.jsonl").is_file
    assert {p.name for p in driver_dir.iterdir()} <= {"hareplica-data"}, os.listdir(driver_dir)
