"""Catch-up benchmark: bronze beside a real RocketMQ 4.9.8 slave on the same bytes in the same run.

Every reader (a real slave, a stub slave, bronze, the 4.9.8 Java consumer, ``os.sendfile``) takes one real
master's whole log, interleaved round by round; then silver and gold run on demo order events.
``python -m bench.catchup`` (a 512 MiB CommitLog of 1 KiB messages, 3 rounds, about 6-8 minutes on 2 CPUs) or
``--quick`` (16 MiB, 1 round, about a minute); results in ``bench/results/catchup.json`` (``catchup_quick.json``).
What each figure measures, the goals and the latest results: docs/performance.md "Catch-up beside a real slave:
`bench/catchup.py`".
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from bench.common import report
from bench.delta import produce_backlog_bytes
from bench.floors import measure_floors
from bench.replication import _catchup_once, raw_sendfile_mb_s
from connector.protocol.commitlog import file_name

MIB = 1024 * 1024
MAPPED_FILE_SIZE = 1024 * MIB  # one mapped file, as in the measurement
TOPIC = "BenchLoad"  # the topic bench.delta's producer fills
POLL_S = 0.05
ROUND_TIMEOUT_S = 300.0
ORDER_EVENTS = 200_000  # demo order events for silver and gold: four micro-batches, three after the first
ORDERS_FILE_SIZE = 64 * MIB  # mapped files of the order events' broker: one micro-batch each
HAREPLICA = Path(sys.executable).with_name("hareplica")


def _max_offset(addr: str) -> int:
    from tests.support.brokers import runtime_info

    return int(runtime_info(addr)["commitLogMaxOffset"])


def real_slave_seconds(work: Path, master, end: int) -> dict:
    """A fresh real 4.9.8 SLAVE copying ``end`` bytes of CommitLog: ``cold_s`` from its launch (JVM start
    included, as ``bronze_cold`` includes Python and Spark start) and ``data_s`` from the first poll that saw
    bytes in its CommitLog (``commitLogMaxOffset > 0``, polled every 50 ms) to holding them all."""
    from tests.support.jvm_peers import RealBroker

    launched = time.perf_counter()
    slave = RealBroker.start(work, brokerRole="SLAVE", haMasterAddress=master.ha_addr,
                             mappedFileSizeCommitLog=MAPPED_FILE_SIZE)
    try:
        first_byte = None
        deadline = time.monotonic() + ROUND_TIMEOUT_S
        while (held := _max_offset(slave.remoting_addr)) < end:
            if first_byte is None and held > 0:
                first_byte = time.perf_counter()
            if time.monotonic() > deadline:
                raise RuntimeError(f"real slave did not catch up within {ROUND_TIMEOUT_S} s")
            time.sleep(POLL_S)
        done = time.perf_counter()
        return {"cold_s": done - launched, "data_s": done - (first_byte or done - POLL_S)}
    finally:
        slave.stop()


def _parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _proc_stats() -> dict[int, tuple[int, float]]:
    """Every process's (parent pid, own user + system CPU seconds), from ``/proc/PID/stat``."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            fields = text[text.rfind(")") + 2:].split()
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    return stats


