"""`hareplica inspect-commitlog` refuses a CommitLog folder with a missing middle file (issue 9 item 4)."""

from __future__ import annotations

import shutil

from streaming_apps.cli import main

FILE = 1048576  # the golden CommitLog's mappedFileSizeCommitLog


def _copy(fixture_dir, tmp_path):
    folder = tmp_path / "commitlog"
    shutil.copytree(fixture_dir / "commitlog", folder)
    for p in folder.iterdir():
        p.chmod(0o644)
    return folder


def test_missing_middle_file_exits_2_naming_the_gap(fixture_dir, tmp_path, capsys):
    folder = _copy(fixture_dir, tmp_path)
    (folder / f"{FILE:020d}").unlink()
    assert main(["inspect-commitlog", str(folder)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before printing: a gap makes every later record suspect
    err = captured.err.strip().splitlines()
    assert len(err) == 1, err
    assert f"{0:020d}" in err[0] and f"{2 * FILE:020d}" in err[0]
    assert f"offsets {FILE}..{2 * FILE - 1}" in err[0] and "missing" in err[0]


def test_file_of_a_different_size_exits_2_naming_it(fixture_dir, tmp_path, capsys):
    folder = _copy(fixture_dir, tmp_path)
    with open(folder / f"{FILE:020d}", "r+b") as fh:
        fh.truncate(FILE // 2)
    assert main(["inspect-commitlog", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{FILE:020d}" in err[0] and str(FILE // 2) in err[0]


def test_folder_after_retention_has_no_gap(fixture_dir, tmp_path, capsys):
    folder = _copy(fixture_dir, tmp_path)
    (folder / f"{0:020d}").unlink()  # retention deletes the oldest files: that is not a gap
    assert main(["inspect-commitlog", str(folder)]) == 0
    assert capsys.readouterr().out
