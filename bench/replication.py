"""Benchmark of the broker stub's master/slave replication: catch-up, send latency, producer throughput.

Each figure is measured beside its baseline in the same run (raw ``os.sendfile``, ASYNC against SYNC).
``python -m bench.replication`` (about 1 minute on 2 CPUs) or ``--quick`` (~15 s); results in
``bench/results/replication.json`` (``replication_quick.json``). The method, the goals and the latest results:
docs/performance.md "Replication: `bench/replication.py`".
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.common import report
from broker_stub.launcher import BrokerProcess
from connector.client.producer import Producer
from connector.protocol.address import split_host_port
from connector.protocol.commitlog import HostAddress, encode_record, file_name

CATCHUP_FILE_SIZE = 1024 * 1024 * 1024
RECORD_BODY_BYTES = 16 * 1024
SEND_BODY_BYTES = 1024
POLL_S = 0.05  # runtime-info polling of the bench (the slave measures the catch-up itself)


def _runtime_info(addr: str) -> dict[str, str]:
    from connector.client.admin import BrokerAdminClient

    with BrokerAdminClient(addr, 5000) as admin:
        return admin.runtime_info()


def build_store(store_dir: Path, total_bytes: int) -> int:
    """Write a CommitLog of ``total_bytes`` (rounded to whole records) into ``store_dir/commitlog``.

    Records are what a 4.9.8 broker stores for 16 KiB bodies on 8 queues of one topic. Returns the max offset.
    """
    commitlog = store_dir / "commitlog"
    commitlog.mkdir(parents=True)
    born = HostAddress.parse("127.0.0.1:50000")
    store = HostAddress.parse("127.0.0.1:10911")
    body = bytes(range(256)) * (RECORD_BODY_BYTES // 256)
    offset = 0
    queue_offsets = [0] * 8
    with open(commitlog / file_name(0), "wb") as f:
        f.truncate(CATCHUP_FILE_SIZE)
        chunks = []
        pending = 0
        i = 0
        while offset < total_bytes:
            q = i % 8
            rec = encode_record(commit_log_offset=offset, topic="CatchupTopic", body=body, queue_id=q,
                                queue_offset=queue_offsets[q], born_timestamp=1_700_000_000_000 + i,
                                born_host=born, store_timestamp=1_700_000_000_000 + i, store_host=store,
                                properties=b"TAGS\x01bench\x02CLUSTER\x01BenchCluster")
            queue_offsets[q] += 1
            chunks.append(rec)
            pending += len(rec)
            offset += len(rec)
            i += 1
            if pending >= 8 << 20:
                f.write(b"".join(chunks))
                chunks, pending = [], 0
        f.write(b"".join(chunks))
    return offset


def raw_sendfile_mb_s(path: Path, size: int) -> float:
    """os.sendfile of ``size`` bytes of ``path`` over loopback to a reader that discards them (MB/s)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    received = [0]

    def reader() -> None:
        conn, _ = server.accept()
        buf = bytearray(4 << 20)
        view = memoryview(buf)
        with conn:
            while received[0] < size:
                n = conn.recv_into(view)
                if not n:
                    break
                received[0] += n

    t = threading.Thread(target=reader)
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as s, open(path, "rb") as f:
        start = time.perf_counter()
        sent = 0
        while sent < size:
            sent += os.sendfile(s.fileno(), f.fileno(), sent, size - sent)
        t.join()
        elapsed = time.perf_counter() - start
    server.close()
    assert received[0] == size, f"raw reader got {received[0]} of {size} bytes"
    return size / elapsed / 1e6


