"""RocketMQ 5.x MessageVersion V2 records (issue 13 §3; docs/protocol.md §8): MAGICCODE 0xDAA320AB and a
2-byte TOPIC length prefix, which a 5.x broker writes for topics over 127 bytes. The scalar codec and the
Arrow decoder (both kernels) read them, alone and mixed with V1 records.

The V2 records here are V1 records re-laid as 5.x's MessageExtEncoder writes V2: magic swapped, TOPIC length
as a short, TOTALSIZE one byte larger. A V2 record written by a real 5.5.0 broker is in the golden 5.5.0
CommitLog (tests/unit/connector/test_golden_rocketmq5.py).
"""

from __future__ import annotations

import struct

import pytest

from connector.errors import CommitLogFormatError
from connector.protocol.commitlog import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MessageRecord,
    calc_msg_length,
    decode_record,
    encode_record,
    iter_records,
    min_record_size,
    topic_length_prefix_bytes,
)
from tests.support.decoding import decode_commitlog_range, use_decode_kernels

LONG_TOPIC = "%DLQ%" + "g" * 140  # 145 bytes: more than a signed byte holds
FILE_SIZE = 1 << 16


def v2_record(offset: int, topic: str, body: bytes, **fields) -> bytes:
    """A V2 record at CommitLog ``offset``: a V1 record of a one-byte topic re-laid with ``topic``."""
    v1 = encode_record(commit_log_offset=offset, topic="T", body=body, **fields)
    topic_prefix = 84 + 4 + len(body)  # IPv4 hosts: BODY's length prefix at 84
    topic_b = topic.encode("utf-8")
    tail = v1[topic_prefix + 2:]  # PROPERTIES length prefix and value (after the 1-byte prefix and "T")
    total = len(v1) - 2 + 2 + len(topic_b)  # one-byte prefix and "T" out, short prefix and topic in
    head = struct.pack(">ii", total, MESSAGE_MAGIC_CODE_V2) + v1[8:topic_prefix]
    return head + struct.pack(">h", len(topic_b)) + topic_b + tail


def mixed_file() -> tuple[bytes, list[tuple[str, bytes]]]:
    """V1, V2, V2, V1 records from offset 0, then zeros to FILE_SIZE; returns the bytes and (topic, body)."""
    sent = [("GoldenA", b"v1 first"), (LONG_TOPIC, b"v2 one"), (LONG_TOPIC, b""), ("GoldenB", b"v1 last")]
    data = b""
    for i, (topic, body) in enumerate(sent):
        fields = {"queue_offset": i, "properties": {"TAGS": f"t{i}", "KEYS": "k"}}
        if len(topic) > 127:
            data += v2_record(len(data), topic, body, **fields)
        else:
            data += encode_record(commit_log_offset=len(data), topic=topic, body=body, **fields)
    return data + bytes(FILE_SIZE - len(data)), sent


def test_v2_layout_constants():
    assert MESSAGE_MAGIC_CODE_V2 & 0xFFFFFFFF == 0xDAA320AB
    assert topic_length_prefix_bytes(MESSAGE_MAGIC_CODE) == 1 and topic_length_prefix_bytes(MESSAGE_MAGIC_CODE_V2) == 2
    assert min_record_size(MESSAGE_MAGIC_CODE) == 91 and min_record_size(MESSAGE_MAGIC_CODE_V2) == 92
    assert calc_msg_length(0, 3, 145, 10, magic=MESSAGE_MAGIC_CODE_V2) == 92 + 3 + 145 + 10
    with pytest.raises(ValueError):
        topic_length_prefix_bytes(0)


def test_scalar_codec_decodes_a_v2_record():
    raw = v2_record(4096, LONG_TOPIC, b"payload", queue_id=3, properties={"TAGS": "x"})
    assert len(raw) == calc_msg_length(0, len(b"payload"), len(LONG_TOPIC), len(b"TAGS\x01x"),
                                       magic=MESSAGE_MAGIC_CODE_V2)
    rec = decode_record(raw, 0, base_offset=4096, check_crc=True)
    assert rec.magic == MESSAGE_MAGIC_CODE_V2
    assert rec.topic == LONG_TOPIC and rec.body == b"payload" and rec.queue_id == 3
    assert rec.properties["TAGS"] == "x" and rec.store_size == len(raw)


def test_scalar_codec_refuses_a_v2_record_whose_topic_length_overruns():
    raw = bytearray(v2_record(0, LONG_TOPIC, b"b"))
    at = 84 + 4 + 1
    raw[at:at + 2] = struct.pack(">h", 30000)
    with pytest.raises(CommitLogFormatError) as err:
        decode_record(bytes(raw), 0, base_offset=0)
    assert err.value.field == "TOPIC"


def test_iter_records_walks_v1_and_v2_records():
    data, sent = mixed_file()
    records = [r for r in iter_records(data, base_offset=0, check_crc=True) if isinstance(r, MessageRecord)]
    assert [(r.topic, r.body) for r in records] == sent
    assert [r.magic for r in records] == [MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, MESSAGE_MAGIC_CODE_V2,
                                          MESSAGE_MAGIC_CODE]


@pytest.mark.parametrize("name", ["numpy", "native"])
def test_arrow_decoder_reads_v1_and_v2_records_with_both_kernels(name, monkeypatch):
    data, sent = mixed_file()
    end = sum(r.store_size for r in iter_records(data, base_offset=0) if isinstance(r, MessageRecord))
    use_decode_kernels(monkeypatch, name)
    for chunk in (len(data), 100):  # whole, and in small pieces that split records
        chunks = [(o, data[o:o + chunk]) for o in range(0, end, chunk)]
        batches = list(decode_commitlog_range(chunks, 0, end, FILE_SIZE, broker="b"))
        rows = [row for b in batches for row in b.to_pylist()]
        assert [(r["topic"], r["body"]) for r in rows] == sent
        assert [r["tags"] for r in rows] == ["t0", "t1", "t2", "t3"]
        assert [r["queueOffset"] for r in rows] == [0, 1, 2, 3]
        assert [r["storeSize"] for r in rows] == [r.store_size for r in iter_records(data, base_offset=0)
                                                  if isinstance(r, MessageRecord)]
