"""The restore's batch encoder: the native kernel's records are the reference encoder's, byte for byte, on the
golden 4.9.8 and 5.x logs (every batch shape: whole, sliced, one row); the restore and its check give the same
files with the reference alone (``HAREPLICA_PURE_PYTHON=1``); a table read a batch at a time in any row order
restores the same files (docs/restore.md "Exactness").
"""

from __future__ import annotations

import filecmp
import os

import numpy as np
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from connector.decode.columns import iter_record_batches
from connector.decode.kernels import native_kernel_available
from connector.decode.schema import ALL_ARROW_SCHEMA
from connector.protocol.commitlog import MessageRecord, iter_records
from connector.restore import encode, restore_commitlog, verify_store
from connector.restore.encode import RECORD_COLUMNS, encode_batch, encode_rows
from tests.integration.restore.conftest import SIZE


def _golden_batches(folder) -> list[tuple[pa.RecordBatch, bytes]]:
    """(rows, the file's bytes of their records) of every CommitLog file of ``folder``."""
    out = []
    for name in sorted(os.listdir(folder)):
        data, base = (folder / name).read_bytes(), int(name)
        recs = [r for r in iter_records(data, base_offset=base) if isinstance(r, MessageRecord)]
        if not recs:
            continue
        starts = np.array([r.commit_log_offset - base for r in recs], dtype=np.int64)
        rows = pa.Table.from_batches(list(iter_record_batches(data, starts, base, broker="broker-a",
                                                              mapped_file_size=SIZE, columns=ALL_ARROW_SCHEMA.names)))
        batch = rows.select(list(RECORD_COLUMNS)).combine_chunks().to_batches()[0]
        out.append((batch, data[recs[0].commit_log_offset - base:recs[-1].commit_log_offset - base
                                + recs[-1].store_size]))
    return out


@pytest.mark.parametrize("log", ["rocketmq-4.9.8", "rocketmq-5.5.0"])
def test_the_native_encoder_gives_the_reference_bytes(log, fixture_dir):
    assert native_kernel_available(), "the native kernel is not built (make test builds it; .ci/run installs gcc)"
    for batch, stored in _golden_batches(fixture_dir.parent / log / "commitlog"):
        assert bytes(encode_batch(batch, broker="broker-a")) == stored == encode_rows(batch, broker="broker-a")
        for lo, n in ((1, batch.num_rows - 2), (3, 1), (batch.num_rows - 1, 1)):
            part = batch.slice(lo, n)
            assert bytes(encode_batch(part, broker="broker-a")) == encode_rows(part, broker="broker-a")


def test_the_reference_alone_restores_and_verifies_the_same_files(table, fixture_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(encode, "_encoder", lambda: None)
    restore_commitlog(table, "broker-a", tmp_path / "store")
    for name in sorted(os.listdir(fixture_dir / "commitlog")):
        assert filecmp.cmp(fixture_dir / "commitlog" / name, tmp_path / "store" / "commitlog" / name, shallow=False)
    assert verify_store(table, "broker-a", tmp_path / "store") is None


def test_rows_in_any_order_and_landed_twice_restore_the_same_files(rows, fixture_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("connector.restore.plan.BATCH_ROWS", 7)  # many batches, runs cut inside a file
    shuffled = rows.take(np.random.default_rng(53).permutation(rows.num_rows))
    path = str(tmp_path / "shuffled")
    write_deltalake(path, pa.concat_tables([shuffled, rows.slice(100, 40)]))
    restore_commitlog(path, "broker-a", tmp_path / "store")
    for name in sorted(os.listdir(fixture_dir / "commitlog")):
        assert filecmp.cmp(fixture_dir / "commitlog" / name, tmp_path / "store" / "commitlog" / name, shallow=False)
    assert verify_store(path, "broker-a", tmp_path / "store") is None
