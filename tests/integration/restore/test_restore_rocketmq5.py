"""A restore of a real RocketMQ 5.5.0 broker's CommitLog (tests/fixtures/rocketmq-5.5.0: 19 V1 records and one
MessageVersion V2 record, properties with their 5.x CRC, a timer and a delay message): bronze's rows write the
file back byte for byte, and the check mode finds it identical (docs/restore.md).

The table is the decoder's output with every column, written with deltalake: what bronze lands, without Spark.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from connector.decode.columns import iter_record_batches
from connector.decode.schema import ALL_ARROW_SCHEMA
from connector.protocol.commitlog import MessageRecord, iter_records
from connector.restore import restore_commitlog, verify_store

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "rocketmq-5.5.0"
FILE = "00000000000000000000"


@pytest.fixture(scope="module")
def broker_file() -> tuple[bytes, int]:
    """The broker's mapped file as it was on disk (the fixture keeps only its written bytes) and its size."""
    info = json.loads((FIXTURE / "broker.json").read_text(encoding="utf-8"))
    raw = (FIXTURE / "commitlog" / FILE).read_bytes()
    assert len(raw) == info["commitLogMaxOffset"]
    size = info["mappedFileSizeCommitLog"]
    return raw + bytes(size - len(raw)), size


def test_a_rocketmq5_log_with_a_v2_record_restores_byte_for_byte(broker_file, tmp_path):
    data, size = broker_file
    records = [r for r in iter_records(data, base_offset=0) if isinstance(r, MessageRecord)]
    rows = pa.Table.from_batches(list(iter_record_batches(
        data, np.array([r.commit_log_offset for r in records], dtype=np.int64), 0, broker="broker-a",
        mapped_file_size=size, columns=ALL_ARROW_SCHEMA.names)))
    formats = rows.column("recordFormat").to_pylist()
    assert len(rows) == 20 and len(set(formats)) == 2  # V1 records and the one V2 record, told apart
    table = str(tmp_path / "bronze")
    write_deltalake(table, rows)

    plan = restore_commitlog(table, "broker-a", tmp_path / "store")
    assert plan.missing is None
    restored = (tmp_path / "store" / "commitlog" / FILE).read_bytes()
    assert len(restored) == size and restored == data  # every record, then zeros to the end of the file
    assert verify_store(table, "broker-a", tmp_path / "store") is None
