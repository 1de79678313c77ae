"""``format("hareplica")`` against master/slave broker sets of stub brokers: topic filters, reading from a
slave (also with the master dead), minInSyncSlaves, a master killed mid-read, retention data loss, acks on a
SYNC_MASTER, and brokers that do not speak the classic HA protocol."""

from __future__ import annotations

import json
import random
import re
import socketserver
import threading
import time
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from connector.client.producer import Producer
from connector.options.parse import SourceOptions
from connector.protocol.remoting import (
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_kv_table,
    encode_properties_body,
)
from connector.source import HAReplicaStreamReader, read_partition
from tests.integration.connector.conftest import brokers_option, run_stream
from tests.support.brokers import max_offset, remoting_request, runtime_info, wait_for, wait_for_offset

pytestmark = pytest.mark.spark

FILE = 64 * 1024


def produce(broker, count: int, start: int = 0, topics=("orders", "payments")) -> list[tuple[str, bytes]]:
    """Send ``count`` messages (bodies 200..2000 random bytes, every 9th 4x longer and so compressed by the
    producer) and return their (topic, body)s in CommitLog order."""
    sent = []
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        futures = []
        for i in range(start, start + count):
            topic = topics[i % len(topics)]
            body = f"m{i}:".encode() + random.Random(i).randbytes(200 + (i * 131) % 1800)
            if i % 9 == 0:
                body *= 4  # > 4096 bytes: compressed by the producer
            futures.append(producer.send_async(topic, body, keys=f"k{i}", properties={"seq": str(i)},
                                               wait_store_msg_ok=False))
            sent.append((topic, body))
        for f in futures:
            f.result(timeout=30)
    return sent


def rows_as_sent(rows: list[dict]) -> list[tuple[str, bytes]]:
    rows = sorted(rows, key=lambda r: r["commitLogOffset"])
    offsets = [r["commitLogOffset"] for r in rows]
    assert len(offsets) == len(set(offsets)), "a message was delivered twice"
    return [(r["topic"], bytes(r["body"])) for r in rows]


def start_pair(broker_factory, **extra):
    """A stub ASYNC master and its stub SLAVE (64 KiB mapped files)."""
    common = {"mappedFileSizeCommitLog": FILE, "haSendHeartbeatInterval": 300, **extra}
    master = broker_factory("master", **common)
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr, **common)
    wait_for(lambda: runtime_info(slave.remoting_addr)["slaveConnected"] == "true", "the slave to connect")
    return master, slave


def _log(broker) -> str:
    return Path(broker.log_path).read_text(encoding="utf-8", errors="replace")


def accepted_ha_connections(broker) -> int:
    """How many HA connections the stub accepted, from its own log."""
    return _log(broker).count("ha connection accepted")


def foreign_ha_connections(master, slave) -> int:
    """HA connections the master accepted from anyone but ``slave``'s own HA client (whose local addresses
    the slave logs at each connect, so a reconnect of the slave under load is not counted)."""
    slave_ends = set(re.findall(r"ha client connected master=\S+ local=(\S+)", _log(slave)))
    peers = re.findall(r"ha connection accepted peer=(\S+)", _log(master))
    return sum(peer not in slave_ends for peer in peers)


# --- item 1: topic filters ---------------------------------------------------------------------------
def test_topic_options_filter_records_on_the_executors(hareplica_spark, fixture_master, messages, tmp_path):
    base = {"brokers": brokers_option(fixture_master)}
    run = run_stream(hareplica_spark, tmp_path / "cp1", {**base, "subscribe": "FixOrders611,%DLQ%fixture_cg_20240611"})
    assert sorted(r["commitLogOffset"] for r in run.rows) == [
        m["commitLogOffset"] for m in messages if m["topic"] in ("FixOrders611", "%DLQ%fixture_cg_20240611")]
    run = run_stream(hareplica_spark, tmp_path / "cp2", {**base, "subscribePattern": "Q8Topic_.*|tOqx|.*_TOPIC_XXXX"})
    assert sorted(r["commitLogOffset"] for r in run.rows) == [
        m["commitLogOffset"] for m in messages if m["topic"] in ("Q8Topic_11", "tOqx")]  # system topic hidden
    run = run_stream(hareplica_spark, tmp_path / "cp3", {**base, "subscribePattern": ".*_TOPIC_XXXX",
                                                         "includeSystemTopics": "true"})
    assert {r["topic"] for r in run.rows} == {"SCHEDULE_TOPIC_XXXX"} and len(run.rows) == 14
    # the offsets still cover the whole CommitLog: filtered records are consumed, not re-read later
    assert run.end_offsets[-1] == {"broker-a": max_offset(fixture_master.remoting_addr)}


