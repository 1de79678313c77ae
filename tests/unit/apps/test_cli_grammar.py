"""The ``hareplica`` command's grammar and console (issue 54, docs/cli.md "Grammar and exit codes"), run as a user
runs it: the real command in a subprocess, its output piped. Before: ``run --namesrv-addr`` with no name server
started Spark and failed after it (exit 1); ``hareplica broker --help`` said ``usage: broker_stub``; ``--broker``
meant an address in ``produce`` and a name in ``restore``; piped output was wrapped at 80 columns; ``--help``
left some defaults out."""

from __future__ import annotations

import subprocess
import sys

from tests.support.brokers import free_port
from tests.support.fixtures import namesrv_factory  # noqa: F401 - fixture


def hareplica(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streaming_apps.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_run_with_a_dead_or_empty_name_server_is_refused_before_spark_in_one_line(namesrv_factory,  # noqa: F811
                                                                                    tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    result = hareplica("run", "bronze", "-n", dead, "--workdir", str(tmp_path / "w"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [f"error: NameServerError: no name server answered GET_BROKER_CLUSTER_INFO "
                                          f"(106): {dead}: [Errno 111] Connection refused"]
    assert not (tmp_path / "w" / "logs").exists()  # Spark never started
    ns = namesrv_factory()
    result = hareplica("run", "bronze", "--namesrv-addr", ns.addr, "--workdir", str(tmp_path / "w"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: NameServerError: name server {ns.addr} has no broker set in its "
                                          "route (clusters: any cluster)"]


def test_help_names_the_command_as_hareplica_and_shows_defaults(tmp_path):
    broker = hareplica("broker", "--help", cwd=tmp_path)
    assert broker.stdout.startswith("usage: hareplica broker "), broker.stdout
    status = hareplica("broker", "status", "--help", cwd=tmp_path)
    assert status.stdout.startswith("usage: hareplica broker status "), status.stdout
    assert "-b BROKER_ADDR, --broker-addr BROKER_ADDR" in status.stdout
    inspect = " ".join(hareplica("inspect-commitlog", "--help", cwd=tmp_path).stdout.split())
    assert "(records at or after it) (default 0)" in inspect and "a readable summary (default jsonl)" in inspect
    produce = " ".join(hareplica("produce", "--help", cwd=tmp_path).stdout.split())
    assert "-b BROKER, --broker-addr BROKER" in produce and "-t TOPIC, --topic TOPIC" in produce
    for command in ("run", "read", "status"):
        assert "-n HOST:PORT[;HOST:PORT], --namesrv-addr" in hareplica(command, "--help", cwd=tmp_path).stdout


def test_an_old_spelling_works_with_a_one_line_notice(tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    result = hareplica("produce", "--broker", dead, "-t", "T", "--count", "1", cwd=tmp_path)
    assert result.returncode == 2
    notice, error = result.stderr.splitlines()
    assert notice == "hareplica produce: --broker is deprecated and goes in the next release; use --broker-addr"
    assert error.startswith(f"error: --broker-addr {dead}: ")


def test_piped_output_is_not_wrapped(tmp_path):
    """rich wraps at 80 columns when stdout is not a terminal; the command's lines stay whole."""
    import pyarrow as pa
    from deltalake import write_deltalake

    table = tmp_path / ("table-" + "x" * 60)
    write_deltalake(str(table), pa.table({"a": [1, 2]}))
    result = hareplica("maintain", str(table), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"maintained {table}: version ") and len(line) > 120, line
