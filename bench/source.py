"""Benchmark of ``format("hareplica")``: decode speed, Spark throughput, worker memory.

Each figure is measured beside its baseline in the same run (a raw HA receive, an Arrow source yielding the same
batches), on the demo's order events. ``python -m bench.source`` (about 3-5 minutes) or ``--quick``; results in
``bench/results/source.json`` (``source_quick.json``). The method, the goals and the latest results:
docs/performance.md "Source: `bench/source.py`".
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import pyarrow as pa

from bench.common import arrow_file_source, report
from connector.client.ha import HARangeFetcher, fetch_receives
from connector.decode.schema import ARROW_SCHEMA
from connector.decode.stream import CommitLogArrowDecoder
from connector.options.settings import DecodeSettings, FetchSettings
from connector.protocol.address import split_host_port
from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB_TYPE,
    END_FILE_MIN_BLANK_LENGTH_BYTES,
    PHY_POS_POSITION,
    HostAddress,
    encode_blank,
    encode_properties,
    encode_record,
    file_name,
)
from connector.protocol.ha import HA_TRANSFER_BATCH_SIZE_BYTES, encode_transfer_header
from connector.protocol.mapped_files import file_start as file_start_of

log = logging.getLogger(__name__)

MIB = 1024 * 1024
GIB = 1024 * MIB
COMPRESS_MSG_BODY_OVER_HOWMUCH = 4096  # DefaultMQProducer.compressMsgBodyOverHowmuch
POOL_MESSAGES = 4000


# --- data --------------------------------------------------------------------------------------------
def record_pool(count: int = POOL_MESSAGES) -> list[bytes]:
    """``count`` encoded order-event records (PHYSICALOFFSET 0, patched when written)."""
    from streaming_apps.workload import order_events

    pool = []
    born = HostAddress(b"\x0a\x00\x00\x07", 51234)
    store = HostAddress(b"\x0a\x00\x00\x01", 10911)
    for i, msg in enumerate(order_events(count)):
        body, sys_flag = msg.body, 0
        if len(body) >= COMPRESS_MSG_BODY_OVER_HOWMUCH:
            body, sys_flag = zlib.compress(body, 5), COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE
        props = {"TAGS": msg.tags, "KEYS": " ".join(msg.keys), "UNIQ_KEY": f"0A00000700C818B4AAC2{i:012X}",
                 "CLUSTER": "DefaultCluster", **msg.properties}
        pool.append(encode_record(commit_log_offset=0, topic=msg.topic, body=body, queue_id=i % 4,
                                  queue_offset=i // 4, sys_flag=sys_flag, born_timestamp=1_790_000_000_000 + i,
                                  born_host=born, store_timestamp=1_790_000_000_005 + i, store_host=store,
                                  properties=encode_properties(props)))
    return pool


def write_commitlog(directory: Path, total_bytes: int, file_size: int, pool: list[bytes], mark: int = 0
                    ) -> tuple[int, int, int]:
    """Write mapped files of ``file_size`` bytes under ``directory`` until ``total_bytes`` of records are
    stored (END_FILE blanks between files, docs/protocol.md §1.9). Returns (commitLogMaxOffset, records, the first
    record boundary at or after ``mark``)."""
    directory.mkdir(parents=True, exist_ok=True)
    offset = 0
    records = 0
    marked = -1
    index = 0
    out = None
    file_start = -1
    try:
        while offset < total_bytes:
            if file_start_of(offset, file_size) != file_start:
                if out is not None:
                    out.close()
                file_start = file_start_of(offset, file_size)
                out = open(directory / file_name(file_start), "wb")  # noqa: SIM115 - closed in the loop
            rec = bytearray(pool[index % len(pool)])
            room = file_start + file_size - offset
            if len(rec) + END_FILE_MIN_BLANK_LENGTH_BYTES > room:
                out.write(encode_blank(room) + bytes(room - 8))
                offset += room
                continue
            if marked < 0 and offset >= mark:
                marked = offset
            struct.pack_into(">q", rec, PHY_POS_POSITION, offset)
            out.write(rec)
            offset += len(rec)
            records += 1
            index += 1
    finally:
        if out is not None:
            out.close()
    return offset, records, offset if marked < 0 else marked


def read_range(directory: Path, start: int, end: int, file_size: int, chunk: int = 4 * MIB):
    """Yield ``(offset, bytes)`` of the CommitLog files in ``directory`` over ``[start, end)``."""
    offset = start
    while offset < end:
        file_start = file_start_of(offset, file_size)
        with open(directory / file_name(file_start), "rb") as fh:
            fh.seek(offset - file_start)
            stop = min(end, file_start + file_size)
            while offset < stop:
                data = fh.read(min(chunk, stop - offset))
                yield offset, data
                offset += len(data)


# --- a helper process that serves CommitLog bytes as a master's HA port does -------------------------
def _serve_frames(directory: str, file_size: int, end: int, ready, port_out) -> None:
    """For every connection: read the first 8-byte report R, send frames of [R, end) (32 KiB bodies that
    never cross a mapped file, HAConnection.WriteSocketService), then end its side of the connection
    and read the client's reports until it closes."""
    server = socket.create_server(("127.0.0.1", 0))
    port_out.value = server.getsockname()[1]
    ready.set()
    maps: dict[int, memoryview] = {}

    def file_view(file_start: int) -> memoryview:
        import mmap

        if file_start not in maps:
            with open(os.path.join(directory, file_name(file_start)), "rb") as fh:
                maps[file_start] = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
        return maps[file_start]

    while True:
        conn, _ = server.accept()
        with conn:
            report_bytes = conn.recv(8)
            if len(report_bytes) < 8:
                continue
            offset = struct.unpack(">q", report_bytes)[0]
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MIB)
            try:
                while offset < end:
                    file_start = file_start_of(offset, file_size)
                    stop = min(end, offset + HA_TRANSFER_BATCH_SIZE_BYTES, file_start + file_size)
                    view = file_view(file_start)
                    conn.sendall(encode_transfer_header(offset, stop - offset))
                    conn.sendall(view[offset - file_start:stop - file_start])
                    offset = stop
                # like a master, never close with the client's reports unread (that would reset the
                # connection and could drop frames still in flight): signal the end, drain, then close
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(60)
                while conn.recv(65536):
                    pass
            except OSError:
                pass