def vm_hwm_kib(pid: int) -> int:
    """The peak resident set size (``VmHWM``, KiB) of process ``pid`` so far; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeCpuMeter:
    """CPU seconds of a process tree that outlives its reaping: pyspark never waits for its Spark JVM, so the
    JVM's CPU reaches no parent's ``cutime``. Samples ``/proc`` every ``interval_s``; every process ever seen
    below ``root_pid`` counts with its last seen user + system time (the last ``interval_s`` of a process's life
    is lost), plus what ``extra_pids`` (e.g. the broker serving the run) used since :meth:`start`."""

    def __init__(self, extra_pids: list[int], interval_s: float = 0.1) -> None:
        self.extra_pids = extra_pids
        self.interval_s = interval_s
        self.seen: dict[int, float] = {}
        self.series: list[tuple[float, float]] = []  # (epoch s, tree + extra CPU s so far) per sample
        self.root_pid: int | None = None
        self.worker_peak_rss_kib = 0  # the largest VmHWM of a pyspark.daemon process (the Python workers)
        self._workers: dict[int, bool] = {}  # pid -> is a pyspark.daemon process
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        stats = _proc_stats()
        self._extra_before = sum(stats.get(p, (0, 0.0))[1] for p in extra_pids)

    def start(self, root_pid: int) -> None:
        """Watch the tree below ``root_pid`` (itself included) from now on."""
        self.root_pid = root_pid
        self._thread.start()

    def _sample(self) -> dict[int, tuple[int, float]]:
        stats = _proc_stats()
        tree, todo = set(), [self.root_pid]
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        while todo:
            pid = todo.pop()
            tree.add(pid)
            todo.extend(children.get(pid, ()))
        for pid in tree | (self.seen.keys() & stats.keys()):
            if pid in stats:
                self.seen[pid] = max(self.seen.get(pid, 0.0), stats[pid][1])
        for pid in tree:
            self._note_worker_rss(pid)
        extra = sum(stats.get(p, (0, 0.0))[1] for p in self.extra_pids) - self._extra_before
        self.series.append((time.time(), sum(self.seen.values()) + extra))
        return stats

    def _note_worker_rss(self, pid: int) -> None:
        try:
            if pid not in self._workers:
                self._workers[pid] = b"pyspark.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return
        if self._workers[pid]:
            self.worker_peak_rss_kib = max(self.worker_peak_rss_kib, vm_hwm_kib(pid))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def between(self, t0: float, t1: float) -> float:
        """CPU seconds used between epoch times ``t0`` and ``t1`` (linear between samples)."""
        def at(t: float) -> float:
            times = [ts for ts, _ in self.series]
            i = bisect.bisect_left(times, t)
            if i == 0:
                return self.series[0][1]
            if i == len(times):
                return self.series[-1][1]
            (ta, ca), (tb, cb) = self.series[i - 1], self.series[i]
            return ca + (cb - ca) * (t - ta) / (tb - ta) if tb > ta else cb
        return at(t1) - at(t0)

    def stop(self) -> float:
        """Stop sampling; total CPU seconds of the tree and the extra processes."""
        self._stop.set()
        self._thread.join()
        stats = self._sample()
        extra = sum(stats.get(p, (0, 0.0))[1] for p in self.extra_pids) - self._extra_before
        return sum(self.seen.values()) + extra


def produce_orders(master, count: int) -> None:
    """Send ``count`` demo order events (:func:`streaming_apps.workload.order_events`) to the master, pipelined."""
    from connector.client.producer import Producer
    from streaming_apps.workload import order_events

    with Producer(master.remoting_addr, "bench-orders", max_in_flight=512, timeout_ms=30_000) as producer:
        futures = [producer.send_async(m.topic, m.body, tags=m.tags, keys=m.keys, properties=m.properties)
                   for m in order_events(count)]
        for f in futures:
            f.result(timeout=120)


def app_rows_s(work: Path, broker, app: str) -> dict:
    """One cold ``hareplica run silver|gold --trigger available-now`` over the order events of ``broker`` (see
    :func:`orders_broker`), one mapped file per micro-batch (``--max-bytes-per-trigger``; a batch ends at a
    mapped-file start, docs/source.md "Batches"). Returns ``{"rows_s", "first_batch_rows_s"}``: source rows
    per second of the micro-batches after the first (steady state: the Python workers are up and imported)
    and of the first one (workers starting), from the progress file as ``bronze_data_mb_s``."""
    cmd = [str(HAREPLICA), "--log-level", "WARNING", "run", app, "--brokers", f"broker-a={broker.ha_addr}",
           "--workdir", str(work), "--trigger", "available-now",
           "--max-bytes-per-trigger", broker.props["mappedFileSizeCommitLog"]]
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=ROUND_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"hareplica run {app} exited {done.returncode}:\n{done.stderr[-4000:]}")
    batches = _batches_with_rows(work / "status" / f"{app}.jsonl")
    if len(batches) < 2:
        raise RuntimeError(f"hareplica run {app}: {len(batches)} micro-batch(es) with rows, need 2 for a steady state")
    first, rest = batches[0], batches[1:]
    return {"rows_s": sum(rows for rows, _, _ in rest) / (rest[-1][2] - rest[0][1]),
            "first_batch_rows_s": first[0] / (first[2] - first[1])}


def _batches_with_rows(status_file: Path) -> list[tuple[int, float, float]]:
    """``(source rows, trigger time, end time)`` of every micro-batch with rows in an app's progress file."""
    events = [json.loads(line) for line in status_file.read_text().splitlines() if line]
    out = []
    for e in events:
        if e.get("event") == "progress" and (e.get("numInputRows") or 0) > 0:
            begin = _parse_time(e["time"])
            out.append((int(e["numInputRows"]), begin, begin + e["batchDurationMs"] / 1e3))
    return out


