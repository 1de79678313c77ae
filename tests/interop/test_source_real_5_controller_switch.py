"""A query that follows real RocketMQ 5.5.0 master switches (issue 20 §3).

A real 5.5.0 name server and controller and two real 5.5.0 brokers in controller mode of one broker set
(``broker-a``, ``allAckInSyncStateSet=true``, 1 MiB CommitLog files): the controller elects one master, the other
replicates from it over AutoSwitch HA. A producer keeps sending to whichever broker is master while a
``format("hareplica")`` query (``brokers`` = the first broker, ``slaves`` = the second: the set's members) runs
with a processing-time trigger. Five times, a batch's sink SIGKILLs the master *before* the batch's data is read
— and only when the controller could then elect the other broker (:func:`electable`: both alive in the
controller's SyncStateSet at the master's epoch and in the master's own, the slave caught up; 5.5.0 elects from
nothing else) — so the batch planned against the old master is fetched after its death: the tasks find the broker the
controller elected (a new epoch) and read the rest from it, the driver plans on from it, and the killed broker is
restarted and rejoins as a slave (truncating to the common point). In the end every message the producer got
SEND_OK for is in the rows once, the rows are exactly what 5.5.0's ``MessageDecoder`` decodes from the final
master's CommitLog (nothing lost, nothing twice, no byte of a truncated tail), and every switch is recorded in
the batch end offsets with its epoch and the old master's lost tail (if any).
"""

from __future__ import annotations

import json
import threading

import pytest

from connector.client.ha_autoswitch import NO_REPORT, probe_master
from connector.client.producer import Producer
from connector.errors import BrokerAdminError, DataLossError, HAReplicaError
from connector.options.parse import SourceOptions
from connector.protocol.remoting import RemotingCommand
from connector.source import HAReplicaStreamReader, read_partition
from connector.source.driver.controller_mode import SWITCH_KEY
from tests.interop.peers import FILE_SIZE, message_decoder_rows, produce_bytes
from tests.interop.test_source_real_5_controller import _sendable
from tests.interop.test_source_real_peers import assert_rows_equal_decoder
from tests.support.brokers import broker_config, max_offset, remoting_request, wait_for
from tests.support.jvm_peers import ROCKETMQ5_LIB, RealBroker, RealController, RealNameServer, killed_at_exit

SWITCHES = 5
TOPIC = "Interop5Switch"
#: how long the controller may take to elect once the master died: at once when its channel closes, else after
#: the broker's heartbeat timeout (controllerHeartBeatTimeoutMills, 10 s) and the controller's scan
#: (scanNotActiveBrokerInterval, 5 s); a slave also asks every syncBrokerMetadataPeriod (5 s). 120 s is four times
#: the sum, for a loaded 2-core machine.
ELECTION_TIMEOUT_S = 120


def _role(broker: RealBroker) -> str | None:
    try:
        return broker_config(broker.remoting_addr).get("brokerRole")
    except Exception:  # noqa: BLE001 - down or starting
        return None


def _max(broker: RealBroker) -> int | None:
    try:
        return max_offset(broker.remoting_addr)
    except Exception:  # noqa: BLE001
        return None


class Sender(threading.Thread):
    """Sends ``seq=<n>`` messages one at a time to whichever broker says it is master; keeps the SEND_OK ones."""

    def __init__(self, brokers: list[RealBroker]):
        super().__init__(daemon=True, name="switch-sender")
        self.brokers = brokers
        self.stop = threading.Event()
        self.ok: list[bytes] = []
        self.failed = 0
        self.seq = 0

    def run(self) -> None:
        while not self.stop.is_set():
            master = next((b for b in self.brokers if b.is_running() and (_role(b) or "").endswith("MASTER")), None)
            if master is None:
                self.stop.wait(0.2)
                continue
            try:
                with Producer(master.remoting_addr, "interop5_switch_pg") as producer:
                    while not self.stop.is_set():
                        body = f"seq={self.seq};".encode() + bytes(400)
                        self.seq += 1
                        result = producer.send(TOPIC, body, keys=f"k{self.seq}")
                        if result.send_status != "SEND_OK":
                            self.failed += 1
                            break
                        self.ok.append(body)
                        self.stop.wait(0.01)
            except Exception:  # noqa: BLE001 - the master died or was demoted: find the new one
                self.failed += 1
                self.stop.wait(0.2)


