"""The suite's disk check (tests/conftest.py ``disk_problem``): the suite stops before its first test, in one line,
when its temporary folders' disk cannot hold what the suite adds while staying under the brokers' forcible
clean-up ratio (CONTRIBUTING.md "The disk")."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest import disk_problem

CHECKOUT = Path(__file__).resolve().parents[2]


def test_a_disk_with_room_passes():
    # this test only runs when the session's own check passed, with the suite's whole peak
    assert disk_problem(Path(tempfile.gettempdir()), peak_bytes=0) is None


def test_a_disk_without_room_names_the_folder_the_ratio_and_the_remedy():
    folder = Path(tempfile.gettempdir())
    st = os.statvfs(folder)
    problem = disk_problem(folder, peak_bytes=st.f_blocks * st.f_frsize)
    assert problem is not None
    assert "\n" not in problem
    assert str(folder) in problem and "85%" in problem and "uv cache prune" in problem


def test_the_session_stops_before_its_first_test(tmp_path):
    """A whole pytest run whose peak cannot fit exits with a usage error and the one line, running no test."""
    probe = tmp_path / "test_probe.py"
    probe.write_text("def test_never():\n    raise AssertionError('ran')\n")
    env = {**os.environ, "HAREPLICA_TEST_DISK_PEAK_BYTES": str(1 << 60)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                           "--rootdir", str(tmp_path), str(probe)],
                          capture_output=True, text=True, cwd=CHECKOUT, env=env, timeout=120)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "uv cache prune" in done.stdout + done.stderr
    assert "ran" not in done.stdout
