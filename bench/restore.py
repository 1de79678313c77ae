"""Restoring a CommitLog from a bronze table beside ``cp`` of the same files (docs/restore.md).

For each ``--mib`` size, a synthetic CommitLog (1 KiB messages, 64 MiB mapped files, every fourth body
ZLIB-compressed) is decoded with every column into a Delta table, as bronze lands it. Each round then runs, in
separate processes and interleaved, ``cp -r`` of the CommitLog folder, ``hareplica restore`` of the table,
``hareplica restore --verify`` of the restored store and, with ``--spark``, the Spark job form
(``restore_commitlog_spark`` on ``local[2]``, the job's wall time without the session's start, then the same job
again in the same session into another store, its Python workers warm: :data:`_SPARK_JOB`); the table reports
the medians of the rounds' wall seconds and peak RSS (``ru_maxrss`` of the child, started by a small launcher so
that the bench's own memory is not counted: :data:`_LAUNCH`) and the restore's cores busy (its CPU seconds over
its wall seconds: what two executors can add to one process on this machine), and the restored files are compared
with the originals. The first size's figures are the top-level results, every size's under ``sizes``, and the
other sizes' also at the top level as ``KEY_MIB`` (``restore_mib_per_s_4096``).
Run: ``flock /tmp/hareplica-heavy.lock .venv/bin/python -m bench.restore [--mib 1024 4096] [--rounds 3] [--spark]``.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from bench.common import report

FILE = 64 * 1024 * 1024
BODY = 1024


def build(root: Path, mib: int) -> tuple[Path, str, int]:
    """(CommitLog folder, table path, records) of a ``mib`` MiB log."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    from connector.decode.columns import iter_record_batches
    from connector.decode.schema import ALL_ARROW_SCHEMA
    from connector.protocol.commitlog import COMPRESSED_FLAG, encode_blank, encode_record
    from connector.protocol.commitlog.layout import COMPRESSION_ZLIB_TYPE

    folder, table = root / "store" / "commitlog", str(root / "bronze")
    folder.mkdir(parents=True)
    offset, records, total = 0, 0, mib * 1024 * 1024
    full = True
    while full:  # a full file ends with a blank: the record that did not fit opens the next one
        start, data, starts = offset, bytearray(), []
        while True:
            i = records
            body = (f"{i:08d}".encode() * (BODY // 8)) if i % 4 else zlib.compress(os.urandom(BODY // 2) * 2)
            rec = encode_record(commit_log_offset=offset, topic=f"Bench{i % 4}", body=body, queue_id=i % 4,
                                queue_offset=i // 16, sys_flag=0 if i % 4 else COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE,
                                store_timestamp=1_790_000_000_000 + i, born_timestamp=1_790_000_000_000 + i,
                                properties={"TAGS": f"t{i % 3}", "UNIQ_KEY": f"U{i:016d}", "WAIT": "true"})
            full = len(data) + len(rec) + 8 > FILE
            if full or (offset >= total and starts):
                break
            starts.append(len(data))
            data += rec
            offset += len(rec)
            records += 1
        if full:
            data += encode_blank(FILE - len(data))
        batches = iter_record_batches(bytes(data), np.array(starts, dtype=np.int64), start, broker="broker-a",
                                      mapped_file_size=FILE, columns=ALL_ARROW_SCHEMA.names)
        write_deltalake(table, pa.Table.from_batches(list(batches)), mode="append")
        (folder / f"{start:020d}").write_bytes(bytes(data) + bytes(FILE - len(data)))
        offset = start + FILE if full else offset
    return folder, table, records


#: Runs argv[1:] and prints its wall seconds and peak RSS (KiB): started by this small launcher, the command's
#: ``ru_maxrss`` is its own (and its children's). Started straight from the bench, it would be at least the
#: bench's own peak: a child made by vfork (as subprocess makes them) and exec'd takes the parent's RSS high-water
#: mark into its ``ru_maxrss`` (Linux ``exec_mmap``), and this process built the table in memory.
_LAUNCH = """
import os, subprocess, sys, time
t = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - t, usage.ru_maxrss, os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime)
"""


def timed(cmd: list[str]) -> tuple[float, int, float]:
    """(wall seconds, peak RSS bytes, CPU seconds) of ``cmd`` run as a child process of a small launcher
    (:data:`_LAUNCH`): ``ru_maxrss`` and user + system time of that child and its children, not of this process.
    Raises CalledProcessError when it fails."""
    out = subprocess.run([sys.executable, "-S", "-c", _LAUNCH, *cmd], check=True, capture_output=True, text=True)
    wall, maxrss, code, cpu = out.stdout.split()
    if int(code):
        raise subprocess.CalledProcessError(int(code), cmd)
    return float(wall), int(maxrss) * 1024, float(cpu)


_SPARK_JOB = """
import sys, time
from pyspark.sql import SparkSession
from connector.restore import restore_commitlog_spark
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.parallelize([0, 1], 2).count()  # executors up before the clock starts
for store in sys.argv[2:]:  # the first job's Python workers import and warm up what the restore uses, the next's not
    t = time.perf_counter()
    restore_commitlog_spark(spark, sys.argv[1], "broker-a", store)
    print(time.perf_counter() - t)
"""


def spark_job(table: str, store: Path, warm_store: Path) -> tuple[float, float]:
    """Wall seconds of the Spark job form on ``local[2]`` (the session started before the clock) into ``store``,
    and of the same job right after it in the same session into ``warm_store``, its Python workers warm."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}  # the workers import this environment's hareplica
    out = subprocess.run([sys.executable, "-c", _SPARK_JOB, table, str(store), str(warm_store)], check=True,
                         capture_output=True, env=env, text=True)
    cold, warm = out.stdout.strip().splitlines()[-2:]
    return float(cold), float(warm)


def measure(root: Path, mib: int, rounds: int, spark: bool) -> dict:
    """The medians of ``rounds`` interleaved rounds at ``mib`` MiB (see the module's docstring)."""
    t = time.perf_counter()
    folder, table, records = build(root, mib)
    build_s = time.perf_counter() - t
    cli = [sys.executable, "-m", "streaming_apps.cli", "restore", table, "--broker-name", "broker-a"]
    cp, restore, verify, spark_s, warm_s = [], [], [], [], []
    names = sorted(os.listdir(folder))
    for r in range(rounds):
        out, store = root / f"cp{r}", root / f"r{r}"
        cp.append(timed(["cp", "-r", str(folder), str(out)]))
        restore.append(timed([*cli, "--store-dir", str(store)]))
        assert all(filecmp.cmp(folder / n, store / "commitlog" / n, shallow=False) for n in names)
        verify.append(timed([*cli, "--verify", str(store)]))
        shutil.rmtree(out)
        shutil.rmtree(store)
        if spark:
            warm_store = root / f"w{r}"
            cold, warm = spark_job(table, store, warm_store)
            spark_s.append(cold)
            warm_s.append(warm)
            for written in (store, warm_store):
                assert all(filecmp.cmp(folder / n, written / "commitlog" / n, shallow=False) for n in names)
                shutil.rmtree(written)
    shutil.rmtree(root / "store")
    shutil.rmtree(table)
    cp_s, restore_s = statistics.median(w for w, *_ in cp), statistics.median(w for w, *_ in restore)
    verify_s = statistics.median(w for w, *_ in verify)
    results = {"mib": mib, "records": records, "rounds": rounds, "build_seconds": build_s, "cp_seconds": cp_s,
               "restore_seconds": restore_s, "restore_vs_cp": restore_s / cp_s, "restore_mib_per_s": mib / restore_s,
               "restore_peak_rss_mib": statistics.median(m for _, m, _ in restore) / 2**20,
               "restore_cores_busy": statistics.median(c / w for w, _, c in restore),
               "cp_mib_per_s": mib / cp_s, "verify_seconds": verify_s, "verify_mib_per_s": mib / verify_s,
               "verify_peak_rss_mib": statistics.median(m for _, m, _ in verify) / 2**20}
    if spark:
        spark_median, warm_median = statistics.median(spark_s), statistics.median(warm_s)
        results |= {"spark_local2_seconds": spark_median, "spark_local2_mib_per_s": mib / spark_median,
                    "spark_local2_vs_one_process": restore_s / spark_median,
                    "spark_local2_warm_seconds": warm_median,
                    "spark_local2_warm_vs_one_process": restore_s / warm_median,
                    "spark_local2_workers_first_use_seconds": spark_median - warm_median}
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, nargs="+", default=[1024])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="also time the Spark job form on local[2]")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-restore-"))
    try:
        sizes = {str(mib): measure(root / str(mib), mib, args.rounds, args.spark) for mib in args.mib}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results = dict(sizes[str(args.mib[0])], sizes=sizes)
    for mib, r in list(sizes.items())[1:]:  # every other size's figures as KEY_MIB too (docs/performance.md)
        results |= {f"{key}_{mib}": value for key, value in r.items() if key not in ("mib", "rounds")}
    rows = []
    for mib, r in sizes.items():
        rows += [
            (f"CommitLog {mib} MiB", r["records"], f"records, {FILE // 2**20} MiB files (table built in "
                                                   f"{r['build_seconds']:.0f} s)"),
            ("cp -r", r["cp_seconds"], f"s, median ({r['cp_mib_per_s']:.0f} MiB/s)"),
            ("hareplica restore", r["restore_seconds"], f"s, median ({r['restore_mib_per_s']:.0f} MiB/s, "
                                                        "byte-identical files)"),
            ("restore / cp", r["restore_vs_cp"], "x"),
            ("restore peak RSS", r["restore_peak_rss_mib"], "MiB (the process, imports included)"),
            ("restore's CPU", r["restore_cores_busy"], "cores busy (CPU seconds / wall seconds, median)"),
            ("restore --verify", r["verify_seconds"], f"s, median ({r['verify_mib_per_s']:.0f} MiB/s, "
                                                      f"peak RSS {r['verify_peak_rss_mib']:.0f} MiB)"),
        ]
        if "spark_local2_seconds" in r:
            rows.append(("Spark job form, local[2]", r["spark_local2_seconds"],
                         f"s, median ({r['spark_local2_vs_one_process']:.2f}x one process)"))
            rows.append(("the same, workers warm", r["spark_local2_warm_seconds"],
                         f"s, median ({r['spark_local2_warm_vs_one_process']:.2f}x one process)"))
    report("restore", results, rows)


if __name__ == "__main__":
    main()
