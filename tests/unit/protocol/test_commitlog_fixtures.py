"""The codec against the golden RocketMQ 4.9.8 CommitLog (docs/protocol.md §1; fixtures README)."""

from __future__ import annotations

import base64
import json

import pytest

from connector.protocol.commitlog import (
    BlankRecord,
    EndOfData,
    MessageRecord,
    decode_record,
    encode_blank,
    encode_record,
    iter_records,
    record_to_json,
)

FILE_SIZE = 1048576
COMPARED_FIELDS = (
    "file", "commitLogOffset", "storeSize", "magic", "bodyCRC", "queueId", "flag", "queueOffset", "sysFlag",
    "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes", "preparedTransactionOffset",
    "topic", "properties", "tags", "keys", "msgId", "uniqKey", "bodyBase64", "bodyDecompressedBase64",
)


@pytest.fixture(scope="module")
def files(fixture_dir):
    return {p.name: p.read_bytes() for p in sorted((fixture_dir / "commitlog").iterdir())}


@pytest.fixture(scope="module")
def expected(fixture_dir):
    with open(fixture_dir / "messages.jsonl") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def decoded(files):
    records, blanks, ends = [], [], []
    for name, data in files.items():
        for rec in iter_records(data, base_offset=int(name), check_crc=True, file=name, file_end=len(data)):
            if isinstance(rec, MessageRecord):
                records.append((name, rec))
            elif isinstance(rec, BlankRecord):
                blanks.append((name, rec))
            else:
                ends.append(rec)
    return records, blanks, ends


def test_every_record_matches_messages_jsonl(decoded, expected):
    records, _, _ = decoded
    assert len(records) == len(expected) == 557
    for (name, rec), exp in zip(records, expected, strict=True):
        got = record_to_json(rec, file=name)
        for key in COMPARED_FIELDS:
            assert got[key] == exp[key], f"{key} differs at commitLogOffset {exp['commitLogOffset']}"
        assert rec.commit_log_offset - int(name) == exp["filePosition"]
        assert base64.b64encode(rec.properties_raw).decode() == exp["propertiesRawBase64"]
        assert len(rec.body) == exp["bodyLength"]
        assert rec.physical_offset == rec.commit_log_offset


def test_blanks_match_blanks_jsonl(decoded, fixture_dir):
    _, blanks, _ = decoded
    with open(fixture_dir / "blanks.jsonl") as fh:
        expected = [json.loads(line) for line in fh]
    got = [{"file": n, "offset": b.commit_log_offset, "filePosition": b.commit_log_offset - int(n), "size": b.size}
           for n, b in blanks]
    assert got == expected
    for n, b in blanks:  # every blank reaches the end of its file
        assert b.commit_log_offset - int(n) + b.size == FILE_SIZE


def test_data_ends_at_master_max_offset(decoded, fixture_dir):
    _, _, ends = decoded
    runtime = json.loads((fixture_dir / "runtime_info.json").read_text())
    assert [e.commit_log_offset for e in ends] == [int(runtime["commitLogMaxOffset"])]


def test_records_and_blanks_tile_the_log(decoded):
    records, blanks, ends = decoded
    spans = sorted([(r.commit_log_offset, r.store_size) for _, r in records]
                   + [(b.commit_log_offset, b.size) for _, b in blanks])
    pos = 0
    for start, size in spans:
        assert start == pos
        pos += size
    assert pos == ends[0].commit_log_offset


def test_reencoding_every_record_gives_the_stored_bytes(decoded, files):
    records, blanks, _ = decoded
    for name, rec in records:
        pos = rec.commit_log_offset - int(name)
        again = encode_record(
            commit_log_offset=rec.commit_log_offset, topic=rec.topic, body=rec.body, queue_id=rec.queue_id,
            flag=rec.flag, queue_offset=rec.queue_offset, sys_flag=rec.sys_flag, born_timestamp=rec.born_timestamp,
            born_host=rec.born_host, store_timestamp=rec.store_timestamp, store_host=rec.store_host,
            reconsume_times=rec.reconsume_times, prepared_transaction_offset=rec.prepared_transaction_offset,
            properties=rec.properties_raw)
        assert again == files[name][pos:pos + rec.store_size], f"record at {rec.commit_log_offset}"
    for name, b in blanks:
        pos = b.commit_log_offset - int(name)
        assert encode_blank(b.size) == files[name][pos:pos + 8]


def test_decode_record_at_an_offset_inside_a_buffer(files):
    data = files["00000000000001048576"]
    rec = decode_record(data, 0, base_offset=1048576)
    assert isinstance(rec, MessageRecord) and rec.commit_log_offset == 1048576
    nxt = decode_record(data, rec.store_size, base_offset=1048576)
    assert isinstance(nxt, MessageRecord) and nxt.commit_log_offset == 1048576 + rec.store_size


def test_end_of_data_in_preallocated_zeros(files):
    data = files["00000000000003145728"]
    assert isinstance(decode_record(data, 257203, base_offset=3145728), EndOfData)
