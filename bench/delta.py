"""Delta landing benchmark: bronze throughput against noop and its ceilings, catch-up, latency, files after 1 h.

``.venv/bin/python -m bench.delta`` (about 7 minutes on 2 cores) or ``--quick`` (about a minute, small sizes);
results in ``bench/results/delta.json`` (``delta_quick.json``). The method, every figure and the latest results:
docs/performance.md "Delta landing: `bench/delta.py`".
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import arrow_file_source, report

log = logging.getLogger(__name__)

MIB = 1024 * 1024
MAPPED_FILE_SIZE = 64 * MIB
MAX_BYTES_PER_TRIGGER = 128 * MIB
BODY_BYTES = 1024
BATCH_MESSAGES = 64  # messages per SEND_BATCH_MESSAGE while building the backlog
QUERY_TIMEOUT_S = 600


def _max_offset(remoting_addr: str) -> int:
    from connector.client.admin import BrokerAdminClient

    with BrokerAdminClient(remoting_addr) as client:
        return client.commit_log_max_offset()


def produce_backlog_bytes(broker, target_bytes: int, *, topic: str = "BenchLoad",
                          body: Callable[[int], bytes] | None = None) -> int:
    """Send unique 1 KiB bodies (64 per batch, 128 batches in flight) to ``topic`` until the CommitLog has
    ``target_bytes``; messages sent. ``body(seq)`` makes the body of the ``seq``-th message (0, 1, ...); by default
    ``"SEQ:"`` and a filler."""
    from connector.client.producer import Producer

    sent = 0
    seq = 0
    filler = (b"hareplica delta benchmark payload " * 40)[:BODY_BYTES]
    with Producer(broker.remoting_addr, "bench-delta", max_in_flight=128, timeout_ms=30_000) as producer:
        while _max_offset(broker.remoting_addr) < target_bytes:
            futures = []
            for _ in range(256):
                bodies = []
                for _ in range(BATCH_MESSAGES):
                    if body is None:
                        head = f"{seq}:".encode()
                        bodies.append(head + filler[len(head):])
                    else:
                        bodies.append(body(seq))
                    seq += 1
                futures.append(producer.send_batch_async(topic, bodies))
            for f in futures:
                f.result(timeout=120)
            sent += 256 * BATCH_MESSAGES
    return sent


@dataclass(frozen=True)
class RunStats:
    """One timed throughput run.

    Attributes:
        rows: rows the query read.
        seconds: wall time from starting the query to its end (query start-up included).
        batch_seconds: time inside micro-batches (sum of their triggerExecution durations).
        cpu_seconds: CPU time of this process tree during the run (Spark's JVM, its Python workers,
            the broker; None where /proc is missing). On a shared machine wall times vary with the
            load; CPU seconds per GB much less, and 2 cores / (CPU seconds per byte) is a ceiling.
    """

    rows: int
    seconds: float
    batch_seconds: float
    cpu_seconds: float | None


def process_tree_cpu_seconds() -> float | None:
    """User + system CPU seconds of this process and all its descendants, including reaped children (Linux).

    Reads ``/proc/PID/stat`` (utime, stime, cutime, cstime in clock ticks); None when /proc is missing.
    """
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        stats[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / ticks)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0.0))[1]
        todo.extend(children.get(pid, ()))
    return total


def _timed(run) -> tuple[object, float, float | None]:
    """Call ``run()``: (its result, wall seconds, process-tree CPU seconds)."""
    cpu_before = process_tree_cpu_seconds()
    started = time.perf_counter()
    result = run()
    elapsed = time.perf_counter() - started
    cpu_after = process_tree_cpu_seconds()
    return result, elapsed, (cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None)


def batch_seconds(progresses: list[dict]) -> float:
    """Seconds spent inside micro-batches (sum of durationMs.triggerExecution, or batchDurationMs)."""
    total_ms = 0
    for p in progresses:
        d = p.get("durationMs") or {}
        total_ms += d.get("triggerExecution", p.get("batchDurationMs") or 0)
    return total_ms / 1000.0


def _await_query(q, what: str) -> list[dict]:
    """Wait for an AvailableNow query; its progress list. Raises RuntimeError when it fails or hangs."""
    if not q.awaitTermination(QUERY_TIMEOUT_S):
        q.stop()
        raise RuntimeError(f"{what} did not finish within {QUERY_TIMEOUT_S} s")
    if q.exception() is not None:
        raise RuntimeError(f"{what} failed: {q.exception()}")
    return q.recentProgress


def run_noop(spark, broker, checkpoint: Path) -> RunStats:
    """hareplica → noop with AvailableNow over the whole backlog."""
    query = (spark.readStream.format("hareplica").option("brokers", f"broker-a={broker.ha_addr}")
             .option("startingOffsets", "earliest").option("maxBytesPerTrigger", str(MAX_BYTES_PER_TRIGGER)).load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True))
    progress, elapsed, cpu = _timed(lambda: _await_query(query.start(), "hareplica → noop"))
    return RunStats(sum(p["numInputRows"] for p in progress), elapsed, batch_seconds(progress), cpu)


def run_bronze(spark, broker, workdir: Path, landing: str | None = None) -> RunStats:
    """The bronze app (``run_app``: listener, sink, no maintenance) with AvailableNow over the whole backlog;
    ``landing``: the app's ``--landing`` mode (None: its default, ``direct``; or ``spark``)."""
    from streaming_apps.apps import AppConfig, run_app

    cfg = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=workdir, trigger="available-now",
                    max_bytes_per_trigger=MAX_BYTES_PER_TRIGGER, maintenance_every=0, landing=landing)
    result, elapsed, cpu = _timed(lambda: run_app(spark, cfg, max_runtime_s=QUERY_TIMEOUT_S))
    records = [json.loads(line) for line in cfg.status_file.read_text().splitlines() if line.strip()]
    return RunStats(result.rows, elapsed, batch_seconds([r for r in records if r.get("event") == "progress"]), cpu)


