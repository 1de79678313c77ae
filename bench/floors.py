"""The floors of bronze's per-byte work, measured in one process on the bytes the catch-up benchmark replicates.

:func:`measure_floors` times the decode into bronze's columns and the Parquet write of the decoded batches alone
(no Spark, no sockets, no start-up), and the write with other Parquet settings (``parquet_variants``). What they
measure and the latest figures: docs/performance.md "Catch-up beside a real slave: `bench/catchup.py`"; the
settings chosen from them: docs/delta.md "Parquet settings".
"""

from __future__ import annotations

import mmap
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

CHUNK = 1024 * 1024  # bytes per fed chunk: the HA fetch's receive buffer


def decode_file(path: Path, end: int, mapped_file_size: int) -> tuple[float, list[pa.RecordBatch]]:
    """Decode ``[0, end)`` of the CommitLog file ``path`` as bronze does: (CPU seconds, the batches)."""
    from connector.decode.stream import CommitLogArrowDecoder
    from connector.landing import with_store_date

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            started = time.process_time()
            decoder = CommitLogArrowDecoder(0, end, mapped_file_size, broker="broker-a")
            batches = []
            for offset in range(0, end, CHUNK):
                batches += [with_store_date(b) for b in decoder.feed(offset, view[offset:min(offset + CHUNK, end)])]
            batches += [with_store_date(b) for b in decoder.finish()]
            return time.process_time() - started, batches
        finally:
            view.release()


def write_landing_files(batches: list[pa.RecordBatch], folder: Path) -> tuple[float, int]:
    """Write ``batches`` as one landing task does (TaskFileWriter, the sink's defaults, partitioned by
    ``storeDate``) into ``folder``: (CPU seconds, bytes on disk)."""
    from connector.delta.options import DeltaSinkOptions
    from connector.delta.parquet import TaskFileWriter
    from connector.landing import DEFAULT_PARTITION_BY

    options = DeltaSinkOptions.from_options({"path": str(folder), "appId": "floors"})
    started = time.process_time()
    writer = TaskFileWriter(str(folder), DEFAULT_PARTITION_BY, options.compression, options.codec_infix,
                            options.target_file_size, "part-floors")
    for batch in batches:
        writer.write(batch)
    files = writer.close()
    return time.process_time() - started, sum(f.size for f in files)


def write_variant(batches: list[pa.RecordBatch], folder: Path, row_group_bytes: int | None = None,
                  **writer_options) -> tuple[float, int]:
    """Write ``batches`` (storeDate dropped) with ``pyarrow.parquet.ParquetWriter(**writer_options)`` in row groups
    of ``row_group_bytes`` Arrow bytes (default: the landing's ``ROW_GROUP_BUFFER_BYTES``), as the landing buffers
    them: (CPU seconds, bytes on disk)."""
    from connector.delta.parquet import ROW_GROUP_BUFFER_BYTES

    row_group_bytes = row_group_bytes or ROW_GROUP_BUFFER_BYTES
    schema = batches[0].schema.remove(batches[0].schema.get_field_index("storeDate"))
    path = folder / "variant.parquet"
    started = time.process_time()
    with pq.ParquetWriter(path, schema, **writer_options) as writer:
        group, size = [], 0
        for batch in batches:
            group.append(batch.drop_columns(["storeDate"]))
            size += batch.nbytes
            if size >= row_group_bytes:
                table = pa.Table.from_batches(group, schema=schema)
                writer.write_table(table, row_group_size=table.num_rows)
                group, size = [], 0
        if group:
            table = pa.Table.from_batches(group, schema=schema)
            writer.write_table(table, row_group_size=table.num_rows)
    return time.process_time() - started, path.stat().st_size


def _variants(schema: pa.Schema, sample: pa.Table) -> dict[str, dict]:
    """Named pyarrow writer settings (and a row-group size) to compare with the landing's own (the first entry)."""
    from connector.delta.parquet import parquet_writer_options

    chosen = parquet_writer_options(schema, "snappy", sample)
    return {
        "landing (snappy, sampled dictionary)": chosen,
        "no compression": {**chosen, "compression": "none"},
        "lz4": {**chosen, "compression": "lz4"},
        "zstd level 1": {**chosen, "compression": "zstd", "compression_level": 1},
        "dictionary everywhere": {**chosen, "use_dictionary": True},
        "no dictionary": {**chosen, "use_dictionary": False},
        "1 MiB pages": {**chosen, "data_page_size": 1024 * 1024},
        "no page index, no CRC": {**chosen, "write_page_index": False, "write_page_checksum": False},
        "64 MiB row groups": {**chosen, "row_group_bytes": 64 * 1024 * 1024},
    }


def _median_run(run: Callable[[Path], tuple[float, int]], rounds: int) -> tuple[float, int]:
    cpu, size = [], 0
    for _ in range(rounds):
        folder = Path(tempfile.mkdtemp(prefix="bench-floors-"))
        try:
            c, size = run(folder)
            cpu.append(c)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return statistics.median(cpu), size


def measure_floors(commitlog_file: Path, end: int, mapped_file_size: int, *, rounds: int = 3,
                   variants: bool = True) -> dict:
    """The floors of the module docstring for ``[0, end)`` of ``commitlog_file`` (bytes), medians of ``rounds``.

    Returns ``{"decode_floor_cpu_s_per_gb", "parquet_floor_cpu_s_per_gb", "parquet_floor_bytes",
    "parquet_variants": [{"settings", "cpu_s_per_gb", "bytes"}...]}``.
    """
    gb = end / 1e9
    decode_cpu, batches = [], []
    for _ in range(rounds):
        cpu, batches = decode_file(commitlog_file, end, mapped_file_size)
        decode_cpu.append(cpu)
    parquet_cpu, parquet_bytes = _median_run(lambda d: write_landing_files(batches, d), rounds)
    out = {"decode_floor_cpu_s_per_gb": statistics.median(decode_cpu) / gb,
           "parquet_floor_cpu_s_per_gb": parquet_cpu / gb, "parquet_floor_bytes": parquet_bytes}
    if variants and batches:
        schema = batches[0].schema.remove(batches[0].schema.get_field_index("storeDate"))
        sample = pa.Table.from_batches([batches[0].drop_columns(["storeDate"])], schema=schema)
        out["parquet_variants"] = []
        for name, options in _variants(schema, sample).items():
            cpu, size = _median_run(lambda d, o=options: write_variant(batches, d, **o), rounds)
            out["parquet_variants"].append({"settings": name, "cpu_s_per_gb": cpu / gb, "bytes": size})
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.floors COMMITLOG_FILE [END]``: print the floors of one CommitLog file as JSON."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m bench.floors", description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="a CommitLog mapped file (named by its start offset 0)")
    parser.add_argument("end", type=int, nargs="?", default=None,
                        help="bytes to decode from offset 0: the broker's commitLogMaxOffset (default: the file's "
                             "size, right only for a file filled to its END_FILE blank)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    size = args.file.stat().st_size
    print(json.dumps(measure_floors(args.file, args.end or size, size, rounds=args.rounds), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