@pytest.fixture
def broker_set(tmp_path):
    """(name server, controller, [two controller-mode brokers of broker-a]) — all SIGKILLed at the end."""
    with killed_at_exit(RealNameServer.start(tmp_path / "ns")) as ns, \
            killed_at_exit(RealController.start(tmp_path / "ctl")) as ctl:
        common = dict(version="5", namesrvAddr=ns.addr, enableControllerMode=True, controllerAddr=ctl.addr,
                      brokerName="broker-a", mappedFileSizeCommitLog=FILE_SIZE, allAckInSyncStateSet=True)
        brokers = [RealBroker.start(tmp_path / f"b{i}", **common) for i in (1, 2)]
        try:
            yield ns, ctl, brokers
        finally:
            for b in brokers:
                b.kill9()


def _snapshot_offsets(checkpoint, into: dict[int, dict]) -> None:
    """Add the source's end offset of every batch in the checkpoint's offset log (one JSON line per source) to
    ``into`` by batch id: Spark keeps only the newest 100 batches there, so the test snapshots it as it goes."""
    for path in (checkpoint / "offsets").iterdir():
        if path.name.isdigit() and int(path.name) not in into:
            lines = path.read_text().splitlines()
            if len(lines) >= 3:
                into[int(path.name)] = json.loads(lines[2])


#: RequestCode.CONTROLLER_GET_SYNC_STATE_DATA (5.5.0): body a JSON list of broker names, answer BrokerReplicasInfo
GET_SYNC_STATE_DATA = 1006
#: RequestCode.GET_BROKER_HA_STATUS (5.5.0), to a broker: answer HARuntimeInfo (a master's HA connections and
#: ``inSyncSlaveNums``, the size of its own SyncStateSet less itself)
GET_BROKER_HA_STATUS = 907


def replicas_info(ctl: RealController, broker_name: str = "broker-a") -> dict:
    """The controller's ReplicasInfo of ``broker_name`` (CONTROLLER_GET_SYNC_STATE_DATA): ``masterAddress``,
    ``masterEpoch``, ``syncStateSetEpoch``, ``inSyncReplicas`` and ``notInSyncReplicas`` (each with
    ``brokerAddress`` and ``alive``, the controller's heartbeat view). Raises AssertionError on an error answer."""
    resp = remoting_request(ctl.addr, RemotingCommand.request(GET_SYNC_STATE_DATA,
                                                              body=json.dumps([broker_name]).encode()))
    assert resp.code == 0, f"CONTROLLER_GET_SYNC_STATE_DATA: {resp.code} {resp.remark}"
    return json.loads(resp.body)["replicasInfoTable"][broker_name]


def sync_state_set(ctl: RealController, broker_name: str = "broker-a") -> set[str]:
    """The remoting addresses of the alive brokers the controller holds in ``broker_name``'s SyncStateSet: only
    these can be elected master (5.x's default ``enableElectUncleanMaster=false``). Raises AssertionError on an
    error answer."""
    return {r["brokerAddress"] for r in replicas_info(ctl, broker_name)["inSyncReplicas"] if r["alive"]}


def describe(info: dict) -> str:
    """One line of a ReplicasInfo for a failure message: master, epochs, who is in the SyncStateSet, who is alive."""
    def members(key: str) -> str:
        return ", ".join(f"{r['brokerAddress']}{'' if r['alive'] else ' (not alive)'}" for r in info[key]) or "-"
    return (f"master {info.get('masterAddress')} epoch {info.get('masterEpoch')}, SyncStateSet epoch "
            f"{info.get('syncStateSetEpoch')} [{members('inSyncReplicas')}], "
            f"not in it [{members('notInSyncReplicas')}]")


def ha_status(broker: RealBroker) -> dict:
    """The broker's HARuntimeInfo (GET_BROKER_HA_STATUS). Raises AssertionError on an error answer."""
    resp = remoting_request(broker.remoting_addr, RemotingCommand.request(GET_BROKER_HA_STATUS))
    assert resp.code == 0, f"GET_BROKER_HA_STATUS: {resp.code} {resp.remark}"
    return json.loads(resp.body)