def commit_latencies(table: Path, topic: str) -> np.ndarray:
    """Seconds from bornTimestamp to the commit timestamp of the Delta version that added each row of ``topic``."""
    latencies: list[np.ndarray] = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), None)
        if info is None:
            continue
        commit_ms = int(info["timestamp"])
        for a in actions:
            if "add" not in a:
                continue
            data = pq.read_table(table / unquote(a["add"]["path"]), columns=["topic", "bornTimestamp"])
            born = data.filter(pc.equal(data.column("topic"), topic)).column("bornTimestamp")
            born_ms = born.cast(pa.int64()).to_numpy() // 1000  # microseconds → ms
            latencies.append((commit_ms - born_ms) / 1000.0)
    return np.concatenate(latencies) if latencies else np.zeros(0)


def run_latency(spark, broker, workdir: Path, seconds: float, rate: int) -> np.ndarray:
    """Bronze with a 1 s trigger while a producer sends ``rate`` msgs/s for ``seconds``; the latencies (s)."""
    from connector.client.producer import Producer
    from streaming_apps.apps import AppConfig, start

    start_offset = _max_offset(broker.remoting_addr)
    cfg = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=workdir, trigger="1s",
                    starting_offsets=json.dumps({"broker-a": start_offset}), maintenance_every=0)
    running = start(spark, cfg)
    try:
        sent = 0
        with Producer(broker.remoting_addr, "bench-latency") as producer:
            interval = 1.0 / rate
            begin = time.perf_counter()
            futures = []
            while time.perf_counter() - begin < seconds:
                target = begin + sent * interval
                delay = target - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                futures.append(producer.send_async("BenchLatency", f"latency {sent}".encode().ljust(BODY_BYTES, b".")))
                sent += 1
            for f in futures:
                f.result(timeout=60)
        end_offset = _max_offset(broker.remoting_addr)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = [p for p in running.progress
                    if (p["sources"][0].get("endOffset") or {}).get("broker-a", 0) >= end_offset]
            if done:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("the latency run did not catch up within 120 s")
    finally:
        running.close()
    lat = commit_latencies(cfg.table_path("bronze"), "BenchLatency")
    if len(lat) != sent:
        raise RuntimeError(f"latency run: {sent} sent but {len(lat)} rows landed")
    return lat


