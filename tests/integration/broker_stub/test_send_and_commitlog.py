"""Producer → broker stub → CommitLog files, decoded with connector.protocol.commitlog and checked field by field."""

from __future__ import annotations

import zlib

import pytest

from connector.client.producer import Message, Producer
from connector.errors import MQClientException
from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB_TYPE,
    BlankRecord,
    MessageRecord,
    body_crc,
    offset_msg_id,
)
from streaming_apps.workload import produce_load
from tests.support.brokers import read_commitlog, runtime_info


def _messages(broker) -> list[MessageRecord]:
    return [r for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord)]


def test_every_field_of_stored_messages(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=1048576, brokerClusterName="FieldCluster")
    with Producer(broker.remoting_addr, "pg-fields") as p:
        local_ip, local_port = p.connection.sock.getsockname()[:2]
        plain = p.send("Orders", b"hello", tags="TagA", keys=["k1", "k2"], properties={"region": "eu", "ü": "值"},
                       flag=42)
        big_body = b"compressible " * 500  # 6500 bytes: compressed by the producer
        compressed = p.send("Orders", big_body)
        delayed = p.send("Orders", b"later", delay_level=2, queue_id=3)
        nowait = p.send("Orders", b"fire and forget", wait_store_msg_ok=False)
        batch = p.send_batch("Batches", [Message(b"b0", tags="x"), Message(b"b1", keys="kb"), b"b2"], queue_id=1)
    recs = _messages(broker)
    assert len(recs) == 7
    by_offset = {r.commit_log_offset: r for r in recs}
    store_host = f"127.0.0.1:{broker.listen_port}"

    for r in recs:
        assert str(r.store_host) == store_host
        assert str(r.born_host) == f"{local_ip}:{local_port}"
        assert r.body_crc == body_crc(r.body)
        assert r.msg_id == offset_msg_id(r.store_host, r.commit_log_offset)
        assert r.properties["CLUSTER"] == "FieldCluster"
        assert "WAIT" not in r.properties or r.topic in ("SCHEDULE_TOPIC_XXXX", "Batches")  # as 4.9.8
        assert r.reconsume_times == 0 and r.prepared_transaction_offset == 0
        assert r.store_timestamp >= r.born_timestamp - 1000

    r = by_offset[int(plain.offset_msg_id[-16:], 16)]
    assert (r.topic, r.queue_id, r.queue_offset, r.flag, r.sys_flag) == ("Orders", 0, 0, 42, 0)
    assert r.body == b"hello" and r.tags == "TagA" and r.keys == "k1 k2"
    assert r.properties["region"] == "eu" and r.properties["ü"] == "值"
    assert r.uniq_key == plain.msg_id and len(plain.msg_id) == 32
    assert plain.send_status == "SEND_OK" and plain.offset_msg_id == r.msg_id

    r = by_offset[int(compressed.offset_msg_id[-16:], 16)]
    assert r.sys_flag == COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE == 0x301
    assert zlib.decompress(r.body) == big_body and r.decompressed_body() == big_body
    assert (r.queue_id, r.queue_offset) == (1, 0)

    r = by_offset[int(delayed.offset_msg_id[-16:], 16)]
    assert (r.topic, r.queue_id) == ("SCHEDULE_TOPIC_XXXX", 1)
    assert r.properties["REAL_TOPIC"] == "Orders" and r.properties["REAL_QID"] == "3"
    assert r.properties["DELAY"] == "2" and delayed.queue_id == 3

    r = by_offset[int(nowait.offset_msg_id[-16:], 16)]
    assert r.body == b"fire and forget" and "WAIT" not in r.properties

    batch_recs = [by_offset[int(m[-16:], 16)] for m in batch.offset_msg_ids]
    assert [b.body for b in batch_recs] == [b"b0", b"b1", b"b2"]
    assert [b.queue_offset for b in batch_recs] == [0, 1, 2] and {b.queue_id for b in batch_recs} == {1}
    assert len({b.born_timestamp for b in batch_recs}) == 1
    assert [b.uniq_key for b in batch_recs] == batch.msg_id.split(",")
    assert batch_recs[0].tags == "x" and batch_recs[1].keys == "kb"
    assert all(b.properties_raw.endswith(b"CLUSTER\x01FieldCluster\x02WAIT\x01true") for b in batch_recs)
    offsets = [b.commit_log_offset for b in batch_recs]
    assert offsets[1] == offsets[0] + batch_recs[0].store_size

    info = runtime_info(broker.remoting_addr)
    last = max(recs, key=lambda x: x.commit_log_offset)
    assert int(info["commitLogMaxOffset"]) == last.commit_log_offset + last.store_size


