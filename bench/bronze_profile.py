"""Where bronze's CPU goes: per process and per JVM thread, in the data phase, at two log sizes.

``python -m bench.bronze_profile`` (about 8 minutes on 2 CPUs; ``--small-mib``, ``--large-mib``, ``--rounds``)
runs bronze cold against two real 4.9.8 masters and reports what each further GB costs and the Python task workers'
peak RSS; results in ``bench/results/bronze_profile.json`` and a table. ``--baseline DIR`` also runs, interleaved in
the same rounds, the code of another checkout (a folder holding its ``connector`` and ``streaming_apps``, put first
on ``PYTHONPATH``; its native kernel built) and reports its figures under ``baseline``. The kinds, the method and
the latest results: docs/performance.md "Where the CPU goes: `bench/bronze_profile.py`".
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.catchup import (
    HAREPLICA,
    MAPPED_FILE_SIZE,
    ROUND_TIMEOUT_S,
    _data_phase,
    _max_offset,
    _proc_stats,
    vm_hwm_kib,
)
from bench.common import report
from bench.delta import produce_backlog_bytes

MIB = 1024 * 1024
KINDS = ("spark-jvm", "py-worker", "py-foreachbatch", "cli", "master", "other")


def _kind(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    if "pyspark.daemon" in cmd:
        return "py-worker"
    if "pyspark.sql.streaming" in cmd:
        return "py-foreachbatch"
    if "org.apache.spark.deploy.SparkSubmit" in cmd:
        return "spark-jvm"
    if "bin/hareplica" in cmd:
        return "cli"
    return "other"


def _thread_cpu(pid: int, ticks: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid`` by name, digits folded to N."""
    out: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = re.sub(r"\d+", "N", text[text.find("(") + 1:text.rfind(")")])
        fields = text[text.rfind(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return out


class RunSampler:
    """Samples a run's process tree (by kind) and its JVM's threads every ``interval_s``; kinds are fixed when a
    process is first seen (a shell that execs the JVM is seen again once its command line changed). Also keeps
    ``worker_peak_rss_kib``, the largest peak RSS (``VmHWM``, KiB) of a Python task worker (``py-worker``)."""

    def __init__(self, root_pid: int, master_pid: int, interval_s: float = 0.1) -> None:
        self.root_pid, self.master_pid, self.interval_s = root_pid, master_pid, interval_s
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.kinds: dict[int, str] = {}
        self.cpu: dict[int, float] = {}
        self.samples: list[tuple[float, dict[str, float], dict[str, float]]] = []  # (time, by kind, JVM threads)
        self._master0 = _proc_stats().get(master_pid, (0, 0.0))[1]
        self._jvm: int | None = None
        self._threads: dict[str, float] = {}
        self.worker_peak_rss_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
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
        # the driver JVM: of the processes naming SparkSubmit (spark-class's short-lived launcher too), the busiest
        jvms = [pid for pid in tree if pid in stats and self.kinds[pid] == "spark-jvm"]
        jvm = max(jvms, key=lambda pid: stats[pid][1], default=None)
        by_kind = dict.fromkeys(KINDS, 0.0)
        for pid, cpu in self.cpu.items():
            by_kind[self.kinds[pid]] += cpu
        by_kind["master"] = stats.get(self.master_pid, (0, 0.0))[1] - self._master0
        if jvm != self._jvm:  # a thread's CPU counts from the JVM it ran in; an ended thread keeps its last value
            self._jvm, self._threads = jvm, {}
        if jvm is not None:
            self._threads = {**self._threads, **_thread_cpu(jvm, self.ticks)}
        self.samples.append((time.time(), by_kind, dict(self._threads)))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def between(self, t0: float, t1: float) -> tuple[dict[str, float], dict[str, float]]:
        """(CPU seconds by kind, by JVM thread name) used between epoch times ``t0`` and ``t1`` (nearest samples)."""
        times = [t for t, _, _ in self.samples]

        def at(t: float):
            return self.samples[min(bisect.bisect_left(times, t), len(times) - 1)]

        (_, k0, j0), (_, k1, j1) = at(t0), at(t1)
        return {k: k1[k] - k0.get(k, 0.0) for k in k1}, {n: j1[n] - j0.get(n, 0.0) for n in j1}


def profile_run(work: Path, master, code: Path | None = None) -> dict:
    """One cold bronze run against ``master``: data-phase seconds, rows, CPU by kind and by JVM thread, the Python
    task workers' peak RSS (MiB); with ``code``, of the checkout there (first on ``PYTHONPATH``)."""
    cmd = [str(HAREPLICA), "--log-level", "WARNING", "run", "bronze", "--brokers", f"broker-a={master.ha_addr}",
           "--workdir", str(work), "--trigger", "available-now"]
    env = None if code is None else {**os.environ, "PYTHONPATH": str(code)}
    # run from the bench's folder: a Python worker (``python -m pyspark.daemon``) puts its working directory first
    # on sys.path, so started from the project it would import this checkout's code, not ``code``'s
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env=env, cwd=work.parent)
    sampler = RunSampler(proc.pid, master.pid)
    _, stderr = proc.communicate(timeout=ROUND_TIMEOUT_S)
    time.sleep(1.0)  # the orphaned Spark JVM ends after the CLI
    sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"hareplica run bronze exited {proc.returncode}:\n{stderr[-4000:]}")
    rows, start, end = _data_phase(work / "status" / "bronze.jsonl")
    kinds, threads = sampler.between(start, end)
    return {"data_s": end - start, "rows": rows, "cpu_by_kind": kinds, "cpu_by_jvm_thread": threads,
            "worker_peak_rss_mib": sampler.worker_peak_rss_kib / 1024}


