"""A Spark standalone cluster made of pyspark's own jars: one Master, N Workers (tests only), on 127.0.0.1 unless
given other addresses (a Worker may also run under a command prefix, e.g. on a network-namespace host of
tests/support/netns.py).

Each daemon is ``SPARK_HOME/bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}`` in its
own session (so a SIGKILL of the session takes a Worker's executors and their Python workers with it),
on free ports, its log in ``root/<name>.log``. The Workers run without the driver's Python: PATH, PYTHONPATH,
VIRTUAL_ENV and PYSPARK_* of this process are not passed on, so an executor finds Python only where the
application says (``spark.pyspark.python`` in a shipped archive).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from broker_stub.launcher import free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER_READY = "I have been elected leader"
WORKER_READY = "Successfully registered with master"
START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 20
#: Environment variables the daemons do not inherit from the test process (the driver's Python and venv).
DRIVER_ONLY_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME",
                   "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")


def spark_home() -> Path:
    """The pip-installed pyspark folder, which holds ``bin/spark-class``, ``jars/`` and ``python/lib``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def daemon_env(root: Path, local_ip: str = "127.0.0.1") -> dict[str, str]:
    """The daemons' environment: this one without :data:`DRIVER_ONLY_ENV` and without this venv on PATH; Spark
    binds to ``local_ip`` (SPARK_LOCAL_IP, which a Worker's executors inherit)."""
    env = {k: v for k, v in os.environ.items() if k not in DRIVER_ONLY_ENV}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=local_ip, SPARK_DAEMON_MEMORY="384m",
               SPARK_LOCAL_DIRS=str(root / "local"), SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    return env


@dataclass
class Daemon:
    """One spark-class process: ``name``, its Popen, its log file."""

    name: str
    proc: subprocess.Popen
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for_log(self, needle: str, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while needle not in self.log_text():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode} before '{needle}':\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: no '{needle}' in {timeout_s} s:\n{self.tail()}")
            time.sleep(0.2)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the daemon's whole session (the daemon, its executors and their Python workers)."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """SIGTERM the session, SIGKILL it after :data:`STOP_TIMEOUT_S`, and reap the daemon."""
        self.kill(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        self.kill(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)


@dataclass
class StandaloneCluster:
    """A Master and its Workers under ``root``; ``url`` is ``spark://HOST:PORT``, ``host`` the Master's address."""

    root: Path
    master: Daemon | None = None
    url: str = ""
    workers: dict[int, Daemon] = field(default_factory=dict)
    host: str = "127.0.0.1"

    def _spawn(self, name: str, args: list[str], host: str, prefix: Sequence[str] = ()) -> Daemon:
        log = self.root / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([*prefix, str(spark_home() / "bin" / "spark-class"), *args],
                                    env=daemon_env(self.root, host),
                                    cwd=self.root, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        return Daemon(name, proc, log)

    def start_master(self) -> None:
        port = free_port(self.host)
        self.master = self._spawn("master", [MASTER_CLASS, "--host", self.host, "--port", str(port),
                                             "--webui-port", str(free_port(self.host))], self.host)
        self.url = f"spark://{self.host}:{port}"
        self.master.wait_for_log(MASTER_READY)

    def work_dir(self, index: int) -> Path:
        """Worker ``index``'s ``--work-dir``: one ``app-*/EXECUTOR_ID/`` folder per executor it ran."""
        return self.root / f"worker-{index}"

    def start_worker(self, index: int, host: str = "127.0.0.1", command_prefix: Sequence[str] = ()) -> Daemon:
        """Start (or restart) Worker ``index`` with 1 core and 1 GiB on ``host`` (its address, under
        ``command_prefix``: e.g. ``ip netns exec NAME``); returns once the Master registered it."""
        work = self.work_dir(index)
        work.mkdir(parents=True, exist_ok=True)
        worker = self._spawn(f"worker-{index}", [WORKER_CLASS, self.url, "--host", host, "--cores", "1",
                                                 "--memory", "1g", "--work-dir", str(work),
                                                 "--webui-port", str(free_port())], host, command_prefix)
        self.workers[index] = worker
        log_start = len(worker.log_text())
        deadline = time.monotonic() + START_TIMEOUT_S
        while WORKER_READY not in worker.log_text()[log_start:]:
            if worker.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker-{index} did not register with {self.url}:\n{worker.tail()}")
            time.sleep(0.2)
        return worker

    def executor_dirs(self, index: int) -> list[Path]:
        """``WORK_DIR/app-*/ID`` folders of Worker ``index``, oldest application first."""
        return sorted(self.work_dir(index).glob("app-*/*"))

    def logs(self) -> str:
        """The tail of every daemon's log and of every executor's stderr, for a failure message."""
        parts = [f"--- {d.name} ---\n{d.tail()}" for d in [self.master, *self.workers.values()] if d]
        for index in self.workers:
            for folder in self.executor_dirs(index):
                stderr = folder / "stderr"
                if stderr.exists():
                    lines = stderr.read_text(errors="replace").splitlines()[-25:]
                    parts.append(f"--- {folder} stderr ---\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self) -> None:
        for daemon in [*self.workers.values(), self.master]:
            if daemon is not None:
                try:
                    daemon.stop()
                except Exception:  # noqa: BLE001 - teardown reaches every daemon
                    daemon.kill()


TASK_LINE = re.compile(r"(Running|Finished) task \S+ in stage \S+ \(TID (\d+)\)")


def executor_tasks(executor_dir: Path) -> tuple[set[int], set[int]]:
    """``(started, finished)`` task ids an executor logged in its ``stderr`` (Spark's INFO lines)."""
    started: set[int] = set()
    finished: set[int] = set()
    stderr = executor_dir / "stderr"
    text = stderr.read_text(errors="replace") if stderr.exists() else ""
    for kind, tid in TASK_LINE.findall(text):
        (started if kind == "Running" else finished).add(int(tid))
    return started, finished
