"""``format("hareplica")`` against an ACL-enabled broker (issue 15, docs/security.md "Running the source
against an ACL-enabled broker"): with ``accessKey``/``secretKey`` the driver's signed remoting calls plan
the batches and every message arrives; without them the query fails naming the ACL refusal, and the
secret never appears in what the query reports."""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from connector.client.producer import Producer
from connector.protocol.acl import AclCredentials
from tests.integration.connector.conftest import run_stream

pytestmark = pytest.mark.spark

PLAIN_ACL = """\
accounts:
  - accessKey: reader1
    secretKey: reader-secret-123
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
READER = AclCredentials("reader1", "reader-secret-123")


@pytest.fixture
def acl_broker(broker_factory, tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return broker_factory(aclEnable="true", rocketmqHome=str(home))


def test_signed_source_reads_every_message_and_unsigned_is_refused(hareplica_spark, acl_broker, tmp_path):
    bodies = [f"acl-{i}".encode() for i in range(50)]
    with Producer(acl_broker.remoting_addr, credentials=READER) as producer:
        for body in bodies:
            producer.send("AclTopic", body)
    brokers = f"broker-a={acl_broker.ha_addr}/{acl_broker.remoting_addr}"

    run = run_stream(hareplica_spark, tmp_path / "signed", {
        "brokers": brokers, "accessKey": "reader1", "secretKey": "reader-secret-123", "subscribe": "AclTopic"})
    assert sorted(bytes(r["body"]) for r in run.rows) == sorted(bodies)
    assert "reader-secret-123" not in str(run.progress)

    with pytest.raises(StreamingQueryException, match="AclException") as err:
        run_stream(hareplica_spark, tmp_path / "unsigned", {"brokers": brokers, "subscribe": "AclTopic"})
    assert "reader-secret-123" not in str(err.value)