class FrameServer:
    """The frame-serving helper process (see :func:`_serve_frames`); ``addr`` is its HA address."""

    def __init__(self, directory: Path, file_size: int, end: int):
        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Event()
        port = ctx.Value("i", 0)
        self.process = ctx.Process(target=_serve_frames, args=(str(directory), file_size, end, ready, port),
                                   daemon=True)
        self.process.start()
        if not ready.wait(30):
            self.process.kill()
            raise RuntimeError("frame server did not start")
        self.addr = f"127.0.0.1:{port.value}"

    def close(self) -> None:
        self.process.kill()
        self.process.join(10)


def raw_recv(addr: str, report: int) -> tuple[float, int]:
    """(seconds, stream bytes) to receive every frame the server sends after ``report``, with
    ``recv_into`` and nothing else (the server closes the connection after the last frame)."""
    host, port = split_host_port(addr, bare_ipv6=True)
    began = time.perf_counter()
    got = 0
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(struct.pack(">q", report))
        buf = bytearray(MIB)
        view = memoryview(buf)
        while n := sock.recv_into(view):
            got += n
    return time.perf_counter() - began, got


def fetch_and_decode(addr: str, start: int, end: int, file_size: int, decompress: bool = True) -> tuple[float, int]:
    """Seconds and rows to read ``[start, end)`` through the executor path (fetch + decode, all columns)."""
    began = time.perf_counter()
    rows = 0
    decoder = CommitLogArrowDecoder(start, end, file_size, broker="broker-a",
                                    settings=DecodeSettings(decompress_body=decompress))
    with HARangeFetcher(addr, start, end, broker="broker-a") as fetcher:
        receives = fetch_receives(fetcher, FetchSettings().prefetch_chunks)
        try:  # as read_partition reads
            for batch in decoder.decode_receives(receives):
                rows += batch.num_rows
        finally:
            receives.close()
    return time.perf_counter() - began, rows


def decode_only(directory: Path, start: int, end: int, file_size: int, verify_crc: bool = True) -> tuple[float, int]:
    """Seconds and rows to decode ``[start, end)`` from memory (32 KiB chunks, as frames arrive);
    ``verify_crc`` is ``verifyBodyCRC``."""
    chunks = []
    for offset, data in read_range(directory, start, end, file_size):
        view = memoryview(data)
        chunks.extend((offset + i, view[i:i + HA_TRANSFER_BATCH_SIZE_BYTES])
                      for i in range(0, len(data), HA_TRANSFER_BATCH_SIZE_BYTES))
    began = time.perf_counter()
    rows = 0
    decoder = CommitLogArrowDecoder(start, end, file_size, broker="broker-a",
                                    settings=DecodeSettings(verify_body_crc=verify_crc))
    for offset, data in chunks:
        for batch in decoder.feed(offset, data):
            rows += batch.num_rows
    for batch in decoder.finish():
        rows += batch.num_rows
    return time.perf_counter() - began, rows


