"""The golden 4.9.8 CommitLog as a bronze table, for the restore tests that need no broker: the decoder's output with
every column, written with deltalake (what bronze lands, without Spark)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from connector.decode.columns import iter_record_batches
from connector.decode.schema import ALL_ARROW_SCHEMA
from connector.protocol.commitlog import MessageRecord, iter_records

SIZE = 1024 * 1024  # the golden broker's mappedFileSizeCommitLog


@pytest.fixture(scope="module")
def rows(fixture_dir) -> pa.Table:
    """Every record of the golden CommitLog with all the decoder's columns."""
    tables = []
    for name in sorted(os.listdir(fixture_dir / "commitlog")):
        data = (fixture_dir / "commitlog" / name).read_bytes()
        base = int(name)
        starts = [r.commit_log_offset - base for r in iter_records(data, base_offset=base)
                  if isinstance(r, MessageRecord)]
        tables.append(pa.Table.from_batches(list(iter_record_batches(
            data, np.array(starts, dtype=np.int64), base, broker="broker-a", mapped_file_size=SIZE,
            columns=ALL_ARROW_SCHEMA.names))))
    return pa.concat_tables(tables)


@pytest.fixture(scope="module")
def table(rows, tmp_path_factory) -> str:
    """The golden rows as a Delta table's folder."""
    path = str(tmp_path_factory.mktemp("golden") / "bronze")
    write_deltalake(path, rows)
    return path