# --- reading from a slave, also with the master dead ---------------------------------------------------
def test_read_from_slave_and_go_on_when_the_master_dies(hareplica_spark, broker_factory, tmp_path):
    master, slave = start_pair(broker_factory)
    sent = produce(master, 200)
    end = max_offset(master.remoting_addr)
    assert end > 3 * FILE
    wait_for_offset(slave.remoting_addr, end)
    options = {"brokers": brokers_option(master), "slaves": f"broker-a={slave.ha_addr}", "readFrom": "slave"}
    master_conns = foreign_ha_connections(master, slave)  # the launcher's readiness probe
    run = run_stream(hareplica_spark, tmp_path / "cp1", options)
    assert rows_as_sent(run.rows) == sent
    assert run.end_offsets[-1] == {"broker-a": end}
    assert foreign_ha_connections(master, slave) == master_conns  # no reader connected to the master...
    assert accepted_ha_connections(slave) >= 4  # ... every mapped file was read from the slave
    master.kill9()
    # a new query while the master is down: planned from the slave alone, up to its last record
    dead = run_stream(hareplica_spark, tmp_path / "cp2", options)
    assert rows_as_sent(dead.rows) == sent
    assert dead.end_offsets[-1] == {"broker-a": end}


# --- item 7: minInSyncSlaves ---------------------------------------------------------------------------
def test_min_replicas_holds_batches_back_until_a_slave_has_the_bytes(hareplica_spark, broker_factory, tmp_path):
    master, slave = start_pair(broker_factory)
    options = {"brokers": brokers_option(master), "slaves": f"broker-a={slave.ha_addr}", "minInSyncSlaves": "1"}
    first = produce(master, 40)
    wait_for_offset(slave.remoting_addr, max_offset(master.remoting_addr))
    run = run_stream(hareplica_spark, tmp_path / "cp", options)
    assert rows_as_sent(run.rows) == first
    replicated = max_offset(slave.remoting_addr)
    slave.stop()
    second = produce(master, 40, start=40)
    held = run_stream(hareplica_spark, tmp_path / "cp", options)
    assert held.rows == [] and max_offset(master.remoting_addr) > replicated  # nothing a failover could lose
    slave.restart()
    wait_for_offset(slave.remoting_addr, max_offset(master.remoting_addr))
    released = run_stream(hareplica_spark, tmp_path / "cp", options)
    assert rows_as_sent(released.rows) == second


