"""Restoring a CommitLog from a bronze table beside ``cp`` of the same files (docs/restore.md).

A synthetic CommitLog of ``--mib`` MiB (1 KiB messages, 64 MiB mapped files, every fourth body ZLIB-compressed) is
decoded with every column into a Delta table, as bronze lands it. Each round then runs, in separate processes and
interleaved, ``cp -r`` of the CommitLog folder and ``hareplica restore`` of the table; the table reports the medians
of the rounds' wall seconds and peak RSS (``ru_maxrss`` of the child), and the restored files are compared with the
originals. Run: ``flock /tmp/hareplica-heavy.lock .venv/bin/python -m bench.restore [--mib 1024] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
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


def timed(cmd: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes) of ``cmd`` run as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) * 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-restore-"))
    try:
        folder, table, records = build(root, args.mib)
        cp, restore = [], []
        for r in range(args.rounds):
            out = root / f"cp{r}"
            cp.append(timed(["cp", "-r", str(folder), str(out)]))
            restore.append(timed([sys.executable, "-m", "streaming_apps.cli", "restore", table, "--broker-name",
                                  "broker-a", "--store-dir", str(root / f"r{r}")]))
            names = sorted(os.listdir(folder))
            assert all(filecmp.cmp(folder / n, root / f"r{r}" / "commitlog" / n, shallow=False) for n in names)
            shutil.rmtree(out)
            shutil.rmtree(root / f"r{r}")
        cp_s, restore_s = statistics.median(w for w, _ in cp), statistics.median(w for w, _ in restore)
        restore_rss = statistics.median(m for _, m in restore)
        results = {"mib": args.mib, "records": records, "rounds": args.rounds, "cp_seconds": cp_s,
                   "restore_seconds": restore_s, "restore_vs_cp": restore_s / cp_s,
                   "restore_mib_per_s": args.mib / restore_s, "restore_peak_rss_mib": restore_rss / 2**20}
        report("restore", results, [
            ("CommitLog", f"{args.mib} MiB", f"{records:,} records, {FILE // 2**20} MiB files"),
            ("cp -r", cp_s, "s, median"),
            ("hareplica restore", restore_s, "s, median (byte-identical files)"),
            ("restore / cp", restore_s / cp_s, "x"),
            ("restore throughput", args.mib / restore_s, "MiB/s"),
            ("restore peak RSS", restore_rss / 2**20, "MiB (the process, imports included)"),
        ])
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
