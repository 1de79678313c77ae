"""``format("hareplica")`` reading a real RocketMQ 4.9 master and a real slave's HA port (issue 10 §2f).

One real name server, a real ASYNC_MASTER and a real SLAVE per module, 1 MiB CommitLog files, more than
3 MiB produced with the stub's producer (bodies of 6 KiB zlib-compressed). The rows a stream reads with
``startingOffsets=earliest`` equal what RocketMQ's own ``MessageDecoder`` (the ``CommitLogDecoder`` Java
program, tests/java/) decodes from the real broker's CommitLog files — starting at the first byte of
file 0 although the log rolled over 3 times — and the bodies equal what was sent. With ``readFrom=slave``
the same rows come from the real slave's HA port while the real master is down.
"""

from __future__ import annotations

import base64
import json

import pytest

from connector.client.consume_queue import ConsumeQueueReader
from connector.options.parse import SourceOptions
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.source import HAReplicaStreamReader, read_partition
from connector.source.driver import partitions
from tests.integration.connector.conftest import run_stream
from tests.interop.peers import FILE_SIZE, MiB, attach_slave, produce_bytes, wait_same_max_offset
from tests.support.brokers import remoting_request, runtime_info, wait_for
from tests.support.java_tools import run_java
from tests.support.jvm_peers import RealBroker, killed_at_exit

pytestmark = pytest.mark.spark

SCALAR_FIELDS = ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
                 "bornHost", "storeHost", "reconsumeTimes", "preparedTransactionOffset", "msgId", "uniqKey", "tags",
                 "keys")


@pytest.fixture(scope="module")
def real_pair(tmp_path_factory, real_namesrv):
    """(real master, real slave, [(topic, body)] sent, commitLogMaxOffset) once the slave holds everything."""
    # retention only on request (DELETE_EXPIRED_COMMITLOG): deleteWhen never matches, every full file expired
    with killed_at_exit(RealBroker.start(tmp_path_factory.mktemp("real-master"), brokerRole="ASYNC_MASTER",
                                         namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE,
                                         fileReservedTime=0, deleteWhen="99", cleanResourceInterval=1000)) as master, \
            killed_at_exit(RealBroker.start(tmp_path_factory.mktemp("real-slave"), brokerRole="SLAVE", brokerId=1,
                                            namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE,
                                            haSendHeartbeatInterval=1000)) as slave:
        attach_slave(master.remoting_addr, slave.remoting_addr)
        sent = produce_bytes(master.remoting_addr, int(3.3 * MiB), seed=21)
        end = wait_same_max_offset(master.remoting_addr, slave.remoting_addr)
        assert end > 3 * FILE_SIZE
        yield master, slave, sent, end


@pytest.fixture(scope="module")
def decoded(real_pair, tmp_path_factory) -> list[dict]:
    """Every record of the real master's CommitLog as RocketMQ's MessageDecoder reads it."""
    master = real_pair[0]
    run = run_java("CommitLogDecoder", [str(master.commitlog_dir)], log_dir=tmp_path_factory.mktemp("decoder"),
                   timeout_s=120)
    return [json.loads(line) for line in run.stdout.splitlines()]


def assert_rows_equal_decoder(rows: list[dict], expected: list[dict]) -> None:
    rows = sorted(rows, key=lambda r: r["commitLogOffset"])
    assert [r["commitLogOffset"] for r in rows] == [e["commitLogOffset"] for e in expected]
    for r, e in zip(rows, expected, strict=True):
        for f in SCALAR_FIELDS:
            assert r[f] == e[f], (f, e["commitLogOffset"], r[f], e[f])
        assert (r["bornMs"], r["storeMs"]) == (e["bornTimestamp"], e["storeTimestamp"]), e["commitLogOffset"]
        assert dict(r["properties"]) == e["properties"], e["commitLogOffset"]
        assert bytes(r["body"]) == base64.b64decode(e["bodyDecompressedBase64"]), e["commitLogOffset"]
        assert r["broker"] == "broker-a"


def assert_bodies_are_the_sent_ones(rows: list[dict], sent: list[tuple[str, bytes]]) -> None:
    got = sorted((r["topic"], bytes(r["body"])) for r in rows if r["topic"] in {t for t, _ in sent})
    assert got == sorted(sent), f"{len(got)} rows of the sent topics, {len(sent)} messages sent"