def _data_phase(status_file: Path) -> tuple[int, float, float]:
    """(source rows, first micro-batch with rows' trigger time, end of the last one) from an app's progress file."""
    batches = _batches_with_rows(status_file)
    if not batches:
        raise RuntimeError(f"{status_file}: no micro-batch with rows")
    return sum(rows for rows, _, _ in batches), batches[0][1], batches[-1][2]


def bronze_run(work: Path, master) -> dict:
    """One cold ``hareplica run bronze --trigger available-now``: wall, data-phase and first-byte seconds, CPU."""
    cmd = [str(HAREPLICA), "--log-level", "WARNING", "run", "bronze", "--brokers", f"broker-a={master.ha_addr}",
           "--workdir", str(work), "--trigger", "available-now"]
    meter = TreeCpuMeter([master.pid])
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    meter.start(proc.pid)
    _, stderr = proc.communicate(timeout=ROUND_TIMEOUT_S)
    wall = time.perf_counter() - started
    time.sleep(1.0)  # the orphaned Spark JVM ends after the CLI: keep sampling until it is gone
    cpu = meter.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"hareplica run bronze exited {proc.returncode}:\n{stderr[-4000:]}")
    rows, data_start, data_end = _data_phase(work / "status" / "bronze.jsonl")
    data_s = data_end - data_start
    events = [json.loads(line) for line in (work / "status" / "bronze.jsonl").read_text().splitlines() if line]
    first = next(e for e in events if e.get("event") == "progress" and (e.get("numInputRows") or 0) > 0)
    d = first.get("durationMs") or {}
    first_byte = sum(float(d.get(k) or 0) for k in ("latestOffset", "getBatch", "queryPlanning")) / 1e3
    return {"wall_s": wall, "data_s": data_s, "first_byte_s": first_byte, "rows": rows,
            "cpu_s": cpu, "data_cpu_s": meter.between(data_start, data_end),
            "worker_peak_rss_mib": meter.worker_peak_rss_kib / 1024}


def java_consumer_seconds(work: Path, namesrv, messages: int, group: str) -> float:
    """Wall seconds of the real 4.9.8 lite-pull consumer (a new JVM) consuming ``messages`` of the topic."""
    from tests.support.java_tools import run_java

    started = time.perf_counter()
    run = run_java("JavaConsumer", ["mode=litepull", f"namesrv={namesrv.addr}", f"topic={TOPIC}", f"group={group}",
                                    f"count={messages}", f"timeoutMs={int(ROUND_TIMEOUT_S * 1000)}"],
                   log_dir=work, timeout_s=ROUND_TIMEOUT_S + 30)
    elapsed = time.perf_counter() - started
    if len(run.lines) < messages:
        raise RuntimeError(f"Java consumer printed {len(run.lines)} of {messages} messages")
    return elapsed


def settle(*outputs: Path) -> None:
    """Remove a reader's ``outputs`` and write the page cache back (``os.sync``) before the next reader starts.

    A slave leaves 527 MiB of dirty pages behind; unsettled, the kernel writes them back while the next reader
    runs, on the same two cores (writing 1 GiB back costs this machine about 1.4 s of system CPU, ``dd`` with
    ``conv=fdatasync``), and that reader is measured slower for its predecessor's work."""
    for output in outputs:
        shutil.rmtree(output, ignore_errors=True)
    os.sync()


def one_round(work: Path, i: int, master, namesrv, end: int, messages: int) -> dict:
    """Every reader once, in a fixed order, each on fresh state under ``work`` and after the previous one's
    output is gone (:func:`settle`); returns their figures."""
    settle()
    out = {"real_slave": real_slave_seconds(work / f"real-slave{i}", master, end)}
    settle(work / f"real-slave{i}")
    mb_s, _ = _catchup_once(work, f"stub-slave{i}", master, end)
    settle(work / f"stub-slave{i}")
    out["stub_slave_mb_s"] = mb_s
    out["bronze"] = bronze_run(work / f"bronze{i}", master)
    settle(work / f"bronze{i}")
    out["java_s"] = java_consumer_seconds(work / f"java{i}", namesrv, messages, f"bench_catchup_{i}")
    settle(work / f"java{i}")
    out["raw_sendfile_mb_s"] = raw_sendfile_mb_s(master.commitlog_dir / file_name(0), end)
    out["floors"] = measure_floors(master.commitlog_dir / file_name(0), end, MAPPED_FILE_SIZE, rounds=1)
    return out


