"""`hareplica broker ...` forwards its arguments to the broker stub; `produce` fails cleanly."""

from __future__ import annotations

import pytest

from streaming_apps.cli import main
from tests.support.brokers import free_port


def test_broker_subcommand_forwards_options_to_the_broker_stub(tmp_path, capsys):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-z\nlistenPort=20911\nstorePathRootDir={tmp_path}/store\n")
    assert main(["broker", "-c", str(conf), "-p"]) == 0
    out = capsys.readouterr().out
    assert "brokerName=broker-z" in out and "listenPort=20911" in out


def test_unknown_arguments_of_other_subcommands_are_rejected(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["inspect-commitlog", "x", "--bogus"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_produce_to_a_closed_port_reports_the_address(capsys):
    port = free_port()
    assert main(["produce", "--broker-addr", f"127.0.0.1:{port}", "--topic", "T", "--count", "1"]) == 2
    assert f"127.0.0.1:{port}" in capsys.readouterr().err


CONSOLE_MAIN = """
import atexit, sys
atexit.register(lambda: sys.stdout.write("atexit handler ran\\n"))
from streaming_apps.cli import console_main
sys.argv[0] = "hareplica"
console_main()
"""


def _console(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", CONSOLE_MAIN, *args], capture_output=True, text=True, timeout=120)


def test_the_console_command_keeps_exit_codes_output_and_atexit_handlers(fixture_dir):
    """console_main ends the process with os._exit: the exit code, every buffered output line and the atexit
    handlers must survive it (fails when the streams are not flushed or the handlers not run)."""
    ok = _console("inspect-commitlog", str(fixture_dir / "commitlog"))
    assert ok.returncode == 0, ok.stderr[-2000:]
    lines = ok.stdout.splitlines()
    records = (fixture_dir / "messages.jsonl").read_text().splitlines()
    assert lines[-1] == "atexit handler ran"
    assert len(lines) - 1 >= len(records) and lines[-2].startswith("{")  # the whole dump, then the handler's line
    failed = _console("inspect-commitlog", str(fixture_dir / "no-such-folder"))
    assert failed.returncode == 1
    assert "no-such-folder does not exist" in failed.stderr and failed.stdout == "atexit handler ran\n"
    usage = _console("inspect-commitlog")  # argparse's SystemExit takes Python's own exit
    assert usage.returncode == 2 and "atexit handler ran" in usage.stdout