def test_queue_offsets_round_robin_and_roll_over_with_blanks(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=65536)
    with Producer(broker.remoting_addr) as p:
        futures = [p.send_async("Roll", bytes([i % 251]) * (1000 + (i * 37) % 3000)) for i in range(300)]
        results = [f.result(timeout=30) for f in futures]
    assert [r.queue_id for r in results[:8]] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [r.queue_offset for r in results[:8]] == [0, 0, 0, 0, 1, 1, 1, 1]
    recs = read_commitlog(broker.commitlog_dir)
    files = sorted(p.name for p in broker.commitlog_dir.iterdir())
    assert len(files) > 5
    blanks = [r for r in recs if isinstance(r, BlankRecord)]
    assert len(blanks) == len(files) - 1
    pos = 0
    for r in recs:  # records and blanks tile the log with no gap; nothing spans a file boundary
        assert r.commit_log_offset == pos
        size = r.size if isinstance(r, BlankRecord) else r.store_size
        assert r.commit_log_offset // 65536 == (r.commit_log_offset + size - 1) // 65536
        if isinstance(r, BlankRecord):
            assert (r.commit_log_offset + r.size) % 65536 == 0
            assert r.size >= 8
        pos += size
    assert pos == int(runtime_info(broker.remoting_addr)["commitLogMaxOffset"])
    msgs = [r for r in recs if isinstance(r, MessageRecord)]
    assert [r.body for r in msgs] == [bytes([i % 251]) * (1000 + (i * 37) % 3000) for i in range(300)]


def test_produce_load_pipelines_many_messages(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=4 * 1048576)
    seen = []
    stats = produce_load(broker.remoting_addr, "LoadA", 3000, 200, topics=["LoadA", "LoadB", "LoadC"],
                         progress=lambda done, total: seen.append(done))
    assert (stats.ok, stats.failed) == (3000, 0) and stats.statuses == {"SEND_OK": 3000}
    assert stats.per_topic == {"LoadA": 1000, "LoadB": 1000, "LoadC": 1000}
    assert seen[-1] == 3000 and seen == sorted(seen)
    recs = _messages(broker)
    assert len(recs) == 3000 and all(len(r.body) == 200 for r in recs)
    assert len({r.body for r in recs}) == 3000
    assert runtime_info(broker.remoting_addr)["msgPutTotalTodayNow"] == "3000"


def test_producer_validates_like_the_java_client_and_reconnects(broker_factory):
    broker = broker_factory()
    with Producer(broker.remoting_addr) as p:
        for bad in (lambda: p.send("T", b""), lambda: p.send("bad topic", b"x"),
                    lambda: p.send("SCHEDULE_TOPIC_XXXX", b"x"), lambda: p.send("T", b"x" * (4 * 1024 * 1024 + 1)),
                    lambda: p.send_batch("T", [])):
            with pytest.raises(MQClientException):
                bad()
        assert _messages(broker) == []
        p.send("T", b"first")
        assert broker.stop() == 0
        with pytest.raises(MQClientException):
            p.send("T", b"broker is down")
        broker.restart()
        assert p.send("T", b"after restart").send_status == "SEND_OK"
    assert [r.body for r in _messages(broker)] == [b"first", b"after restart"]
