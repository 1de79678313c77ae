"""``format("hareplica")`` reading a real RocketMQ 5.5.0 master in controller mode over AutoSwitch HA (issue 20 §2).

One real 5.5.0 controller (``ControllerStartup``, a DLedger controller group of one) and one real 5.5.0 broker in
controller mode that it elects master of ``broker-a`` (epoch 1), 1 MiB CommitLog files, per module; no name
server. The source handshakes with the master's AutoSwitch HA port as an async learner (docs/protocol.md §10)
and reads its CommitLog: the bytes equal the broker's files, the rows equal 5.5.0's own ``MessageDecoder``,
a crash between batches and a restart from the checkpoint lose and duplicate nothing, and ``hareplica run``'s
preflight accepts the broker (it used to refuse it with UnsupportedBrokerModeError).
"""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from connector.client.admin import BrokerAdminClient
from connector.client.ha import HARangeFetcher
from connector.client.ha_autoswitch import probe_master
from connector.client.producer import Producer
from connector.options.parse import SourceOptions
from connector.protocol.ha_autoswitch import EpochEntry
from streaming_apps.preflight import check_brokers
from tests.integration.connector.conftest import run_stream
from tests.interop.peers import FILE_SIZE, MiB, message_decoder_rows, produce_bytes
from tests.interop.test_source_real_peers import assert_bodies_are_the_sent_ones, assert_rows_equal_decoder
from tests.support.brokers import broker_config, max_offset, wait_for
from tests.support.jvm_peers import ROCKETMQ5_LIB, RealBroker, RealController, killed_at_exit


def _sendable(addr: str) -> bool:
    """True once the broker stores a send (right after election it answers TIMEOUT_CLEAN_QUEUE for a moment);
    raises AssertionError with the refusal (wait_for shows the last one)."""
    try:
        with Producer(addr, "interop5_ctl_probe_pg") as producer:
            status = producer.send("Interop5CtlProbe", b"probe").send_status
    except Exception as exc:  # noqa: BLE001 - any refusal: not yet
        raise AssertionError(f"send refused: {exc!r}") from None
    assert status == "SEND_OK", status
    return True


@pytest.fixture(scope="module")
def elected(tmp_path_factory):
    """(real 5.5.0 master elected by a real controller, [(topic, body)] sent, commitLogMaxOffset)."""
    workdir = tmp_path_factory.mktemp("real-5-controller-source")
    with killed_at_exit(RealController.start(workdir / "controller")) as controller, \
            killed_at_exit(RealBroker.start(workdir / "broker", version="5", namesrvAddr="", enableControllerMode=True,
                                            controllerAddr=controller.addr,
                                            mappedFileSizeCommitLog=FILE_SIZE)) as master:
        wait_for(lambda: broker_config(master.remoting_addr).get("brokerRole") == "SYNC_MASTER" or None,
                 "the controller to elect the 5.x broker master", timeout_s=60, interval_s=0.5)
        wait_for(lambda: _sendable(master.remoting_addr), "the elected master to store a send", timeout_s=60,
                 interval_s=0.5)
        sent = produce_bytes(master.remoting_addr, int(2.4 * MiB), seed=61)
        yield master, sent, max_offset(master.remoting_addr)


@pytest.fixture(scope="module")
def decoded(elected) -> list[dict]:
    """Every record of the master's CommitLog as 5.5.0's own MessageDecoder reads it."""
    return message_decoder_rows(elected[0].commitlog_dir, ROCKETMQ5_LIB)


def _brokers(master: RealBroker) -> str:
    return f"broker-a={master.ha_addr}/{master.remoting_addr}"


def test_the_fetcher_reads_the_masters_files_byte_for_byte_over_autoswitch_ha(elected, decoded):
    master, _, end = elected
    files = b"".join(p.read_bytes() for p in sorted(master.commitlog_dir.iterdir()) if p.name.isdigit())
    assert end > 2 * FILE_SIZE  # two roll-overs at least
    with HARangeFetcher(master.ha_addr, 0, end, protocol="autoswitch", broker="broker-a") as fetcher:
        got = b"".join(bytes(chunk) for _, chunk in fetcher)
    assert got == files[:end]
    # the master's handshake: one epoch (its election) from offset 0; the learner reported 0 only
    assert fetcher.handshake.entries == (EpochEntry(fetcher.handshake.last_epoch, 0),)
    assert fetcher.handshake.master_max_offset == end and fetcher.confirm_offset == end
    assert (fetcher.min_reported_offset, fetcher.max_reported_offset) == (0, 0)
    # a range from a record in the middle of file 1 to the middle of file 2
    lo = next(d["commitLogOffset"] for d in decoded if d["commitLogOffset"] > FILE_SIZE + 1000)
    hi = next(d["commitLogOffset"] for d in decoded if d["commitLogOffset"] > 2 * FILE_SIZE + 1000)
    with HARangeFetcher(master.ha_addr, lo, hi, protocol="autoswitch", broker="broker-a") as fetcher:
        assert b"".join(bytes(chunk) for _, chunk in fetcher) == files[lo:hi]
    assert (fetcher.min_reported_offset, fetcher.max_reported_offset) == (lo, lo)
    state = probe_master(master.ha_addr, lo)
    assert (state.confirm_offset, state.handshake.master_max_offset) == (end, end)


@pytest.mark.spark
def test_earliest_from_the_controller_mode_master_equals_its_message_decoder(hareplica_spark_session, elected,
                                                                             decoded, tmp_path):
    master, sent, end = elected
    run = run_stream(hareplica_spark_session, tmp_path / "cp", {"brokers": _brokers(master),
                                                                "startingOffsets": "earliest",
                                                                "includeSystemTopics": "true"})
    assert run.end_offsets[-1]["broker-a"] == end
    assert min(r["commitLogOffset"] for r in run.rows) == 0
    assert len({r["commitLogOffset"] // FILE_SIZE for r in run.rows}) >= 3
    assert_rows_equal_decoder(run.rows, decoded)
    assert_bodies_are_the_sent_ones(run.rows, sent)


@pytest.mark.spark
def test_crash_and_restart_from_the_checkpoint_lose_and_duplicate_nothing(hareplica_spark_session, elected, decoded,
                                                                          tmp_path):
    master, _, end = elected
    options = {"brokers": _brokers(master), "includeSystemTopics": "true", "maxBytesPerTrigger": str(FILE_SIZE // 2)}
    crashed: list = []
    with pytest.raises(StreamingQueryException, match="simulated crash in batch 2"):
        run_stream(hareplica_spark_session, tmp_path / "cp", options, fail_on_batch=2, collected=crashed)
    assert [b for b, _ in crashed] == [0, 1]
    restarted = run_stream(hareplica_spark_session, tmp_path / "cp", options)
    assert [b for b, _ in restarted.batches][:1] == [2]
    rows = [r for _, rows in crashed for r in rows] + restarted.rows
    offsets = [r["commitLogOffset"] for r in rows]
    assert len(offsets) == len(set(offsets))  # nothing twice
    assert restarted.end_offsets[-1]["broker-a"] == end
    assert_rows_equal_decoder(rows, decoded)  # nothing lost


def test_the_preflight_of_hareplica_run_accepts_the_controller_mode_master(elected):
    master = elected[0]
    with BrokerAdminClient(master.remoting_addr, 5000) as admin:
        assert admin.ha_protocol() == "autoswitch"
    check_brokers(SourceOptions.from_options({"brokers": _brokers(master)}))  # raises PreflightError if refused
