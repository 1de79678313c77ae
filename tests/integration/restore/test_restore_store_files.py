"""The files of a store, as a broker reads them: ``--verify`` names a missing, extra, short or misnamed CommitLog
file and a store that starts or ends elsewhere than the table's range; ``restore`` refuses a CommitLog folder that
holds any file, or a ``commitlog`` that is no folder, in one line (docs/restore.md "The store's files").

Over the golden 4.9.8 CommitLog (four files of 1 MiB) and its table (conftest.py), through the real ``hareplica``
command where the command's output is what is checked.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from connector.errors import RestoreError
from connector.restore import restore_commitlog, verify_store
from tests.integration.restore.conftest import SIZE

HAREPLICA = Path(sys.executable).with_name("hareplica")  # the console script installed beside the venv's python
CLI_TIMEOUT_S = 240
NAMES = [f"{i * SIZE:020d}" for i in range(4)]  # the golden CommitLog's files


def hareplica(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([str(HAREPLICA), *args], cwd=cwd, capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


def no_traceback(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The one line on stderr, an ``error:`` line, with nothing on stdout and no traceback."""
    no_traceback(result)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr[-3000:]
    assert not result.stdout.strip(), result.stdout
    return lines[0]


def differs_line(result: subprocess.CompletedProcess) -> str:
    """``--verify``'s one ``differs:`` line, exit 1, nothing on stderr."""
    no_traceback(result)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("differs: "), result.stdout
    assert not result.stderr.strip(), result.stderr[-3000:]
    return lines[0]


@pytest.fixture
def store(fixture_dir, tmp_path) -> Path:
    """A copy of the golden broker's store (its CommitLog folder): the table's range, file for file."""
    shutil.copytree(fixture_dir / "commitlog", tmp_path / "store" / "commitlog")
    return tmp_path / "store"


def _delete(folder: Path, name: str) -> None:
    (folder / name).unlink()


def _truncate_last(folder: Path, name: str) -> None:
    with open(folder / NAMES[-1], "r+b") as f:
        f.truncate(SIZE - 4096)


def _shorten_middle(folder: Path, name: str) -> None:
    with open(folder / name, "r+b") as f:
        f.truncate(SIZE - 100)


def _rename_unpadded(folder: Path, name: str) -> None:
    (folder / name).rename(folder / str(int(name)))


def _rename_off_file_start(folder: Path, name: str) -> None:
    (folder / name).rename(folder / f"{int(name) + 1:020d}")


def _copy_past_the_end(folder: Path, name: str) -> None:
    shutil.copyfile(folder / NAMES[0], folder / f"{4 * SIZE:020d}")


def _zeros_after_a_gap(folder: Path, name: str) -> None:
    (folder / f"{5 * SIZE:020d}").write_bytes(bytes(SIZE))


def _stray_file(folder: Path, name: str) -> None:
    (folder / "notes.txt").write_text("not a CommitLog file")


# (what is done to the store, the file the difference names, what the difference says)
DAMAGE = [
    pytest.param(_delete, NAMES[1], NAMES[1], "the store lacks CommitLog file", id="deleted-middle-file"),
    pytest.param(_delete, NAMES[0], NAMES[0], "the store lacks CommitLog file", id="deleted-first-file"),
    pytest.param(_delete, NAMES[3], NAMES[3], "the store lacks CommitLog file", id="deleted-last-file"),
    pytest.param(_truncate_last, NAMES[3], NAMES[3], f"is {SIZE - 4096} bytes, not mappedFileSizeCommitLog {SIZE}",
                 id="truncated-last-file"),
    pytest.param(_shorten_middle, NAMES[2], NAMES[2], f"is {SIZE - 100} bytes, not mappedFileSizeCommitLog {SIZE}",
                 id="short-middle-file"),
    pytest.param(_copy_past_the_end, None, f"{4 * SIZE:020d}", "outside the table's range", id="extra-file"),
    pytest.param(_zeros_after_a_gap, None, f"{5 * SIZE:020d}", "outside the table's range",
                 id="extra-file-after-a-gap"),
    pytest.param(_rename_unpadded, NAMES[1], str(SIZE), "is no CommitLog file name", id="misnamed-unpadded"),
    pytest.param(_rename_off_file_start, NAMES[2], f"{2 * SIZE + 1:020d}", "is no CommitLog file name",
                 id="misnamed-off-a-file-start"),
    pytest.param(_stray_file, None, "notes.txt", "is no CommitLog file name", id="stray-file"),
]


