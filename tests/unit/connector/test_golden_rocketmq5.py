"""The project's CommitLog decoders against the golden RocketMQ 5.5.0 CommitLog (tests/fixtures/rocketmq-5.5.0).

The fixture was recorded from a real 5.5.0 master (its README.md and record.py); ``messages.jsonl`` is what
5.5.0's own ``MessageDecoder`` reads from it. The scalar codec and the Arrow decoder — native kernel and NumPy
path — give the same fields for every record, including the MessageVersion V2 record of a long ``%RETRY%``
topic, 5.x's ``__CRC32#`` property and the timer wheel's records (docs/protocol.md §8); re-encoding every
record with the stub's encoder gives the stored bytes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    MESSAGE_MAGIC_CODE_V2,
    EndOfData,
    MessageRecord,
    encode_record,
    iter_records,
    record_to_json,
)
from tests.support.decoding import decode_commitlog_range, use_decode_kernels
from tests.support.message_version import LONG_RETRY_TOPIC
from tests.unit.connector.test_arrow_decode import assert_matches, rows
from tests.unit.protocol.test_commitlog_fixtures import COMPARED_FIELDS

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "rocketmq-5.5.0"
FILE_SIZE = 1 << 20
FILE = f"{0:020d}"


@pytest.fixture(scope="module")
def info() -> dict:
    return json.loads((FIXTURE / "broker.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def data(info) -> bytes:
    """CommitLog file 0 as the broker had it: the recorded bytes, then zeros to the file size."""
    raw = (FIXTURE / "commitlog" / FILE).read_bytes()
    assert len(raw) == info["commitLogMaxOffset"] and info["mappedFileSizeCommitLog"] == FILE_SIZE
    return raw + bytes(FILE_SIZE - len(raw))


@pytest.fixture(scope="module")
def messages() -> list[dict]:
    with open(FIXTURE / "messages.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def records(data) -> tuple[list[MessageRecord], list[EndOfData]]:
    recs = list(iter_records(data, base_offset=0, check_crc=True, file=FILE, file_end=FILE_SIZE))
    return [r for r in recs if isinstance(r, MessageRecord)], [r for r in recs if isinstance(r, EndOfData)]


def test_the_fixture_holds_the_recorded_mix(messages):
    topics = [m["topic"] for m in messages]
    v2 = [m for m in messages if m["magic"] == MESSAGE_MAGIC_CODE_V2]
    assert [(m["topic"], m["reconsumeTimes"]) for m in v2] == [(LONG_RETRY_TOPIC, 1)]
    assert topics.count("Golden5Batch") == 3 and topics.count("Golden5Delay") == 1
    assert {"SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "Golden5Timer", "Golden5Orders"} <= set(topics)
    assert any(m["sysFlag"] & COMPRESSED_FLAG and m["bodyLength"] < 4096 for m in messages)
    # enabledAppendPropCRC=true: every record but the batch's carries __CRC32# (5.5.0 adds none to batch records)
    assert all(len(m["properties"]["__CRC32#"]) == 10 for m in messages if m["topic"] != "Golden5Batch")
    assert not any("__CRC32#" in m["properties"] for m in messages if m["topic"] == "Golden5Batch")
    timer = next(m for m in messages if m["topic"] == "Golden5Timer")["properties"]
    assert {"TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_OUT_MS"} <= set(timer)


def test_scalar_codec_matches_the_java_decoder(records, messages, info):
    recs, ends = records
    assert len(recs) == len(messages)
    for rec, exp in zip(recs, messages, strict=True):
        got = record_to_json(rec, file=FILE, file_start=0)
        for key in COMPARED_FIELDS:
            assert got[key] == exp[key], f"{key} differs at commitLogOffset {exp['commitLogOffset']}"
        assert base64.b64encode(rec.properties_raw).decode() == exp["propertiesRawBase64"]
        assert rec.physical_offset == rec.commit_log_offset
    assert [e.commit_log_offset for e in ends] == [info["commitLogMaxOffset"]]


def test_reencoding_every_record_gives_the_stored_bytes(records, data):
    for rec in records[0]:
        again = encode_record(
            commit_log_offset=rec.commit_log_offset, topic=rec.topic, body=rec.body, queue_id=rec.queue_id,
            flag=rec.flag, queue_offset=rec.queue_offset, sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp,
            born_host=rec.born_host, store_timestamp=rec.store_timestamp, store_host=rec.store_host,
            reconsume_times=rec.reconsume_times, prepared_transaction_offset=rec.prepared_transaction_offset,
            properties=rec.properties_raw, body_crc_value=rec.body_crc, magic=rec.magic)
        assert again == data[rec.commit_log_offset:rec.commit_log_offset + rec.store_size], rec.commit_log_offset


@pytest.fixture(params=["native", "numpy"])
def kernel(request, monkeypatch) -> str:
    return use_decode_kernels(monkeypatch, request.param)


@pytest.mark.parametrize("chunk", [FILE_SIZE, 1000])
def test_arrow_decoder_matches_the_java_decoder(kernel, data, messages, info, chunk):
    end = info["commitLogMaxOffset"]
    pieces = ((o, data[o:min(o + chunk, end)]) for o in range(0, end, chunk))
    batches = list(decode_commitlog_range(pieces, 0, end, FILE_SIZE, broker="broker-a"))
    assert_matches(rows(batches), messages)
