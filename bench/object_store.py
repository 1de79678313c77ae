"""Bronze with its workdir in an object store: throughput beside a local workdir, and S3 requests per micro-batch.

``flock /tmp/hareplica-heavy.lock .venv/bin/python -m bench.object_store`` (about 15 minutes on 2 cores, 7 of them
building the tables; ``--quick`` about 2) against a real S3 server on this machine (S3Proxy 4.1.0 over a local
folder, tests/support/s3_server.py); results in ``bench/results/object_store.json`` (``object_store_quick.json``).
The method, every figure and the latest results: docs/performance.md "Object storage: `bench/object_store.py`".

1. **Throughput.** A broker stub (64 MiB mapped files) is filled once with 1 KiB messages (``--mib``). Then, in
   interleaved rounds (local, s3, local, s3, ...), ``hareplica run bronze --trigger available-now
   --max-bytes-per-trigger 128 MiB`` lands all of it cold, into a new local workdir or a new ``s3://`` prefix
   (tables, checkpoint and progress file all there; ``AWS_*`` variables name the server). Per run: the wall time
   from launch to exit, the data phase (first micro-batch's trigger to the end of the last one, from the progress
   file), Spark's per-batch durations, and the CPU of every process by kind (the run's tree, the broker, the S3
   server, and the rest of the machine) sampled in ``/proc``. Medians over the rounds; ``s3_vs_local`` is the
   median of the rounds' ratios. Then, without Spark and interleaved: one task's write of one data file's rows
   through the sink's writer, and the Delta commit of a small batch, local and on S3 (:func:`parts_alone`).
2. **Requests per micro-batch.** A second broker with 128 KiB mapped files. Two bronze tables are built on the S3
   server by the bronze app itself, each in ~10 micro-batches: one of ~10 data files (one mapped file, one task
   per batch) and one of ~1,000 (100 mapped files, 100 tasks per batch). A third is grown as a 1 s trigger grows
   a table, one data file per commit (``--history-commits``, written by the sink's own writer and committer).
   Each then takes ``--batches`` more micro-batches of the app of one mapped file each (``available-now``,
   ``--max-bytes-per-trigger`` one mapped file; the third with a new checkpoint) with ``AWS_ENDPOINT_URL``
   pointing at a counting proxy (tests/support/s3_proxy_faults.py). The requests of a micro-batch are those from
   its trigger to the next one's (the listener's progress file included); the first and the last micro-batch of
   the run are left out (start-up, shutdown); the figure is the median per kind, and per what the request
   touched (:func:`request_what`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from urllib.parse import parse_qsl, unquote

from bench.common import report

MIB = 1024 * 1024
MAPPED_FILE_SIZE = 64 * MIB
MAX_BYTES_PER_TRIGGER = 128 * MIB
BODY_BYTES = 1024
REQUEST_FILE_SIZE = 128 * 1024  # the request-count broker's mapped files: one small micro-batch each
BUCKET = "bench"
RUN_TIMEOUT_S = 600
HAREPLICA = Path(sys.executable).with_name("hareplica")
KINDS = ("LIST", "GET", "HEAD", "PUT", "COPY", "POST", "DELETE")
PROC_KINDS = ("spark-jvm", "py-worker", "py-foreachbatch", "cli", "broker", "s3-server", "other")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (``/proc/stat``: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


# --- CPU by process kind ---------------------------------------------------------------------------------------
class KindSampler:
    """CPU seconds by process kind, sampled in ``/proc`` every ``interval_s``: the tree below ``root_pid`` (kinds of
    bench.bronze_profile: ``spark-jvm``, ``py-worker``, ``py-foreachbatch``, ``cli``; a process keeps its last seen
    CPU once it ended), the long-running ``extra`` processes (kind → pid, counted from the sampler's start) and
    ``outside``: the rest of the machine's busy CPU (``/proc/stat``), i.e. load beside the run. Also
    ``worker_peak_rss_kib``: the largest VmHWM seen of a ``py-worker`` (pyspark.daemon) process of the tree."""

    def __init__(self, root_pid: int, extra: dict[str, int], interval_s: float = 0.1) -> None:
        from bench.catchup import _proc_stats

        self.root_pid, self.extra, self.interval_s = root_pid, extra, interval_s
        self.kinds: dict[int, str] = {}
        self.cpu: dict[int, float] = {}
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.worker_peak_rss_kib = 0
        stats = _proc_stats()
        self._extra0 = {k: stats.get(pid, (0, 0.0))[1] for k, pid in extra.items()}
        self._machine0 = machine_busy_s()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        from bench.bronze_profile import _kind
        from bench.catchup import _proc_stats, vm_hwm_kib

        stats = _proc_stats()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        tree, todo = set(), [self.root_pid]
        while todo:
            pid = todo.pop()
            tree.add(pid)
            todo.extend(children.get(pid, ()))
        for pid in tree:
            if pid in stats:
                if self.kinds.get(pid, "other") == "other":
                    self.kinds[pid] = _kind(pid)
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), stats[pid][1])
                if self.kinds[pid] == "py-worker":
                    self.worker_peak_rss_kib = max(self.worker_peak_rss_kib, vm_hwm_kib(pid))
        by_kind = dict.fromkeys(PROC_KINDS, 0.0)
        for pid, cpu in self.cpu.items():
            by_kind[self.kinds[pid]] += cpu
        for kind, pid in self.extra.items():
            by_kind[kind] = stats.get(pid, (0, 0.0))[1] - self._extra0[kind]
        # everything else the machine did meanwhile (this benchmark's sampling, other processes): load beside the run
        by_kind["outside"] = machine_busy_s() - self._machine0 - sum(by_kind.values())
        self.samples.append((time.time(), by_kind))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> dict[str, float]:
        """Stop sampling; CPU seconds by kind over the whole run."""
        self._stop.set()
        self._thread.join()
        self._sample()
        return self.samples[-1][1]

    def between(self, t0: float, t1: float) -> dict[str, float]:
        """CPU seconds by kind used between epoch times ``t0`` and ``t1`` (the nearest samples)."""
        times = [t for t, _ in self.samples]

        def at(t: float) -> dict[str, float]:
            import bisect

            return self.samples[min(bisect.bisect_left(times, t), len(times) - 1)][1]

        a, b = at(t0), at(t1)
        return {k: b[k] - a.get(k, 0.0) for k in b}


# --- filling the brokers -------------------------------------------------------------------------------------
def _max_offset(broker) -> int:
    from bench.delta import _max_offset as max_offset

    return max_offset(broker.remoting_addr)


def fill_to(broker, end: int, topic: str, per_batch: int) -> int:
    """Send unique 1 KiB bodies (``per_batch`` per batch) until the CommitLog holds ``end`` bytes; messages sent.
    Rounds shrink near the end, so the log overshoots ``end`` by a few batches at most."""
    from connector.client.producer import Producer

    filler = (b"hareplica object-store benchmark payload " * 30)[:BODY_BYTES]
    sent = 0
    with Producer(broker.remoting_addr, "bench-object-store", max_in_flight=64, timeout_ms=30_000) as producer:
        while (now := _max_offset(broker)) < end:
            batches = max(1, min(256, (end - now) // (per_batch * (BODY_BYTES + 200)) // 2))
            futures = []
            for _ in range(batches):
                bodies = []
                for _ in range(per_batch):
                    head = f"{topic}:{sent}:".encode()
                    bodies.append(head + filler[len(head):])
                    sent += 1
                futures.append(producer.send_batch_async(topic, bodies))
            for f in futures:
                f.result(timeout=120)
    return sent


# --- one run of the app --------------------------------------------------------------------------------------
def _parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def progress_events(fs, path: str) -> list[dict]:
    """The ``progress`` records of a progress file (``fs``: a pyarrow file system, ``path`` inside it)."""
    with fs.open_input_stream(path) as f:
        lines = f.read().decode().splitlines()
    return [e for e in (json.loads(line) for line in lines if line.strip()) if e.get("event") == "progress"]


def run_bronze(server, broker, workdir: str, *, env: dict[str, str], cwd: Path, max_bytes: int,
               sampler_extra: dict[str, int] | None = None, extra: tuple[str, ...] = (), app: str = "bronze") -> dict:
    """One cold ``hareplica run APP --trigger available-now`` (bronze by default; ``extra``: more options, e.g.
    ``--config`` of ``run tables``): wall seconds, CPU by kind (whole run; the sampler, with the Python workers'
    peak RSS), and the progress records (read from the workdir, local or on ``server``)."""
    from pyarrow import fs as pafs

    cmd = [str(HAREPLICA), "--log-level", "WARNING", "run", app, "--brokers", f"broker-a={broker.ha_addr}",
           "--workdir", workdir, "--trigger", "available-now", "--maintenance-every", "0",
           "--max-bytes-per-trigger", str(max_bytes), *extra]
    started = time.perf_counter()
    launched_at = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env={**os.environ, **env}, cwd=cwd)
    sampler = KindSampler(proc.pid, sampler_extra or {}) if sampler_extra is not None else None
    try:
        _, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    wall = time.perf_counter() - started
    if sampler is not None:
        time.sleep(1.0)  # the orphaned Spark JVM ends after the CLI: keep sampling until it is gone
    cpu = sampler.stop() if sampler is not None else None
    if proc.returncode != 0:
        raise RuntimeError(f"hareplica run {app} --workdir {workdir} exited {proc.returncode}:\n{stderr[-4000:]}")
    if workdir.startswith("s3://"):
        events = progress_events(server.filesystem(), workdir[len("s3://"):] + f"/status/{app}.jsonl")
    else:
        events = progress_events(pafs.LocalFileSystem(), workdir + f"/status/{app}.jsonl")
    events = [e for e in events if _parse_time(e["time"]) >= launched_at]  # this run's: the file keeps earlier ones
    return {"wall_s": wall, "launched_at": launched_at, "cpu": cpu, "sampler": sampler, "events": events}


def data_phase(events: list[dict]) -> tuple[int, float, float]:
    """(rows, first micro-batch with rows' trigger time, end of the last one) of a run's progress records."""
    batches = [(int(e["numInputRows"]), _parse_time(e["time"])) for e in events if (e.get("numInputRows") or 0) > 0]
    last = [e for e in events if (e.get("numInputRows") or 0) > 0][-1]
    return sum(r for r, _ in batches), batches[0][1], _parse_time(last["time"]) + last["batchDurationMs"] / 1e3


# --- part 1: throughput ----------------------------------------------------------------------------------------
def throughput_run(server, broker, root: Path, where: str, i: int, end: int, keep: bool = False) -> dict:
    """One cold run into a new local workdir or a new ``s3://`` prefix; removed afterwards unless ``keep``."""
    local = root / f"local{i}"
    workdir = str(local) if where == "local" else f"s3://{BUCKET}/round{i}"
    env = server.env() if where == "s3" else {}
    os.sync()  # the previous run's dirty pages written back before this one starts (bench.catchup.settle)
    run = run_bronze(server, broker, workdir, env=env, cwd=root, max_bytes=MAX_BYTES_PER_TRIGGER,
                     sampler_extra={"broker": broker.pid, "s3-server": server.pid})
    rows, start, stop = data_phase(run["events"])
    durations = Counter()
    for e in run["events"]:
        durations.update({k: v / 1e3 for k, v in (e.get("durationMs") or {}).items()})
    data_files, data_bytes = table_files(server, workdir)
    if where == "local":
        if not keep:
            shutil.rmtree(local, ignore_errors=True)
    else:
        server.filesystem().delete_dir(f"{BUCKET}/round{i}")
    return {"where": where, "rows": rows, "wall_s": run["wall_s"], "data_s": stop - start,
            "start_s": start - run["launched_at"], "batches": len(run["events"]), "durations_s": dict(durations),
            "cpu_s": run["cpu"], "data_cpu_s": run["sampler"].between(start, stop),
            "data_files": data_files, "data_bytes": data_bytes, "end": end, "workdir": workdir}


def table_files(server, workdir: str) -> tuple[int, int]:
    """(files, bytes) of the bronze table's current version."""
    from deltalake import DeltaTable

    uri = workdir + "/tables/bronze"
    opts = server.storage_options() if uri.startswith("s3://") else None
    actions = DeltaTable(uri, storage_options=opts).get_add_actions(flatten=True)
    return actions.num_rows, int(sum(actions.column("size_bytes").to_pylist()))


def summarize_throughput(runs: list[dict], end: int) -> dict:
    mb = end / 1e6
    out: dict = {"commitlog_bytes": end, "rows": runs[0]["rows"], "rounds": len(runs) // 2,
                 "max_bytes_per_trigger": MAX_BYTES_PER_TRIGGER, "mapped_file_size": MAPPED_FILE_SIZE}
    for where in ("local", "s3"):
        mine = [r for r in runs if r["where"] == where]
        data_s = statistics.median(r["data_s"] for r in mine)
        wall_s = statistics.median(r["wall_s"] for r in mine)
        out[f"{where}_rows_s"] = round(statistics.median(r["rows"] / r["data_s"] for r in mine), 1)
        out[f"{where}_mb_s"] = round(mb / data_s, 2)
        out[f"{where}_data_s"] = round(data_s, 3)
        out[f"{where}_cold_s"] = round(wall_s, 2)
        out[f"{where}_cold_mb_s"] = round(mb / wall_s, 2)
        out[f"{where}_fixed_s"] = round(statistics.median(r["wall_s"] - r["data_s"] for r in mine), 2)
        out[f"{where}_start_s"] = round(statistics.median(r["start_s"] for r in mine), 2)
        out[f"{where}_batches"] = mine[0]["batches"]
        out[f"{where}_data_files"] = mine[0]["data_files"]
        out[f"{where}_data_bytes"] = mine[0]["data_bytes"]
        for key in ("addBatch", "walCommit", "commitOffsets", "latestOffset", "queryPlanning"):
            out[f"{where}_{key}_s"] = round(statistics.median(r["durations_s"].get(key, 0.0) for r in mine), 3)
        kinds = {k: statistics.median(r["data_cpu_s"].get(k, 0.0) for r in mine) for k in PROC_KINDS}
        out[f"{where}_data_cpu_s_by_kind"] = {k: round(v, 2) for k, v in kinds.items()}
        out[f"{where}_data_cpu_outside_s"] = round(statistics.median(r["data_cpu_s"]["outside"] for r in mine), 2)
        out[f"{where}_data_cpu_s_per_gb"] = round(sum(kinds.values()) / (end / 1e9), 2)
        out[f"{where}_data_cpu_cores"] = round(sum(kinds.values()) / data_s, 2)
        whole = {k: statistics.median(r["cpu_s"].get(k, 0.0) for r in mine) for k in (*PROC_KINDS, "outside")}
        out[f"{where}_cold_cpu_s_by_kind"] = {k: round(v, 2) for k, v in whole.items()}
        out["seconds"] = out.get("seconds", {}) | {where: [[round(r["data_s"], 3), round(r["wall_s"], 2)]
                                                            for r in mine]}
        out["outside_cpu_s"] = out.get("outside_cpu_s", {}) | {where: [round(r["data_cpu_s"]["outside"], 2)
                                                                      for r in mine]}
    out["s3_vs_local"] = round(statistics.median(
        s["rows"] / s["data_s"] / (lo["rows"] / lo["data_s"])
        for lo, s in zip(runs[0::2], runs[1::2], strict=True)), 3)
    out["s3_vs_local_cold"] = round(statistics.median(
        lo["wall_s"] / s["wall_s"] for lo, s in zip(runs[0::2], runs[1::2], strict=True)), 3)
    out["s3_server_data_cpu_s_per_gb"] = round(out["s3_data_cpu_s_by_kind"]["s3-server"] / (end / 1e9), 2)
    out["s3_extra_addbatch_s"] = round(out["s3_addBatch_s"] - out["local_addBatch_s"], 3)
    return out


# --- where the time goes: the sink's task writer and the Delta commit alone, local and on S3 ----------------
def task_rows(table_dir: Path) -> list:
    """The rows of the first data file of a local bronze table (one task's share of a micro-batch), as the
    landing's tasks hand them to the writer: Arrow batches with ``storeDate``."""
    import pyarrow.parquet as pq

    from connector.landing.rows import with_store_date

    first = sorted(table_dir.rglob("*.parquet"))[0]
    return [with_store_date(b) for b in pq.ParquetFile(first).iter_batches(batch_size=8192)]


def writer_for(location: str, app_id: str, batch_id: int):
    from connector.delta.options import DeltaSinkOptions
    from connector.delta.sink import DeltaLakeStreamWriter
    from connector.landing.rows import landed_schema

    opts = DeltaSinkOptions.from_options({"path": location, "appId": app_id, "partitionBy": "storeDate"})
    return DeltaLakeStreamWriter(opts, landed_schema(), ("storeDate",), batch_id=batch_id)


def write_task(location: str, batches: list, app_id: str, batch_id: int):
    """One task's write through the sink's writer (Parquet files, uploads): its commit message."""
    task = writer_for(location, app_id, batch_id).open_task()
    for b in batches:
        task.write(b)
    return task.close()


def parts_alone(server, table_dir: Path, rounds: int, commits: int) -> dict:
    """The two parts of a micro-batch that differ in an object store, without Spark, in this process, local and on
    S3 interleaved: one task's write of the rows of one data file of ``table_dir`` (Parquet, upload; wall and CPU
    seconds of this process and of the S3 server), and the Delta commit of a batch (of a task's few rows) on a
    table of ``commits`` commits (the driver's :meth:`DeltaBatchCommitter.commit`, wall seconds)."""
    from bench.catchup import _proc_stats
    from connector.storage import store
    from connector.storage.config import StorageConfig

    store.use(StorageConfig.from_options(server.storage_options()))
    rows = task_rows(table_dir)
    small = [rows[0].slice(0, 10)]
    n_rows = sum(b.num_rows for b in rows)
    out: dict = {"task_rows": n_rows}
    write: dict = {"local": [], "s3": []}
    commit: dict = {"local": [], "s3": []}
    scratch = table_dir.parent / "parts-alone"
    for r in range(rounds):
        for where in ("local", "s3"):
            location = str(scratch / f"w{r}") if where == "local" else f"s3://{BUCKET}/parts-alone/w{r}"
            cpu0, s3_0 = time.process_time(), _proc_stats().get(server.pid, (0, 0.0))[1]
            t = time.perf_counter()
            message = write_task(location, rows, "parts", 0)
            wall = time.perf_counter() - t
            cpu, s3_cpu = time.process_time() - cpu0, _proc_stats().get(server.pid, (0, 0.0))[1] - s3_0
            write[where].append((wall, cpu, s3_cpu))
            writer_for(location, "parts", 0).commit([message], 0)  # creates the table
            for b in range(1, commits + 1):
                m = write_task(location, small, "parts", b)
                w = writer_for(location, "parts", b)
                t = time.perf_counter()
                w.commit([m], b)
                if b > commits // 2:  # the later commits: the table has a history
                    commit[where].append(time.perf_counter() - t)
    shutil.rmtree(scratch, ignore_errors=True)
    server.filesystem().delete_dir(f"{BUCKET}/parts-alone")
    for where in ("local", "s3"):
        out[f"{where}_task_write_s"] = round(statistics.median(w for w, _, _ in write[where]), 3)
        out[f"{where}_task_write_cpu_s"] = round(statistics.median(c for _, c, _ in write[where]), 3)
        out[f"{where}_commit_s"] = round(statistics.median(commit[where]), 4)
    out["s3_task_write_server_cpu_s"] = round(statistics.median(s for _, _, s in write["s3"]), 3)
    out["commits"] = commits
    return out


# --- part 2: requests per micro-batch -----------------------------------------------------------------------
def request_what(target: str, kind: str) -> str:
    """What a request of the bronze run touches, with numbers folded to N: ``data file``, ``_delta_log/N.json``,
    ``checkpoint offsets/N``, ``progress file``, ``directory marker``, ``bucket``...; a multipart upload's
    requests are named ``(create)``, ``(part)``, ``(complete)``; a LIST by the prefix it lists and whether it
    starts at the beginning, after a key or at a continuation token."""
    path, _, query = target.partition("?")
    params = dict(parse_qsl(query, keep_blank_values=True))
    path = unquote(path).lstrip("/")
    bucket, _, key = path.partition("/")
    if kind == "LIST":
        key = params.get("prefix", "")
    marker = kind == "PUT" and key.endswith("/") and "partNumber" not in params
    key = re.sub(r"^[^/]+/", "", key)  # the workdir's prefix
    if kind == "HEAD" and not key and "/" not in path:
        return "bucket"
    what = re.sub(r"\d+", "N", key)
    if re.search(r"/storeDate=[^/]*/[^/]+\.parquet$", key):
        what = "data file"
    elif "_delta_log/" in key:
        what = "_delta_log/" + re.sub(r"\d+", "N", key.split("_delta_log/", 1)[1])
    elif key.startswith("status/"):
        what = "progress file"
    elif marker:
        what = "directory marker"
    if kind == "LIST":
        where = ("continued" if "continuation-token" in params else
                 "after a key" if "start-after" in params else "from its start")
        return f"{what or '/'} ({where})"
    if "uploads" in params:
        what += " (create)"
    elif "partNumber" in params:
        what += " (part)"
    elif "uploadId" in params:
        what += " (complete)"
    return what


def build_table(server, broker, workdir: str, root: Path, files_per_batch: int) -> dict:
    """Land the broker's whole log into a bronze table at ``workdir`` in micro-batches of ``files_per_batch``
    mapped files (one task each): (batches, data files)."""
    run = run_bronze(server, broker, workdir, env=server.env(), cwd=root,
                     max_bytes=files_per_batch * REQUEST_FILE_SIZE)
    files, _ = table_files(server, workdir)
    return {"build_batches": len(run["events"]), "data_files_before": files}


def measure_requests(server, proxy, broker, workdir: str, root: Path, extra: tuple[str, ...] = ()) -> dict:
    """The new micro-batches (one mapped file each) of the bronze run at ``workdir`` through ``proxy``: requests
    per micro-batch by kind (median over the middle batches) and what they touched."""
    proxy.reset()
    run = run_bronze(server, broker, workdir, env=proxy.env(), cwd=root, max_bytes=REQUEST_FILE_SIZE, extra=extra)
    requests = proxy.requests()
    starts = [_parse_time(e["time"]) for e in run["events"]]
    per_batch, what = [], []
    for k in range(1, len(starts) - 1):  # not the run's first batch (start-up) nor its last (shutdown)
        inside = [r for r in requests if starts[k] <= r.at < starts[k + 1]]
        per_batch.append(Counter(r.kind for r in inside))
        what.append(Counter(f"{r.kind} {request_what(r.target, r.kind)}" for r in inside))
    json_gets = [c.get("GET _delta_log/N.json", 0) for c in what]
    counts = {kind: statistics.median(c.get(kind, 0) for c in per_batch) for kind in KINDS}
    by_what = {w: statistics.median(c.get(w, 0) for c in what) for w in sorted(set().union(*what))}
    files, _ = table_files(server, workdir)
    return {"batches_measured": len(per_batch), "requests_per_batch": counts,
            "requests_per_batch_total": sum(counts.values()),
            "requests_per_batch_by_what": {w: n for w, n in by_what.items() if n},
            "requests_per_batch_each": [dict(c) for c in per_batch], "delta_log_json_gets_each": json_gets,
            "data_files_after": files, "requests_in_run": len(requests)}


def history_table(server, proxy, broker, root: Path, commits: int, batches: int) -> dict:
    """A bronze table grown as a 1 s trigger grows it, one data file per commit, ``commits`` commits (written by
    the sink's own writer and committer, ten of the large table's rows per file); then ``batches`` micro-batches
    of the bronze app (a new checkpoint starting at a mapped file's start) counted as :func:`measure_requests`."""
    import pyarrow.parquet as pq

    from connector.landing.rows import with_store_date
    from connector.storage import store
    from connector.storage.config import StorageConfig

    store.use(StorageConfig.from_options(server.storage_options()))
    fs = server.filesystem()
    from pyarrow import fs as pafs

    sample = next(i.path for i in fs.get_file_info(pafs.FileSelector(f"{BUCKET}/requests-large/tables/bronze",
                                                                       recursive=True))
                  if i.path.endswith(".parquet"))
    with fs.open_input_file(sample) as f:
        rows = [with_store_date(pq.ParquetFile(f).read_row_group(0).to_batches()[0].slice(0, 10))]
    workdir = f"s3://{BUCKET}/requests-history"
    location = workdir + "/tables/bronze"
    t = time.perf_counter()
    for b in range(commits):
        writer_for(location, "bench-history", b).commit([write_task(location, rows, "bench-history", b)], b)
    build_s = time.perf_counter() - t
    log_objects = len(fs.get_file_info(pafs.FileSelector(f"{BUCKET}/requests-history/tables/bronze/_delta_log")))
    start = _max_offset(broker) // REQUEST_FILE_SIZE * REQUEST_FILE_SIZE  # a mapped file's start
    fill_to(broker, start + (batches + 1) * REQUEST_FILE_SIZE, "BenchRequests", 8)
    files, _ = table_files(server, workdir)
    measured = measure_requests(server, proxy, broker, workdir, root,
                                extra=("--starting-offsets", json.dumps({"broker-a": start})))
    return {"build_commits": commits, "build_s": round(build_s, 1), "data_files_before": files,
            "delta_log_objects_before": log_objects, **measured}


def request_counts(server, root: Path, small_files: int, large_files: int, batches: int, history_commits: int) -> dict:
    """Part 2 (module doc): ``{"small": ..., "large": ..., "history": ...}`` for tables of about ``small_files``
    and ``large_files`` data files, each built in the same number of micro-batches, and one of
    ``history_commits`` commits of one data file each (none when 0)."""
    from broker_stub.launcher import BrokerProcess
    from tests.support.s3_proxy_faults import S3FaultProxy

    build_batches = small_files
    large_per_batch = max(1, large_files // build_batches)
    out = {}
    broker = BrokerProcess.start(root / "broker-requests", brokerName="broker-a",
                                 mappedFileSizeCommitLog=REQUEST_FILE_SIZE)
    proxy = S3FaultProxy.start(server, workdir=root / "proxy")
    try:
        for label, per_batch in (("small", 1), ("large", large_per_batch)):
            workdir = f"s3://{BUCKET}/requests-{label}"
            # the table lands the whole log so far (the first `build_batches * per_batch` mapped files), `per_batch`
            # mapped files (tasks, data files) a micro-batch
            fill_to(broker, build_batches * per_batch * REQUEST_FILE_SIZE, "BenchRequests", 8)
            built = build_table(server, broker, workdir, root, per_batch)
            fill_to(broker, _max_offset(broker) + batches * REQUEST_FILE_SIZE, "BenchRequests", 8)
            out[label] = {**built, **measure_requests(server, proxy, broker, workdir, root)}
            print(f"{label}: {json.dumps({k: v for k, v in out[label].items() if k != 'requests_per_batch_each'})}",
                  flush=True)
        if history_commits:
            out["history"] = history_table(server, proxy, broker, root, history_commits, batches)
            print(f"history: {json.dumps({k: v for k, v in out['history'].items() if k != 'requests_per_batch_each'})}",
                  flush=True)
    finally:
        proxy.close()
        broker.stop()
    return out


# --- main ----------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.object_store", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--mib", type=int, default=None, help="CommitLog to land (default 1024; quick 128)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of (local, s3) (default 5; quick 1)")
    parser.add_argument("--small-files", type=int, default=10, help="data files of the small table (10)")
    parser.add_argument("--large-files", type=int, default=None, help="data files of the large one (1000; quick 100)")
    parser.add_argument("--batches", type=int, default=None, help="micro-batches counted per table (8; quick 4)")
    parser.add_argument("--history-commits", type=int, default=None,
                        help="commits of the table grown one file a commit (1000; quick 100; 0: none)")
    parser.add_argument("--s3-heap", default="512m", help="the S3 server's JVM heap (512m)")
    parser.add_argument("--skip-throughput", action="store_true",
                        help="measure the requests only; the results keep the throughput figures of the results file "
                             "(their time in throughput_taken_at)")
    parser.add_argument("--skip-requests", action="store_true",
                        help="measure the throughput only; the results keep the request counts of the results file "
                             "(their time in requests_taken_at)")
    parser.add_argument("--results-name", default=None)
    args = parser.parse_args(argv)
    mib = args.mib or (128 if args.quick else 1024)
    rounds = args.rounds or (1 if args.quick else 5)
    large_files = args.large_files or (100 if args.quick else 1000)
    batches = args.batches or (4 if args.quick else 8)
    history = args.history_commits if args.history_commits is not None else (100 if args.quick else 1000)

    from broker_stub.launcher import BrokerProcess
    from tests.support.s3_server import S3Server

    root = Path(tempfile.mkdtemp(prefix="bench-object-store-"))
    server = S3Server.start(root / "s3", heap=args.s3_heap)
    results: dict = {"quick": args.quick, "s3_server": f"S3Proxy 4.1.0, filesystem store, heap {args.s3_heap}"}
    try:
        server.create_bucket(BUCKET)
        if not args.skip_throughput:
            broker = BrokerProcess.start(root / "broker", brokerName="broker-a",
                                         mappedFileSizeCommitLog=MAPPED_FILE_SIZE)
            try:
                t = time.perf_counter()
                from bench.delta import produce_backlog_bytes

                messages = produce_backlog_bytes(broker, mib * MIB)
                end = _max_offset(broker)
                print(f"backlog: {messages} messages, {end / MIB:.0f} MiB in {time.perf_counter() - t:.0f} s",
                      flush=True)
                runs = []
                for i in range(rounds):
                    for where in ("local", "s3"):
                        r = throughput_run(server, broker, root, where, i, end, keep=i == 0 and where == "local")
                        if r["rows"] != messages:
                            raise RuntimeError(f"{where} round {i}: {r['rows']} rows, produced {messages}")
                        print(f"round {i} {where}: data {r['data_s']:.2f} s, wall {r['wall_s']:.2f} s, "
                              f"cpu {json.dumps({k: round(v, 2) for k, v in r['data_cpu_s'].items()})}",
                              flush=True)
                        runs.append(r)
                results |= summarize_throughput(runs, end)
                results["messages"] = messages
                parts = parts_alone(server, Path(runs[0]["workdir"]) / "tables" / "bronze", 3, 6)
                shutil.rmtree(runs[0]["workdir"], ignore_errors=True)
                print(f"parts alone: {json.dumps(parts)}", flush=True)
                results["parts_alone"] = parts
                for key in ("local_task_write_s", "s3_task_write_s", "local_commit_s", "s3_commit_s",
                            "s3_task_write_server_cpu_s", "local_task_write_cpu_s", "s3_task_write_cpu_s"):
                    results[key] = parts[key]
            finally:
                broker.stop()
        if not args.skip_requests:
            req = request_counts(server, root, args.small_files, large_files, batches, history)
            results["requests"] = req
            for label, files in (("small", args.small_files), ("large", large_files)):
                r = req[label]
                tag = f"requests_{files}_files"
                for kind in KINDS:
                    results[f"{tag}_{kind.lower()}"] = r["requests_per_batch"][kind]
                results[f"{tag}_total"] = r["requests_per_batch_total"]
                results[f"{label}_table_data_files"] = r["data_files_before"]
            results["requests_same_for_both"] = (req["small"]["requests_per_batch"]
                                                 == req["large"]["requests_per_batch"])
            gets = req["small"]["delta_log_json_gets_each"]
            results["delta_log_json_gets_per_commit"] = statistics.median(b - a for a, b in pairwise(gets))
            if "history" in req:
                r = req["history"]
                for kind in KINDS:
                    results[f"requests_history_{kind.lower()}"] = r["requests_per_batch"][kind]
                results["requests_history_total"] = r["requests_per_batch_total"]
                results["history_table_data_files"] = r["data_files_before"]
                results["history_table_log_objects"] = r["delta_log_objects_before"]
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)

    name = args.results_name or ("object_store_quick" if args.quick else "object_store")
    _keep_skipped_part(name, results, throughput=args.skip_throughput, requests=args.skip_requests)
    rows = []
    if "s3_rows_s" in results:
        rows += [
            ("local_rows_s", results["local_rows_s"], f"data phase, median of {results['rounds']} cold runs"),
            ("s3_rows_s", results["s3_rows_s"], "same log, workdir s3:// (S3Proxy on this machine)"),
            ("s3_vs_local", results["s3_vs_local"], "data phase; goal >= 0.8"),
            ("local_mb_s", results["local_mb_s"], f"{results['commitlog_bytes'] / MIB:.0f} MiB of CommitLog"),
            ("s3_mb_s", results["s3_mb_s"], ""),
            ("local_cold_s", results["local_cold_s"], "launch to exit"),
            ("s3_cold_s", results["s3_cold_s"], "launch to exit"),
            ("s3_vs_local_cold", results["s3_vs_local_cold"], "cold runs"),
            ("local_addBatch_s", results["local_addBatch_s"], "sum over the run's micro-batches"),
            ("s3_addBatch_s", results["s3_addBatch_s"], "tasks' uploads + the Delta commit"),
            ("local_walCommit_s", results["local_walCommit_s"], "offsets log"),
            ("s3_walCommit_s", results["s3_walCommit_s"], "offsets log on S3"),
            ("s3_commitOffsets_s", results["s3_commitOffsets_s"], "commits log on S3"),
            ("local_data_cpu_s_per_gb", results["local_data_cpu_s_per_gb"], "CPU-s/GB, every process"),
            ("s3_data_cpu_s_per_gb", results["s3_data_cpu_s_per_gb"], "CPU-s/GB, every process, S3 server included"),
            ("s3_server_data_cpu_s_per_gb", results["s3_server_data_cpu_s_per_gb"], "CPU-s/GB of S3Proxy alone"),
            ("s3_data_cpu_cores", results["s3_data_cpu_cores"], "cores busy in the data phase (of 2)"),
        ]
    if "requests" in results:
        for label in ("small", "large", "history"):
            if label not in results["requests"]:
                continue
            r = results["requests"][label]
            rows.append((f"requests/batch, {r['data_files_before']} files", r["requests_per_batch_total"],
                         " ".join(f"{k}={v:g}" for k, v in r["requests_per_batch"].items() if v)))
        rows.append(("requests_same_for_both", str(results["requests_same_for_both"]), "goal: True"))
    report(name, results, rows, notes="quick mode: small sizes, not comparable" if args.quick else "")
    return 0


def _keep_skipped_part(name: str, results: dict, *, throughput: bool, requests: bool) -> None:
    """Copy into ``results`` the figures of the part this run skipped from bench/results/NAME.json, with the time that
    run was taken as ``throughput_taken_at`` / ``requests_taken_at``."""
    from bench.common import RESULTS_DIR

    path = RESULTS_DIR / f"{name}.json"
    if not (throughput or requests) or not path.exists():
        return
    previous = json.loads(path.read_text(encoding="utf-8"))
    is_request_key = lambda key: key.startswith(("requests", "delta_log_")) or key.endswith("_table_data_files") \
        or key.endswith("_table_log_objects")  # noqa: E731
    for key, value in previous["results"].items():
        if key in results or key in ("quick", "s3_server"):
            continue
        if (throughput and not is_request_key(key)) or (requests and is_request_key(key)):
            results[key] = value
    part = "throughput" if throughput else "requests"
    results[f"{part}_taken_at"] = previous["results"].get(f"{part}_taken_at", previous["taken_at"])


if __name__ == "__main__":
    raise SystemExit(main())