# --- ceilings: the same rows without the HA source, and without Spark ----------------------------------
def decode_to_arrow_files(commitlog_dir: Path, end: int, file_size: int, out_dir: Path
                          ) -> tuple[list[str], int, float]:
    """Decode CommitLog ``[0, end)`` into one Arrow IPC file per mapped file: (paths, rows, decode seconds).

    The same decoder and batch sizes as hareplica's executors (:class:`CommitLogArrowDecoder` with the
    source's defaults and the columns bronze reads, restore columns included), so the files hold exactly the
    RecordBatches a ``hareplica`` task of the bronze app yields for that mapped file. Decode seconds: decoding
    from memory only (reading and writing the files not counted).
    """
    from bench.source import read_range
    from connector.decode.schema import ALL_ARROW_SCHEMA
    from connector.decode.stream import CommitLogArrowDecoder
    from connector.landing.rows import LANDED_SOURCE_COLUMNS

    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[str] = []
    rows = 0
    decode_s = 0.0
    for file_start in range(0, end, file_size):
        stop = min(end, file_start + file_size)
        chunks = list(read_range(commitlog_dir, file_start, stop, file_size))
        began = time.perf_counter()
        batches = list(CommitLogArrowDecoder(file_start, stop, file_size, broker="broker-a",
                                             columns=LANDED_SOURCE_COLUMNS).decode_all(chunks))
        decode_s += time.perf_counter() - began
        path = out_dir / f"mapped-file-{file_start:020d}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, ALL_ARROW_SCHEMA) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        paths.append(str(path))
    return paths, rows, decode_s


def run_arrow_baseline(spark, paths: list[str], workdir: Path, sink: str, files_per_batch: int = 2) -> RunStats:
    """``arrowfiles`` → noop (``sink="noop"``) or → the bronze sink (``"deltalake"``: storeDate added,
    ``format("deltalake")`` partitioned by storeDate, as the bronze app), Trigger.AvailableNow."""
    from streaming_apps.apps.bronze import store_date

    spark.dataSource.register(arrow_file_source())
    df = (spark.readStream.format("arrowfiles").option("paths", ",".join(paths))
          .option("filesPerBatch", str(files_per_batch)).load())
    if sink == "noop":
        writer = df.writeStream.format("noop")
    else:
        writer = (df.withColumn("storeDate", store_date()).writeStream.format("deltalake")
                  .option("appId", "arrow-baseline").option("partitionBy", "storeDate")
                  .option("path", str(workdir / "table")))
    writer = writer.option("checkpointLocation", str(workdir / "checkpoint")).trigger(availableNow=True)
    progress, elapsed, cpu = _timed(lambda: _await_query(writer.start(), f"arrowfiles → {sink}"))
    return RunStats(sum(p["numInputRows"] for p in progress), elapsed, batch_seconds(progress), cpu)


