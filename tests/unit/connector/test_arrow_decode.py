"""connector.decode against the golden RocketMQ 4.9.8 CommitLog and the scalar codec."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.decode import kernels
from connector.decode.columns import iter_record_batches
from connector.decode.schema import ARROW_SCHEMA, spark_schema
from connector.decode.stream import CommitLogArrowDecoder
from connector.errors import CommitLogFormatError
from connector.options.settings import DecodeSettings
from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB_TYPE,
    HostAddress,
    decode_record,
    encode_blank,
    encode_record,
    record_to_json,
)
from tests.support.decoding import decode_commitlog_range, use_decode_kernels

MAPPED_FILE_SIZE = 1048576
MAX_OFFSET = 3402931
FIELDS = ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
          "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes", "preparedTransactionOffset",
          "msgId", "uniqKey", "tags", "keys", "properties")


@pytest.fixture(params=["native", "numpy"], autouse=True)
def kernel(request, monkeypatch) -> str:
    """Every test runs twice: through the native kernel and through the NumPy path (same results)."""
    return use_decode_kernels(monkeypatch, request.param)


def test_the_native_kernel_is_built(kernel):
    # the install compiles connector/decode/_decode_kernel.c (gcc and zlib headers are on this machine and in CI)
    from connector.decode import _decode_kernel

    assert kernels.native_kernel_available() is (kernel == "native")
    assert callable(_decode_kernel.walk_records) and callable(_decode_kernel.gather_bodies)


@pytest.fixture(scope="module")
def commitlog(fixture_dir: Path) -> bytes:
    """The four fixture CommitLog files back to back: byte i is CommitLog offset i."""
    files = sorted((fixture_dir / "commitlog").iterdir())
    assert [f.name for f in files] == [f"{i * MAPPED_FILE_SIZE:020d}" for i in range(4)]
    return b"".join(f.read_bytes() for f in files)


@pytest.fixture(scope="module")
def messages(fixture_dir: Path) -> list[dict]:
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def rows(batches) -> list[dict]:
    """RecordBatches as dicts with timestamps as epoch ms and properties as dicts (messages.jsonl shape)."""
    if not batches:
        return []
    table = pa.Table.from_batches(batches)
    for name in ("bornTimestamp", "storeTimestamp"):
        idx = table.schema.get_field_index(name)
        table = table.set_column(idx, name, pa.compute.divide(table.column(name).cast(pa.int64()), 1000))
    out = table.to_pylist()
    for r in out:
        r["properties"] = dict(r["properties"])
    return out


def chunks(data: bytes, start: int, end: int, size: int):
    for pos in range(start, end, size):
        yield pos, data[pos:min(pos + size, end)]


def decode(commitlog: bytes, start: int, end: int, chunk: int = 32768, **kw) -> list[pa.RecordBatch]:
    return list(decode_commitlog_range(chunks(commitlog, start, end, chunk), start, end, MAPPED_FILE_SIZE,
                                       broker="broker-a", **kw))


def assert_matches(got: list[dict], expected: list[dict], *, decompressed: bool = True) -> None:
    assert len(got) == len(expected)
    body_key = "bodyDecompressedBase64" if decompressed else "bodyBase64"
    for g, e in zip(got, expected, strict=True):
        for f in FIELDS:
            assert g[f] == e[f], (f, e["commitLogOffset"])
        assert g["body"] == base64.b64decode(e[body_key]), e["commitLogOffset"]
        assert g["broker"] == "broker-a"
        assert g["decodeError"] is None, e["commitLogOffset"]  # every golden body matches its BODYCRC


def test_arrow_schema_is_what_spark_expects_from_the_spark_schema():
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(spark_schema(), timezone="UTC").equals(ARROW_SCHEMA)
    assert spark_schema().fieldNames() == ARROW_SCHEMA.names
    assert ARROW_SCHEMA.names == ["topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC",
                                  "flag", "sysFlag", "bornTimestamp", "bornHost", "storeTimestamp", "storeHost",
                                  "reconsumeTimes", "preparedTransactionOffset", "msgId", "uniqKey", "tags", "keys",
                                  "properties", "body", "broker", "decodeError"]


@pytest.mark.parametrize("file_index", range(4))
def test_every_fixture_file_matches_messages_jsonl(commitlog, messages, file_index):
    start = file_index * MAPPED_FILE_SIZE
    end = min(start + MAPPED_FILE_SIZE, MAX_OFFSET)
    batches = decode(commitlog, start, end)
    assert all(b.schema.equals(ARROW_SCHEMA) for b in batches)
    expected = [m for m in messages if start <= m["commitLogOffset"] < end]
    assert expected and all(m["file"] == f"{start:020d}" for m in expected)
    assert_matches(rows(batches), expected)


def test_whole_commitlog_with_raw_bodies(commitlog, messages):
    batches = decode(commitlog, 0, MAX_OFFSET, decompress_body=False)
    got = rows(batches)
    assert_matches(got, messages, decompressed=False)
    assert sum(1 for r in got if r["sysFlag"] & COMPRESSED_FLAG) == 71


def test_ranges_starting_and_ending_mid_file_at_record_boundaries(commitlog, messages):
    offsets = [m["commitLogOffset"] for m in messages]
    cases = [(554616, MAX_OFFSET), (offsets[3], offsets[10]), (offsets[100], offsets[101]), (offsets[5], offsets[5]),
             (offsets[200], 2 * MAPPED_FILE_SIZE), (offsets[300], 3145728)]
    for start, end in cases:
        expected = [m for m in messages if start <= m["commitLogOffset"] < end]
        assert_matches(rows(decode(commitlog, start, end, chunk=10000)), expected)


def test_a_range_ending_at_an_end_file_blank_stops_there(commitlog, messages):
    # 997099 is the END_FILE blank of file 0: a range may end at the blank or at the file end
    for end in (997099, MAPPED_FILE_SIZE):
        expected = [m for m in messages if 900000 <= m["commitLogOffset"] < end]
        start = expected[0]["commitLogOffset"]
        assert_matches(rows(decode(commitlog, start, end, chunk=4096)), expected)


def test_range_across_files_skips_blanks_and_counts_them(commitlog, messages):
    start = [m for m in messages if m["commitLogOffset"] < 997099][-1]["commitLogOffset"]
    dec = CommitLogArrowDecoder(start, MAX_OFFSET, MAPPED_FILE_SIZE, broker="broker-a")
    got = rows(list(dec.decode_all(chunks(commitlog, start, MAX_OFFSET, 32768))))
    assert_matches(got, [m for m in messages if m["commitLogOffset"] >= start])
    assert dec.blanks_skipped == 3 and dec.records_emitted == len(got) and dec.done


def _awkward_split_points(messages) -> tuple[int, int, list[int]]:
    """A range over the end of file 0 (last records, the blank) and the start of file 1, and positions
    to split it at: inside every header field of two records, around the blank and the file boundary."""
    in_file0 = [m for m in messages if m["file"] == "00000000000000000000"]
    in_file1 = [m for m in messages if m["file"] == "00000000000001048576"]
    start = in_file0[-3]["commitLogOffset"]
    end = in_file1[3]["commitLogOffset"]
    points = set()
    for rec in (in_file0[-2], in_file1[0]):
        points.update(range(rec["commitLogOffset"] - 3, rec["commitLogOffset"] + 100))
        tail = rec["commitLogOffset"] + rec["storeSize"]
        points.update(range(tail - 40, tail + 3))
    points.update(range(997099 - 4, 997099 + 12))
    points.update(range(MAPPED_FILE_SIZE - 4, MAPPED_FILE_SIZE + 12))
    return start, end, sorted(p for p in points if start < p < end)


def test_two_chunks_split_at_every_awkward_position(commitlog, messages):
    start, end, points = _awkward_split_points(messages)
    expected = [m for m in messages if start <= m["commitLogOffset"] < end]
    reference = rows(decode(commitlog, start, end))
    assert_matches(reference, expected)
    assert len(points) > 300
    for p in points:
        feed = [(start, commitlog[start:p]), (p, commitlog[p:end])]
        got = rows(list(decode_commitlog_range(feed, start, end, MAPPED_FILE_SIZE, broker="broker-a")))
        assert got == reference, p


@pytest.mark.parametrize("size", [1, 7, 8, 13, 91, 4096])
def test_small_chunk_sizes(commitlog, messages, size):
    start = messages[40]["commitLogOffset"]
    end = messages[52]["commitLogOffset"]
    assert_matches(rows(decode(commitlog, start, end, chunk=size)), messages[40:52])


def test_batches_are_bounded_in_rows_and_bytes_and_memory(commitlog, messages):
    dec = CommitLogArrowDecoder(0, MAX_OFFSET, MAPPED_FILE_SIZE, broker="broker-a",
                                settings=DecodeSettings(max_records_per_batch=7, max_bytes_per_batch=20000))
    largest_record = max(m["storeSize"] for m in messages)
    batches = []
    peak = 0
    for off, data in chunks(commitlog, 0, MAX_OFFSET, 32768):
        batches.extend(dec.feed(off, data))
        peak = max(peak, dec.buffered_bytes)
    batches.extend(dec.finish())
    assert all(1 <= b.num_rows <= 7 for b in batches)
    for b in batches:
        sizes = b.column("storeSize").to_pylist()
        assert sum(sizes[:-1]) < 20000  # the limit is reached by the batch's last record at most
    assert peak <= 20000 + largest_record + 32768
    assert_matches(rows(batches), messages)


def test_empty_range_yields_nothing(commitlog):
    assert decode(commitlog, 554616, 554616) == []
    assert CommitLogArrowDecoder(5, 5, MAPPED_FILE_SIZE, broker="b").done


# --- errors ------------------------------------------------------------------------------------------
def test_start_that_is_not_a_record_boundary_names_offset_and_magic(commitlog):
    with pytest.raises(CommitLogFormatError, match=r"bad MAGICCODE .* at CommitLog offset 100 \(file "
                                                   r"00000000000000000000\), field MAGICCODE"):
        decode(commitlog, 100, 200000)


def test_end_that_is_not_a_record_boundary(commitlog, messages):
    end = messages[2]["commitLogOffset"] + 10
    with pytest.raises(CommitLogFormatError, match=f"crosses the range end {end}.*CommitLog offset "
                                                   f"{messages[2]['commitLogOffset']}.*field TOTALSIZE"):
        decode(commitlog, 0, end)


def test_range_past_the_written_data_reports_unwritten_bytes(commitlog):
    with pytest.raises(CommitLogFormatError, match=r"unwritten bytes.*CommitLog offset 3402931 \(file "
                                                   r"00000000000003145728\), field MAGICCODE"):
        decode(commitlog, 3145728, MAX_OFFSET + 200)


def test_stream_that_stops_early_fails_in_finish(commitlog, messages):
    end = messages[10]["commitLogOffset"]
    feed = [(0, commitlog[0:end - 5])]
    with pytest.raises(CommitLogFormatError, match=f"range \\[0, {end}\\) ended after .* incomplete record"):
        list(decode_commitlog_range(feed, 0, end, MAPPED_FILE_SIZE, broker="b"))


def test_chunks_must_continue_the_stream(commitlog):
    dec = CommitLogArrowDecoder(0, 200000, MAPPED_FILE_SIZE, broker="b")
    list(dec.feed(0, commitlog[:1000]))
    with pytest.raises(ValueError, match="chunk at CommitLog offset 1001 does not continue the stream at 1000"):
        list(dec.feed(1001, commitlog[1001:2000]))


def _corrupt(commitlog: bytes, pos: int, value: bytes) -> bytes:
    return commitlog[:pos] + value + commitlog[pos + len(value):]


def test_corrupt_fields_are_named(commitlog, messages):
    m = messages[4]
    at = m["commitLogOffset"]
    end = messages[6]["commitLogOffset"]
    cases = [
        (at + 28, (at + 1).to_bytes(8, "big"), "PHYSICALOFFSET"),  # PHYSICALOFFSET field
        (at + 84, (10 ** 8).to_bytes(4, "big"), "BODY"),  # BODY length
        (at + 4, b"\x00\x00\x00\x01", "MAGICCODE"),
        (at, (50).to_bytes(4, "big"), "TOTALSIZE"),
        (at, (MAPPED_FILE_SIZE).to_bytes(4, "big"), "TOTALSIZE"),
    ]
    for pos, value, field in cases:
        with pytest.raises(CommitLogFormatError) as err:
            decode(_corrupt(commitlog, pos, value), 0, end)
        assert err.value.offset == at and err.value.field == field, (field, str(err.value))


def test_wrong_blank_size_is_an_error(commitlog):
    bad = _corrupt(commitlog, 997099, (100).to_bytes(4, "big"))
    with pytest.raises(CommitLogFormatError, match="END_FILE blank TOTALSIZE 100 does not reach .* offset 997099"):
        decode(bad, 0, MAPPED_FILE_SIZE)


def test_jump_skips_a_lost_range_and_keeps_walked_records(commitlog, messages):
    in_file0 = [m for m in messages if m["commitLogOffset"] < MAPPED_FILE_SIZE]
    start = in_file0[-5]["commitLogOffset"]
    cut = in_file0[-2]["commitLogOffset"] + 10  # mid-record: that record is lost
    end = 2 * MAPPED_FILE_SIZE
    dec = CommitLogArrowDecoder(start, end, MAPPED_FILE_SIZE, broker="broker-a")
    # the HA stage's receives: a chunk starting past the stream offset is the broker's gap
    receives = [[(start, commitlog[start:cut])], list(chunks(commitlog, MAPPED_FILE_SIZE, end, 32768))]
    out = list(dec.decode_receives(receives, "test"))
    expected = in_file0[-5:-2] + [m for m in messages if MAPPED_FILE_SIZE <= m["commitLogOffset"] < end]
    assert_matches(rows(out), expected)
    with pytest.raises(ValueError, match="cannot jump back"):
        list(CommitLogArrowDecoder(start, end, MAPPED_FILE_SIZE, broker="broker-a").decode_receives(
            [[(start, commitlog[start:cut])], [(5, b"x")]]))


# --- against the scalar codec on synthetic records (IPv6 hosts, odd properties, compression) ---------
_hosts = st.one_of(
    st.builds(HostAddress, st.binary(min_size=4, max_size=4), st.integers(0, 65535)),
    st.builds(HostAddress, st.binary(min_size=16, max_size=16), st.integers(-2 ** 31, 2 ** 31 - 1)),
)
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_props = st.one_of(
    st.dictionaries(_text.filter(lambda s: "\x01" not in s and "\x02" not in s and s), _text, max_size=5),
    st.binary(max_size=40),  # arbitrary bytes: invalid UTF-8, separators first/last, duplicates, trailing \x02
    st.text(alphabet="ab\x01\x02", max_size=40).map(str.encode),  # mostly separators: duplicate names, odd cuts
)


@st.composite
def _records(draw):
    n = draw(st.integers(1, 6))
    recs = []
    for _ in range(n):
        compressed = draw(st.booleans())
        body = draw(st.binary(max_size=300))
        sys_flag = draw(st.sampled_from([0, 0x2, 0x8, 0x4, 0xC]))
        if compressed:
            body = zlib.compress(body)
            sys_flag |= COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE
        recs.append(dict(
            topic=draw(st.text(alphabet="abcXYZ%_-|é值", max_size=20).filter(lambda s: len(s.encode()) <= 127)),
            body=body, queue_id=draw(st.integers(-2 ** 31, 2 ** 31 - 1)), flag=draw(st.integers(-2 ** 31, 2 ** 31 - 1)),
            queue_offset=draw(st.integers(0, 2 ** 62)), sys_flag=sys_flag,
            born_timestamp=draw(st.integers(0, 2 ** 45)), born_host=draw(_hosts),
            store_timestamp=draw(st.integers(0, 2 ** 45)), store_host=draw(_hosts),
            reconsume_times=draw(st.integers(0, 16)), prepared_transaction_offset=draw(st.integers(0, 2 ** 40)),
            properties=draw(_props)))
    return recs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=_records(), base=st.integers(0, 2 ** 40))
def test_vectorised_columns_equal_the_scalar_codec(recs, base):
    data = bytearray()
    starts = []
    for r in recs:
        starts.append(len(data))
        data += encode_record(commit_log_offset=base + len(data), **r)
    batches = list(iter_record_batches(bytes(data), np.array(starts, dtype=np.int64), base, broker="broker-a",
                                       mapped_file_size=2 ** 62))
    got = rows(batches)
    assert len(got) == len(recs)
    for pos, g in zip(starts, got, strict=True):
        rec = decode_record(data, pos, base_offset=base)
        e = record_to_json(rec)
        for f in FIELDS:
            assert g[f] == e[f], f
        assert g["body"] == rec.decompressed_body()


def test_decoder_handles_synthetic_files_with_blanks_and_ipv6():
    size = 4096
    v6 = HostAddress(bytes(range(16)), 10911)
    data = bytearray()
    for file_start in (0, size):
        pos = file_start
        while True:
            rec = encode_record(commit_log_offset=pos, topic="T6", body=b"x" * 300, store_host=v6, born_host=v6,
                                properties={"KEYS": "a b", "TAGS": "t"})
            if pos + len(rec) + 8 > file_start + size:
                break
            data += rec
            pos += len(rec)
        data += encode_blank(file_start + size - pos) + bytes(file_start + size - pos - 8)
    expected = list(_iter_scalar(bytes(data), size))
    got = rows(list(decode_commitlog_range(chunks(bytes(data), 0, 2 * size, 333), 0, 2 * size, size, broker="b")))
    assert [g["commitLogOffset"] for g in got] == [e["commitLogOffset"] for e in expected]
    for g, e in zip(got, expected, strict=True):
        assert (g["bornHost"], g["storeHost"], g["msgId"], g["keys"], g["tags"]) == (
            e["bornHost"], e["storeHost"], e["msgId"], e["keys"], e["tags"])
        assert len(g["msgId"]) == 56


def _iter_scalar(data: bytes, size: int):
    from connector.protocol.commitlog import MessageRecord, iter_records

    for base in range(0, len(data), size):
        for rec in iter_records(data[base:base + size], base_offset=base):
            if isinstance(rec, MessageRecord):
                yield record_to_json(rec)


# --- topic filter, fast walk, memory bounds for inflated bodies --------------------------------------
def test_topic_filters_drop_records_before_rows_are_built(commitlog, messages):
    from connector.decode.topic_filter import TopicFilter
    from connector.protocol.topics import is_system_topic

    dec = CommitLogArrowDecoder(0, MAX_OFFSET, MAPPED_FILE_SIZE, broker="broker-a",
                                topic_filter=TopicFilter(topics=frozenset({"FixOrders611", "SCHEDULE_TOPIC_XXXX"})))
    got = rows(list(dec.decode_all(chunks(commitlog, 0, MAX_OFFSET, 32768))))
    expected = [m for m in messages if m["topic"] in ("FixOrders611", "SCHEDULE_TOPIC_XXXX")]
    assert_matches(got, expected)
    assert dec.records_filtered == len(messages) - len(expected) and dec.records_emitted == len(expected)
    default = rows(decode(commitlog, 0, MAX_OFFSET, topic_filter=TopicFilter()))
    assert_matches(default, [m for m in messages if not is_system_topic(m["topic"])])
    assert {"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC"} <= {m["topic"] for m in messages}
    pattern = rows(decode(commitlog, 0, MAX_OFFSET, topic_filter=TopicFilter(pattern=r"%(RETRY|DLQ)%.*")))
    assert_matches(pattern, [m for m in messages if m["topic"].startswith(("%RETRY%", "%DLQ%"))])
    assert decode(commitlog, 0, MAX_OFFSET, topic_filter=TopicFilter(topics=frozenset({"nope"}))) == []


MAGIC = bytes.fromhex("DAA320A7")


def _records_with_magic_in_bodies(count: int, base: int = 0) -> tuple[bytes, list[int]]:
    """Records whose bodies contain the MESSAGE MAGICCODE bytes at many positions (false candidates)."""
    data = bytearray()
    starts = []
    for i in range(count):
        body = (b"x" * (i % 7) + b"\x00\x00\x01\x00" + MAGIC + b"y" * (i % 5) + MAGIC * (i % 3)) * (1 + i % 4)
        starts.append(len(data))
        data += encode_record(commit_log_offset=base + len(data), topic=f"t{i % 3}", body=body,
                              properties={"KEYS": f"k{i}", "N": str(i)})
    return bytes(data), starts


def test_magic_bytes_inside_bodies_do_not_confuse_the_walk(kernel):
    chain_record_starts = kernels.active().chain_record_starts

    data, starts = _records_with_magic_in_bodies(200, base=4096)
    found, totals, false_hits = chain_record_starts(data)
    assert found.tolist() == starts
    assert false_hits > 200 if kernel == "numpy" else false_hits == 0  # the native walk follows TOTALSIZE only
    assert (found + totals).tolist() == starts[1:] + [len(data)]
    dec = CommitLogArrowDecoder(4096, 4096 + len(data), 2 ** 30, broker="b")
    got = rows(list(dec.decode_all(chunks(bytes(4096) + data, 4096, 4096 + len(data), 777))))
    assert [g["commitLogOffset"] for g in got] == [4096 + s for s in starts]
    assert [g["properties"]["N"] for g in got] == [str(i) for i in range(200)]
    assert dec.false_magic_candidates == false_hits


def test_chain_stops_before_incomplete_or_irregular_records():
    chain_record_starts = kernels.active().chain_record_starts

    data, starts = _records_with_magic_in_bodies(10)
    found, _, _ = chain_record_starts(data[:starts[7] + 20])  # record 7 is cut short
    assert found.tolist() == starts[:7]
    blanked = data[:starts[4]] + encode_blank(64) + bytes(56)
    assert chain_record_starts(blanked)[0].tolist() == starts[:4]
    with pytest.raises(ValueError, match="does not start with a MESSAGE record"):
        chain_record_starts(b"\x00" * 100)


def test_inflated_bodies_are_split_into_bounded_record_batches():
    body = b"z" * 200000  # ~200 KB inflated, a few hundred bytes stored
    data = bytearray()
    for i in range(40):
        stored = zlib.compress(body + str(i).encode())
        data += encode_record(commit_log_offset=len(data), topic="big", body=stored,
                              sys_flag=COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE)
        data += encode_record(commit_log_offset=len(data), topic="small", body=b"s%d" % i)
    dec = CommitLogArrowDecoder(0, len(data), 2 ** 30, broker="b",
                                settings=DecodeSettings(max_bytes_per_batch=1_000_000))
    batches = list(dec.decode_all([(0, bytes(data))]))
    assert len(batches) >= 8
    for b in batches:
        sizes = [len(v) for v in b.column("body").to_pylist()]
        assert sum(sizes[:-1]) <= 1_000_000  # at most one body past the cap
    bodies = [v for b in batches for v in b.column("body").to_pylist()]
    assert bodies == [x for i in range(40) for x in (body + str(i).encode(), b"s%d" % i)]


def test_a_record_larger_than_many_chunks_is_walked_once_complete():
    data = encode_record(commit_log_offset=0, topic="big", body=b"q" * 3_000_000)
    dec = CommitLogArrowDecoder(0, len(data), 2 ** 30, broker="b")
    out = []
    for off, piece in chunks(data, 0, len(data), 32768):
        out += dec.feed(off, piece)
        assert dec.records_walked == 0 or off + len(piece) == len(data)
    out += dec.finish()
    assert [len(v) for b in out for v in b.column("body").to_pylist()] == [3_000_000]


def test_bodies_inflate_the_same_with_and_without_zlib_ng(commitlog, messages, monkeypatch):
    with_fast = rows(decode(commitlog, 0, MAX_OFFSET))
    monkeypatch.setattr(kernels.active(), "zlib_module", zlib)
    assert rows(decode(commitlog, 0, MAX_OFFSET)) == with_fast
    assert sum(1 for m in messages if m["sysFlag"] & COMPRESSED_FLAG) == 71


@pytest.mark.parametrize("stored, sys_flag, error", [
    (zlib.compress(b"abc" * 1000)[:-9], COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE, "ZLIB body does not inflate"),
    (zlib.compress(bytes(range(256)) * 40)[:40] + b"\xff" * 20, COMPRESSED_FLAG, "ZLIB body does not inflate"),
    (zlib.compress(b"abc"), COMPRESSED_FLAG | 0x100, "LZ4 body is not an LZ4 frame"),
])
def test_bad_compressed_bodies_after_good_ones_name_the_record_in_failfast_mode(stored, sys_flag, error):
    data = bytearray()
    for i in range(5):  # good rows first: the error must name the bad record, not the group
        data += encode_record(commit_log_offset=len(data), topic="t", body=zlib.compress(b"ok%d" % i * 3000),
                              sys_flag=COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE)
    bad_at = len(data)
    data += encode_record(commit_log_offset=bad_at, topic="t", body=stored, sys_flag=sys_flag)
    with pytest.raises(CommitLogFormatError, match=f"broker b: {error}.*CommitLog offset {bad_at}.*BODY"):
        list(decode_commitlog_range([(0, bytes(data))], 0, len(data), 2 ** 30, broker="b", mode="FAILFAST"))
    raw = rows(list(decode_commitlog_range([(0, bytes(data))], 0, len(data), 2 ** 30, broker="b",
                                           decompress_body=False)))
    assert raw[-1]["body"] == stored


def test_a_body_that_does_not_inflate_names_the_record_in_failfast_mode():
    good = encode_record(commit_log_offset=0, topic="t", body=b"fine")
    bad = encode_record(commit_log_offset=len(good), topic="t", body=b"not zlib at all",
                        sys_flag=COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE)
    with pytest.raises(CommitLogFormatError, match=f"ZLIB body does not inflate.*CommitLog offset {len(good)}.*BODY"):
        list(decode_commitlog_range([(0, good + bad)], 0, len(good + bad), 2 ** 30, broker="b", mode="failfast"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flips=st.lists(st.tuples(st.integers(0, 2 ** 20), st.integers(0, 255)), min_size=1, max_size=6),
       chunk=st.sampled_from([97, 4096, 32768]))
def test_corrupted_bytes_end_in_rows_or_a_named_error_never_a_crash(commitlog, messages, flips, chunk):
    # the fixture's records up to ~40 KB (compressed bodies, properties, many topics) with bytes overwritten
    end = max(e for e in (m["commitLogOffset"] + m["storeSize"] for m in messages) if e <= 41_000)
    data = bytearray(commitlog[:end])
    for at, value in flips:
        data[at % end] = value
    try:
        batches = list(decode_commitlog_range(chunks(bytes(data), 0, end, chunk), 0, end, MAPPED_FILE_SIZE,
                                              broker="b"))
    except CommitLogFormatError as exc:
        assert exc.offset is not None and 0 <= exc.offset < end and exc.field
        return
    assert all(b.schema == ARROW_SCHEMA for b in batches)


@pytest.mark.parametrize("columns", [("body", "decodeError"), ("topic", "msgId", "storeHost", "bornHost", "broker"),
                                     ("queueOffset", "tags"), ("properties", "storeTimestamp", "body")])
def test_a_column_set_builds_only_those_columns_with_the_whole_schemas_values(commitlog, columns, monkeypatch):
    """``columns`` (docs/source.md "Speed and memory"): the batches hold exactly those columns, in the source's
    order, with the values the whole schema's batches hold; PROPERTIES is split only for a column made from it."""
    whole = pa.Table.from_batches(decode(commitlog, 0, MAX_OFFSET))
    splits = []
    active = kernels.active()
    real = active.properties
    monkeypatch.setattr(active, "properties", lambda *a: splits.append(1) or real(*a))
    got = decode(commitlog, 0, MAX_OFFSET, columns=set(columns))
    order = [name for name in ARROW_SCHEMA.names if name in columns]
    assert {tuple(b.schema.names) for b in got} == {tuple(order)}
    assert pa.Table.from_batches(got).equals(whole.select(order))
    assert bool(splits) == bool({"properties", "tags", "keys", "uniqKey"} & set(columns))


def test_a_column_set_naming_no_source_column_is_refused(commitlog):
    with pytest.raises(ValueError, match="not a column of the source: orderId"):
        decode(commitlog, 0, MAX_OFFSET, columns={"body", "orderId"})