@pytest.mark.parametrize("damage, victim, named, says", DAMAGE)
def test_verify_names_the_file_that_differs(table, store, damage, victim, named, says, tmp_path):
    assert verify_store(table, "broker-a", store) is None  # the copy is the table's range, file for file
    damage(store / "commitlog", victim)
    difference = verify_store(table, "broker-a", store)
    assert difference is not None, "the damaged store verified as the table's"
    assert difference.file == named and says in difference.reason, str(difference)
    line = differs_line(hareplica("restore", table, "--broker-name", "broker-a", "--verify", str(store), cwd=tmp_path))
    assert f"file {named}" in line and says in line, line


def test_a_brokers_preallocated_empty_next_file_is_no_difference(table, store):
    """A broker creates the file after its last one ahead of time, all zeros (4.9.8 AllocateMappedFileService): it
    holds no record, and a broker reads it as empty."""
    (store / "commitlog" / f"{4 * SIZE:020d}").write_bytes(bytes(SIZE))
    assert verify_store(table, "broker-a", store) is None


def test_a_store_of_a_range_verifies_with_the_same_range(table, tmp_path):
    store = tmp_path / "store"
    restore_commitlog(table, "broker-a", store, from_offset=SIZE, to_offset=3 * SIZE)
    assert verify_store(table, "broker-a", store, from_offset=SIZE, to_offset=3 * SIZE) is None
    result = hareplica("restore", table, "--broker-name", "broker-a", "--verify", str(store), "--from-offset",
                       str(SIZE), "--to-offset", str(3 * SIZE), cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("same: "), result.stdout + result.stderr
    starts_later = verify_store(table, "broker-a", store)  # the table's whole range starts at 0 and ends later
    assert (starts_later.file, starts_later.offset) == (NAMES[0], 0) and "lacks" in starts_later.reason
    ends_earlier = verify_store(table, "broker-a", store, from_offset=SIZE)
    assert ends_earlier.file == NAMES[3] and "the store lacks CommitLog file" in ends_earlier.reason


def test_restore_refuses_a_commitlog_folder_holding_a_stray_file(table, tmp_path):
    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    stray = tmp_path / "store" / "commitlog" / "notes.txt"
    stray.write_text("mine")
    with pytest.raises(RestoreError, match="notes.txt"):
        restore_commitlog(table, "broker-a", tmp_path / "store")
    result = hareplica("restore", table, "--broker-name", "broker-a", "--store-dir", str(tmp_path / "store"),
                       cwd=tmp_path)
    assert result.returncode == 2
    assert str(stray) in one_error_line(result)
    assert sorted(p.name for p in stray.parent.iterdir()) == ["notes.txt"]  # nothing written
    assert not (tmp_path / "store" / "config").exists()


@pytest.mark.parametrize("mode", ["--store-dir", "--verify"])
def test_a_commitlog_that_is_a_plain_file_is_one_error_line(table, tmp_path, mode):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "commitlog").write_text("a file, not a folder")
    result = hareplica("restore", table, "--broker-name", "broker-a", mode, str(tmp_path / "store"), cwd=tmp_path)
    assert result.returncode == 2
    line = one_error_line(result)
    assert f"{tmp_path / 'store' / 'commitlog'} is not a folder" in line and "Errno" not in line, line
    assert (tmp_path / "store" / "commitlog").read_text() == "a file, not a folder"


def test_a_store_dir_that_is_a_plain_file_is_one_error_line(table, tmp_path):
    (tmp_path / "store").write_text("a file")
    result = hareplica("restore", table, "--broker-name", "broker-a", "--store-dir", str(tmp_path / "store"),
                       cwd=tmp_path)
    assert result.returncode == 2
    line = one_error_line(result)
    assert f"{tmp_path / 'store'} is not a folder" in line and "Errno" not in line, line
