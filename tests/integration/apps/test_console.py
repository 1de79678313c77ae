"""What ``hareplica demo`` and ``hareplica run`` print at the default log level, and how a run the user stops ends.

Real processes throughout: the CLI in a subprocess of its own (it starts its own Spark and, for the demo, its own
broker stub), a broker-stub master for ``run``. The console must hold hareplica's own lines only: no Python
traceback, no line of py4j's or Spark's loggers (those go to the log file the run names at start), at most
:data:`MAX_LINES` lines. A stop the user asked for (``--max-runtime``, SIGTERM) is a success: exit 0 and the
run's summary.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import kill_session

pytestmark = pytest.mark.spark

CLI_TIMEOUT_S = 300
MAX_LINES = 40
#: the demo's: bronze's lines, then the typed tables' run and query
MAX_DEMO_LINES = 55
MESSAGES = 60
#: a line of py4j's Python loggers (``py4j.clientserver``) or errors, of Spark's log4j (its default layout:
#: ``26/12/01 22:25:34 WARN Utils: ...``), of a Java stack, or of the JVM itself
FOREIGN_LINE = re.compile(r"\bpy4j\.\w|Py4J\w*(Error|Exception)|"
                          r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) |"
                          r"^WARNING: |log4j|^\s+at [\w$.]+\(|SparkContext|Exception in thread")
SUMMARY = re.compile(r"^bronze: (\d+) rows in (\d+) micro-batches", re.M)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "streaming_apps.cli", *args]


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "COLUMNS"}, "COLUMNS": "120"}


def assert_quiet(out: str, max_lines: int = MAX_LINES) -> list[str]:
    """The console's lines, after checking that they are hareplica's only and at most ``max_lines``."""
    lines = out.splitlines()
    assert "Traceback" not in out, out[-4000:]
    foreign = [line for line in lines if FOREIGN_LINE.search(line)]
    assert not foreign, "\n".join(foreign[:20])
    assert len(lines) <= max_lines, f"{len(lines)} lines:\n{out}"
    return lines


def log_file_of(out: str) -> Path:
    """The log file the command named on its console (one line), which must exist."""
    named = re.findall(r"^Spark's and py4j's log: (\S+)$", out, re.M)
    assert len(named) == 1, out
    path = Path(named[0])
    assert path.is_file(), path
    return path


@pytest.fixture
def stored_broker(broker_factory):
    """A stub master holding MESSAGES messages."""
    from connector.client.producer import Producer

    broker = broker_factory("master")
    with Producer(broker.remoting_addr, "console-test") as producer:
        futures = [producer.send_async(f"Topic{i % 2}", f"message {i}".encode() * 20) for i in range(MESSAGES)]
        assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
    return broker


def test_the_demo_prints_its_own_lines_only(tmp_path):
    workdir = tmp_path / "demo"
    proc = subprocess.run(_cli("demo", "--workdir", str(workdir), "--messages", "1500"), capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S, env=_env())
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert_quiet(out, MAX_DEMO_LINES)
    for shown in ("rows landed in Delta", "missing", "duplicated", "every message landed exactly once",
                  "hareplica query --workdir", "micro-batch 0:", "typed tables caught up"):
        assert shown in out, shown
    log = log_file_of(out).read_text()
    assert "Using Spark's default log4j profile" in log or " WARN " in log, log[:2000]  # the JVM's output is there


def test_run_available_now_prints_its_own_lines_only(tmp_path, stored_broker):
    workdir = tmp_path / "w"
    proc = subprocess.run(_cli("run", "bronze", "--workdir", str(workdir), "--brokers",
                               f"broker-a={stored_broker.ha_addr}", "--trigger", "available-now"),
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=_env())
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert_quiet(out)
    assert int(SUMMARY.search(out).group(1)) == MESSAGES, out
    assert re.search(r"^  micro-batch 0: \d+ rows", out, re.M), out  # a progress line per micro-batch
    log_file_of(out)


def _landed_rows(status_file: Path) -> int:
    if not status_file.exists():
        return 0
    events = [json.loads(line) for line in status_file.read_text().splitlines() if line.strip()]
    return sum(int(e.get("numInputRows") or 0) for e in events if e.get("event") == "progress")


def test_max_runtime_stops_cleanly_and_exits_0(tmp_path, stored_broker):
    """``--max-runtime``: Spark's ``awaitTermination(timeout)``, then the query is stopped between micro-batches;
    the run lands everything, prints its summary and exits 0 (``--timeout-s`` printed an error and exited 1)."""
    workdir = tmp_path / "w"
    started = time.monotonic()
    proc = subprocess.run(_cli("run", "bronze", "--workdir", str(workdir), "--brokers",
                               f"broker-a={stored_broker.ha_addr}", "--trigger", "1s", "--max-runtime", "25"),
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=_env())
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert time.monotonic() - started >= 25
    assert_quiet(out)
    assert "error" not in out.lower(), out
    assert int(SUMMARY.search(out).group(1)) == MESSAGES, out
    assert "stopped after --max-runtime 25" in out, out


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_sigterm_and_ctrl_c_stop_cleanly_and_exit_0(tmp_path, stored_broker, how):
    """SIGTERM (a service manager's stop, to the command's process) or Ctrl-C (a terminal's SIGINT, to its whole
    process group) once the messages landed: the query stops as ``query.stop()`` does and the run prints its
    summary, exit 0 (a SIGTERM printed about 125 lines, 20 of them stacks)."""
    workdir = tmp_path / "w"
    with open(tmp_path / "out.txt", "w+") as sink:
        proc = subprocess.Popen(_cli("run", "bronze", "--workdir", str(workdir), "--brokers",
                                     f"broker-a={stored_broker.ha_addr}", "--trigger", "1s"),
                                stdout=sink, stderr=subprocess.STDOUT, text=True, env=_env(), start_new_session=True)
        try:
            deadline = time.monotonic() + CLI_TIMEOUT_S
            while _landed_rows(workdir / "status" / "bronze.jsonl") < MESSAGES:
                assert proc.poll() is None, (tmp_path / "out.txt").read_text()[-4000:]
                assert time.monotonic() < deadline, "the messages never landed"
                time.sleep(0.2)
            time.sleep(2)  # a micro-batch or two without data: the stop comes between triggers or in one
            if how == "SIGTERM":
                proc.send_signal(signal.SIGTERM)
            else:  # the group a terminal's foreground job is: the command and every process it started there
                os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=120)
        finally:
            kill_session(proc)
        sink.seek(0)
        out = sink.read()
    assert code == 0, out[-4000:]
    assert_quiet(out)
    assert int(SUMMARY.search(out).group(1)) == MESSAGES, out
    assert f"stopped by {'SIGTERM' if how == 'SIGTERM' else 'SIGINT'}" in out, out