def _in_sync(brokers: list[RealBroker], ctl: RealController | None = None) -> tuple[RealBroker, RealBroker]:
    """Both up, one master, and the slave holds what the master held a moment before: the master is read first,
    the slave after it, so sends going on meanwhile do not hide a slave in sync; with ``ctl``, the controller
    also has both in the SyncStateSet (a slave that caught up is added a few seconds later, and a master killed
    before that leaves no member the controller may elect). Returns ``(master, slave)``; raises AssertionError
    naming the roles, offsets or SyncStateSet seen otherwise (``wait_for`` shows the last one on a time-out)."""
    roles = [_role(b) for b in brokers]
    if sorted(roles, key=str) != ["SLAVE", "SYNC_MASTER"]:
        raise AssertionError(f"roles {roles}")
    master, slave = (brokers, brokers[::-1])[roles[1] == "SYNC_MASTER"]
    master_max = _max(master)
    slave_max = _max(slave)
    if master_max is None or slave_max is None or slave_max < master_max:
        raise AssertionError(f"master {master.remoting_addr} at {master_max}, "
                             f"slave {slave.remoting_addr} at {slave_max}")
    if ctl is not None and not {b.remoting_addr for b in brokers} <= (in_set := sync_state_set(ctl)):
        raise AssertionError(f"the controller's SyncStateSet is {sorted(in_set)}")
    return master, slave


def electable(brokers: list[RealBroker], ctl: RealController) -> RealBroker:
    """The master, if the controller would elect the slave were the master to die now; else AssertionError naming
    what is missing. The controller elects only from the SyncStateSet it holds at the master's death, so beyond
    :func:`_in_sync` (roles, the slave caught up, both alive in the controller's SyncStateSet):

    * the controller's master is the broker that says SYNC_MASTER, at the epoch its epoch file ends with (the
      controller and the broker are at the same election);
    * the master's own SyncStateSet holds the slave too (``inSyncSlaveNums``): a master that dropped the slave
      (its connection closed, or not caught up for ``haMaxTimeSlaveNotCatchup``) sends the controller the smaller
      set a moment later, and a master killed then leaves no member to elect. 5.5.0's master drops a slave that
      just caught up when an HA connection opens or closes while the slave acks (hareplica's learners do so a few
      times a second): ``AutoSwitchHAService.computeConfirmOffset`` iterates the connection list unlocked, the
      ConcurrentModificationException ends the slave's ReadSocketService (store.log), and the slave is back in
      the set some 10 s later, after its reconnect and catch-up;
    * the controller's answer is read again after the master's, so a change between them is seen.
    """
    master, slave = _in_sync(brokers, ctl)
    info = replicas_info(ctl)
    epoch = probe_master(master.ha_addr, NO_REPORT).handshake.last_epoch
    if info["masterAddress"] != master.remoting_addr or info["masterEpoch"] != epoch:
        raise AssertionError(f"{master.remoting_addr} is master at epoch {epoch}; the controller: {describe(info)}")
    status = ha_status(master)
    if status["inSyncSlaveNums"] < 1:
        raise AssertionError(f"master {master.remoting_addr} holds no slave in its SyncStateSet ({status}); the "
                             f"controller: {describe(info)}")
    again = replicas_info(ctl)
    if (again["masterEpoch"], again["syncStateSetEpoch"]) != (info["masterEpoch"], info["syncStateSetEpoch"]) or \
            slave.remoting_addr not in {r["brokerAddress"] for r in again["inSyncReplicas"] if r["alive"]}:
        raise AssertionError(f"the controller changed meanwhile: {describe(again)}")
    return master


def _not_killed(deferred: list[str]) -> None:
    """Raise AssertionError with why the last batch asked to kill the master did not (``wait_for`` shows it)."""
    raise AssertionError(deferred[-1] if deferred else "no batch asked yet")


def _new_master(brokers: list[RealBroker], victim: RealBroker, ctl: RealController) -> bool:
    """True once a broker other than ``victim`` says SYNC_MASTER; else AssertionError with what the controller
    holds (``wait_for`` shows the last one on a time-out)."""
    if any(_role(b) == "SYNC_MASTER" for b in brokers if b is not victim):
        return True
    raise AssertionError(f"no new master; the controller: {describe(replicas_info(ctl))}")


