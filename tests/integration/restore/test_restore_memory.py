"""A restore's memory is bounded by a batch, not by the table (docs/restore.md "Speed and memory").

Two tables of one broker, one holding twice the bytes of the other (64 KiB incompressible bodies in one Parquet row
group each), are restored and verified by ``hareplica restore`` in child processes with 16-row batches; each child
reports its own peak RSS (VmHWM). The larger table's 16 MiB more of bodies may add only a small part of that to
the peak: a restore that held a file, a row group or the table would add all of it. A structural check, not a
figure: the figures are bench/restore.py's. In one process, the memory Python allocates during ``--verify``'s check
(tracemalloc's peak) stays under four batches' bytes for 16 batches and for 32.
"""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

import connector.restore.plan as plan_module
from connector.decode.columns import iter_record_batches
from connector.decode.schema import ALL_ARROW_SCHEMA
from connector.protocol.commitlog import encode_record

ROOT = Path(__file__).resolve().parents[3]
FILE = 64 * 1024 * 1024  # the table's mappedFileSizeCommitLog
BODY = 64 * 1024
MIB = 16  # the smaller table's records, in MiB; the larger holds twice as many

#: Runs ``hareplica restore`` (argv[1:]) in this process with 16-row batches, then prints its VmHWM (KiB).
_CHILD = """
import sys
import connector.restore.plan as plan
plan.BATCH_ROWS = 16
from streaming_apps.cli import main
code = main(sys.argv[1:])
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0].split()[1]
print("VmHWM", hwm, code)
"""


def _build(root: Path, mib: int) -> tuple[Path, str]:
    """(CommitLog file, table path) of ``mib`` MiB of records in one mapped file, landed in one write."""
    data, starts, i = bytearray(), [], 0
    while len(data) < mib * 1024 * 1024:
        starts.append(len(data))
        data += encode_record(commit_log_offset=len(data), topic=f"Mem{i % 2}", body=os.urandom(BODY),
                              queue_id=i % 2, queue_offset=i // 2, store_timestamp=1_790_000_000_000 + i,
                              born_timestamp=1_790_000_000_000 + i, properties={"UNIQ_KEY": f"U{i:016d}"})
        i += 1
    table = str(root / "bronze")
    write_deltalake(table, pa.Table.from_batches(list(iter_record_batches(
        bytes(data), np.array(starts, dtype=np.int64), 0, broker="broker-a", mapped_file_size=FILE,
        columns=ALL_ARROW_SCHEMA.names))))
    original = root / "original"
    original.write_bytes(bytes(data) + bytes(FILE - len(data)))
    return original, table


def _peak_kib(*args: str) -> int:
    """The VmHWM (KiB) of a child running ``hareplica restore *args`` with 16-row batches; it must exit 0."""
    out = subprocess.run([sys.executable, "-c", _CHILD, "restore", *args], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    assert line.startswith("VmHWM") and line.endswith(" 0"), out.stdout + out.stderr
    return int(line.split()[1])


def test_the_peak_does_not_grow_with_the_table(tmp_path):
    peaks = {}
    for mib in (MIB, 2 * MIB):
        original, table = _build(tmp_path / str(mib), mib)
        store = tmp_path / str(mib) / "store"
        restored = _peak_kib(table, "--broker-name", "broker-a", "--store-dir", str(store))
        assert filecmp.cmp(original, store / "commitlog" / f"{0:020d}", shallow=False)
        verified = _peak_kib(table, "--broker-name", "broker-a", "--verify", str(store))
        peaks[mib] = restored, verified
    quarter = MIB * 1024 // 4  # KiB: a quarter of the bytes the larger table adds
    (small_restore, small_verify), (large_restore, large_verify) = peaks[MIB], peaks[2 * MIB]
    assert large_restore - small_restore < quarter, peaks
    assert large_verify - small_verify < quarter, peaks


def test_a_check_holds_a_few_batches_whatever_their_number(tmp_path, monkeypatch):
    """``verify_store`` of stores of 16 and 32 batches (16 rows of 64 KiB bodies each): the peak of the memory
    Python allocates during the check (tracemalloc, the check's own thread and any other) stays under four
    batches' bytes: the batch being encoded, the one before it and the one buffer the store's bytes are read
    into. A buffer per batch kept alive, or one of a fixed size larger than a batch (the 8 MiB a zero check
    read into), exceeds it."""
    from connector.restore import restore_commitlog, verify_store

    monkeypatch.setattr(plan_module, "BATCH_ROWS", 16)
    for mib in (MIB, 2 * MIB):
        _, table = _build(tmp_path / str(mib), mib)
        store = tmp_path / str(mib) / "store"
        restore_commitlog(table, "broker-a", store)
        assert verify_store(table, "broker-a", store) is None  # imports and first-use caches before the count
        sizes = pa.Table.from_batches(plan_module.row_batches(table, "broker-a", ["storeSize"])).column("storeSize")
        batch = 16 * max(sizes.to_pylist())  # bytes: every record has the same size
        tracemalloc.start()
        try:
            assert verify_store(table, "broker-a", store) is None
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 * batch, (mib, peak, batch)