def parquet_ceilings(paths: list[str], workdir: Path, repeats: int = 2) -> dict[str, float]:
    """Rows/s writing the rows of ``paths`` in one process, no Spark (best of ``repeats``).

    ``parquet_write``: pyarrow's ParquetWriter alone, one file per input file (row groups of one
    micro-batch's task buffer), with the sink's writer options
    (:func:`connector.delta.parquet.parquet_writer_options`);
    ``sink_task_write``: the sink's executor path (:meth:`DeltaLakeStreamWriter.write`: storeDate partition
    split, row groups, rolling, Delta statistics from the footers), one task per input file.
    Input batches are read into memory first (not timed); storeDate is added to them beforehand.
    """
    from pyspark.sql.types import DateType, StructField, StructType

    from connector.decode.schema import spark_schema
    from connector.delta.options import DeltaSinkOptions
    from connector.delta.parquet import parquet_writer_options
    from connector.delta.sink import DeltaLakeStreamWriter

    per_file = []
    for path in paths:
        with pa.memory_map(path) as source:
            reader = pa.ipc.open_file(source)
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        dated = []
        for b in batches:
            days = pc.floor(pc.divide(b.column("storeTimestamp").cast(pa.int64()), 86_400_000_000))
            store_date = days.cast(pa.int32()).cast(pa.date32())
            dated.append(pa.RecordBatch.from_arrays(list(b.columns) + [store_date],
                                                    schema=b.schema.append(pa.field("storeDate", pa.date32()))))
        per_file.append((batches, dated))
    rows = sum(b.num_rows for batches, _ in per_file for b in batches)
    out = workdir / "parquet-ceiling"
    out.mkdir(parents=True, exist_ok=True)
    write_s = []
    for _ in range(repeats):
        began = time.perf_counter()
        for i, (batches, _) in enumerate(per_file):
            table = pa.Table.from_batches(batches)
            with pq.ParquetWriter(str(out / f"f{i}.parquet"), table.schema,
                                  **parquet_writer_options(table.schema, "snappy", table)) as writer:
                writer.write_table(table, row_group_size=max(1, table.num_rows))
        write_s.append(time.perf_counter() - began)
    schema = StructType(spark_schema(restore_columns=True).fields + [StructField("storeDate", DateType())])
    task_s = []
    for r in range(repeats):
        opts = DeltaSinkOptions.from_options({"path": str(workdir / f"sink-ceiling-{r}"), "appId": "ceiling",
                                              "partitionBy": "storeDate"})
        writer = DeltaLakeStreamWriter(opts, schema, ("storeDate",), batch_id=0)
        began = time.perf_counter()
        for _, dated in per_file:
            writer.write(iter(dated))
        task_s.append(time.perf_counter() - began)
    return {"rows": rows, "parquet_write_s": min(write_s), "sink_task_write_s": min(task_s)}


def simulate_hour(workdir: Path, batches: int, maintenance_every: int, rows_per_task: int = 20
                  ) -> dict[str, int | float]:
    """``batches`` 1 s micro-batches of 2 tasks through the sink's writer, maintenance on schedule."""
    import datetime as dt

    from pyspark.sql.types import DateType, StructField, StructType

    from connector.decode.schema import ARROW_SCHEMA, spark_schema
    from connector.delta.maintenance import MaintenancePolicy, TableMaintainer
    from connector.delta.options import DeltaSinkOptions
    from connector.delta.sink import DeltaLakeStreamWriter

    table = workdir / "sim-bronze"
    schema = StructType(spark_schema().fields + [StructField("storeDate", DateType())])
    opts = DeltaSinkOptions.from_options({"path": str(table), "appId": "sim", "partitionBy": "storeDate"})
    maintainer = TableMaintainer([str(table)], MaintenancePolicy(every_batches=maintenance_every))
    start_ts = dt.datetime(2026, 1, 1, 23, 30, tzinfo=dt.UTC)  # crosses midnight: two storeDate partitions
    arrow_schema = pa.schema(list(ARROW_SCHEMA) + [pa.field("storeDate", pa.date32())])
    offset = 0
    began = time.perf_counter()
    for b in range(batches):
        writer = DeltaLakeStreamWriter(opts, schema, ("storeDate",), batch_id=b)
        messages = []
        for _task in range(2):
            n = rows_per_task
            ts = start_ts + dt.timedelta(seconds=b)
            cols = {
                "topic": pa.array(["Sim"] * n), "queueId": pa.array([0] * n, pa.int32()),
                "queueOffset": pa.array(range(offset, offset + n), pa.int64()),
                "commitLogOffset": pa.array(range(offset * 1100, (offset + n) * 1100, 1100), pa.int64()),
                "storeSize": pa.array([1100] * n, pa.int32()), "bodyCRC": pa.array([0] * n, pa.int32()),
                "flag": pa.array([0] * n, pa.int32()), "sysFlag": pa.array([0] * n, pa.int32()),
                "bornTimestamp": pa.array([ts] * n, pa.timestamp("us", tz="UTC")),
                "bornHost": pa.array(["127.0.0.1:5000"] * n),
                "storeTimestamp": pa.array([ts] * n, pa.timestamp("us", tz="UTC")),
                "storeHost": pa.array(["127.0.0.1:10911"] * n), "reconsumeTimes": pa.array([0] * n, pa.int32()),
                "preparedTransactionOffset": pa.array([0] * n, pa.int64()),
                "msgId": pa.array([f"{i:032X}" for i in range(offset, offset + n)]),
                "uniqKey": pa.array([None] * n, pa.string()), "tags": pa.array([None] * n, pa.string()),
                "keys": pa.array([None] * n, pa.string()),
                "properties": pa.array([[]] * n, pa.map_(pa.string(), pa.string())),
                "body": pa.array([os.urandom(16) * 64 for _ in range(n)], pa.binary()),
                "broker": pa.array(["broker-a"] * n), "decodeError": pa.nulls(n, pa.string()),
                "storeDate": pa.array([ts.date()] * n, pa.date32()),
            }
            offset += n
            messages.append(writer.write(iter([pa.record_batch(cols, schema=arrow_schema)])))
        writer.commit(messages, b)
        maintainer.batch_completed(b)
    maintainer.wait(300)
    elapsed = time.perf_counter() - began
    from deltalake import DeltaTable

    active = len(DeltaTable(str(table)).file_uris())
    on_disk = sum(1 for p in table.rglob("*.parquet") if "_delta_log" not in p.parts)
    return {"files_after_1h": active, "files_on_disk_after_1h": on_disk, "files_without_maintenance_1h": 2 * batches,
            "maintenance_runs": maintainer.runs, "sim_batches": batches, "sim_seconds": round(elapsed, 1)}


