"""`hareplica inspect-commitlog` on the golden CommitLog (issue 2 item 3)."""

from __future__ import annotations

import base64
import io
import json
import shutil
import struct

from streaming_apps.cli import main
from streaming_apps.inspect_commitlog import run


def test_jsonl_output_reproduces_messages_jsonl_byte_for_byte(fixture_dir, capsys):
    assert main(["inspect-commitlog", str(fixture_dir / "commitlog")]) == 0
    out = capsys.readouterr().out
    assert out == (fixture_dir / "messages.jsonl").read_text(encoding="utf-8")


def test_from_offset_starts_at_that_record(fixture_dir):
    expected = [json.loads(line) for line in (fixture_dir / "messages.jsonl").read_text().splitlines()]
    start = expected[300]["commitLogOffset"]
    buf = io.StringIO()
    assert run(str(fixture_dir / "commitlog"), start + 1, "jsonl", buf) == 0
    got = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [g["commitLogOffset"] for g in got] == [e["commitLogOffset"] for e in expected[301:]]


def test_table_format_lists_every_record(fixture_dir):
    buf = io.StringIO()
    assert run(str(fixture_dir / "commitlog"), 0, "table", buf) == 0
    lines = buf.getvalue().splitlines()
    assert lines[0].split()[:3] == ["commitLogOffset", "storeSize", "topic"]
    assert len(lines) == 1 + 557
    assert lines[1].split()[:3] == ["0", "3691", "odd%Topic|FD4cQq-x_9|%"]


def test_corrupt_record_exits_2_naming_offset_and_file_after_printing_valid_records(fixture_dir, tmp_path, capsys):
    folder = tmp_path / "commitlog"
    shutil.copytree(fixture_dir / "commitlog", folder)
    expected = [json.loads(line) for line in (fixture_dir / "messages.jsonl").read_text().splitlines()]
    victim = expected[10]
    path = folder / victim["file"]
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, victim["filePosition"] + 4, 0x11223344)
    path.write_bytes(bytes(data))
    assert main(["inspect-commitlog", str(folder)]) == 2
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 10
    assert f"CommitLog offset {victim['commitLogOffset']}" in captured.err
    assert victim["file"] in captured.err and "MAGICCODE" in captured.err


def test_missing_folder_exits_1(tmp_path, capsys):
    assert main(["inspect-commitlog", str(tmp_path / "nope")]) == 1
    assert "does not exist" in capsys.readouterr().err


def _flip_body_bytes(folder, victims):
    """Corrupt one body byte of each victim record (its BODYCRC then no longer matches)."""
    for v in victims:
        path = folder / v["file"]
        path.chmod(0o644)
        data = bytearray(path.read_bytes())
        # a V1 record ends BODY, TOPIC (1-byte length + topic), PROPERTIES (2-byte length + properties)
        tail = 1 + len(v["topic"].encode()) + 2 + len(base64.b64decode(v["propertiesRawBase64"]))
        data[v["filePosition"] + v["storeSize"] - tail - 1] ^= 0xFF  # the body's last byte
        path.write_bytes(bytes(data))


def test_every_record_is_listed_and_each_bad_body_named_then_exit_2(fixture_dir, tmp_path, capsys):
    """Issue 22 item 7: the inspector stopped at the first BODYCRC mismatch."""
    folder = tmp_path / "commitlog"
    shutil.copytree(fixture_dir / "commitlog", folder)
    expected = [json.loads(line) for line in (fixture_dir / "messages.jsonl").read_text().splitlines()]
    victims = [e for e in expected if e["bodyLength"] > 0 and not e["sysFlag"] & 1][5:400:60]
    assert len(victims) >= 5
    _flip_body_bytes(folder, victims)
    assert main(["inspect-commitlog", str(folder)]) == 2
    captured = capsys.readouterr()
    got = [json.loads(line) for line in captured.out.splitlines()]
    assert [g["commitLogOffset"] for g in got] == [e["commitLogOffset"] for e in expected]  # every record
    flagged = {g["commitLogOffset"]: g["bodyError"] for g in got if "bodyError" in g}
    assert sorted(flagged) == [v["commitLogOffset"] for v in victims]
    assert all(e.startswith("BODYCRC mismatch: stored ") for e in flagged.values())
    errors = captured.err.strip().splitlines()
    assert errors[:-1] == [f"error: CommitLog offset {v['commitLogOffset']}, file {v['file']}: "
                           f"{flagged[v['commitLogOffset']]}" for v in victims]
    assert errors[-1] == f"error: {len(victims)} of {len(expected)} records have a bad body (listed above with " \
                         "offset and file)"
    good = [g for g in got if "bodyError" not in g]
    assert good == [e for e in expected if e["commitLogOffset"] not in flagged]  # the rest byte for byte

    assert main(["inspect-commitlog", "--stop-at-first", str(folder)]) == 2
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == expected.index(victims[0])
    assert captured.err.strip().splitlines() == errors[:1]

    buf = io.StringIO()
    assert run(str(folder), 0, "table", buf) == 2
    rows = buf.getvalue().splitlines()[1:]
    assert len(rows) == len(expected)
    assert sum(r.rstrip().endswith("BODYCRC mismatch") for r in rows) == len(victims)


def test_table_columns_have_fixed_widths_and_iso_timestamps_with_zone(fixture_dir):
    """Before, rich realigned the columns on every page of 1,000 rows and timestamps had no zone."""
    import re

    buf = io.StringIO()
    assert run(str(fixture_dir / "commitlog"), 0, "table", buf) == 0
    header, *rows = buf.getvalue().splitlines()
    check_at = header.index("check")
    assert all(len(r) > check_at and r[check_at - 2:check_at] == "  " and r[check_at] != " " for r in rows)
    stamp_at = header.index("storeTimestamp")
    stamps = {r[stamp_at:stamp_at + 24] for r in rows}
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", s) for s in stamps), sorted(stamps)[:3]


def test_table_piped_into_a_closed_reader_exits_0(fixture_dir):
    import subprocess
    import sys

    folder = fixture_dir / "commitlog"
    cmd = f"{sys.executable} -m streaming_apps.cli inspect-commitlog --format table {folder} | head -1"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("    commitLogOffset"), result.stderr[-2000:]
    assert result.stderr == ""
