"""``format("hareplica")`` reading a real RocketMQ 5.x master in classic master/slave mode (issue 13 §3).

One real 5.5.0 ASYNC_MASTER per module (jvm/rocketmq-5.pom.xml; DefaultHAService, no name server), 1 MiB
CommitLog files, ``enabledAppendPropCRC=true`` so every record carries 5.x's ``__CRC32#`` property, and a few
timer messages (``TIMER_DELAY_SEC``) that 5.x's timer wheel stores twice: parked in ``rmq_sys_wheel_timer``
with its ``TIMER_*`` properties, then delivered to the real topic. The rows a stream reads from offset 0 equal
what 5.5.0's own ``MessageDecoder`` decodes from the broker's files and what was sent; ``minPartitions``
splits the mapped files at the record starts the 5.x broker's ConsumeQueues give (QUERY_CONSUME_QUEUE).

A consumer group of 136 characters hands a message back: the 5.x master stores the ``%RETRY%`` copy as a
MessageVersion V2 record (docs/protocol.md §8), which the stream reads, and a stub master with
``autoMessageVersionOnTopicLen=true`` given the same hand-back stores the same record layout.
"""

from __future__ import annotations

import pytest

from connector.client.consume_queue import ConsumeQueueReader
from connector.client.producer import Producer
from connector.options.parse import SourceOptions
from connector.source import HAReplicaStreamReader, read_partition
from connector.source.driver import partitions
from tests.integration.connector.conftest import run_stream
from tests.interop.peers import FILE_SIZE, MiB, message_decoder_rows, produce_bytes
from tests.interop.test_source_real_peers import assert_bodies_are_the_sent_ones, assert_rows_equal_decoder
from tests.support.brokers import BrokerProcess, max_offset, read_commitlog, wait_for
from tests.support.jvm_peers import ROCKETMQ5_LIB, RealBroker, killed_at_exit
from tests.support.message_version import (
    LONG_RETRY_TOPIC,
    ORIGIN_TOPIC,
    hand_back_long_group,
    raw_layout,
    record_bytes,
    seed_long_group,
    wait_long_retry_record,
)

pytestmark = pytest.mark.spark

TIMER_TOPIC = "Interop5Timer"
WHEEL_TOPIC = "rmq_sys_wheel_timer"  # 5.x TimerMessageStore.TIMER_TOPIC
TIMER_MESSAGES = 3


def send_timer_messages(addr: str) -> list[tuple[str, bytes]]:
    """Send :data:`TIMER_MESSAGES` messages due 1 s later (``TIMER_DELAY_SEC``, a 5.x property)."""
    sent = []
    with Producer(addr, "interop5_timer_pg") as producer:
        for n in range(TIMER_MESSAGES):
            body = f"timer-{n}".encode()
            result = producer.send(TIMER_TOPIC, body, keys=f"timer{n}", properties={"TIMER_DELAY_SEC": "1"})
            assert result.send_status == "SEND_OK", result
            sent.append((TIMER_TOPIC, body))
    return sent


@pytest.fixture(scope="module")
def real_5(tmp_path_factory):
    """(real 5.x master, [(topic, body)] sent, commitLogMaxOffset) once the timer messages were delivered."""
    workdir = tmp_path_factory.mktemp("real-5-master")
    seed_long_group(workdir / "store")  # 5.5.0 creates no group over 120 characters, an upgraded one has it
    with killed_at_exit(RealBroker.start(workdir, version="5", brokerRole="ASYNC_MASTER", namesrvAddr="",
                                         mappedFileSizeCommitLog=FILE_SIZE, enabledAppendPropCRC=True)) as master:
        sent = send_timer_messages(master.remoting_addr)
        sent += produce_bytes(master.remoting_addr, int(2.4 * MiB), seed=51)
        hand_back_long_group(master.remoting_addr)
        sent.append((ORIGIN_TOPIC, b"hand me back"))
        wait_for(lambda: sum(getattr(r, "topic", None) == TIMER_TOPIC
                             for r in read_commitlog(master.commitlog_dir, check_crc=False)) == TIMER_MESSAGES,
                 "the real 5.x master's timer wheel to deliver the timer messages", timeout_s=60, interval_s=0.5)
        wait_long_retry_record(master.commitlog_dir)
        yield master, sent, max_offset(master.remoting_addr)


@pytest.fixture(scope="module")
def decoded(real_5) -> list[dict]:
    """Every record of the 5.x master's CommitLog as 5.5.0's own MessageDecoder reads it."""
    return message_decoder_rows(real_5[0].commitlog_dir, ROCKETMQ5_LIB)