def _median_dict(dicts: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for d in dicts for k in d}
    return {k: statistics.median(d.get(k, 0.0) for d in dicts) for k in sorted(keys)}


def run(small_mib: int, large_mib: int, rounds: int, baseline: Path | None = None) -> dict:
    """Fill, profile the small and the large log ``rounds`` times each (and with the ``baseline`` checkout's code
    right after each, when given), report; returns the results."""
    from tests.support.jvm_peers import RealBroker

    work = Path(tempfile.mkdtemp(prefix="bench-bronze-profile-"))
    masters = {}
    codes = {"this": None, **({"baseline": baseline} if baseline is not None else {})}
    sizes, runs = {}, {code: {"small": [], "large": []} for code in codes}
    try:
        for label, mib in (("small", small_mib), ("large", large_mib)):  # no name server: the producer and
            masters[label] = RealBroker.start(                           # the runs go straight to each master
                work / f"master-{label}", brokerRole="ASYNC_MASTER", mappedFileSizeCommitLog=MAPPED_FILE_SIZE,
                autoCreateTopicEnable="true")
            produce_backlog_bytes(masters[label], mib * MIB)
            sizes[label] = _max_offset(masters[label].remoting_addr)
        for i in range(rounds):  # interleaved: small, large, small, large... (each code in turn)
            for label in ("small", "large"):
                for code, path in codes.items():
                    runs[code][label].append(profile_run(work / f"{code}-{label}{i}", masters[label], path))
    finally:
        for peer in masters.values():
            peer.stop()
        shutil.rmtree(work, ignore_errors=True)
    results = {"rounds": rounds, **_summary(runs["this"], sizes)}
    rows = _rows(results)
    if baseline is not None:
        results["baseline"] = {"code": str(baseline), **_summary(runs["baseline"], sizes)}
        for key in ("worker_peak_rss_mib", "py_worker_marginal_cpu_s_per_gb", "marginal_cpu_s_per_gb_total"):
            results[f"baseline_{key}"] = results["baseline"][key]
        rows += [(f"baseline {metric}", value, comment) for metric, value, comment in _rows(results["baseline"])]
    report("bronze_profile", results, rows, notes=f"{small_mib} and {large_mib} MiB logs, {rounds} interleaved cold "
           f"run(s) each, medians" + (f"; baseline: the code at {baseline}" if baseline is not None else ""))
    return results


def _summary(runs: dict[str, list[dict]], sizes: dict[str, int]) -> dict:
    """The medians of one code's ``runs`` (by log label) and what each further GB costs."""
    results: dict = {}
    for label in ("small", "large"):
        gb = sizes[label] / 1e9
        kinds = _median_dict([r["cpu_by_kind"] for r in runs[label]])
        results[label] = {
            "commitlog_bytes": sizes[label], "data_s": statistics.median(r["data_s"] for r in runs[label]),
            "cpu_s_by_kind": kinds, "cpu_s_per_gb": sum(kinds.values()) / gb,
            "worker_peak_rss_mib": statistics.median(r["worker_peak_rss_mib"] for r in runs[label]),
            "cpu_s_by_jvm_thread": {k: v for k, v in _median_dict([r["cpu_by_jvm_thread"] for r in runs[label]]
                                                                   ).items() if v >= 0.02}}
    extra_gb = (sizes["large"] - sizes["small"]) / 1e9
    small, large = results["small"]["cpu_s_by_kind"], results["large"]["cpu_s_by_kind"]
    results["marginal_cpu_s_per_gb"] = {k: (large.get(k, 0.0) - small.get(k, 0.0)) / extra_gb for k in large}
    results["marginal_cpu_s_per_gb_total"] = sum(results["marginal_cpu_s_per_gb"].values())
    results["py_worker_marginal_cpu_s_per_gb"] = results["marginal_cpu_s_per_gb"]["py-worker"]
    results["worker_peak_rss_mib"] = max(results[label]["worker_peak_rss_mib"] for label in ("small", "large"))
    return results


def _rows(results: dict) -> list[tuple[str, object, str]]:
    """The table rows of one code's :func:`_summary`."""
    rows = [(f"{label} {k}", v, "data-phase CPU s (median)")
            for label in ("small", "large") for k, v in results[label]["cpu_s_by_kind"].items() if v]
    rows += [(f"marginal {k}", v, "CPU-s per further GB") for k, v in results["marginal_cpu_s_per_gb"].items() if v]
    rows.append(("marginal total", results["marginal_cpu_s_per_gb_total"], "CPU-s per further GB, all processes"))
    rows += [(f"{label} cpu_s_per_gb", results[label]["cpu_s_per_gb"], f"data phase, all processes, "
              f"{results[label]['commitlog_bytes'] / 1e9:.2f} GB") for label in ("small", "large")]
    rows += [(f"large JVM {k}", v, "data-phase CPU s") for k, v in results["large"]["cpu_s_by_jvm_thread"].items()]
    rows.append(("worker_peak_rss_mib", results["worker_peak_rss_mib"], "MiB, Python task workers' peak RSS "
                 "(median of the runs, the larger log's or the smaller's)"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bronze_profile", description=__doc__.splitlines()[0])
    parser.add_argument("--small-mib", type=int, default=512)
    parser.add_argument("--large-mib", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a checkout whose code runs too, interleaved (see above)")
    args = parser.parse_args(argv)
    run(args.small_mib, args.large_mib, args.rounds, args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
