"""``hareplica read`` errors for people (issue 49): bad input is one ``error:`` line naming its cause, exit 2, no
traceback, also when Spark finds it while planning the read (before, the message was read after the
SparkContext stopped: a 70-line traceback ending in ``AssertionError``); Spark's own lines go to the log file the
command names, as ``hareplica run``'s do (docs/cli.md "hareplica read", "The console and the log file").

Real processes: the CLI in a subprocess of its own (its own Spark), stub brokers and a stub name server.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.test_cli_errors import stored_broker  # noqa: F401 - fixture
from tests.support.brokers import wait_for
from tests.support.fixtures import namesrv_factory  # noqa: F401 - fixture

CLI_TIMEOUT_S = 300
#: a line of Spark's log4j (``26/12/01 22:25:34 WARN Utils: ...``), of the JVM or of a Java stack
SPARK_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) |^WARNING: |log4j|"
                        r"^\s+at [\w$.]+\(|Exception in thread")


def hareplica(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streaming_apps.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line on stderr; no Python traceback, no Java stack, no Spark log line anywhere."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, f"stderr:\n{result.stderr[-4000:]}"
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr, result.stderr[-4000:]
    assert not [line for line in lines if SPARK_LINE.search(line)], result.stderr[-4000:]
    return errors[0]


@pytest.mark.spark
def test_a_start_inside_a_record_found_while_spark_plans_is_one_line_and_exit_2(tmp_path, stored_broker):  # noqa: F811
    """The start is checked where the batch read plans, inside Spark: its HAReplicaOptionError is the line (before:
    an AssertionError traceback, the cause lost), and Spark's WARN lines are in the log file, not on the console."""
    result = hareplica("read", "--workdir", str(tmp_path / "w"), "--brokers", f"broker-a={stored_broker.ha_addr}",
                       "--starting-offsets", '{"broker-a": 5}', cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-4000:]
    line = error_line(result)
    assert line.startswith("error: HAReplicaOptionError: option startingOffsets="), line
    assert "offset 5 of broker broker-a is not the start of a record" in line, line
    assert "suspect the checkpoint" not in line, line  # a batch read has none
    log_file = tmp_path / "w" / "logs" / "read.log"
    others = [x for x in result.stderr.splitlines() if x.strip() and not x.startswith("error:")]
    assert others == [f"Spark's and py4j's log: {log_file}"], others
    assert re.search(r" WARN ", log_file.read_text(errors="replace")), "Spark's lines are in the log file"


def test_a_route_whose_master_does_not_answer_is_one_line_and_exit_2(tmp_path, broker_factory,
                                                                   namesrv_factory):  # noqa: F811
    """The name server routes to a master that accepts connections and never answers (stopped with SIGSTOP): the
    range cannot be fixed without that set, so the read is refused naming it (before: Spark started and failed on
    a startingOffsets the command had written itself, with an AssertionError traceback)."""
    from tests.integration.connector.test_source_namesrv import _route_has

    ns = namesrv_factory()
    broker = broker_factory("a", namesrvAddr=ns.addr, brokerName="broker-a", brokerClusterName="StubCluster")
    wait_for(lambda: _route_has(ns.addr, "broker-a"), "broker-a registered")
    os.kill(broker.process.pid, signal.SIGSTOP)
    try:
        result = hareplica("read", "--workdir", str(tmp_path / "w"), "--namesrv-addr", ns.addr, "--option",
                           "readTimeoutMs=2000", cwd=tmp_path)
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
    assert result.returncode == 2, result.stderr[-4000:]
    line = error_line(result)
    assert "broker-a" in line and broker.remoting_addr in line and ns.addr in line, line
    assert not (tmp_path / "w" / "logs").exists()  # refused before Spark started


def test_a_silent_master_is_one_line_and_exit_2(tmp_path):
    """``--brokers`` naming a remoting port that accepts connections and never answers: refused once
    ``maxOutageMs`` has passed, naming the broker and the timeout."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as silent:
        addr = f"127.0.0.1:{silent.getsockname()[1]}"
        result = hareplica("read", "--workdir", str(tmp_path / "w"), "--brokers", f"broker-a=127.0.0.1:1/{addr}",
                           "--option", "readTimeoutMs=1000", "--option", "maxOutageMs=0", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-4000:]
    line = error_line(result)
    assert f"broker broker-a remoting {addr}: unreachable" in line and "timed out" in line, line
    assert not (tmp_path / "w" / "logs").exists()