def test_earliest_from_real_5_master_equals_its_message_decoder(hareplica_spark_session, real_5, decoded, tmp_path):
    master, sent, end = real_5
    run = run_stream(hareplica_spark_session, tmp_path / "cp", {"brokers": f"broker-a={master.ha_addr}",
                                                                "startingOffsets": "earliest",
                                                                "includeSystemTopics": "true"})
    assert run.end_offsets[-1]["broker-a"] == end
    assert min(r["commitLogOffset"] for r in run.rows) == 0
    assert len({r["commitLogOffset"] // FILE_SIZE for r in run.rows}) >= 3  # 2 roll-overs at least
    assert_rows_equal_decoder(run.rows, decoded)
    assert_bodies_are_the_sent_ones(run.rows, sent)
    for r in run.rows:
        props = dict(r["properties"])
        crc = props["__CRC32#"]  # 5.x: the whole record's CRC32, 10 decimal digits, least significant first
        assert len(crc) == 10 and crc.isdigit(), (r["commitLogOffset"], crc)
        if r["topic"] in ("InteropA", "InteropB"):
            seq = props["seq"]
            assert (r["keys"], r["tags"]) == (f"k{seq}", f"t{int(seq) % 3}")
    parked = [dict(r["properties"]) for r in run.rows if r["topic"] == WHEEL_TOPIC]
    assert len(parked) >= TIMER_MESSAGES
    assert all(p["REAL_TOPIC"] == TIMER_TOPIC and int(p["TIMER_OUT_MS"]) > 0 for p in parked), parked
    delivered = [dict(r["properties"]) for r in run.rows if r["topic"] == TIMER_TOPIC]
    assert len(delivered) == TIMER_MESSAGES
    assert all("TIMER_ENQUEUE_MS" in p and "TIMER_DEQUEUE_MS" in p for p in delivered), delivered
    assert [r["reconsumeTimes"] for r in run.rows if r["topic"] == LONG_RETRY_TOPIC] == [1]  # the V2 record


def test_min_partitions_split_real_5_mapped_files_at_its_consume_queue_entries(real_5, decoded, monkeypatch):
    """minPartitions=4 against a 5.x master: its QUERY_CONSUME_QUEUE answers parse as 4.9.8's do, every split
    is a record start 5.x's MessageDecoder found, and the partitions together read exactly its records."""
    master, _, end = real_5
    monkeypatch.setattr(partitions, "MIN_PARTITION_BYTES", 64 * 1024)  # the real files here are only 1 MiB
    reader = HAReplicaStreamReader(SourceOptions.from_options({
        "brokers": f"broker-a={master.ha_addr}", "includeSystemTopics": "true", "minPartitions": "4"}))
    start = reader.initialOffset()
    parts = reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit()))
    record_starts = {e["commitLogOffset"] for e in decoded}
    inner = [p.start for p in parts if p.start % FILE_SIZE]
    assert len(parts) >= 4 and inner and set(inner) <= record_starts, [p.start for p in parts]
    assert (parts[0].start, parts[-1].end) == (0, end)
    assert all(a.end == b.start for a, b in zip(parts, parts[1:], strict=False))
    rows = [row for p in parts for batch in read_partition(p) for row in batch.to_pylist()]
    assert [r["commitLogOffset"] for r in rows] == sorted(record_starts)
    with ConsumeQueueReader(master.remoting_addr, 5000) as cq:
        queue = max(cq.ranges(cq.queues()), key=lambda q: q.entries)
        assert cq.entries([(queue, queue.max_index, 1)]) == [[]]  # past the end: SUCCESS without a body


# fields a stub record and a real 5.x one may differ in: when and where each was stored and sent
PER_BROKER_FIELDS = {"bornTimestamp", "storeTimestamp", "bornHost", "storeHost", "physicalOffset", "queueOffset",
                     "totalSize", "properties"}
# per send: UNIQ_KEY (the producer's id), ORIGIN_MESSAGE_ID (the original's offset msgId); 5.x-only: __CRC32#
# (enabledAppendPropCRC), and MSG_REGION / TRACE_ON, which 5.5.0 stores with every send while 4.9.8 (and the
# stub) store them only when a send hook is registered (AbstractSendMessageProcessor.buildMsgContext)
PER_BROKER_PROPERTIES = {"UNIQ_KEY", "ORIGIN_MESSAGE_ID", "__CRC32#", "MSG_REGION", "TRACE_ON"}


def test_real_5_master_and_stub_store_a_long_retry_topic_as_the_same_v2_record(real_5, decoded, tmp_path):
    master = real_5[0]
    real_rec = wait_long_retry_record(master.commitlog_dir)
    real = raw_layout(record_bytes(master.commitlog_dir, real_rec, FILE_SIZE))
    assert (real["magic"], real["topicLengthPrefix"], real["topicLength"]) == (-626843477, 2, len(LONG_RETRY_TOPIC))
    java = next(d for d in decoded if d["commitLogOffset"] == real_rec.commit_log_offset)
    assert (java["magic"], java["topic"], java["reconsumeTimes"]) == (-626843477, LONG_RETRY_TOPIC, 1)

    with BrokerProcess.start(tmp_path / "stub", autoMessageVersionOnTopicLen=True,
                             mappedFileSizeCommitLog=FILE_SIZE) as stub:
        hand_back_long_group(stub.remoting_addr)
        stub_rec = wait_long_retry_record(stub.commitlog_dir)
        ours = raw_layout(record_bytes(stub.commitlog_dir, stub_rec, FILE_SIZE))
    same = {k: v for k, v in ours.items() if k not in PER_BROKER_FIELDS}
    assert same == {k: v for k, v in real.items() if k not in PER_BROKER_FIELDS}
    props = [dict(p.split("\x01", 1) for p in side["properties"].split("\x02") if p) for side in (ours, real)]
    assert {k: v for k, v in props[0].items() if k not in PER_BROKER_PROPERTIES} == \
        {k: v for k, v in props[1].items() if k not in PER_BROKER_PROPERTIES}
    assert props[0]["DELAY"] == props[1]["DELAY"] == "1" and props[1]["REAL_TOPIC"] == LONG_RETRY_TOPIC
