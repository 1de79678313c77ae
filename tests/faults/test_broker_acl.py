"""RocketMQ 4.9.8 plain ACL on the broker stub (issue 15 item 1, docs/security.md "Plain ACL on the remoting
port"), with the stub's own Python clients signing requests.

Before: ``aclEnable=true`` was accepted and ignored — an unsigned send was stored and any client could run
DELETE_EXPIRED_COMMITLOG or overwrite any group's offsets. Real Java clients against a real 4.9 broker are
compared in tests/interop/test_acl_real_clients.py.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from connector.client.admin import BrokerAdminClient
from connector.client.producer import MQBrokerException, Producer
from connector.errors import BrokerAdminError
from connector.protocol.acl import AclCredentials
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import BrokerStartError, remoting_request, wait_for

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB|SUB
      - SubOnly=SUB
    groupPerms:
      - badGroup=DENY
"""
ADMIN = AclCredentials("rocketmq2", "12345678")
USER = AclCredentials("producer1", "producer-secret")
ACL_EXC = "org.apache.rocketmq.acl.common.AclException: "


@pytest.fixture
def acl_broker(broker_factory, tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    broker = broker_factory(aclEnable="true", rocketmqHome=str(home))
    broker.acl_file = home / "conf" / "plain_acl.yml"
    return broker


def _send_error(broker, credentials, topic: str) -> tuple[int, str]:
    with Producer(broker.remoting_addr, credentials=credentials) as p:
        with pytest.raises(MQBrokerException) as err:
            p.send(topic, b"x")
    return err.value.code, err.value.remark


def test_unsigned_wrong_and_unpermitted_requests_are_refused_as_4_9_8_refuses_them(acl_broker):
    b = acl_broker
    with Producer(b.remoting_addr, credentials=USER) as p:
        assert p.send("AclTopic", b"signed").send_status == "SEND_OK"
    assert _send_error(b, None, "AclTopic") == (ResponseCode.SYSTEM_ERROR, ACL_EXC + "No accessKey is configured")
    assert _send_error(b, AclCredentials("producer1", "wrong-secret"), "AclTopic") == (
        ResponseCode.SYSTEM_ERROR, ACL_EXC + "Check signature failed for accessKey=producer1")
    assert _send_error(b, AclCredentials("nobody99", "whatever1"), "AclTopic") == (
        ResponseCode.SYSTEM_ERROR, ACL_EXC + "No acl config for nobody99")
    assert _send_error(b, USER, "SubOnly") == (ResponseCode.SYSTEM_ERROR,
                                               ACL_EXC + "No default permission for topic:SubOnly")
    assert _send_error(b, USER, "OtherTopic")[1] == ACL_EXC + "No default permission for topic:OtherTopic"

    def offset_update(creds, group: str) -> RemotingCommand:
        cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": "AclTopic", "queueId": 0, "commitOffset": 5})
        if creds is not None:
            creds.sign(cmd.ext_fields, cmd.body)
        return remoting_request(b.remoting_addr, cmd)

    assert offset_update(None, "anyGroup").code == ResponseCode.SYSTEM_ERROR
    refused = offset_update(USER, "badGroup")
    assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR,
                                              ACL_EXC + "No default permission for group:badGroup")
    assert offset_update(USER, "goodGroup").code == ResponseCode.SUCCESS
    # a tampered body fails the signature (the body is signed too)
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps({"clientID": "c"}).encode())
    USER.sign(cmd.ext_fields, cmd.body)
    cmd.body = json.dumps({"clientID": "d"}).encode()
    assert remoting_request(b.remoting_addr, cmd).remark == ACL_EXC + "Check signature failed for accessKey=producer1"
    assert "acl refused request peer=127.0.0.1:" in b.log_path.read_text()
    assert "producer-secret" not in b.log_path.read_text()


