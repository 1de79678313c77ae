"""Killing a test's subprocess together with everything it started (a Spark driver: its JVM and Python workers)."""

from __future__ import annotations

import os
import signal
import subprocess
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
