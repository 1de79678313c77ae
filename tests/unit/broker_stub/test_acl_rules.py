"""Plain-ACL rules of the broker stub as RocketMQ 4.9.8 reads them (docs/security.md "Plain ACL")."""

from __future__ import annotations

import pytest

from broker_stub.name_rules import validate_group
from broker_stub.remoting.acl import (
    DENY,
    PUB,
    SUB,
    AclError,
    PlainAclConfig,
    RemoteAddressPattern,
    check_permission,
    needed_resources,
    parse_perm,
)
from connector.protocol.acl import AclCredentials, calc_signature, credentials, signature_content
from connector.protocol.remoting import RemotingCommand, RequestCode


@pytest.mark.parametrize("pattern, yes, no", [
    ("", [], ["127.0.0.1"]),
    ("*", ["1.2.3.4"], []),
    ("192.168.0.*", ["192.168.0.1", "192.168.0.255"], ["192.168.1.1"]),
    ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
    ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.9", "192.168.1.21"]),
    ("10.0.0.{1,3}", ["10.0.0.1", "10.0.0.3"], ["10.0.0.2"]),
    ("10.0.0.1,10.0.0.2", ["10.0.0.2"], ["10.0.0.3"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
])
def test_white_remote_address_patterns(pattern, yes, no):
    p = RemoteAddressPattern(pattern)
    assert all(p.match(ip) for ip in yes) and not any(p.match(ip) for ip in no)


@pytest.mark.parametrize("bad", ["10.0.0.300-301", "10.0.*", "fe80::1-2"])
def test_unreadable_white_addresses_are_refused(bad):
    with pytest.raises(AclError, match="whiteRemoteAddress"):
        RemoteAddressPattern(bad)


def test_permissions_as_4_9_8():
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == PUB | SUB
    assert parse_perm(None) == parse_perm("bogus") == parse_perm("DENY") == DENY
    assert check_permission(SUB, PUB | SUB) and not check_permission(PUB, SUB)
    assert not check_permission(SUB, DENY | SUB)


def test_needed_resources_of_requests():
    send = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "T1"})
    assert needed_resources(send) == {"T1": PUB}
    retry = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "cg", "b": "%RETRY%cg"})
    assert needed_resources(retry) == {"%RETRY%cg": SUB}
    pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "g"})
    assert needed_resources(pull) == {"T": SUB, "%RETRY%g": SUB}
    hb = RemotingCommand.request(RequestCode.HEART_BEAT, body=b'{"consumerDataSet":[{"groupName":"g",'
                                 b'"subscriptionDataSet":[{"topic":"T"}]}]}')
    assert needed_resources(hb) == {"%RETRY%g": SUB, "T": SUB}
    with pytest.raises(AclError, match="HeartbeatData"):
        needed_resources(RemotingCommand.request(RequestCode.HEART_BEAT, body=b"\xff"))


def test_signature_covers_sorted_values_then_body():
    ext = {"b": "2", "a": "1", "Signature": "old"}
    assert signature_content(ext, b"BODY") == b"12BODY"
    signed = AclCredentials("ak123456", "sk123456").sign({"topic": "T"}, b"x")
    assert signed["AccessKey"] == "ak123456"
    assert signed["Signature"] == calc_signature(b"ak123456T" + b"x", "sk123456")
    assert "sk123456" not in repr(AclCredentials("ak123456", "sk123456"))
    assert credentials(None, None) is None
    with pytest.raises(ValueError, match="together"):
        credentials("ak", None)


def test_plain_acl_yml_loads_accounts_and_rejects_bad_entries(tmp_path):
    f = tmp_path / "plain_acl.yml"
    f.write_text("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    groupPerms: [gA=DENY]\n")
    acc = PlainAclConfig.load(f).accounts["RocketMQ"]
    assert acc.secret_key == "12345678" and acc.perms == {"%RETRY%gA": DENY} and not acc.admin
    f.write_text("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [noequals]\n")
    with pytest.raises(AclError, match=r"accounts\[0\]: topicPerms entry 'noequals' is not Res=Perm"):
        PlainAclConfig.load(f)
    assert PlainAclConfig.load(tmp_path / "missing.yml").accounts == {}


def test_group_names():
    assert validate_group("CID_ok-1%|") is None
    assert "illegal characters" in validate_group("../x")
    assert "longer than 255" in validate_group("g" * 256)
    assert "blank" in validate_group(" ")