def test_admin_only_codes_need_an_admin_account(acl_broker):
    b = acl_broker
    with Producer(b.remoting_addr, credentials=USER) as p:
        p.send("AclTopic", b"x")
    ext = {"fileReservedTime": 0}
    for creds in (None, USER):
        with BrokerAdminClient(b.remoting_addr, credentials=creds) as admin, pytest.raises(BrokerAdminError) as err:
            admin.invoke(RequestCode.DELETE_EXPIRED_COMMITLOG, ext)
        assert "AclException" in str(err.value)
    assert f"Need admin permission for request code={RequestCode.DELETE_EXPIRED_COMMITLOG}" in str(err.value)
    with BrokerAdminClient(b.remoting_addr, credentials=ADMIN) as admin:
        assert admin.invoke(RequestCode.DELETE_EXPIRED_COMMITLOG, ext).code == ResponseCode.SUCCESS
        assert int(admin.runtime_info()["commitLogMaxOffset"]) > 0  # the source's admin calls, signed
    with BrokerAdminClient(b.remoting_addr, credentials=USER) as admin:  # non-admin: reading stats is allowed
        assert int(admin.runtime_info()["commitLogMaxOffset"]) > 0


def test_rules_reload_when_plain_acl_yml_changes(acl_broker):
    b = acl_broker
    assert _send_error(b, USER, "LaterTopic")[1].endswith("No default permission for topic:LaterTopic")
    b.acl_file.write_text(PLAIN_ACL.replace("- SubOnly=SUB", "- SubOnly=SUB\n      - LaterTopic=PUB"))
    st = b.acl_file.stat()
    os.utime(b.acl_file, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))

    def sent() -> bool:
        with Producer(b.remoting_addr, credentials=USER) as p:
            try:
                return p.send("LaterTopic", b"x").send_status == "SEND_OK"
            except MQBrokerException:
                time.sleep(0.2)
                return False

    wait_for(sent, "the changed plain_acl.yml to be reloaded", timeout_s=10)
    b.acl_file.write_text("accounts: [\n")  # broken: the last good rules stay
    with Producer(b.remoting_addr, credentials=USER) as p:  # the file is checked when requests come in
        def reload_failed() -> bool:
            assert p.send("LaterTopic", b"y").send_status == "SEND_OK"
            time.sleep(0.1)
            return "acl reload failed, keeping the previous rules" in b.log_path.read_text()

        wait_for(reload_failed, "the broken plain_acl.yml to be refused", timeout_s=10)


def test_acl_enable_without_home_or_with_bad_file_refuses_to_start(broker_factory, tmp_path, monkeypatch):
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    with pytest.raises(BrokerStartError, match="aclEnable=true needs rocketmqHome"):
        broker_factory("nohome", aclEnable="true")
    home = tmp_path / "badhome"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("accounts:\n  - accessKey: short\n    secretKey: x\n")
    with pytest.raises(BrokerStartError, match=r"accounts\[0\]: accessKey and secretKey must be longer than 6"):
        broker_factory("badfile", aclEnable="true", rocketmqHome=str(home))


def test_source_options_carry_credentials_to_the_remoting_calls(acl_broker):
    from connector.errors import HAReplicaOptionError
    from connector.options.parse import SourceOptions

    b = acl_broker
    with Producer(b.remoting_addr, credentials=USER) as p:
        p.send("AclTopic", b"x")
    brokers = f"broker-a={b.ha_addr}/{b.remoting_addr}"
    opts = SourceOptions.from_options({"brokers": brokers, "accessKey": "producer1", "secretKey": "producer-secret"})
    assert "producer-secret" not in repr(opts)
    with BrokerAdminClient(b.remoting_addr, opts.fetch.read_timeout_ms, opts.fetch.credentials) as admin:
        assert admin.commit_log_max_offset() > 0
    unsigned = SourceOptions.from_options({"brokers": brokers})
    with BrokerAdminClient(b.remoting_addr, 3000, unsigned.fetch.credentials) as admin, \
            pytest.raises(BrokerAdminError, match="No accessKey is configured"):
        admin.commit_log_max_offset()
    with pytest.raises(HAReplicaOptionError, match="option secretKey=.missing.: accessKey and secretKey must be"):
        SourceOptions.from_options({"brokers": brokers, "accessKey": "producer1"})
