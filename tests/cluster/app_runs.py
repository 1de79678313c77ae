"""Running an app on the test cluster as users submit it, and seeing where its Python ran (tests only).

- :func:`packed_run` is the ``hareplica run APP ... --master spark://... --archives ENV#environment --conf
  spark.pyspark.python=./environment/bin/python`` command line (docs/deployment.md §2), :func:`start` runs a
  command in its own process session with a clean environment (no driver-only Python variables) and
  :func:`finish` waits for it to exit 0, killing its session in any case.
- :class:`PythonWatcher` records which Python processes ran under a folder (the cluster's: the executors'
  Python workers), so a test sees they were ``./environment/bin/python`` in their executor folders.
- :func:`new_executor_dirs` and :func:`batches` tell which executors an app had and which micro-batches its
  checkpoint planned or committed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from streaming_apps.package import EXECUTOR_PYTHON
from tests.cluster.standalone import DRIVER_ONLY_ENV

#: How long one app run may take before the test fails it (seconds).
RUN_TIMEOUT_S = 240


def app_args(app: str, broker, cluster, workdir: Path, max_bytes_per_trigger: int, *extra: str) -> list[str]:
    """``run APP`` arguments: the broker's HA address, AvailableNow, the cluster's master, two tasks per batch."""
    return ["run", app, "--brokers", f"broker-a={broker.ha_addr}", "--workdir", str(workdir),
            "--trigger", "available-now", "--master", cluster.url, "--maintenance-every", "0",
            "--max-bytes-per-trigger", str(max_bytes_per_trigger), "--min-partitions", "2", *extra]


def packed_run(run_args: list[str], env_archive) -> list[str]:
    """``hareplica RUN_ARGS`` with executors on the packed environment (``--archives``, ``spark.pyspark.python``)."""
    return [sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING", *run_args,
            "--archives", f"{env_archive.path}#environment", "--conf", f"spark.pyspark.python={EXECUTOR_PYTHON}"]


def clean_env() -> dict[str, str]:
    """This environment without the driver-only Python variables; Spark binds to 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if k not in DRIVER_ONLY_ENV}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def start(cmd: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    """Start ``cmd`` in ``cwd`` in a new session, its output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=clean_env(), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the process's whole session (driver, its JVM, its Python workers) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def finish(proc: subprocess.Popen, log: Path) -> None:
    """Wait up to :data:`RUN_TIMEOUT_S` for the app; its session is killed afterwards; it must have exited 0."""
    try:
        code = proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        kill_session(proc)
    assert code == 0, f"the app exited {code}:\n{tail(log)}"


def tail(path: Path, n: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"


#: How often :class:`PythonWatcher` looks at the processes (seconds): an executor's pyspark.daemon and a driver
#: live for the whole application, so a slower look misses none of them; each look reads every /proc entry
#: (about 6 ms of CPU with 100 processes), which 0.1 s made a tenth of a core for the cluster tests' length.
WATCH_INTERVAL_S = 0.5


class PythonWatcher:
    """Records ``(argv[0], cwd)`` of every Python worker process (pyspark.daemon / pyspark.worker) and of every
    ``python .../submit.py`` driver whose working directory is under ``root``, every :data:`WATCH_INTERVAL_S`,
    inside ``with``."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.seen: set[tuple[str, str, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    cwd = os.readlink(f"/proc/{pid}/cwd")
                except OSError:
                    continue
                role = next((a.decode() for a in argv if a in (b"pyspark.daemon", b"pyspark.worker")), None)
                if len(argv) > 1 and argv[1].endswith(b"submit.py"):  # python .../submit.py ARGS
                    role = argv[1].decode()
                if role and cwd.startswith(self.root):
                    self.seen.add((argv[0].decode(), cwd, role))

    def __enter__(self) -> PythonWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def executor_workers(watcher: PythonWatcher, cluster) -> set[int]:
    """The Workers whose executor folders ran Python workers from ``./environment/bin/python``."""
    found = set()
    for argv0, cwd, role in watcher.seen:
        for index in cluster.workers:
            if role.startswith("pyspark.") and cwd.startswith(str(cluster.work_dir(index)) + os.sep):
                assert argv0 == EXECUTOR_PYTHON, f"an executor's Python worker ran {argv0}, not the shipped one"
                assert (Path(cwd) / "environment" / "bin" / "python").exists()
                found.add(index)
    return found


def app_names(cluster) -> set[str]:
    """The ``app-*`` ids of every application whose executors ran on the cluster's Workers so far."""
    return {d.parent.name for index in cluster.workers for d in cluster.executor_dirs(index)}


def new_executor_dirs(cluster, known_apps: set[str]) -> dict[int, list[Path]]:
    """Worker index → its executor folders of applications not in ``known_apps`` (see :func:`app_names`)."""
    return {index: [d for d in cluster.executor_dirs(index) if d.parent.name not in known_apps]
            for index in cluster.workers}


def batches(checkpoint: Path, kind: str) -> set[int]:
    """Batch ids in the checkpoint's ``offsets`` (planned) or ``commits`` (done) log."""
    folder = checkpoint / kind
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()
