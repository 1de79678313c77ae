"""Plain ACL: the real RocketMQ 4.9.8 Java client with ``AclClientRPCHook`` against the broker stub and a real
4.9 broker side by side, both with ``aclEnable=true`` and the same ``plain_acl.yml`` (issue 15 item 1,
docs/security.md "Plain ACL on the remoting port").

Each broker has its own real name server. The same cases run against both: right keys → SEND_OK and consumed;
wrong secret, unknown key, missing permission, no keys at all, and an account whose ``whiteRemoteAddress``
does not match → refused with the same response code and the same AclException message (the real broker
appends the Java stack frame); an account whose ``whiteRemoteAddress`` matches is let in without a valid
signature on both.
"""

from __future__ import annotations

from connector.client.producer import Producer
from connector.protocol.acl import AclCredentials
from tests.support.brokers import BrokerProcess
from tests.support.java_tools import run_java
from tests.support.jvm_peers import RealBroker, RealNameServer

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
  - accessKey: producer1
    secretKey: producer-secret
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB|SUB
      - SubOnly=SUB
    groupPerms:
      - deniedGroup=DENY
  - accessKey: whitelisted
    secretKey: white-secret
    whiteRemoteAddress: 127.0.0.1
  - accessKey: farwhite1
    secretKey: far-secret
    whiteRemoteAddress: 192.168.9.*
    defaultTopicPerm: PUB
"""
CASES = ";".join([
    "right_keys:producer1:producer-secret:AclTopic",
    "wrong_secret:producer1:not-the-secret:AclTopic",
    "unknown_key:nobody99:whatever1:AclTopic",
    "missing_permission:producer1:producer-secret:SubOnly",
    "no_keys:-:-:AclTopic",
    "white_address_matches:whitelisted:not-the-secret:AclTopic",
    "white_address_differs:farwhite1:not-the-secret:AclTopic",
])
EXPECTED = {
    "right_keys": "SEND_OK",
    "wrong_secret": "Check signature failed for accessKey=producer1",
    "unknown_key": "No acl config for nobody99",
    "missing_permission": "No default permission for topic:SubOnly",
    "no_keys": "No accessKey is configured",
    "white_address_matches": "SEND_OK",
    "white_address_differs": "Check signature failed for accessKey=farwhite1",
}
ACL_EXC = "org.apache.rocketmq.acl.common.AclException: "


def _run_cases(namesrv_addr: str, log_dir) -> dict[str, dict]:
    run = run_java("JavaAclClient", [f"namesrv={namesrv_addr}", f"cases={CASES}",
                                     "consume=producer1:producer-secret:AclTopic:acl_cg:2"],
                   log_dir=log_dir, timeout_s=120)
    return {line["case"]: line for line in run.lines}


def test_real_java_acl_client_gets_the_same_answers_from_stub_and_real_broker(tmp_path, real_namesrv):
    stub_home = tmp_path / "stub-home"
    (stub_home / "conf").mkdir(parents=True)
    (stub_home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    real_dir = tmp_path / "real-broker"
    (real_dir / "rocketmq_home" / "conf").mkdir(parents=True)  # RealBroker's ROCKETMQ_HOME
    (real_dir / "rocketmq_home" / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)

    stub_ns = RealNameServer.start(tmp_path / "stub-namesrv")
    try:
        with BrokerProcess.start(tmp_path / "stub", aclEnable="true", rocketmqHome=str(stub_home),
                                 namesrvAddr=stub_ns.addr) as stub, \
                RealBroker.start(real_dir, aclEnable="true", namesrvAddr=real_namesrv.addr) as real:
            answers = {"stub": _run_cases(stub_ns.addr, tmp_path / "java-stub"),
                       "real": _run_cases(real_namesrv.addr, tmp_path / "java-real")}
            for side, lines in answers.items():
                for case, want in EXPECTED.items():
                    line = lines[case]
                    if want == "SEND_OK":
                        assert line["status"] == "SEND_OK", (side, line)
                    else:
                        assert (line["status"], line["code"]) == ("EXCEPTION", 1), (side, line)
                        assert line["error"].startswith(ACL_EXC + want), (side, line)
                consumed = lines["consume"]
                assert consumed["count"] == 2, (side, consumed)
                assert sorted(consumed["bodies"].split(",")) == ["body-right_keys", "body-white_address_matches"]
            for case in EXPECTED:  # the stub's remark is the real one without the Java stack frame
                stub_line, real_line = answers["stub"][case], answers["real"][case]
                if stub_line["status"] != "SEND_OK":
                    assert real_line["error"].startswith(stub_line["error"] + ", org.apache.rocketmq.acl."), case
            # the project's own producer signs as the Java hook does: accepted by both brokers
            for addr in (stub.remoting_addr, real.remoting_addr):
                with Producer(addr, credentials=AclCredentials("producer1", "producer-secret")) as p:
                    assert p.send("AclTopic", b"python").send_status == "SEND_OK"
    finally:
        stub_ns.kill9()