@pytest.mark.spark
def test_the_query_follows_five_master_switches_losing_and_duplicating_nothing(hareplica_spark_session, broker_set,
                                                                               tmp_path):
    _, ctl, brokers = broker_set
    wait_for(lambda: _in_sync(brokers, ctl), "the controller to elect a master and the other to follow it",
             timeout_s=90, interval_s=0.5)
    sender = Sender(brokers)
    sender.start()
    wait_for(lambda: len(sender.ok) >= 50 or None, "the first sends", timeout_s=60, interval_s=0.2)

    end_offsets: dict[int, dict] = {}  # batch id -> the source's end offset
    kill_next = threading.Event()
    killed: list[tuple[int, RealBroker]] = []
    deferred: list[str] = []  # why a batch asked to kill did not: the controller could not have elected then
    batches: list[tuple[int, list[dict]]] = []

    def collect(df, batch_id):
        if kill_next.is_set():
            try:
                master = electable(brokers, ctl)
            except (AssertionError, OSError, ValueError, KeyError, HAReplicaError, BrokerAdminError) as exc:
                deferred.append(f"batch {batch_id}: {exc}")  # a later batch kills, once the controller could elect
            else:
                kill_next.clear()
                master.kill9()  # the batch was planned against it; its data is read only below
                killed.append((batch_id, master))
        batches.append((batch_id, [r.asDict(recursive=False) for r in df.selectExpr(
            "*", "unix_millis(bornTimestamp) AS bornMs", "unix_millis(storeTimestamp) AS storeMs").collect()]))

    b1, b2 = brokers
    query = (hareplica_spark_session.readStream.format("hareplica")
             .option("brokers", f"broker-a={b1.ha_addr}/{b1.remoting_addr}")
             .option("slaves", f"broker-a={b2.ha_addr}/{b2.remoting_addr}")
             .option("maxBytesPerTrigger", str(256 * 1024))
             .option("maxOutageMs", "60000")
             .load().writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="1 second").start())
    try:
        for n in range(SWITCHES):
            wait_for(lambda: _in_sync(brokers, ctl), f"both brokers in sync before switch {n + 1}", timeout_s=120,
                     interval_s=0.5)
            seen = len(batches)
            wait_for(lambda s=seen: len(batches) > s + 1 or None, "the query to go on", timeout_s=120, interval_s=0.2)
            kill_next.set()
            wait_for(lambda k=n: len(killed) > k or _not_killed(deferred),
                     f"a batch to kill the master (switch {n + 1})", timeout_s=120, interval_s=0.2)
            victim = killed[-1][1]
            wait_for(lambda v=victim: _new_master(brokers, v, ctl),
                     f"the controller to elect a new master (switch {n + 1})", timeout_s=ELECTION_TIMEOUT_S,
                     interval_s=0.2)
            victim.restart()  # rejoins as a slave of the new master, truncating to the common point
            assert query.isActive, query.exception()
            _snapshot_offsets(tmp_path / "cp", end_offsets)
        wait_for(lambda: _in_sync(brokers, ctl), "both brokers in sync at the end", timeout_s=120, interval_s=0.5)
        sender.stop.set()
        sender.join(30)
        master = next(b for b in brokers if _role(b) == "SYNC_MASTER")
        wait_for(lambda: _in_sync(brokers, ctl), "the last sends replicated", timeout_s=60, interval_s=0.5)
        end = max_offset(master.remoting_addr)

        def reached():
            progress = query.lastProgress
            return progress and json.loads(progress["sources"][0]["endOffset"]).get("broker-a") == end or None

        wait_for(reached, "the query to read up to the final master's max offset", timeout_s=180, interval_s=0.5)
        assert query.isActive, query.exception()
        _snapshot_offsets(tmp_path / "cp", end_offsets)
    finally:
        query.stop()
        sender.stop.set()
        # kept with the peers' logs: each time a kill waited for the controller to be able to elect, and why
        (tmp_path / "deferred_kills.txt").write_text("".join(f"{d}\n" for d in deferred), encoding="utf-8")

    rows = [r for _, rs in batches for r in rs]
    offsets = [r["commitLogOffset"] for r in rows]
    assert len(offsets) == len(set(offsets)), "a record was landed twice"
    assert_rows_equal_decoder(rows, message_decoder_rows(master.commitlog_dir, ROCKETMQ5_LIB))
    bodies = [bytes(r["body"]) for r in rows if r["topic"] == TOPIC]
    assert set(sender.ok) <= set(bodies), "a message acknowledged SEND_OK is missing"
    assert len(killed) == SWITCHES and sender.failed > 0  # sends failed while there was no master

    switches = [s for _, end_offset in sorted(end_offsets.items()) for s in end_offset.get(SWITCH_KEY, {}).get(
        "broker-a", [])]
    unique = {(s["epoch"], s["to"]): s for s in switches}
    epochs = sorted(e for e, _ in unique)
    assert len(epochs) >= SWITCHES and epochs == sorted(set(epochs)), switches
    for s in unique.values():
        assert s["lost"] is None or (s["lost"][0] <= s["epochStartOffset"] and s["lost"][1] > s["lost"][0]), s