# --- the master killed mid-read ------------------------------------------------------------------------
def test_master_killed_mid_read_then_restarted_loses_and_duplicates_nothing(hareplica_spark, broker_factory,
                                                                           tmp_path):
    master = broker_factory("master", mappedFileSizeCommitLog=FILE)
    sent = produce(master, 200)
    options = {"brokers": brokers_option(master), "maxBytesPerTrigger": str(FILE), "maxOutageMs": "2000",
               "connectTimeoutMs": "1000", "readTimeoutMs": "3000"}
    delivered: list = []
    killed = threading.Event()

    def kill_in_batch_2(df, batch_id):
        if batch_id == 2:
            master.kill9()
            killed.set()
        rows = [r.asDict() for r in df.collect()]  # reads the batch: fails once the master is dead
        delivered.append((batch_id, rows))

    query = (hareplica_spark.readStream.format("hareplica").options(**options).load().writeStream
             .foreachBatch(kill_in_batch_2).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    try:
        with pytest.raises(StreamingQueryException, match=r"unreachable for \d+ ms .*longer than maxOutageMs=2000"):
            assert query.awaitTermination(180), "the query neither failed nor finished"
    finally:
        if query.isActive:
            query.stop()
    assert killed.is_set() and [b for b, _ in delivered] == [0, 1]
    master.restart()
    rest = run_stream(hareplica_spark, tmp_path / "cp", {k: v for k, v in options.items() if k != "maxOutageMs"})
    assert rest.batches[0][0] == 2  # batch 2 is replayed with the same range
    assert rows_as_sent([r for _, rows in delivered for r in rows] + rest.rows) == sent


# --- item 3: retention deleted bytes the query still needs ---------------------------------------------
def test_retention_data_loss_fails_or_skips(hareplica_spark, broker_factory, tmp_path):
    not_now = (time.localtime().tm_hour + 12) % 24  # no scheduled retention round during the test
    master = broker_factory("master", mappedFileSizeCommitLog=FILE, fileReservedTime=0, deleteWhen=f"{not_now:02d}")
    options = {"brokers": brokers_option(master)}
    first = produce(master, 30)
    assert rows_as_sent(run_stream(hareplica_spark, tmp_path / "cp", options).rows) == first
    checkpointed = max_offset(master.remoting_addr)
    second = produce(master, 100, start=30)
    response = remoting_request(master.remoting_addr, RemotingCommand.request(RequestCode.DELETE_EXPIRED_COMMITLOG))
    assert response.code == ResponseCode.SUCCESS
    min_offset = int(runtime_info(master.remoting_addr)["commitLogMinOffset"])
    assert min_offset > checkpointed
    with pytest.raises(StreamingQueryException,
                       match=rf"no longer holds CommitLog bytes \[{checkpointed}, {min_offset}\).*failOnDataLoss"):
        run_stream(hareplica_spark, tmp_path / "cp", options)
    skipped = run_stream(hareplica_spark, tmp_path / "cp", {**options, "failOnDataLoss": "false"})
    kept = rows_as_sent(skipped.rows)
    assert kept and kept == second[len(second) - len(kept):]  # exactly the messages still on the broker
    assert min(r["commitLogOffset"] for r in skipped.rows) == min_offset


# --- item 5: acks ---------------------------------------------------------------------------------------
def test_readers_never_acknowledge_past_their_range_start(hareplica_spark, broker_factory, tmp_path):
    master = broker_factory("master", brokerRole="SYNC_MASTER", mappedFileSizeCommitLog=FILE, slaveTimeout=500,
                            syncFlushTimeout=60000)
    produce(master, 150)
    end = max_offset(master.remoting_addr)
    # one executor task, driven by hand: keep its HA connection open and look at it from the master
    # (no receive-ahead thread, so the fetch waits for the consumer with its connection open)
    options = SourceOptions.from_options({"brokers": brokers_option(master), "haSendHeartbeatInterval": "50",
                                          "arrowMaxRecordsPerBatch": "5", "fetchPrefetchChunks": "0"})
    reader = HAReplicaStreamReader(options)
    part = reader.partitions({"broker-a": FILE}, {"broker-a": 2 * FILE})[0]
    batches = read_partition(part)
    next(batches)

    def our_connection():
        conns = json.loads(runtime_info(master.remoting_addr)["haConnections"])
        return conns[0] if len(conns) == 1 and conns[0]["slaveRequestOffset"] == FILE else None

    conn = wait_for(our_connection, "the reader's HA connection")
    wait_for(lambda: (our_connection() or {"msSinceLastRead": 1e9})["msSinceLastRead"] < 200, "keep-alive reports")
    with Producer(master.remoting_addr, timeout_ms=15000) as producer:
        result = producer.send("orders", b"must not be acknowledged by a reader")
    assert result.send_status == "FLUSH_SLAVE_TIMEOUT"  # the reader's acks never covered the new message
    conn = our_connection()
    assert conn["maxReportedOffset"] == conn["slaveAckOffset"] == FILE
    assert int(runtime_info(master.remoting_addr)["push2SlaveMaxOffset"]) == FILE
    assert sum(b.num_rows for b in batches) > 0  # the rest of the range still reads fine
    reader.stop()

    # a whole query: push2SlaveMaxOffset (the highest report any connection ever sent) is the highest
    # partition start, so no report passed its range's start
    run = run_stream(hareplica_spark, tmp_path / "cp", {"brokers": brokers_option(master)})
    ends = [e["broker-a"] for e in run.end_offsets]
    starts = [0] + ends[:-1]
    assert ends[-1] > end and all(e % FILE == 0 for e in ends[:-1])  # SYNC_MASTER: each batch ends at a file start
    partition_starts = {s for s, e in zip(starts, ends, strict=True) if e > s}
    assert int(runtime_info(master.remoting_addr)["push2SlaveMaxOffset"]) == max(partition_starts)


# --- item 4: brokers without the classic HA port --------------------------------------------------------
class FakeRemotingBroker(socketserver.ThreadingTCPServer):
    """A loopback remoting server answering GET_BROKER_CONFIG with ``config`` (a DLedger or controller-mode
    broker as far as the driver can tell; the stub refuses to start in those modes). Each connection is served
    by its own thread, as a broker serves its clients: the driver's admin client and its controller-mode probe
    hold connections at the same time."""

    daemon_threads = True

    def __init__(self, config: dict[str, str]):
        self.config = config
        super().__init__(("127.0.0.1", 0), _FakeRemotingConnection)
        self.addr = f"127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self):
        self.shutdown()
        self.server_close()


class _FakeRemotingConnection(socketserver.BaseRequestHandler):
    """One connection to :class:`FakeRemotingBroker`: GET_BROKER_CONFIG gets its config, any other request
    commitLogMin/MaxOffset 0."""

    def handle(self):
        self.request.settimeout(10)
        decoder = FrameDecoder()
        try:
            while data := self.request.recv(65536):
                for request in decoder.feed(data):
                    if request.code == RequestCode.GET_BROKER_CONFIG:
                        body = encode_properties_body(self.server.config)
                    else:
                        body = encode_kv_table({"commitLogMinOffset": "0", "commitLogMaxOffset": "0"})
                    self.request.sendall(request.response(ResponseCode.SUCCESS, body=body).encode())
        except OSError:
            pass


@pytest.mark.parametrize("config, message", [
    ({"enableDLegerCommitLog": "true", "brokerRole": "ASYNC_MASTER"}, "UnsupportedBrokerModeError: .*DLedger"),
    # controller mode is read (tests/interop/test_source_real_5_controller.py), from the member that is master:
    # a set whose only member says SLAVE is waited for (maxOutageMs), then fails naming why
    ({"enableControllerMode": "true", "brokerRole": "SLAVE"},
     "is no longer master and the controller has not elected another one yet"),
])
def test_dledger_and_controller_mode_brokers_fail_fast(hareplica_spark, tmp_path, config, message):
    fake = FakeRemotingBroker(config)
    try:
        host, port = fake.addr.split(":")
        with pytest.raises(StreamingQueryException, match=message):
            run_stream(hareplica_spark, tmp_path / "cp", {"brokers": f"broker-a={host}:{int(port) + 1}/{fake.addr}",
                                                          "maxOutageMs": "1000"}, timeout_s=60)
    finally:
        fake.close()


def test_a_batch_read_on_a_sync_master_waits_out_the_ack_window_before_its_partitions(broker_factory):
    """A batch read's end is fixed, so on a SYNC_MASTER it cannot end at the first unsettled mapped-file start as
    a micro-batch does (docs/source.md "Acknowledgements"): its planning returns only once every partition start
    was in a master sample at least the replica wait ago. Before, the partitions came at once, and the task of the
    last file reported its start while a producer of the bytes below could still be waiting for its ack."""
    from connector.source.batch_reader import HAReplicaBatchReader

    master = broker_factory("master", brokerRole="SYNC_MASTER", mappedFileSizeCommitLog=FILE, slaveTimeout=1500,
                            syncFlushTimeout=500)
    window_s = (1500 + 1000) / 1000  # max(slaveTimeout, syncFlushTimeout) + ACK_WINDOW_MARGIN_MS
    produce(master, 150)
    appended = time.monotonic()  # the last bytes are on the master: they were first seen at or after this
    reader = HAReplicaBatchReader(SourceOptions.from_options({"brokers": brokers_option(master)}))
    parts = reader.partitions()
    planned = time.monotonic()
    assert max(p.start for p in parts) >= 2 * FILE  # a partition reports a mapped-file start the sends just passed
    assert planned - appended >= window_s  # no producer of those bytes can still be waiting
    end = max_offset(master.remoting_addr)
    assert [(p.start, p.end) for p in parts] == [(lo, min(lo + FILE, end)) for lo in range(0, end, FILE)]