# --- (c) worker memory -------------------------------------------------------------------------------
_WORKER = r"""
import resource, sys, time
import pandas, pyarrow as pa, pyspark.sql  # what a Spark Python worker has loaded
from connector.options.settings import FetchSettings
from connector.source import HAReplicaInputPartition, read_partition
addr, start, end, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
part = HAReplicaInputPartition(broker="broker-a", ha_addr=addr, remoting_addr="127.0.0.1:1", start=start, end=end,
                               mapped_file_size=size, fetch=FetchSettings())
rows = 0
began = time.perf_counter()
for batch in read_partition(part):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:  # what the worker sends to the JVM
        w.write_batch(batch)
    rows += batch.num_rows
    del sink, batch
try:  # VmHWM: this process image's peak RSS (ru_maxrss would include the parent's RSS at fork time)
    with open("/proc/self/status") as status:
        peak_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(rows, time.perf_counter() - began, peak_kib)
"""


def worker_peak_rss(addr: str, start: int, end: int, file_size: int) -> tuple[float, int, float]:
    """(peak RSS MiB, rows, seconds) of a fresh Python process reading one partition."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", _WORKER, addr, str(start), str(end), str(file_size)],
                         capture_output=True, text=True, timeout=900, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"worker failed: {out.stderr[-2000:]}")
    rows, seconds, max_rss_kib = out.stdout.split()
    return int(max_rss_kib) / 1024, int(rows), float(seconds)


# --- (b) Spark: hareplica vs an in-memory Arrow source -----------------------------------------------
def timed_noop_query(spark, reader, checkpoint: Path) -> float:
    """Seconds for a Trigger.AvailableNow query from ``reader`` into the noop sink."""
    began = time.perf_counter()
    query = (reader.load().writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    if not query.awaitTermination(1800):
        query.stop()
        raise RuntimeError("benchmark query did not finish within 30 minutes")
    if query.exception() is not None:
        raise RuntimeError(f"benchmark query failed: {query.exception()}")
    return time.perf_counter() - began


def spark_comparison(spark, work: Path, directory: Path, end: int, file_size: int, repeats: int) -> dict:
    """(b): rows/s of hareplica over a stub master vs the Arrow baseline, best of ``repeats`` runs each after
    one warm-up run of each when ``repeats`` > 1 (alternating, so both see the same machine state)."""
    from broker_stub.launcher import BrokerProcess
    from streaming_apps.spark_session import register_data_sources

    register_data_sources(spark)
    spark.dataSource.register(arrow_file_source())
    ipc_paths = []
    rows = 0
    for file_start in range(0, end, file_size):
        stop = min(end, file_start + file_size)
        path = work / f"baseline-{file_start}.arrow"
        decoder = CommitLogArrowDecoder(file_start, stop, file_size, broker="broker-a")
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, ARROW_SCHEMA) as writer:
            for batch in decoder.decode_all(read_range(directory, file_start, stop, file_size)):
                writer.write_batch(batch)
                rows += batch.num_rows
        ipc_paths.append(str(path))
    broker = BrokerProcess.start(work / "broker", timeout_s=300, mappedFileSizeCommitLog=file_size,
                                 storePathCommitLog=str(directory), haSendHeartbeatInterval=1000)
    try:
        brokers = f"broker-a={broker.ha_addr}/{broker.remoting_addr}"
        source_runs, baseline_runs = [], []
        warm_up = 1 if repeats > 1 else 0
        for i in range(repeats + warm_up):  # run 0 warms the JVM and the Python workers up and is not counted
            source_runs.append(timed_noop_query(
                spark, spark.readStream.format("hareplica").option("brokers", brokers), work / f"cp-source-{i}"))
            baseline_runs.append(timed_noop_query(
                spark, spark.readStream.format("arrowfiles").option("paths", ",".join(ipc_paths))
                .option("filesPerBatch", str(len(ipc_paths))),
                work / f"cp-baseline-{i}"))
        source_s, baseline_s = min(source_runs[warm_up:]), min(baseline_runs[warm_up:])
    finally:
        broker.stop()
    return {"rows": rows, "partitions": len(ipc_paths), "source_s": source_s, "baseline_s": baseline_s,
            "source_rows_s": rows / source_s, "arrow_baseline_rows_s": rows / baseline_s,
            "source_vs_baseline": baseline_s / source_s}


# --- driver ------------------------------------------------------------------------------------------
def run(*, quick: bool = False, spark=None, work_dir: Path | None = None) -> dict:
    """Run (a), (b), (c) and write the JSON; ``spark`` reuses a session (else one is created)."""
    decode_bytes = 16 * MIB if quick else 256 * MIB
    spark_bytes = 8 * MIB if quick else 192 * MIB
    spark_file = 2 * MIB if quick else 32 * MIB
    worker_bytes = 32 * MIB if quick else GIB - 64 * MIB
    repeats = 1 if quick else 2
    work = Path(tempfile.mkdtemp(prefix="bench-source-", dir=work_dir))
    try:
        pool = record_pool(500 if quick else POOL_MESSAGES)
        # (a) decode vs raw, and (c) the worker: one 1 GiB mapped file
        big = work / "commitlog-1g"
        big_end, big_records, a_end = write_commitlog(big, worker_bytes, GIB, pool, mark=decode_bytes)
        server = FrameServer(big, GIB, big_end)
        try:
            raw_runs = [raw_recv(server.addr, 1) for _ in range(3)]
            raw_s, raw_bytes = min(raw_runs)
            fetch_s, _ = min(fetch_and_decode(server.addr, 0, big_end, GIB) for _ in range(2))
            fetch_raw_s, _ = min(fetch_and_decode(server.addr, 0, big_end, GIB, decompress=False) for _ in range(2))
            decode_s, decode_rows = min(decode_only(big, 0, a_end, GIB) for _ in range(2))
            no_crc_s, _ = min(decode_only(big, 0, a_end, GIB, verify_crc=False) for _ in range(2))
            rss_mib, worker_rows, worker_s = worker_peak_rss(server.addr, 0, big_end, GIB)
        finally:
            server.close()
        # (b) Spark
        small = work / "commitlog"
        spark_end, _, _ = write_commitlog(small, spark_bytes, spark_file, pool)
        own_session = spark is None
        if own_session:
            from streaming_apps.spark_session import build_spark_session

            spark = build_spark_session("bench-source", local_dir=str(work / "spark"))
        try:
            spark_result = spark_comparison(spark, work, small, spark_end, spark_file, repeats)
        finally:
            if own_session:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {
        "decode_mb_s": big_end / 1e6 / fetch_s,
        "raw_recv_mb_s": raw_bytes / 1e6 / raw_s,
        "decode_vs_raw": (big_end / fetch_s) / (raw_bytes / raw_s),
        "decode_only_mb_s": a_end / 1e6 / decode_s,
        "decode_only_no_crc_mb_s": a_end / 1e6 / no_crc_s,
        "verify_body_crc_cost": 1 - no_crc_s / decode_s,
        "decode_stored_bodies_mb_s": big_end / 1e6 / fetch_raw_s,
        "decode_stored_bodies_vs_raw": (big_end / fetch_raw_s) / (raw_bytes / raw_s),
        "decode_rows_s": big_records / fetch_s,
        "decode_bytes": big_end,
        "source_rows_s": spark_result["source_rows_s"],
        "arrow_baseline_rows_s": spark_result["arrow_baseline_rows_s"],
        "source_vs_baseline": spark_result["source_vs_baseline"],
        "spark_rows": spark_result["rows"],
        "spark_partitions": spark_result["partitions"],
        "worker_peak_rss_mib": rss_mib,
        "worker_partition_bytes": big_end,
        "worker_rows": worker_rows,
        "worker_seconds": worker_s,
        "mean_record_bytes": big_end / max(big_records, 1),
        "quick": quick,
    }
    rows = [
        ("(a) raw loopback recv", results["raw_recv_mb_s"], "MB/s, HA frames, recv_into only"),
        ("(a) fetch + decode", results["decode_mb_s"], f"MB/s, all columns, {results['decode_rows_s']:,.0f} rows/s"),
        ("(a) decode_vs_raw", results["decode_vs_raw"], "goal >= 0.5"),
        ("(a) decode only (in memory)", results["decode_only_mb_s"], "MB/s, verifyBodyCRC=true (default)"),
        ("(a) decode only, verifyBodyCRC=false", results["decode_only_no_crc_mb_s"],
         f"MB/s; the BODYCRC check costs {100 * results['verify_body_crc_cost']:.1f}% of decode time"),
        ("(a) fetch + decode, decompressBody=false", results["decode_stored_bodies_mb_s"],
         f"MB/s, ratio to raw {results['decode_stored_bodies_vs_raw']:.2f}"),
        ("(b) hareplica -> noop", results["source_rows_s"], f"rows/s, {spark_result['partitions']} partitions"),
        ("(b) Arrow source -> noop", results["arrow_baseline_rows_s"], "rows/s, same batches from memory"),
        ("(b) source_vs_baseline", results["source_vs_baseline"], "goal >= 0.6"),
        ("(c) worker peak RSS", results["worker_peak_rss_mib"], f"MiB, one {big_end / GIB:.2f} GiB partition, "
                                                               "goal <= 256"),
    ]
    report("source_quick" if quick else "source", results, rows,
           notes=f"order-event records, mean {results['mean_record_bytes']:,.0f} bytes stored")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every part")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    run(quick=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
