"""Issue 51, object storage: faults of the S3 store under a running ``hareplica run bronze`` (direct landing).

Real processes only: a broker stub, the app in a subprocess of its own session (driver, Spark JVM, Python workers)
whose ``AWS_*`` environment points at a real S3 server (S3Proxy, tests/support/s3_server.py) or at the counting,
fault-injecting proxy in front of it (tests/support/s3_proxy_faults.py). Every test ends with every message of the
broker's CommitLog in the bronze table exactly once, read back with deltalake.

1. The store is SIGKILLed for ``OUTAGE_S`` seconds mid-query (1 s trigger) and restarted on the same port and data
   folder (clients see refused connections), three times: between micro-batches (the next batch's offset log:
   hadoop-aws), as a batch's tasks start (their Parquet uploads: pyarrow) and between the uploads and the commit
   (delta-rs). The query waits and resumes. (delta-rs's default retries gave up after 2-5 s: the clients' retry
   settings are connector/storage/config.py's, docs/object_storage.md "When it does not work".)
2. The driver is SIGKILLed between the executors' uploads and the Delta commit (fault point before-delta-commit):
   the restart lands the batch once, the dead attempt's objects are never referenced by the table, and
   ``hareplica maintain --orphan-grace-ms 0`` removes them.
3. The store answers ``503 SlowDown`` for ``SLOWDOWN_S`` seconds, at the same three moments: the client at work
   backs off and retries (the proxy sees the refused requests answered later), the query does not fail.

Placing a fault at a moment of the app's flow: the test waits until the app is between micro-batches (Spark's
commit log and the progress file written), then watches the server's data folder (an object is a file there) for
the object that ends the step before the fault — ``offsets/N`` of the checkpoint, or batch N's Parquet file. When it
appears the app is stopped (SIGSTOP: every process of its session, or for the commit only the driver's Python
process, so that the task still finishes its file), the server is given ``SETTLE_S`` to answer the request in
flight, the fault starts and the app continues (SIGCONT). The files' modification times then show that the step
after the fault waited for the store (written after the restart).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from connector.delta.faults import FAULT_INJECTION_ENV, FAULT_MARKER_ENV, FAULT_PAUSE_ENV
from connector.delta.file_names import batch_file_prefix
from streaming_apps.apps import AppConfig
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from tests.support.processes import kill_at_marker, kill_session, log_tail, session_pids
from tests.support.s3_proxy_faults import S3FaultProxy
from tests.support.s3_server import TEST_BUCKET, S3Endpoint, S3Server

TOPIC = "ObjectStoreFaults"
TRIGGER = "1s"
OUTAGE_S = 10.0  # each outage of test 1
SLOWDOWN_S = 5.0  # each 503 window of test 3
SETTLE_S = 0.5  # with the app (or its driver) stopped: the request in flight is answered, a task ends its file
MESSAGES_PER_PHASE = 10
START_TIMEOUT_S = 120.0  # the app's start (Spark's JVM) and its first micro-batch
LAND_TIMEOUT_S = 120.0  # a phase's messages in the table: the fault plus the clients' backoff after it
EVENT_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
WATCH_INTERVAL_S = 0.002  # the data folder, while waiting for the object that places a fault
POLL_INTERVAL_S = 0.2  # the table

#: Test 2: small mapped files and a byte cap per trigger, so that the CommitLog spans three micro-batches
MAPPED_FILE_SIZE = 64 * 1024
CRASH_MESSAGES = 150
CRASH_BODY = 1000
RUN_TIMEOUT_S = 240.0


# --- the pieces -------------------------------------------------------------------------------------------------
@pytest.fixture
def own_s3_server(tmp_path) -> Iterator[S3Server]:
    """An S3 server of this test's own (the test kills it; the session's serves the other tests)."""
    server = S3Server.start(tmp_path / "s3-server")
    try:
        server.create_bucket(TEST_BUCKET)
        yield server
    finally:
        if server.is_running():
            server.stop()


@pytest.fixture
def s3_proxy(s3_server, tmp_path) -> Iterator[S3FaultProxy]:
    with S3FaultProxy.start(s3_server, workdir=tmp_path / "s3-fault-proxy") as proxy:
        yield proxy


@pytest.fixture
def producer(broker_factory):
    """A broker stub and a producer to it: ``(broker, producer)``."""
    from connector.client.producer import Producer

    broker = broker_factory("broker", mappedFileSizeCommitLog=MAPPED_FILE_SIZE)
    with Producer(broker.remoting_addr, "object-store-faults") as p:
        yield broker, p


def produce(producer, tag: str, n: int = MESSAGES_PER_PHASE, body_bytes: int = 0) -> None:
    futures = [producer.send_async(TOPIC, f"{tag}-{i}".encode().ljust(body_bytes, b".")) for i in range(n)]
    assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}


def new_workdir() -> tuple[str, str]:
    """``(s3://bucket/prefix, prefix)``: a workdir of this test's own in the test bucket."""
    prefix = f"object-store-faults/{uuid.uuid4().hex[:12]}"
    return f"s3://{TEST_BUCKET}/{prefix}", prefix


def app_env(endpoint: S3Endpoint, **extra: str) -> dict[str, str]:
    """This process's environment without AWS settings and armed faults, with ``endpoint``'s AWS_* variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "HAREPLICA_DELTA_FAULT", "HAREPLICA_SPARK_DELTA_FAULT"))}
    return {**env, **endpoint.env(), **extra}


class App:
    """``hareplica run bronze`` in a subprocess and session of its own, its cwd (where the log file of an object
    store workdir goes: ``hareplica-data/logs``) in ``folder``."""

    def __init__(self, broker, workdir: str, endpoint: S3Endpoint, folder: Path, *extra: str,
                 env: dict[str, str] | None = None, name: str = "bronze") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.log_path = folder / f"{name}.out"
        self.spark_log = folder / "hareplica-data" / "logs" / "bronze.log"
        cmd = [sys.executable, "-m", "streaming_apps.cli", "--log-level", "INFO", "run", "bronze",
               "--brokers", f"broker-a={broker.ha_addr}/{broker.remoting_addr}", "--workdir", workdir,
               "--maintenance-every", "0", *extra]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, env=app_env(endpoint, **(env or {})), cwd=folder, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def logs(self, lines: int = 40) -> str:
        return f"--- {self.log_path.name}:\n{log_tail(self.log_path, lines)}\n--- Spark's log:\n" \
               f"{log_tail(self.spark_log, lines)}"

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in (self.log_path, self.spark_log) if p.exists())

    def check_running(self, what: str) -> None:
        code = self.proc.poll()
        assert code is None, f"the app exited {code} {what}:\n{self.logs()}"

    def frozen(self, *, driver_only: bool = False) -> list[int]:
        """SIGSTOP every process of the app's session, or only the driver's Python process (where the Delta
        commits run; the JVM and the tasks' Python workers go on); the pids, for :meth:`thaw`."""
        pids = [self.proc.pid] if driver_only else session_pids(self.proc.pid)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    @staticmethod
    def thaw(pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def stop(self) -> int | None:
        """SIGTERM the driver (a clean stop between micro-batches) and wait; its exit code."""
        try:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None
        finally:
            kill_session(self.proc)

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        finally:
            kill_session(self.proc)


def wait_for(condition: Callable[[], object], app: App, what: str, timeout_s: float,
             interval_s: float = POLL_INTERVAL_S):
    """Poll ``condition`` until it returns something true (returned); fail when the app exits first or after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        app.check_running(f"while waiting for {what}")
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s\n{app.logs()}"
        time.sleep(interval_s)


def table_uri(workdir: str) -> str:
    return f"{workdir}/tables/bronze"


def landed_offsets(server: S3Endpoint, workdir: str) -> Counter:
    """commitLogOffset → rows of the bronze table (empty before the table exists), read with deltalake."""
    try:
        table = DeltaTable(table_uri(workdir), storage_options=server.storage_options())
    except TableNotFoundError:
        return Counter()
    return Counter(table.to_pyarrow_table(columns=["commitLogOffset"]).column("commitLogOffset").to_pylist())


def wait_landed(server: S3Endpoint, workdir: str, app: App, messages: int, timeout_s: float = LAND_TIMEOUT_S) -> None:
    wait_for(lambda: sum(landed_offsets(server, workdir).values()) >= messages, app,
             f"{messages} messages in the bronze table", timeout_s)


def assert_exactly_once(server: S3Endpoint, workdir: str, broker, produced: int) -> None:
    """Every message of the broker's CommitLog in the bronze table once, with its msgId."""
    commitlog = {rec.commit_log_offset: rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
    assert len(commitlog) == produced
    rows = DeltaTable(table_uri(workdir), storage_options=server.storage_options()).to_pyarrow_table(
        columns=["commitLogOffset", "msgId"]).to_pylist()
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert set(counts) == set(commitlog), (f"missing {sorted(set(commitlog) - set(counts))[:10]}, "
                                           f"unknown {sorted(set(counts) - set(commitlog))[:10]}")
    assert max(counts.values()) == 1, f"twice: {sorted(o for o, n in counts.items() if n > 1)[:10]}"
    assert all(commitlog[r["commitLogOffset"]].msg_id == r["msgId"] for r in rows)


# --- the server's data folder: where a fault is placed, and when each step wrote -----------------------------
class StoreFolder:
    """The local folder behind ``s3://bucket/prefix`` on an S3Proxy server (its filesystem blob store)."""

    def __init__(self, server: S3Server, prefix: str) -> None:
        self.root = server.data_dir / TEST_BUCKET / prefix
        self.offsets = self.root / "checkpoints" / "bronze" / "offsets"
        self.commits = self.root / "checkpoints" / "bronze" / "commits"
        self.status = self.root / "status" / "bronze.jsonl"
        self.table = self.root / "tables" / "bronze"
        self.log = self.table / "_delta_log"

    @staticmethod
    def _names(folder: Path, keep: Callable[[str], bool]) -> dict[str, float]:
        try:
            with os.scandir(folder) as entries:
                return {e.name: e.stat().st_mtime for e in entries if e.is_file() and keep(e.name)}
        except FileNotFoundError:
            return {}

    def offset_files(self) -> dict[str, float]:
        """Batch id → mtime of the checkpoint's offset log files."""
        return self._names(self.offsets, str.isdigit)

    def data_files(self) -> dict[str, float]:
        """Name → mtime of the table's Parquet files (every partition folder)."""
        found: dict[str, float] = {}
        try:
            with os.scandir(self.table) as entries:
                folders = [e.path for e in entries if e.is_dir() and e.name != "_delta_log"]
        except FileNotFoundError:
            return found
        for folder in folders:
            found.update(self._names(Path(folder), lambda n: n.startswith("part-") and n.endswith(".parquet")))
        return found

    def commit_files(self) -> dict[str, float]:
        """Name → mtime of the table's commit files."""
        return self._names(self.log, lambda n: n.endswith(".json") and n[:-5].isdigit())

    def quiet(self) -> bool:
        """True between micro-batches: the last batch of the offset log is in Spark's commit log, and the progress
        file was written after that (the last step of a micro-batch)."""
        offsets = self.offset_files()
        commits = self._names(self.commits, str.isdigit)
        status = self._names(self.status.parent, lambda n: n == self.status.name)
        if not offsets or max(offsets, key=int) not in commits or not status:
            return False
        return status[self.status.name] >= commits[max(offsets, key=int)]


def wait_quiet(folder: StoreFolder, app: App) -> None:
    """Wait until the app is between micro-batches (:meth:`StoreFolder.quiet`)."""
    wait_for(folder.quiet, app, "the end of the micro-batch (Spark's commit log, the progress file)", EVENT_TIMEOUT_S)


def wait_new(files: Callable[[], dict[str, float]], before: dict[str, float], app: App, what: str) -> dict[str, float]:
    """Watch (every :data:`WATCH_INTERVAL_S`) until ``files()`` has names not in ``before``; those, with mtimes."""
    return wait_for(lambda: {n: t for n, t in files().items() if n not in before}, app, what, EVENT_TIMEOUT_S,
                    WATCH_INTERVAL_S)


# --- 1. the store down for OUTAGE_S seconds ---------------------------------------------------------------------
def test_store_killed_for_ten_seconds_mid_query_the_query_waits_and_resumes(own_s3_server, producer, tmp_path):
    server, (broker, prod) = own_s3_server, producer
    workdir, prefix = new_workdir()
    folder = StoreFolder(server, prefix)
    produce(prod, "start")
    produced = MESSAGES_PER_PHASE
    app = App(broker, workdir, server, tmp_path / "app", "--trigger", TRIGGER)
    try:
        wait_landed(server, workdir, app, produced, START_TIMEOUT_S)

        def outage(pids: list[int] | None = None) -> tuple[float, float]:
            """Kill the server (the app stopped meanwhile when ``pids``), restart it OUTAGE_S later: the times of
            the kill and of the relaunch."""
            try:
                if pids is not None:
                    time.sleep(SETTLE_S)
                server.kill9()
                killed_at = time.time()
            finally:
                if pids is not None:
                    App.thaw(pids)
            time.sleep(OUTAGE_S)  # the outage itself
            app.check_running(f"during the {OUTAGE_S:g} s outage")
            relaunched_at = time.time()  # nothing can be written between the kill and this
            server.restart()
            return killed_at, relaunched_at

        timings = {}
        # between micro-batches: new messages arrive while the store is down; the next batch's offset log
        # (hadoop-aws) waits
        wait_quiet(folder, app)
        before = folder.offset_files()
        killed_at, relaunched_at = outage()
        produce(prod, "idle")
        produced += MESSAGES_PER_PHASE
        wait_landed(server, workdir, app, produced)
        timings["between batches"] = time.time() - killed_at
        new_offsets = {n: t for n, t in folder.offset_files().items() if n not in before}
        assert new_offsets and min(new_offsets.values()) >= relaunched_at, "the next batch started after the outage"

        # as a batch's tasks start: its offset log is written; the store dies before the tasks' uploads (pyarrow)
        wait_quiet(folder, app)
        offsets_before, data_before = folder.offset_files(), folder.data_files()
        produce(prod, "upload")
        produced += MESSAGES_PER_PHASE
        wait_new(folder.offset_files, offsets_before, app, "the next batch's offset log")
        killed_at, relaunched_at = outage(app.frozen())
        wait_landed(server, workdir, app, produced)
        timings["before the uploads"] = time.time() - killed_at
        uploaded = {n: t for n, t in folder.data_files().items() if n not in data_before}
        assert uploaded and min(uploaded.values()) >= relaunched_at, (
            f"the batch's Parquet files were uploaded after the outage, not before it: {uploaded}, outage "
            f"{killed_at:.3f}-{relaunched_at:.3f}")

        # between the uploads and the commit: batch N's Parquet file is in the store; it dies before the
        # driver's commit (delta-rs)
        wait_quiet(folder, app)
        data_before, commits_before = folder.data_files(), folder.commit_files()
        produce(prod, "commit")
        produced += MESSAGES_PER_PHASE
        uploaded = wait_new(folder.data_files, data_before, app, "the next batch's Parquet file")
        killed_at, relaunched_at = outage(app.frozen(driver_only=True))
        wait_landed(server, workdir, app, produced)
        timings["before the commit"] = time.time() - killed_at
        assert max(uploaded.values()) < killed_at, "the Parquet file was uploaded before the outage"
        commits = {n: t for n, t in folder.commit_files().items() if n not in commits_before}
        assert commits and min(commits.values()) >= relaunched_at, (
            f"the commit came after the outage, not before it: {commits}, outage {killed_at:.3f}-{relaunched_at:.3f}")

        app.check_running("after the outages")
        produce(prod, "after")
        produced += MESSAGES_PER_PHASE
        wait_landed(server, workdir, app, produced)
    finally:
        code = app.stop()
    assert code == 0, f"the app exited {code} on SIGTERM:\n{app.logs()}"
    print(f"outage of {OUTAGE_S:g} s, landed again after (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    assert_exactly_once(server, workdir, broker, produced)


# --- 2. the driver killed between the uploads and the commit ---------------------------------------------------
def list_objects(server: S3Endpoint, prefix: str) -> set[str]:
    """Keys (relative to ``prefix``) of the objects under ``prefix`` of the test bucket, listed through S3."""
    root = f"{TEST_BUCKET}/{prefix}"
    infos = server.filesystem().get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return {i.path[len(root) + 1:] for i in infos if i.type == pafs.FileType.File}


def data_objects(server: S3Endpoint, table_prefix: str) -> set[str]:
    """File names of the table's Parquet objects (outside ``_delta_log``)."""
    return {Path(k).name for k in list_objects(server, table_prefix)
            if k.endswith(".parquet") and not k.startswith("_delta_log/")}


def logged_adds(server: S3Endpoint, table_prefix: str) -> set[str]:
    """File names of every ``add`` action of every commit of the table's log, read through S3."""
    fs, names = server.filesystem(), set()
    for key in sorted(k for k in list_objects(server, table_prefix) if k.startswith("_delta_log/")
                      and k.endswith(".json")):
        with fs.open_input_stream(f"{TEST_BUCKET}/{table_prefix}/{key}") as f:
            for line in f.read().decode().splitlines():
                if line.strip() and "add" in (action := json.loads(line)):
                    names.add(Path(unquote(action["add"]["path"])).name)
    return names


def referenced(server: S3Endpoint, workdir: str) -> set[str]:
    """File names of the table's current version."""
    return {Path(unquote(u)).name for u in
            DeltaTable(table_uri(workdir), storage_options=server.storage_options()).file_uris()}


def test_driver_killed_between_the_uploads_and_the_commit_restart_lands_once_and_maintain_removes_strays(
        s3_server, producer, tmp_path):
    server, (broker, prod) = s3_server, producer
    produce(prod, "crash", CRASH_MESSAGES, CRASH_BODY)
    workdir, prefix = new_workdir()
    table_prefix = f"{prefix}/tables/bronze"
    app_id = AppConfig(app="bronze", brokers="unused", workdir=workdir,
                       storage_options=server.storage_options()).app_id()
    mode = ("--trigger", "available-now", "--max-bytes-per-trigger", str(MAPPED_FILE_SIZE))

    # run 1: batch 1's tasks uploaded their Parquet files; the driver is killed (with its whole session) before
    # the Delta commit
    marker = tmp_path / "fault-marker.json"
    crashed = App(broker, workdir, server, tmp_path / "run-1", *mode, name="crashed",
                  env={FAULT_INJECTION_ENV: "before-delta-commit:1", FAULT_MARKER_ENV: str(marker),
                       FAULT_PAUSE_ENV: "600"})
    fault = json.loads(kill_at_marker(crashed.proc, marker, crashed.log_path, what="before-delta-commit:1",
                                      timeout_s=RUN_TIMEOUT_S))
    assert fault["point"] == "before-delta-commit" and fault["batchId"] == 1
    assert fault["table"].rstrip("/") == table_uri(workdir)
    table = DeltaTable(table_uri(workdir), storage_options=server.storage_options())
    assert table.transaction_version(app_id) == 0, "batch 0 committed, batch 1 not"
    checkpoint = list_objects(server, f"{prefix}/checkpoints/bronze")
    assert "offsets/1" in checkpoint and {k for k in checkpoint if k.startswith("commits/")} == {"commits/0"}
    dead = {n for n in data_objects(server, table_prefix) if n.startswith(batch_file_prefix(app_id, 1))}
    assert dead, "the killed batch had uploaded its Parquet files"
    assert not dead & logged_adds(server, table_prefix)

    # run 2: the restart replays batch 1 with fresh files and lands the rest
    restarted = App(broker, workdir, server, tmp_path / "run-2", *mode, name="restarted")
    code = restarted.wait(RUN_TIMEOUT_S)
    assert code == 0, f"the restart exited {code}:\n{restarted.logs()}"
    assert_exactly_once(server, workdir, broker, CRASH_MESSAGES)
    history = DeltaTable(table_uri(workdir), storage_options=server.storage_options()).history()
    batches = Counter(h["hareplica.batchId"] for h in history if "hareplica.batchId" in h)
    assert batches[1] == 1 and set(batches.values()) == {1}, f"every batch committed once: {batches}"
    # in an object store the commit does not list for earlier attempts' files: they stay, never referenced
    before = data_objects(server, table_prefix)
    assert dead <= before, "the dead attempt's objects are still there"
    assert not dead & logged_adds(server, table_prefix), "no commit ever referenced them"
    assert before - dead == referenced(server, workdir)

    # hareplica maintain removes them, and nothing else
    maintain = subprocess.run(
        [sys.executable, "-m", "streaming_apps.cli", "maintain", "bronze", "--workdir", workdir, "--no-compact",
         "--orphan-grace-ms", "0", "--json"], env=app_env(server), cwd=tmp_path, capture_output=True, text=True,
        timeout=120)
    assert maintain.returncode == 0, maintain.stderr
    assert json.loads(maintain.stdout.strip().splitlines()[-1])["orphans"] == len(dead)
    after = data_objects(server, table_prefix)
    assert after == before - dead == referenced(server, workdir)
    assert_exactly_once(server, workdir, broker, CRASH_MESSAGES)


# --- 3. 503 SlowDown for SLOWDOWN_S seconds --------------------------------------------------------------------
#: Requests that name only the bucket (pyarrow's create_dir and S3A's start ask for it)
HEAD_BUCKET = "the bucket (HeadBucket)"
#: The empty ``folder/`` objects pyarrow's ``create_dir(recursive=True)`` puts for each folder of a task's file
DIRECTORY_MARKERS = "pyarrow (tasks' folder markers)"


def client_of(target: str, prefix: str) -> str | None:
    """Which client sent a request of the app, by the key (or the listed prefix) it names."""
    parts = urlsplit(target)
    key = unquote(parts.path).lstrip("/").partition("/")[2]
    listed = dict(parse_qsl(parts.query)).get("prefix", "")
    where = key or listed
    if not where:
        return HEAD_BUCKET
    if f"{prefix}/".startswith(where) and where.endswith("/"):
        return DIRECTORY_MARKERS  # the folders above the table
    if not where.startswith(prefix + "/"):
        return None
    where = where[len(prefix) + 1:]
    if where.startswith("checkpoints/"):
        return "hadoop-aws (checkpoint)"
    if where.startswith("tables/bronze/_delta_log"):
        return "delta-rs (commit)"
    if where.startswith("tables/") and where.endswith("/"):
        return DIRECTORY_MARKERS
    if where.startswith("tables/bronze/"):
        return "pyarrow (tasks' uploads)"
    if where.startswith("status/"):
        return "pyarrow (progress file)"
    return f"other ({where})"


def timeline(proxy: S3FaultProxy, prefix: str, since: float) -> list[str]:
    """The requests the proxy saw, one line each: seconds after ``since`` (the fault's start), client, method,
    status, whether the proxy refused it."""
    return [f"{r.at - since:+7.3f} {client_of(r.target, prefix)} {r.method} {r.status}"
            f"{' (the proxy)' if r.faulted else ''} {unquote(r.target)[-60:]}" for r in proxy.requests()]


def retried(proxy: S3FaultProxy, prefix: str) -> dict[str, dict[str, int]]:
    """Per client: requests the proxy refused with 503, and requests of the same method and target that the server
    answered after a refusal (the retries that went through; a 404 of a HEAD is an answer too)."""
    seen: dict[str, dict[str, int]] = {}
    refused: set[tuple[str, str]] = set()
    for r in proxy.requests():
        client = client_of(r.target, prefix)
        if client is None:
            continue
        counts = seen.setdefault(client, {"503": 0, "retried ok": 0})
        if r.faulted:
            counts["503"] += 1
            refused.add((r.method, r.target))
        elif (r.method, r.target) in refused and r.status is not None and r.status < 500:
            counts["retried ok"] += 1
            refused.discard((r.method, r.target))
    return seen


def test_store_answering_503_slowdown_for_seconds_every_client_backs_off_and_the_query_goes_on(
        s3_server, s3_proxy, producer, tmp_path):
    server, proxy, (broker, prod) = s3_server, s3_proxy, producer
    workdir, prefix = new_workdir()
    folder = StoreFolder(server, prefix)
    produce(prod, "start")
    produced = MESSAGES_PER_PHASE
    app = App(broker, workdir, proxy, tmp_path / "app", "--trigger", TRIGGER)
    outcomes = {}
    try:
        wait_landed(server, workdir, app, produced, START_TIMEOUT_S)

        def slowdown(pids: list[int] | None = None) -> float:
            """503 for every request from now for SLOWDOWN_S (the app stopped meanwhile when ``pids``): the start."""
            try:
                if pids is not None:
                    time.sleep(SETTLE_S)
                started = time.time()
                proxy.fail_for(SLOWDOWN_S)
                return started
            finally:
                if pids is not None:
                    App.thaw(pids)

        def landed(moment: str, clients: tuple[str, ...], started: float) -> None:
            nonlocal produced
            produced += MESSAGES_PER_PHASE
            wait_landed(server, workdir, app, produced)
            outcomes[moment] = (clients, retried(proxy, prefix), timeline(proxy, prefix, started))

        # between micro-batches: the next batch's offset log (hadoop-aws)
        wait_quiet(folder, app)
        proxy.reset()
        started = slowdown()
        produce(prod, "idle")
        landed("between batches", ("hadoop-aws (checkpoint)",), started)

        # as a batch's tasks start: their uploads (pyarrow)
        wait_quiet(folder, app)
        proxy.reset()
        offsets_before = folder.offset_files()
        produce(prod, "upload")
        wait_new(folder.offset_files, offsets_before, app, "the next batch's offset log")
        landed("before the uploads", ("pyarrow (tasks' uploads)", DIRECTORY_MARKERS, HEAD_BUCKET),
               slowdown(app.frozen()))

        # between the uploads and the commit (delta-rs)
        wait_quiet(folder, app)
        proxy.reset()
        data_before = folder.data_files()
        produce(prod, "commit")
        wait_new(folder.data_files, data_before, app, "the next batch's Parquet file")
        landed("before the commit", ("delta-rs (commit)",), slowdown(app.frozen(driver_only=True)))
        app.check_running("after the 503 windows")
    finally:
        proxy.clear_faults()
        code = app.stop()
    assert code == 0, f"the app exited {code} on SIGTERM:\n{app.logs()}"
    print(f"503 SlowDown for {SLOWDOWN_S:g} s, per moment: { {m: seen for m, (_, seen, _) in outcomes.items()} }")
    for moment, (clients, seen, requests) in outcomes.items():
        refused = sum(seen.get(c, {}).get("503", 0) for c in clients)
        answered = sum(seen.get(c, {}).get("retried ok", 0) for c in clients)
        assert refused and answered, (f"{moment}: {' / '.join(clients)} refused, then retried successfully; the "
                                      f"proxy saw {seen}:\n" + "\n".join(requests))
    assert_exactly_once(server, workdir, broker, produced)
    # what the app's log says about the refusals and retries (the report quotes it)
    named = [line for line in app.log_text().splitlines()
             if re.search(r"SlowDown|Service Unavailable|throttl|\bretr(y|ies|ied|ying)\b", line, re.IGNORECASE)]
    print(f"log lines naming the 503s or retries: {len(named)}" + "".join(f"\n  {line}" for line in named[:20]))
