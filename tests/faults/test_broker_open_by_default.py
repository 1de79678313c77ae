"""A broker open to the network says so once at start (issue 22 item 8, docs/security.md "Hardening checklist").

RocketMQ 4.9.8's defaults (no ACL, no HA lists) let anonymous clients run admin commands and any HA peer
read every message and, on a SYNC_MASTER, ack sends. The stub keeps those defaults for compatibility but,
when it listens beyond loopback with them, logs one WARNING line naming the exposure and the keys that close
it. On loopback, or with those keys set, it says nothing.
"""

from __future__ import annotations

import pytest

from tests.support.brokers import wait_for

MARK = "broker open to the network as RocketMQ 4.9.8 is by default"


def _warnings(broker) -> list[str]:
    wait_for(lambda: "broker started" in broker.log_path.read_text(), "the broker to finish starting")
    return [line for line in broker.log_path.read_text().splitlines() if MARK in line]


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER"])
def test_listening_beyond_loopback_with_the_open_defaults_is_one_warning_naming_the_keys(broker_factory, role):
    broker = broker_factory("open", brokerIP1="0.0.0.0", brokerRole=role)
    lines = _warnings(broker)
    assert len(lines) == 1, lines
    line = lines[0]
    assert "level=WARNING" in line
    assert f"remoting 0.0.0.0:{broker.props['listenPort']}" in line and "DELETE_EXPIRED_COMMITLOG" in line
    assert "serves the whole CommitLog to any peer" in line
    assert "aclEnable=true with plain_acl.yml" in line and "haAllowedAddresses" in line
    assert ("haReplicaAddresses" in line) == (role == "SYNC_MASTER")  # acks matter where producers wait for them
    assert "docs/security.md, 'Hardening checklist'" in line


def test_loopback_only_is_not_warned_about(broker_factory):
    broker = broker_factory("loopback", brokerRole="SYNC_MASTER")  # brokerIP1 127.0.0.1, the stub's default
    assert _warnings(broker) == []


def test_a_hardened_broker_beyond_loopback_is_not_warned_about(broker_factory, tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("accounts:\n  - accessKey: hareplica-admin\n"
                                                 "    secretKey: 12345678\n    admin: true\n")
    broker = broker_factory("hardened", brokerIP1="0.0.0.0", brokerRole="SYNC_MASTER", aclEnable="true",
                            rocketmqHome=str(home), haAllowedAddresses="127.0.0.1", haReplicaAddresses="127.0.0.1")
    assert _warnings(broker) == []