def test_earliest_from_real_master_equals_message_decoder_from_file_0(hareplica_spark_session, real_pair,
                                                                      decoded, tmp_path):
    master, _, sent, end = real_pair
    run = run_stream(hareplica_spark_session, tmp_path / "cp", {"brokers": f"broker-a={master.ha_addr}",
                                                        "startingOffsets": "earliest",
                                                        "includeSystemTopics": "true"})
    assert run.end_offsets[-1]["broker-a"] == end
    assert min(r["commitLogOffset"] for r in run.rows) == 0  # the first byte of file 0, not of the last file
    assert len({r["commitLogOffset"] // FILE_SIZE for r in run.rows}) >= 4
    assert_rows_equal_decoder(run.rows, decoded)
    assert_bodies_are_the_sent_ones(run.rows, sent)


def test_splits_inside_mapped_files_from_real_consume_queues(real_pair, decoded, monkeypatch):
    """minPartitions against a real master: QUERY_CONSUME_QUEUE answers parse, every split is a record start
    MessageDecoder found, and the split partitions together read exactly the decoder's records (issue 12)."""
    master, _, _, end = real_pair
    monkeypatch.setattr(partitions, "MIN_PARTITION_BYTES", 64 * 1024)  # the real files here are only 1 MiB
    reader = HAReplicaStreamReader(SourceOptions.from_options({
        "brokers": f"broker-a={master.ha_addr}", "includeSystemTopics": "true", "minPartitions": "16"}))
    start = reader.initialOffset()
    parts = reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit()))
    record_starts = {e["commitLogOffset"] for e in decoded}
    inner = [p.start for p in parts if p.start % FILE_SIZE]
    assert len(inner) >= 8 and set(inner) <= record_starts  # split inside files, on records only
    rows = [row for p in parts for batch in read_partition(p) for row in batch.to_pylist()]
    assert [r["commitLogOffset"] for r in rows] == sorted(record_starts)
    with ConsumeQueueReader(master.remoting_addr, 5000) as cq:
        queue = max(cq.ranges(cq.queues()), key=lambda q: q.entries)
        assert cq.entries([(queue, queue.max_index, 1)]) == [[]]  # past the end: SUCCESS without a body


def test_earliest_after_real_retention_starts_at_the_oldest_file_left(hareplica_spark_session, real_pair,
                                                                      decoded, tmp_path):
    master, _, _, end = real_pair
    resp = remoting_request(master.remoting_addr, RemotingCommand.request(RequestCode.DELETE_EXPIRED_COMMITLOG))
    assert resp.code == 0, resp.remark
    # a 4.9 store runs its first clean-up 60 s after start, then every cleanResourceInterval
    # every file but the last one goes (one every deleteCommitLogFilesInterval, 100 ms)
    last_file = end // FILE_SIZE * FILE_SIZE
    wait_for(lambda: int(runtime_info(master.remoting_addr)["commitLogMinOffset"]) == last_file,
             f"the real master to delete every CommitLog file below {last_file}", timeout_s=90, interval_s=0.2)
    min_offset = last_file
    run = run_stream(hareplica_spark_session, tmp_path / "cp", {"brokers": f"broker-a={master.ha_addr}",
                                                                "startingOffsets": "earliest",
                                                                "includeSystemTopics": "true"})
    assert min(r["commitLogOffset"] for r in run.rows) == min_offset
    assert_rows_equal_decoder(run.rows, [e for e in decoded if e["commitLogOffset"] >= min_offset])


def test_read_from_real_slave_ha_port_with_master_down_equals_message_decoder(hareplica_spark_session, real_pair,
                                                                              decoded, tmp_path):
    master, slave, sent, end = real_pair
    master.stop()  # every byte must come from the slave's HA port (planning too: its remoting port)
    run = run_stream(hareplica_spark_session, tmp_path / "cp", {"brokers": f"broker-a={master.ha_addr}",
                                                        "slaves": f"broker-a={slave.ha_addr}",
                                                        "readFrom": "slave", "startingOffsets": "earliest",
                                                        "includeSystemTopics": "true",
                                                        "maxBytesPerTrigger": str(FILE_SIZE)})
    assert len(run.batches) >= 3
    assert run.end_offsets[-1]["broker-a"] == end
    assert_rows_equal_decoder(run.rows, decoded)
    assert_bodies_are_the_sent_ones(run.rows, sent)