THROUGHPUT_RUNS = ("noop", "bronze", "bronze_spark", "arrow_noop", "arrow_bronze")


def throughput_round(spark, broker, paths: list[str], workdir: Path) -> dict[str, RunStats]:
    """One run of each throughput query over the whole backlog, one after the other (see the module doc)."""
    return {
        "noop": run_noop(spark, broker, workdir / "noop-checkpoint"),
        "bronze": run_bronze(spark, broker, workdir / "bronze"),
        "bronze_spark": run_bronze(spark, broker, workdir / "bronze-spark", landing="spark"),
        "arrow_noop": run_arrow_baseline(spark, paths, workdir / "arrow-noop", "noop"),
        "arrow_bronze": run_arrow_baseline(spark, paths, workdir / "arrow-bronze", "deltalake"),
    }


def summarize_throughput(rounds: list[dict[str, RunStats]], commitlog_bytes: int, decode_s: float,
                         ceilings: dict[str, float]) -> dict[str, float | int | dict]:
    """The JSON fields of the throughput part: medians over ``rounds`` (module doc)."""
    mb = commitlog_bytes / 1e6
    cpus = os.cpu_count() or 1
    out: dict[str, float | int | dict] = {}
    for name in THROUGHPUT_RUNS:
        runs = [r[name] for r in rounds]
        seconds = statistics.median(r.seconds for r in runs)
        batches = statistics.median(r.batch_seconds for r in runs)
        out[f"{name}_rows_s"] = round(statistics.median(r.rows / r.seconds for r in runs), 1)
        out[f"{name}_catchup_mb_s"] = round(mb / seconds, 2)
        out[f"{name}_batches_mb_s"] = round(mb / batches, 2) if batches else None
        out[f"{name}_fixed_s"] = round(statistics.median(r.seconds - r.batch_seconds for r in runs), 2)
        cpu = [r.cpu_seconds for r in runs if r.cpu_seconds is not None]
        if cpu:
            cpu_s = statistics.median(cpu)
            out[f"{name}_cpu_s_per_gb"] = round(cpu_s / (commitlog_bytes / 1e9), 2)
            out[f"{name}_cpu_bound_mb_s"] = round(cpus * mb / cpu_s, 1)
    out["bronze_vs_noop"] = round(statistics.median(
        (r["bronze"].rows / r["bronze"].seconds) / (r["noop"].rows / r["noop"].seconds) for r in rounds), 3)
    out["bronze_spark_vs_noop"] = round(statistics.median(
        (r["bronze_spark"].rows / r["bronze_spark"].seconds) / (r["noop"].rows / r["noop"].seconds) for r in rounds),
        3)
    out["arrow_bronze_vs_noop"] = round(statistics.median(
        (r["arrow_bronze"].rows / r["arrow_bronze"].seconds) / (r["noop"].rows / r["noop"].seconds) for r in rounds), 3)
    out["throughput_seconds"] = {name: [round(r[name].seconds, 2) for r in rounds] for name in THROUGHPUT_RUNS}
    out["decode_only_mb_s"] = round(mb / decode_s, 1)
    out["parquet_write_mb_s"] = round(mb / ceilings["parquet_write_s"], 1)
    out["parquet_write_rows_s"] = round(ceilings["rows"] / ceilings["parquet_write_s"], 1)
    out["sink_task_write_mb_s"] = round(mb / ceilings["sink_task_write_s"], 1)
    out["sink_task_write_rows_s"] = round(ceilings["rows"] / ceilings["sink_task_write_s"], 1)
    return out


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.delta", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of about a minute")
    parser.add_argument("--backlog-mib", type=int, default=None, help="CommitLog backlog (default 1024; quick 16)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed rounds of the throughput runs after the warm-up round (default 3; quick 1)")
    parser.add_argument("--latency-seconds", type=float, default=None, help="latency load time (default 45; quick 8)")
    parser.add_argument("--latency-rate", type=int, default=500, help="msgs/s during the latency run (default 500)")
    parser.add_argument("--sim-batches", type=int, default=None, help="simulated 1 s batches (default 3600; quick 200)")
    parser.add_argument("--maintenance-every", type=int, default=100, help="maintenance interval in batches (100)")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temporary one, removed)")
    parser.add_argument("--results-name", default=None,
                        help="bench/results/NAME.json to write (default delta, or delta_quick with --quick)")
    return parser.parse_args(argv)