def _median_spread(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), max(values) - min(values)


def summarize(rounds: list[dict], end: int) -> dict:
    """Medians (and max - min spreads, key ``*_spread``) of every figure over the rounds."""
    series = {
        "real_slave_mb_s": [end / r["real_slave"]["cold_s"] / 1e6 for r in rounds],
        "real_slave_data_mb_s": [end / r["real_slave"]["data_s"] / 1e6 for r in rounds],
        "stub_slave_mb_s": [r["stub_slave_mb_s"] for r in rounds],
        "bronze_cold_mb_s": [end / r["bronze"]["wall_s"] / 1e6 for r in rounds],
        "bronze_data_mb_s": [end / r["bronze"]["data_s"] / 1e6 for r in rounds],
        "java_consumer_mb_s": [end / r["java_s"] / 1e6 for r in rounds],
        "raw_sendfile_mb_s": [r["raw_sendfile_mb_s"] for r in rounds],
        "first_byte_s": [r["bronze"]["first_byte_s"] for r in rounds],
        "bronze_fixed_s": [r["bronze"]["wall_s"] - r["bronze"]["data_s"] for r in rounds],
    }
    series["bronze_cpu_s_per_gb"] = [r["bronze"]["data_cpu_s"] / (end / 1e9) for r in rounds]
    series["worker_peak_rss_mib"] = [r["bronze"]["worker_peak_rss_mib"] for r in rounds]
    for key in ("decode_floor_cpu_s_per_gb", "parquet_floor_cpu_s_per_gb"):
        series[key] = [r["floors"][key] for r in rounds]
    series["bronze_cold_cpu_s_per_gb"] = [r["bronze"]["cpu_s"] / (end / 1e9) for r in rounds]
    results: dict = {}
    for key, values in series.items():
        results[key], results[f"{key}_spread"] = _median_spread(values)
    results["bronze_cold_vs_real_slave"] = results["bronze_cold_mb_s"] / results["real_slave_mb_s"]
    results["bronze_data_vs_real_slave"] = results["bronze_data_mb_s"] / results["real_slave_data_mb_s"]
    results["bronze_data_vs_java_consumer"] = results["bronze_data_mb_s"] / results["java_consumer_mb_s"]
    results["parquet_variants"] = [
        {"settings": v["settings"], "bytes": v["bytes"],
         "cpu_s_per_gb": statistics.median(r["floors"]["parquet_variants"][i]["cpu_s_per_gb"] for r in rounds)}
        for i, v in enumerate(rounds[0]["floors"]["parquet_variants"])]
    results["bronze_rows"] = [r["bronze"]["rows"] for r in rounds]
    return results


def apps_round(work: Path, i: int, broker) -> dict:
    """Silver then gold once each, cold, on the order events of ``broker``, each after the previous one's
    tables are gone (:func:`settle`)."""
    settle()
    out = {}
    for app in ("silver", "gold"):
        out[app] = app_rows_s(work / f"{app}{i}", broker, app)
        settle(work / f"{app}{i}")
    return out


@contextlib.contextmanager
def orders_broker(work: Path, count: int, mapped_file_size: int) -> Iterator:
    """A broker-stub master holding ``count`` demo order events in mapped files of ``mapped_file_size`` bytes,
    so that silver and gold cut them into micro-batches (the bronze master's one 1 GiB file would be one)."""
    from broker_stub.launcher import BrokerProcess

    with BrokerProcess.start(work, mappedFileSizeCommitLog=mapped_file_size) as broker:
        produce_orders(broker, count)
        yield broker


def summarize_apps(rounds: list[dict]) -> dict:
    """Medians and spreads of ``silver_rows_s`` / ``gold_rows_s`` (steady state) and of their first batches."""
    out: dict = {}
    for app in ("silver", "gold"):
        out[f"{app}_rows_s"], out[f"{app}_rows_s_spread"] = _median_spread([r[app]["rows_s"] for r in rounds])
        out[f"{app}_first_batch_rows_s"], out[f"{app}_first_batch_rows_s_spread"] = _median_spread(
            [r[app]["first_batch_rows_s"] for r in rounds])
    return out


