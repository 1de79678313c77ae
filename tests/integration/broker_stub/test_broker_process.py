"""The broker process: start-up, SIGTERM/SIGINT shutdown, abort/lock files, start-up errors."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from connector.client.producer import Producer
from tests.support.brokers import BrokerProcess, broker_config, free_port, runtime_info, wait_for


def test_sigterm_flushes_removes_abort_and_exits_zero(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=65536)
    abort = broker.store_dir / "abort"
    assert abort.exists()
    with Producer(broker.remoting_addr) as p:
        p.send("TopicA", b"persist me")
    assert broker.stop() == 0
    assert not abort.exists()
    assert (broker.store_dir / "checkpoint").stat().st_size == 4096
    assert "store shut down clean=True" in broker.log_path.read_text()


def test_sigint_also_shuts_down_cleanly(broker_factory):
    broker = broker_factory()
    broker.process.send_signal(signal.SIGINT)
    assert broker.process.wait(timeout=10) == 0
    assert not (broker.store_dir / "abort").exists()


def test_kill9_leaves_the_abort_file(broker_factory):
    broker = broker_factory()
    broker.kill9()
    assert (broker.store_dir / "abort").exists()


def test_second_broker_on_the_same_store_is_refused(broker_factory, tmp_path):
    first = broker_factory("a")
    conf = tmp_path / "b.conf"
    conf.write_text(f"listenPort={free_port()}\nhaListenPort={free_port()}\n"
                    f"storePathRootDir={first.store_dir}\n")
    out = subprocess.run([sys.executable, "-m", "broker_stub", "-c", str(conf)], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 1
    assert "locked by another broker" in out.stderr


def test_bad_config_exits_2_and_busy_port_exits_1(broker_factory, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("brokerRole=SLAVE\nbrokerId=0\n")
    out = subprocess.run([sys.executable, "-m", "broker_stub", "-c", str(conf)], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 2 and "a SLAVE's brokerId must be > 0" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    running = broker_factory("running")
    conf.write_text(f"listenPort={running.listen_port}\nhaListenPort={free_port()}\n"
                    f"storePathRootDir={tmp_path / 'other'}\n")
    out = subprocess.run([sys.executable, "-m", "broker_stub", "-c", str(conf)], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 1
    (error,) = [line for line in out.stderr.splitlines() if "level=ERROR" in line]
    assert error.endswith(f"broker cannot start: [Errno 98] listenPort={running.listen_port} on 127.0.0.1: "
                          "Address already in use"), error
    assert not (tmp_path / "other" / "abort").exists()


def test_print_config_lists_every_key(tmp_path):
    conf = tmp_path / "p.conf"
    conf.write_text("brokerName=broker-z\nlistenPort=20911\n")
    out = subprocess.run([sys.executable, "-m", "broker_stub", "-c", str(conf), "-p"], capture_output=True,
                         text=True, timeout=20)
    assert out.returncode == 0
    lines = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert lines["brokerName"] == "broker-z" and lines["haListenPort"] == "20912"
    assert len(lines) > 170


def test_get_broker_config_and_runtime_info_over_the_wire(broker_factory, fixture_dir):
    broker = broker_factory(mappedFileSizeCommitLog=65536, brokerClusterName="LocalCluster")
    cfg = broker_config(broker.remoting_addr)
    assert cfg["mappedFileSizeCommitLog"] == "65536"
    assert cfg["listenPort"] == str(broker.listen_port) and cfg["haListenPort"] == str(broker.ha_port)
    assert cfg["brokerRole"] == "ASYNC_MASTER" and cfg["brokerClusterName"] == "LocalCluster"
    info = runtime_info(broker.remoting_addr)
    import json
    real = json.loads((fixture_dir / "runtime_info.json").read_text())
    real_keys = {k.replace("STORE_ROOT/master/commitlog", str(broker.commitlog_dir)) for k in real}
    assert real_keys - set(info) == set()
    assert info["commitLogMinOffset"] == "-1" and info["commitLogMaxOffset"] == "0"
    assert info["brokerVersion"] == "409" and info["brokerVersionDesc"] == "V4_9_8"
    assert int(info["bootTimestamp"]) <= time.time() * 1000
    with Producer(broker.remoting_addr) as p:
        r = p.send("TopicA", b"x" * 100)
        p.send_batch("TopicA", [b"a", b"b"])
    info = runtime_info(broker.remoting_addr)
    assert info["commitLogMinOffset"] == "0"
    assert int(info["commitLogMaxOffset"]) > int(r.offset_msg_id[-16:], 16)
    assert info["msgPutTotalTodayNow"] == "3" and info["putMessageTimesTotal"] == "3"
    assert int(info["putMessageSizeTotal"]) == int(info["commitLogMaxOffset"])


def test_brokerprocess_restart_and_context_manager(tmp_path):
    with BrokerProcess.start(tmp_path / "cm") as broker:
        pid = broker.pid
        broker.restart()
        assert broker.pid != pid and broker.is_running()
    assert not broker.is_running() and broker.process.returncode == 0


def test_ha_port_defaults_to_listen_port_plus_one_and_honours_an_explicit_value(broker_factory):
    default = broker_factory("default")
    assert default.ha_port == default.listen_port + 1
    assert broker_config(default.remoting_addr)["haListenPort"] == str(default.listen_port + 1)
    explicit_port = free_port()
    explicit = broker_factory("explicit", haListenPort=explicit_port)
    assert explicit.ha_port == explicit_port != explicit.listen_port + 1
    assert broker_config(explicit.remoting_addr)["haListenPort"] == str(explicit_port)
    assert "haListenPort" in explicit.conf_path.read_text()


def test_broker_log_lines_are_single_line_key_values(broker_factory):
    broker = broker_factory()

    def started() -> list[str] | None:  # written after the ports open, which is when the launcher returns
        lines = [line for line in broker.log_path.read_text().splitlines() if line.startswith("ts=")]
        return lines if any("level=INFO logger=broker_stub.broker broker started" in ln for ln in lines) else None

    lines = wait_for(started, "the 'broker started' log line")
    assert all(" level=" in line and " logger=" in line for line in lines)
    # at INFO, one start-up line naming the role, the ports and the store (the parts' own lines are at DEBUG)
    (line,) = [ln for ln in lines if "level=INFO" in ln]
    assert (f"brokerRole=ASYNC_MASTER listen=127.0.0.1:{broker.listen_port} ha=127.0.0.1:{broker.ha_port} "
            "storePathRootDir=") in line, line
