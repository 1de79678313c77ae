"""The status report for stub brokers and for real 4.9.8 brokers (which lack the stub's HA keys)."""

from __future__ import annotations

import json

from broker_stub.namesrv import main as namesrv_main
from broker_stub.status import format_status


def test_real_4_9_8_runtime_info_shows_n_a_for_stub_keys(fixture_dir):
    info = json.loads((fixture_dir / "runtime_info.json").read_text())
    text = format_status("127.0.0.1:20911", info)
    assert "role                 n/a (not a stub broker)" in text
    assert "commitLogMaxOffset   3,402,931" in text
    assert "push2SlaveMaxOffset  n/a" in text and "haConnections        n/a" in text


def test_stub_master_and_slave_reports():
    conns = [{"peer": "127.0.0.1:5000", "slaveAckOffset": 900, "lagBytes": 100, "msSinceLastRead": 12,
              "bytesSent": 900, "requestedOffsetMissing": True}]
    master = {"brokerRole": "SYNC_MASTER", "brokerId": "0", "commitLogMinOffset": "0", "commitLogMaxOffset": "1000",
              "push2SlaveMaxOffset": "900", "haConnectionCount": "1", "haConnections": json.dumps(conns)}
    text = format_status("h:1", master)
    line = next(li for li in text.splitlines() if "127.0.0.1:5000" in li)
    assert line.split() == ["127.0.0.1:5000", "900", "100", "12", "900", "true"]
    slave = {"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": "h:2", "slaveConnected": "false",
             "masterPhyOffset": "-1", "haConnections": "[]", "haConnectionCount": "0"}
    text = format_status("h:3", slave)
    assert "haMasterAddress      h:2" in text and "slaveConnected       false" in text


def test_name_server_with_an_unreadable_config_exits_one(tmp_path):
    assert namesrv_main(["-c", str(tmp_path / "missing.conf")]) == 1
