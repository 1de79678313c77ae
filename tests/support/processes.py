"""Killing a test's subprocess together with everything it started (a Spark driver: its JVM and Python workers),
and running a test's Python script in a process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

KILL_TIMEOUT_S = 30


def session_pids(sid: int) -> list[int]:
    """The pids of every live process of session ``sid`` (``start_new_session=True`` makes the child's pid one)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getsid(int(name)) == sid:
                    pids.append(int(name))
            except (ProcessLookupError, PermissionError):
                pass
    return pids


def kill_session(proc: subprocess.Popen, timeout_s: float = KILL_TIMEOUT_S) -> None:
    """SIGKILL every process of the subprocess's session (driver, JVM, Python workers) and reap ``proc``.

    ``proc`` must have been started with ``start_new_session=True``. Fails the test when a process survives
    ``timeout_s`` seconds of SIGKILLs.
    """
    sid = proc.pid
    deadline = time.monotonic() + timeout_s
    while True:
        pids = session_pids(sid)
        if not pids:
            break
        assert time.monotonic() < deadline, f"processes of session {sid} survive SIGKILL: {pids}"
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.05)
    proc.wait(timeout=timeout_s)


def kill_at_marker(proc: subprocess.Popen, marker, log_path, *, what: str, timeout_s: float) -> str:
    """Wait until ``proc`` (started with ``start_new_session=True``) writes the file ``marker`` — a fault point it
    reached (connector.delta.faults) — then SIGKILL its whole session; return the marker's text.

    Fails the test, with the tail of ``log_path``, when ``proc`` exits first or ``timeout_s`` seconds pass.
    """
    try:
        deadline = time.monotonic() + timeout_s
        while not marker.exists():
            assert proc.poll() is None, f"exited {proc.returncode} before {what}:\n{log_tail(log_path)}"
            assert time.monotonic() < deadline, f"{what} not reached in {timeout_s} s:\n{log_tail(log_path)}"
            time.sleep(0.05)
    finally:
        kill_session(proc)
    return marker.read_text()


def log_tail(path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, or ``(no log)``."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"


def run_json_script(script: str, *args: str, env: dict[str, str] | None = None,
                    timeout_s: float = 300) -> tuple[dict, subprocess.CompletedProcess]:
    """Run ``script`` (Python source) with this interpreter and ``args``, in a process of its own; return the JSON
    object of its last stdout line and the finished process. Asserts exit code 0 (the message: stderr's tail)."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout_s,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done
