"""Real RocketMQ 5.x brokers hareplica refuses: controller mode (AutoSwitch HA) and DLedger (issue 13 §3).

One real 5.5.0 controller (``ControllerStartup``, a DLedger controller group of one) with one real broker in
controller mode registered with it, and one real broker running a DLedger CommitLog (a group of one, ``n0``)
per module — no name server. Both serve requests (a send is SEND_OK), yet neither speaks the classic HA
protocol: ``format("hareplica")`` and ``hareplica run bronze`` fail at start with one line naming the mode,
read from the real broker's GET_BROKER_CONFIG answer (docs/real_peers.md, "RocketMQ 5.x").
"""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from broker_stub.launcher import free_port
from connector.client.admin import BrokerAdminClient, UnsupportedBrokerModeError
from connector.client.producer import Producer
from tests.faults.test_cli_errors import hareplica, one_line
from tests.integration.connector.conftest import run_stream
from tests.interop.peers import FILE_SIZE
from tests.support.brokers import broker_config, wait_for
from tests.support.jvm_peers import RealBroker, RealController

CONTROLLER_MESSAGE = "runs in controller (AutoSwitch) mode (enableControllerMode=true)"
DLEDGER_MESSAGE = "runs a DLedger CommitLog (enableDLegerCommitLog=true)"


# These processes keep nothing worth a clean stop (10-20 s each for the shutdown hooks): killed at the end.

@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    ctl = RealController.start(tmp_path_factory.mktemp("real-5-controller"))
    try:
        yield ctl
    finally:
        ctl.kill9()


@pytest.fixture(scope="module")
def controller_mode_broker(tmp_path_factory, controller):
    broker = RealBroker.start(tmp_path_factory.mktemp("real-5-controller-mode"), version="5", namesrvAddr="",
                              enableControllerMode=True, controllerAddr=controller.addr,
                              mappedFileSizeCommitLog=FILE_SIZE)
    try:
        # the controller elects it master of its broker set (a set of one); until then sends are refused
        wait_for(lambda: broker_config(broker.remoting_addr).get("brokerRole") == "SYNC_MASTER" or None,
                 "the controller to elect the 5.x broker master", timeout_s=60, interval_s=0.5)
        yield broker
    finally:
        broker.kill9()


@pytest.fixture(scope="module")
def dledger_broker(tmp_path_factory):
    broker = RealBroker.start(tmp_path_factory.mktemp("real-5-dledger"), version="5", namesrvAddr="",
                              enableDLegerCommitLog=True, dLegerGroup="broker-a", dLegerSelfId="n0",
                              dLegerPeers=f"n0-127.0.0.1:{free_port()}", mappedFileSizeCommitLog=FILE_SIZE)
    try:
        yield broker
    finally:
        broker.kill9()


@pytest.fixture(scope="module", params=["controller", "dledger"])
def refused(request) -> tuple[RealBroker, str]:
    """(a real 5.x broker in a mode hareplica refuses, the message's distinctive part)."""
    if request.param == "controller":
        return request.getfixturevalue("controller_mode_broker"), CONTROLLER_MESSAGE
    return request.getfixturevalue("dledger_broker"), DLEDGER_MESSAGE


def test_the_real_broker_serves_and_says_its_mode_in_get_broker_config(refused):
    broker, message = refused
    with Producer(broker.remoting_addr, "interop5_modes_pg") as producer:
        assert producer.send("Interop5Modes", b"stored").send_status == "SEND_OK"
    with BrokerAdminClient(broker.remoting_addr, 5000) as admin:
        config = admin.broker_config()
        with pytest.raises(UnsupportedBrokerModeError) as err:
            admin.check_classic_ha(config)
    assert f"broker {broker.remoting_addr} {message}" in str(err.value)


@pytest.mark.spark
def test_format_hareplica_fails_at_start(hareplica_spark_session, refused, tmp_path):
    broker, message = refused
    with pytest.raises(StreamingQueryException) as err:
        run_stream(hareplica_spark_session, tmp_path / "cp",
                   {"brokers": f"broker-a={broker.ha_addr}/{broker.remoting_addr}"}, timeout_s=60)
    assert f"UnsupportedBrokerModeError: broker {broker.remoting_addr} {message}" in str(err.value)


@pytest.mark.spark
def test_hareplica_run_bronze_fails_at_start_with_one_line(controller_mode_broker, tmp_path):
    broker = controller_mode_broker
    result = hareplica("run", "bronze", "--workdir", str(tmp_path / "w"), "--trigger", "available-now",
                       "--brokers", f"broker-a={broker.ha_addr}/{broker.remoting_addr}", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]  # refused by the preflight, before Spark starts
    line = one_line(result)
    assert f"UnsupportedBrokerModeError: broker {broker.remoting_addr} {CONTROLLER_MESSAGE}" in line, line