def _report_rows(results: dict, args: argparse.Namespace, repeats: int, commitlog_bytes: int,
                 sim_batches: int) -> list[tuple[str, object, str]]:
    """The table rows (metric, value, note) of one run's results."""
    gb = "CPU s/GB"
    rows = [
        ("noop_rows_s", results["noop_rows_s"], f"hareplica → noop (baseline), median of {repeats}"),
        ("bronze_rows_s", results["bronze_rows_s"], "bronze app (--landing direct), same backlog"),
        ("bronze_vs_noop", results["bronze_vs_noop"], "goal >= 0.5"),
        ("bronze_catchup_mb_s", results["bronze_catchup_mb_s"],
         f"{commitlog_bytes / MIB:.0f} MiB CommitLog of 1 KiB messages (real-slave comparison: bench/catchup.py)"),
        ("bronze_batches_mb_s", results["bronze_batches_mb_s"],
         f"inside micro-batches (query start/stop {results['bronze_fixed_s']} s excluded)"),
        ("bronze_spark_rows_s", results["bronze_spark_rows_s"], "bronze --landing spark (rows through Spark)"),
        ("bronze_spark_vs_noop", results["bronze_spark_vs_noop"], "goal >= 0.5"),
        ("bronze_spark_catchup_mb_s", results["bronze_spark_catchup_mb_s"], "same backlog"),
        ("bronze_spark_batches_mb_s", results["bronze_spark_batches_mb_s"],
         f"inside micro-batches (query start/stop {results['bronze_spark_fixed_s']} s excluded)"),
        ("bronze_cpu_s_per_gb", results.get("bronze_cpu_s_per_gb"),
         f"{gb}; all {os.cpu_count()} cores busy → at most {results.get('bronze_cpu_bound_mb_s')} MB/s end to end"),
        ("noop_cpu_s_per_gb", results.get("noop_cpu_s_per_gb"),
         f"{gb}; → at most {results.get('noop_cpu_bound_mb_s')} MB/s end to end"),
        ("arrow_noop_rows_s", results["arrow_noop_rows_s"],
         f"ceiling: same rows from Arrow files → noop ({results['arrow_noop_batches_mb_s']} MB/s in batches)"),
        ("arrow_bronze_rows_s", results["arrow_bronze_rows_s"],
         f"ceiling: Arrow files → deltalake sink ({results['arrow_bronze_batches_mb_s']} MB/s in batches, "
         f"{results.get('arrow_bronze_cpu_s_per_gb')} {gb})"),
        ("parquet_write_mb_s", results["parquet_write_mb_s"], "ceiling: pyarrow Parquet write of those rows, no Spark"),
        ("sink_task_write_mb_s", results["sink_task_write_mb_s"],
         "ceiling: the sink's task writer (split, Parquet, stats), no Spark"),
        ("decode_only_mb_s", results["decode_only_mb_s"], "ceiling: CommitLog decode in memory, no Spark"),
        ("latency_p50_s", results["latency_p50_s"], f"produce → visible in Delta, 1 s trigger, {args.latency_rate}/s"),
        ("latency_p99_s", results["latency_p99_s"], "goal <= 3 s"),
        ("files_after_1h", results["files_after_1h"],
         f"{sim_batches} simulated 1 s batches, maintenance every {args.maintenance_every}"),
        ("files_on_disk_after_1h", results["files_on_disk_after_1h"], "tombstones kept for the 7-day vacuum retention"),
        ("files_without_maintenance_1h", results["files_without_maintenance_1h"], "2 tasks per batch"),
    ]
    return rows


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    backlog = (args.backlog_mib or (16 if args.quick else 1024)) * MIB
    repeats = max(1, args.repeats or (1 if args.quick else 3))
    latency_s = args.latency_seconds or (8.0 if args.quick else 45.0)
    sim_batches = args.sim_batches or (200 if args.quick else 3600)

    from broker_stub.launcher import BrokerProcess
    from streaming_apps.spark_session import build_spark_session

    root = Path(args.workdir or tempfile.mkdtemp(prefix="bench-delta-"))
    root.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess.start(root / "broker", brokerName="broker-a", mappedFileSizeCommitLog=MAPPED_FILE_SIZE)
    spark = None
    try:
        t0 = time.perf_counter()
        messages = produce_backlog_bytes(broker, backlog)
        commitlog_bytes = _max_offset(broker.remoting_addr)
        print(f"backlog: {messages} messages, {commitlog_bytes / MIB:.0f} MiB of CommitLog in "
              f"{time.perf_counter() - t0:.1f} s")
        paths, arrow_rows, decode_s = decode_to_arrow_files(broker.commitlog_dir, commitlog_bytes, MAPPED_FILE_SIZE,
                                                            root / "arrow")
        if arrow_rows != messages:
            raise RuntimeError(f"decoded {arrow_rows} rows from the CommitLog files, produced {messages}")
        spark = build_spark_session("bench-delta", local_dir=str(root / "spark-local"))
        # round 0 warms every path up (JIT, Python worker daemons, imports, first table) and is not counted
        rounds = [throughput_round(spark, broker, paths, root / f"round-{i}") for i in range(repeats + 1)][1:]
        for r in rounds:
            wrong = {name: stats.rows for name, stats in r.items() if stats.rows != messages}
            if wrong:
                raise RuntimeError(f"rows: produced {messages}, but the runs read {wrong}")
        ceilings = parquet_ceilings(paths, root)
        lat = run_latency(spark, broker, root / "latency", latency_s, args.latency_rate)
        sim = simulate_hour(root, sim_batches, args.maintenance_every)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)

    throughput = summarize_throughput(rounds, commitlog_bytes, decode_s, ceilings)
    results = {
        **throughput,
        "backlog_bytes": commitlog_bytes, "backlog_messages": messages, "body_bytes": BODY_BYTES, "repeats": repeats,
        "latency_p50_s": round(float(np.percentile(lat, 50)), 3),
        "latency_p99_s": round(float(np.percentile(lat, 99)), 3),
        "latency_max_s": round(float(lat.max()), 3), "latency_messages": int(len(lat)),
        "latency_rate_msgs_s": args.latency_rate, "trigger": "1s", "quick": args.quick,
        **sim,
    }
    rows = _report_rows(results, args, repeats, commitlog_bytes, sim_batches)
    report(args.results_name or ("delta_quick" if args.quick else "delta"), results, rows,
           notes="quick mode: small sizes, not comparable" if args.quick else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
