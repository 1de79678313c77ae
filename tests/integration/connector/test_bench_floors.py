"""bench/floors.py on a small CommitLog file: the floors decode every record and write readable Parquet with
the landing's settings and each alternative (speed is not judged here; bench/ measures it)."""

from __future__ import annotations

import pyarrow.parquet as pq

from bench import floors
from connector.protocol.commitlog import encode_record

RECORDS = 300


def _commitlog_file(tmp_path):
    data, offset = bytearray(), 0
    for i in range(RECORDS):
        record = encode_record(commit_log_offset=offset, topic="BenchLoad", body=f"{i}:".encode().ljust(1024, b"x"),
                               queue_id=i % 4, queue_offset=i // 4, store_timestamp=1_790_000_000_000 + i,
                               properties={"TAGS": f"t{i % 3}", "UNIQ_KEY": f"k{i}"})
        data += record
        offset += len(record)
    path = tmp_path / "00000000000000000000"
    path.write_bytes(bytes(data) + b"\0" * 4096)  # a mapped file is longer than what it holds
    return path, len(data)


def test_the_decode_floor_yields_every_record_with_bronze_columns(tmp_path):
    path, end = _commitlog_file(tmp_path)
    cpu, batches = floors.decode_file(path, end, 1 << 30)
    assert cpu >= 0 and sum(b.num_rows for b in batches) == RECORDS
    assert {"body", "properties", "commitLogOffset", "storeDate"} <= set(batches[0].schema.names)


def test_the_parquet_floor_writes_the_landings_files_and_every_variant_writes(tmp_path):
    path, end = _commitlog_file(tmp_path)
    _, batches = floors.decode_file(path, end, 1 << 30)
    out = tmp_path / "landing"
    cpu, size = floors.write_landing_files(batches, out)
    files = sorted(out.rglob("*.parquet"))
    assert size == sum(f.stat().st_size for f in files) > 0
    assert sum(pq.read_metadata(f).num_rows for f in files) == RECORDS
    assert [p.parent.name for p in files] == ["storeDate=2026-09-21"]  # partitioned as the landing is
    results = floors.measure_floors(path, end, 1 << 30, rounds=1)
    assert results["parquet_floor_bytes"] == size
    assert [v["settings"] for v in results["parquet_variants"]][0].startswith("landing")
    assert len(results["parquet_variants"]) == 9 and all(v["bytes"] > 0 for v in results["parquet_variants"])
