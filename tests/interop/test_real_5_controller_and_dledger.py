"""A real RocketMQ 5.x broker hareplica refuses: a DLedger CommitLog (issue 13 §3, issue 20 §4).

One real 5.5.0 broker running a DLedger CommitLog (a group of one, ``n0``) per module — no name server. It
serves requests (a send is SEND_OK), yet has no HA port: its log replicates over DLedger's own protocol, with
entries wrapping the CommitLog records. ``format("hareplica")`` and ``hareplica run bronze`` fail at start with
one line naming the mode, read from the real broker's GET_BROKER_CONFIG answer (docs/real_peers.md, "RocketMQ
5.x"). A broker in controller mode used to be refused the same way; it is read now
(test_source_real_5_controller.py), and GET_BROKER_CONFIG tells the two apart.
"""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from broker_stub.launcher import free_port
from connector.client.admin import BrokerAdminClient
from connector.client.producer import Producer
from connector.errors import UnsupportedBrokerModeError
from tests.faults.test_cli_errors import hareplica, one_line
from tests.integration.connector.conftest import run_stream
from tests.interop.peers import FILE_SIZE
from tests.support.jvm_peers import RealBroker

DLEDGER_MESSAGE = "runs a DLedger CommitLog (enableDLegerCommitLog=true)"


# These processes keep nothing worth a clean stop (10-20 s each for the shutdown hooks): killed at the end.

@pytest.fixture(scope="module")
def dledger_broker(tmp_path_factory):
    broker = RealBroker.start(tmp_path_factory.mktemp("real-5-dledger"), version="5", namesrvAddr="",
                              enableDLegerCommitLog=True, dLegerGroup="broker-a", dLegerSelfId="n0",
                              dLegerPeers=f"n0-127.0.0.1:{free_port()}", mappedFileSizeCommitLog=FILE_SIZE)
    try:
        yield broker
    finally:
        broker.kill9()


@pytest.fixture(scope="module")
def refused(dledger_broker) -> tuple[RealBroker, str]:
    """(the real 5.x broker hareplica refuses, the message's distinctive part)."""
    return dledger_broker, DLEDGER_MESSAGE


def test_the_real_broker_serves_and_says_its_mode_in_get_broker_config(refused):
    broker, message = refused
    with Producer(broker.remoting_addr, "interop5_modes_pg") as producer:
        assert producer.send("Interop5Modes", b"stored").send_status == "SEND_OK"
    with BrokerAdminClient(broker.remoting_addr, 5000) as admin:
        config = admin.broker_config()
        with pytest.raises(UnsupportedBrokerModeError) as err:
            admin.ha_protocol(config)
    assert f"broker {broker.remoting_addr} {message}" in str(err.value)


@pytest.mark.spark
def test_format_hareplica_fails_at_start(hareplica_spark_session, refused, tmp_path):
    broker, message = refused
    with pytest.raises(StreamingQueryException) as err:
        run_stream(hareplica_spark_session, tmp_path / "cp",
                   {"brokers": f"broker-a={broker.ha_addr}/{broker.remoting_addr}"}, timeout_s=60)
    assert f"UnsupportedBrokerModeError: broker {broker.remoting_addr} {message}" in str(err.value)


@pytest.mark.spark
def test_hareplica_run_bronze_fails_at_start_with_one_line(dledger_broker, tmp_path):
    broker = dledger_broker
    result = hareplica("run", "bronze", "--workdir", str(tmp_path / "w"), "--trigger", "available-now",
                       "--brokers", f"broker-a={broker.ha_addr}/{broker.remoting_addr}", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]  # refused by the preflight, before Spark starts
    line = one_line(result)
    assert f"UnsupportedBrokerModeError: broker {broker.remoting_addr} {DLEDGER_MESSAGE}" in line, line