def run(*, quick: bool, log_mib: int | None, rounds: int | None, work_dir: Path | None = None) -> dict:
    """Fill one real master, run the interleaved rounds, report; returns the results dict."""
    from tests.support.jvm_peers import RealBroker, RealNameServer

    log_mib = log_mib or (16 if quick else 512)
    rounds = rounds or (1 if quick else 3)
    orders = 5_000 if quick else ORDER_EVENTS
    work = Path(tempfile.mkdtemp(prefix="bench-catchup-", dir=work_dir))
    namesrv = master = None
    try:
        namesrv = RealNameServer.start(work / "namesrv")
        master = RealBroker.start(work / "master", brokerRole="ASYNC_MASTER", namesrvAddr=namesrv.addr,
                                  mappedFileSizeCommitLog=MAPPED_FILE_SIZE, autoCreateTopicEnable="true")
        t0 = time.perf_counter()
        messages = produce_backlog_bytes(master, log_mib * MIB)
        end = _max_offset(master.remoting_addr)
        print(f"master filled: {messages} messages, {end / MIB:.0f} MiB in {time.perf_counter() - t0:.1f} s")
        os.sync()
        measured = [one_round(work, i, master, namesrv, end, messages) for i in range(rounds)]
        with orders_broker(work / "orders", orders, ORDERS_FILE_SIZE // (16 if quick else 1)) as orders_master:
            apps = [apps_round(work, i, orders_master) for i in range(rounds)]
    finally:
        for peer in (master, namesrv):
            if peer is not None:
                peer.stop()
        shutil.rmtree(work, ignore_errors=True)
    results = summarize(measured, end)
    results.update(summarize_apps(apps), order_events=orders, raw_app_rounds=apps)
    results.update(commitlog_bytes=end, messages=messages, body_bytes=1024, rounds=rounds, quick=quick,
                   cold_or_warm="every reader cold (new process); master page cache warm after the fill",
                   raw_rounds=measured)
    _report(results, quick, log_mib, rounds)
    return results


def _report(results: dict, quick: bool, log_mib: int, rounds: int) -> None:
    def row(key: str, note: str) -> tuple[str, object, str]:
        value = results[key]
        spread = results.get(f"{key}_spread")
        return key, ("n/a" if value is None else value), note + (f" (spread {spread:.2f})" if spread else "")

    rows = [
        row("real_slave_mb_s", "real 4.9.8 SLAVE, launch -> complete"),
        row("real_slave_data_mb_s", "real 4.9.8 SLAVE, first bytes held -> complete"),
        row("stub_slave_mb_s", "broker-stub SLAVE, HA connect -> last append"),
        row("bronze_cold_mb_s", "hareplica run bronze, launch -> exit"),
        row("bronze_data_mb_s", "first micro-batch trigger -> end of last"),
        row("java_consumer_mb_s", "4.9.8 DefaultLitePullConsumer, JVM start included"),
        row("raw_sendfile_mb_s", "os.sendfile over loopback"),
        row("bronze_cpu_s_per_gb", "data phase, process tree incl. master; goal <= 2.5"),
        row("bronze_cold_cpu_s_per_gb", "whole cold run, process tree incl. master"),
        row("worker_peak_rss_mib", "bronze's Python workers, peak RSS; goal <= 256"),
        row("decode_floor_cpu_s_per_gb", "decode kernel alone on the same bytes, bronze's columns"),
        row("parquet_floor_cpu_s_per_gb", "the landing's Parquet write alone of the decoded batches"),
        row("first_byte_s", "first trigger -> read starts; goal <= 0.5"),
        row("bronze_fixed_s", "bronze wall time outside its micro-batches"),
        row("bronze_cold_vs_real_slave", "goal >= 1.5"),
        row("bronze_data_vs_real_slave", "goal >= 2.0"),
        row("bronze_data_vs_java_consumer", "context"),
        row("silver_rows_s", "hareplica run silver, batches after the first; goal >= 120,000"),
        row("gold_rows_s", "hareplica run gold, batches after the first; goal >= 100,000"),
        row("silver_first_batch_rows_s", "silver's first batch (Python workers start and import)"),
        row("gold_first_batch_rows_s", "gold's first batch (Python workers start and import)"),
    ]
    report("catchup_quick" if quick else "catchup", results, rows,
           notes=f"{log_mib} MiB CommitLog of 1 KiB messages, medians of {rounds} interleaved round(s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.catchup", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 MiB, one round: a smoke run of about a minute")
    parser.add_argument("--log-mib", type=int, default=None, help="CommitLog MiB on the master (default 512)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; quick 1)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    run(quick=args.quick, log_mib=args.log_mib, rounds=args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