@pytest.fixture
def async_broker_set(tmp_path):
    """As :func:`broker_set`, with 5.x's default ``allAckInSyncStateSet=false``: a send is SEND_OK (and below
    confirmOffset) once the master has it, whether or not the slave does."""
    with killed_at_exit(RealNameServer.start(tmp_path / "ns")) as ns, \
            killed_at_exit(RealController.start(tmp_path / "ctl")) as ctl:
        common = dict(version="5", namesrvAddr=ns.addr, enableControllerMode=True, controllerAddr=ctl.addr,
                      brokerName="broker-a", mappedFileSizeCommitLog=FILE_SIZE)
        brokers = [RealBroker.start(tmp_path / f"b{i}", **common) for i in (1, 2)]
        try:
            yield brokers
        finally:
            for b in brokers:
                b.kill9()


def _land(reader, start: dict) -> tuple[dict, list[dict]]:
    """Plan one batch from ``start``, read its partitions as the executors would, commit it: (end, rows)."""
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    rows = [row for p in reader.partitions(start, end) for batch in read_partition(p) for row in batch.to_pylist()]
    reader.commit(end)
    return end, rows


def test_a_tail_the_new_master_never_received_is_named_lost(async_broker_set):
    """The slave is frozen while the master stores and the query lands more; the master is killed and the
    controller elects the (resumed) slave: the landed bytes past the new epoch's start were never on the new
    master. The next batch fails naming that range (failOnDataLoss), or with failOnDataLoss=false logs it and
    records the switch with the old master's lost tail in the end offset."""
    b1, b2 = async_broker_set
    wait_for(lambda: _in_sync([b1, b2]), "the controller to elect a master and the other to follow it",
             timeout_s=90, interval_s=0.5)
    master, slave = (b1, b2) if _role(b1) == "SYNC_MASTER" else (b2, b1)
    wait_for(lambda: _sendable(master.remoting_addr), "the master to store a send", timeout_s=60, interval_s=0.5)
    produce_bytes(master.remoting_addr, 100_000, seed=71)
    wait_for(lambda: _in_sync([b1, b2]), "the slave to catch up", timeout_s=60, interval_s=0.5)
    options = {"brokers": f"broker-a={master.ha_addr}/{master.remoting_addr}",
               "slaves": f"broker-a={slave.ha_addr}/{slave.remoting_addr}", "maxOutageMs": "60000"}
    strict = HAReplicaStreamReader(SourceOptions.from_options(options))
    lenient = HAReplicaStreamReader(SourceOptions.from_options({**options, "failOnDataLoss": "false"}))
    start = strict.initialOffset()
    end1, rows1 = _land(strict, start)
    assert end1 == _land(lenient, start)[0] and rows1
    replicated = _max(slave)
    slave.sigstop()  # the slave stops replicating; it stays in the sync state set for haMaxTimeSlaveNotCatchup
    try:
        produce_bytes(master.remoting_addr, 60_000, seed=72, start_seq=10_000)
        tail_end = _max(master)
        end2, rows2 = _land(strict, end1)
        assert _land(lenient, end1)[0] == end2
        assert end2["broker-a"] == tail_end > replicated  # landed: the master's confirmOffset is its max offset
        master.kill9()
    finally:
        slave.sigcont()
    wait_for(lambda: _role(slave) == "SYNC_MASTER" or None, "the controller to elect the slave", timeout_s=60,
             interval_s=0.2)
    # the new epoch starts where the slave's log ended: what it had before the freeze, plus what was already in
    # its socket buffer when it resumed
    epoch = probe_master(slave.ha_addr, 1 << 62).handshake.entries[-1]
    assert epoch.epoch == 2 and replicated <= epoch.start_offset < tail_end, (epoch, replicated, tail_end)
    with pytest.raises(DataLossError) as err:
        strict.latestOffset(end2, strict.getDefaultReadLimit())
    assert f"the query landed CommitLog bytes [{epoch.start_offset}, {tail_end}) from master {master.ha_addr}, " \
           f"which the new master {slave.ha_addr} (epoch 2 from offset {epoch.start_offset}) never received" \
           in str(err.value)
    end3 = lenient.latestOffset(end2, lenient.getDefaultReadLimit())
    assert end3[SWITCH_KEY] == {"broker-a": [{"from": master.ha_addr, "to": slave.ha_addr, "epoch": 2,
                                              "epochStartOffset": epoch.start_offset,
                                              "lost": [epoch.start_offset, tail_end]}]}
