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
    assert main(["produce", "--broker", f"127.0.0.1:{port}", "--topic", "T", "--count", "1"]) == 1
    assert f"127.0.0.1:{port}" in capsys.readouterr().err