def ideal_recv_write_mb_s(ha_addr: str, size: int, out_path: Path) -> float:
    """Context figure: the least a Python slave must do — ``recv_into`` the master's HA stream and ``pwrite``
    every received byte to a new file with its blocks reserved — without parsing frames (MB/s of CommitLog
    bytes)."""
    host, port = split_host_port(ha_addr, bare_ipv6=True)
    total = size + 12 * ((size + 32767) // 32768)  # what the master sends from 0: bodies plus frame headers
    fd = os.open(out_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, CATCHUP_FILE_SIZE)
        os.posix_fallocate(fd, 0, size + (1 << 20))  # blocks reserved up front, as the stub reserves them ahead
        with socket.create_connection((host, port)) as s:
            s.sendall((0).to_bytes(8, "big"))
            view = memoryview(bytearray(4 << 20))
            got, t0 = 0, None
            while got < total:
                n = s.recv_into(view)
                if not n:
                    raise RuntimeError(f"master closed after {got} bytes")
                if t0 is None:
                    t0 = time.perf_counter()
                os.pwrite(fd, view[:n], got)
                got += n
            elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        out_path.unlink(missing_ok=True)
    return size / max(elapsed, 1e-6) / 1e6


def _catchup_once(work: Path, name: str, master: BrokerProcess, end: int) -> tuple[float, float]:
    """One empty slave catching up: (MB/s until its CommitLog is complete, s until its ConsumeQueues are).

    The duration is the slave's own: from making the HA connection to the last frame that carried bytes
    (``haClientConnectedMs - haClientMsSinceLastAppend``, read in one runtime-info answer), so start-up and
    polling do not count.
    """
    slave = BrokerProcess.start(work / name, brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr,
                                timeout_s=60)
    try:
        complete = None
        got = 0
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            info = _runtime_info(slave.remoting_addr)
            got = int(info["commitLogMaxOffset"])
            if complete is None and got >= end:
                complete = info
            if complete is not None and info["dispatchBehindBytes"] == "0":
                elapsed_ms = int(complete["haClientConnectedMs"]) - int(complete["haClientMsSinceLastAppend"])
                start = int(complete["haClientMaxOffsetAtConnect"])
                return ((end - start) / max(elapsed_ms, 1) / 1e3,
                        (int(info["haClientConnectedMs"])) / 1e3)
            time.sleep(POLL_S)
        raise RuntimeError(f"slave did not catch up within 600 s ({got} of {end} bytes)")
    finally:
        slave.stop()


def catchup(work: Path, total_bytes: int, trials: int = 2) -> dict:
    """(a): catchup_mb_s (best of ``trials`` fresh slaves), raw_sendfile_mb_s (best of 2), their ratio, plus
    context: the ideal recv+write pipeline and the time until the slave's ConsumeQueues are complete."""
    master_dir = work / "catchup-master"
    end = build_store(master_dir / "store", total_bytes)
    os.sync()
    raw = max(raw_sendfile_mb_s(master_dir / "store" / "commitlog" / file_name(0), end) for _ in range(2))
    master = BrokerProcess.start(master_dir, timeout_s=120)
    runs, ideals = [], []
    try:
        assert int(_runtime_info(master.remoting_addr)["commitLogMaxOffset"]) == end
        for i in range(trials):  # interleaved, each after writing back dirty pages: comparable conditions
            os.sync()
            runs.append(_catchup_once(work, f"catchup-slave{i}", master, end))
            os.sync()
            ideals.append(ideal_recv_write_mb_s(master.ha_addr, end, work / "ideal.bin"))
    finally:
        master.stop()
    ideal = max(ideals)
    mb_s, dispatched_s = max(runs)
    return {"catchup_bytes": end, "catchup_mb_s": mb_s, "raw_sendfile_mb_s": raw, "catchup_vs_raw": mb_s / raw,
            "ideal_recv_write_mb_s": ideal, "catchup_vs_ideal": mb_s / ideal,
            "catchup_consume_queues_done_s": dispatched_s}


def _pair(work: Path, name: str, role: str) -> tuple[BrokerProcess, BrokerProcess]:
    master = BrokerProcess.start(work / f"{name}-master", brokerRole=role)
    slave = BrokerProcess.start(work / f"{name}-slave", brokerRole="SLAVE", brokerId=1,
                                haMasterAddress=master.ha_addr)
    deadline = time.monotonic() + 30
    while _runtime_info(slave.remoting_addr).get("slaveConnected") != "true":
        if time.monotonic() > deadline:
            raise RuntimeError("slave did not connect")
        time.sleep(0.05)
    return master, slave


def latency(work: Path, role: str, n: int) -> tuple[float, float]:
    """(b): p50 and p99 (ms) of ``n`` one-at-a-time sends to a ``role`` master with one slave."""
    master, slave = _pair(work, role.lower(), role)
    try:
        body = b"L" * SEND_BODY_BYTES
        samples = []
        with Producer(master.remoting_addr, timeout_ms=10000) as p:
            for _ in range(min(200, n)):  # warm-up: connections, topic creation
                p.send("LatencyTopic", body)
            for _ in range(n):
                start = time.perf_counter()
                r = p.send("LatencyTopic", body)
                samples.append((time.perf_counter() - start) * 1000)
                if r.send_status != "SEND_OK":
                    raise RuntimeError(f"{role} send status {r.send_status}")
    finally:
        slave.stop()
        master.stop()
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def _producer_proc(addr: str, seconds: float, barrier, out) -> None:
    body = b"P" * SEND_BODY_BYTES
    count = 0
    with Producer(addr, timeout_ms=10000) as p:
        p.send("ThroughputTopic", body)  # connected and the topic exists before the clock starts
        barrier.wait(timeout=120)
        end_at = time.perf_counter() + seconds
        while time.perf_counter() < end_at:
            p.send("ThroughputTopic", body)
            count += 1
    out.put(count)


def throughput(work: Path, producers: int, seconds: float) -> float:
    """(c): messages/s of ``producers`` processes sending one at a time to an ASYNC_MASTER with a slave.

    The processes start sending together (a barrier after each has connected) and each sends for ``seconds``.
    """
    master, slave = _pair(work, f"tp{producers}", "ASYNC_MASTER")
    try:
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        barrier = ctx.Barrier(producers)
        procs = [ctx.Process(target=_producer_proc, args=(master.remoting_addr, seconds, barrier, out))
                 for _ in range(producers)]
        for proc in procs:
            proc.start()
        counts = [out.get(timeout=seconds + 180) for _ in procs]
        for proc in procs:
            proc.join(timeout=30)
    finally:
        slave.stop()
        master.stop()
    return sum(counts) / seconds


def run(*, quick: bool = False, catchup_mib: int | None = None, latency_msgs: int | None = None,
        produce_seconds: float | None = None, work_dir: Path | None = None) -> dict:
    """Run every part; returns the results dict (also written by :func:`bench.common.report`)."""
    catchup_mib = catchup_mib or (16 if quick else 256)
    latency_msgs = latency_msgs or (200 if quick else 3000)
    produce_seconds = produce_seconds or (1.0 if quick else 10.0)
    work = Path(tempfile.mkdtemp(prefix="bench-replication-", dir=work_dir))
    try:
        results = catchup(work, catchup_mib * 1024 * 1024, trials=1 if quick else 2)
        results["async_p50_ms"], results["async_p99_ms"] = latency(work, "ASYNC_MASTER", latency_msgs)
        results["sync_p50_ms"], results["sync_p99_ms"] = latency(work, "SYNC_MASTER", latency_msgs)
        results["sync_p99_overhead_ms"] = results["sync_p99_ms"] - results["async_p99_ms"]
        results["produce_msgs_s_1"] = throughput(work, 1, produce_seconds)
        results["produce_msgs_s_8"] = throughput(work, 8, produce_seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results.update(catchup_mib=catchup_mib, latency_msgs=latency_msgs, produce_seconds=produce_seconds, quick=quick)
    rows = [
        ("catchup_mb_s", results["catchup_mb_s"], f"slave catch-up of {catchup_mib} MiB over HA"),
        ("raw_sendfile_mb_s", results["raw_sendfile_mb_s"], "os.sendfile of the same bytes, loopback"),
        ("catchup_vs_raw", results["catchup_vs_raw"], "goal >= 0.5"),
        ("ideal_recv_write_mb_s", results["ideal_recv_write_mb_s"], "context: bare recv_into + pwrite in Python"),
        ("catchup_consume_queues_done_s", results["catchup_consume_queues_done_s"],
         "s until the slave's ConsumeQueues are complete"),
        ("async_p50_ms", results["async_p50_ms"], "ASYNC_MASTER + slave, one producer"),
        ("async_p99_ms", results["async_p99_ms"], ""),
        ("sync_p50_ms", results["sync_p50_ms"], "SYNC_MASTER + slave, one producer"),
        ("sync_p99_ms", results["sync_p99_ms"], ""),
        ("sync_p99_overhead_ms", results["sync_p99_overhead_ms"], "goal <= 2 ms"),
        ("produce_msgs_s_1", results["produce_msgs_s_1"], "1 producer, 1 KiB, one at a time"),
        ("produce_msgs_s_8", results["produce_msgs_s_8"], "8 producer processes"),
    ]
    report("replication_quick" if quick else "replication", results, rows)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every part")
    parser.add_argument("--catchup-mib", type=int, help="CommitLog MiB the slave catches up (default 256)")
    parser.add_argument("--latency-msgs", type=int, help="sends per latency run (default 3000)")
    parser.add_argument("--produce-seconds", type=float, help="seconds per throughput run (default 10)")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = parser.parse_args(argv)
    results = run(quick=args.quick, catchup_mib=args.catchup_mib, latency_msgs=args.latency_msgs,
                  produce_seconds=args.produce_seconds)
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
