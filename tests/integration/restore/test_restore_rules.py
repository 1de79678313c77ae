"""The rules of a restore over the golden 4.9.8 CommitLog (a real broker's files): byte-identical files, the check
mode, gaps named, ranges that start inside a record or lack their file's first records refused, tables landed
before the restore columns refused (docs/restore.md).

The table is the decoder's output with every column, written with deltalake: what bronze lands, without Spark.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import write_deltalake

from broker_stub.store.schedule import decode_delay_offsets
from connector.decode.columns import iter_record_batches
from connector.decode.schema import ALL_ARROW_SCHEMA, ARROW_SCHEMA
from connector.errors import RestoreError
from connector.restore import restore_commitlog, verify_store
from streaming_apps.cli import main
from tests.integration.restore.conftest import SIZE


def _table_without(rows: pa.Table, tmp_path, lo: int, hi: int) -> str:
    offsets = rows.column("commitLogOffset")
    path = str(tmp_path / "holed")
    write_deltalake(path, rows.filter(pc.or_(pc.less(offsets, lo), pc.greater_equal(offsets, hi))))
    return path


def test_the_golden_log_restores_byte_for_byte_and_verifies(table, fixture_dir, tmp_path):
    assert main(["restore", table, "--broker-name", "broker-a", "--store-dir", str(tmp_path / "store")]) == 0
    names = sorted(os.listdir(fixture_dir / "commitlog"))
    assert sorted(os.listdir(tmp_path / "store" / "commitlog")) == names
    for name in names:
        assert filecmp.cmp(fixture_dir / "commitlog" / name, tmp_path / "store" / "commitlog" / name, shallow=False)
    assert verify_store(table, "broker-a", fixture_dir) is None
    # levels 1-3 were delivered (their copies are in the log): a broker on the store must not deliver them again;
    # the messages of levels 16-18 (30 min to 2 h) were still parked when the golden broker stopped
    delay_offsets = decode_delay_offsets((tmp_path / "store" / "config" / "delayOffset.json").read_text())
    assert delay_offsets == {1: 2, 2: 2, 3: 4}
    parked = {json.loads(line)["queueId"] + 1 for line in (fixture_dir / "messages.jsonl").read_text().splitlines()
              if json.loads(line)["topic"] == "SCHEDULE_TOPIC_XXXX"}
    assert parked == {1, 2, 3, 16, 17, 18}
    assert main(["restore", table, "--broker-name", "broker-a", "--verify", str(tmp_path / "store")]) == 0


def test_verify_names_the_first_record_that_differs(table, fixture_dir, tmp_path, capsys, rows):
    shutil.copytree(fixture_dir / "commitlog", tmp_path / "store" / "commitlog")
    victim = rows.column("commitLogOffset")[200].as_py()  # a record of the second file
    path = tmp_path / "store" / "commitlog" / f"{SIZE:020d}"
    data = bytearray(path.read_bytes())
    data[victim - SIZE + 12] ^= 0x01  # QUEUEID
    path.write_bytes(bytes(data))
    difference = verify_store(table, "broker-a", tmp_path / "store")
    assert (difference.offset, difference.file, difference.field) == (victim, f"{SIZE:020d}", "QUEUEID")
    assert main(["restore", table, "--broker-name", "broker-a", "--verify", str(tmp_path / "store")]) == 1
    assert f"CommitLog offset {victim} (file {SIZE:020d}, field QUEUEID)" in capsys.readouterr().out


def test_a_gap_ends_the_restore_and_is_named(rows, tmp_path, capsys):
    offsets = rows.column("commitLogOffset").to_pylist()
    lo, hi = offsets[150], offsets[153]  # three records of the second file
    holed = _table_without(rows, tmp_path, lo, hi)
    plan = restore_commitlog(holed, "broker-a", tmp_path / "a")
    assert (plan.end, plan.missing) == (lo, (lo, hi))
    assert [f.name for f in plan.files] == [f"{0:020d}", f"{SIZE:020d}"] and not plan.files[-1].full
    restored = (tmp_path / "a" / "commitlog" / f"{SIZE:020d}").read_bytes()
    original = (tmp_path / "a" / "commitlog" / f"{0:020d}").stat().st_size
    assert original == SIZE and len(restored) == SIZE and not restored[lo - SIZE:].strip(b"\x00")
    assert main(["restore", holed, "--broker-name", "broker-a", "--store-dir", str(tmp_path / "b")]) == 3
    assert f"missing [{lo}, {hi})" in capsys.readouterr().out


def test_a_range_inside_a_record_or_without_its_files_first_records_is_refused(rows, table, tmp_path):
    offsets = rows.column("commitLogOffset").to_pylist()
    with pytest.raises(RestoreError, match=f"--from-offset {offsets[5] + 1} is not the start of a record"):
        restore_commitlog(table, "broker-a", tmp_path / "a", from_offset=offsets[5] + 1)
    with pytest.raises(RestoreError, match=f"--to-offset {offsets[5] + 1} is inside a record"):
        restore_commitlog(table, "broker-a", tmp_path / "b", to_offset=offsets[5] + 1)
    first_of_second = offsets.index(SIZE)
    holed = _table_without(rows, tmp_path, SIZE, offsets[first_of_second + 1])
    with pytest.raises(RestoreError, match=f"lacks the first records of CommitLog file {SIZE:020d}.*at offset "
                                           f"{offsets[first_of_second + 1]}"):
        restore_commitlog(holed, "broker-a", tmp_path / "c", from_offset=offsets[first_of_second + 5])
    plan = restore_commitlog(table, "broker-a", tmp_path / "d", from_offset=offsets[first_of_second + 5],
                             to_offset=2 * SIZE)
    assert [f.name for f in plan.files] == [f"{SIZE:020d}"] and plan.files[0].full and plan.missing is None


def test_a_table_landed_before_the_restore_columns_is_refused_in_one_line(rows, tmp_path):
    old = str(tmp_path / "old")
    write_deltalake(old, rows.select(ARROW_SCHEMA.names))
    with pytest.raises(RestoreError, match="lacks the restore column\\(s\\) storedBody, storedProperties, "
                                           "recordFormat, mappedFileSizeCommitLog") as info:
        restore_commitlog(old, "broker-a", tmp_path / "store")
    assert "\n" not in str(info.value)
    upgraded = str(tmp_path / "upgraded")  # the columns added in place: the earlier rows read them as null
    nulls = {name: pa.nulls(rows.num_rows, rows.schema.field(name).type) for name in ALL_ARROW_SCHEMA.names
             if name not in ARROW_SCHEMA.names}
    write_deltalake(upgraded, rows.select(ARROW_SCHEMA.names).append_column("storedBody", nulls["storedBody"])
                    .append_column("storedProperties", nulls["storedProperties"])
                    .append_column("recordFormat", nulls["recordFormat"])
                    .append_column("mappedFileSizeCommitLog", nulls["mappedFileSizeCommitLog"]))
    with pytest.raises(RestoreError, match="the row at CommitLog offset 0 has no mappedFileSizeCommitLog"):
        restore_commitlog(upgraded, "broker-a", tmp_path / "store2")


def test_a_host_port_outside_1_to_65535_restores_as_stored(tmp_path):
    """BORNHOST and STOREHOSTADDRESS hold a Java int port: 0 (a producer without a bound port) comes back as 0."""
    from connector.protocol.commitlog import HostAddress, encode_blank, encode_record

    size = 4096
    record = encode_record(commit_log_offset=0, topic="t", body=b"x", born_host=HostAddress(b"\x7f\x00\x00\x01", 0),
                           store_timestamp=1_790_000_000_000)
    data = record + encode_blank(size - len(record))
    batch = next(iter_record_batches(data, np.array([0], dtype=np.int64), 0, broker="b", mapped_file_size=size,
                                     columns=ALL_ARROW_SCHEMA.names))
    assert batch.column("bornHost").to_pylist() == ["127.0.0.1:0"]
    write_deltalake(str(tmp_path / "t"), pa.Table.from_batches([batch]))
    restore_commitlog(str(tmp_path / "t"), "b", tmp_path / "store")
    assert (tmp_path / "store" / "commitlog" / f"{0:020d}").read_bytes()[:len(record)] == record
