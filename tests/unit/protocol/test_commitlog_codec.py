"""Property-based round trips and error cases of the CommitLog codec (docs/protocol.md §1.2–§1.9)."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import BodyDecodeError, CommitLogFormatError
from connector.protocol.commitlog import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_LZ4_TYPE,
    COMPRESSION_ZLIB_TYPE,
    COMPRESSION_ZSTD_TYPE,
    MIN_RECORD_SIZE_BYTES,
    RECORD_FIELDS,
    STOREHOSTADDRESS_V6_FLAG,
    V4_HEADER_BYTES,
    BatchEntry,
    BlankRecord,
    HostAddress,
    MessageRecord,
    body_crc,
    calc_msg_length,
    check_body_crc,
    compress_body,
    compression_type_name,
    decode_batch_body,
    decode_offset_msg_id,
    decode_record,
    decompress_body,
    encode_batch_body,
    encode_blank,
    encode_properties,
    encode_record,
    field_positions,
    inflate_body,
    iter_records,
    offset_msg_id,
    parse_properties,
)

ipv4 = st.binary(min_size=4, max_size=4)
ipv6 = st.binary(min_size=16, max_size=16)
hosts = st.builds(HostAddress, st.one_of(ipv4, ipv6), st.integers(0, 65535))
prop_text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)),
                    min_size=1, max_size=12)
props = st.dictionaries(prop_text, prop_text, max_size=5)
topics = st.text(st.characters(whitelist_categories=("L", "N"), max_codepoint=0x7F), min_size=1, max_size=127)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(0, 2**62)


@settings(max_examples=300, deadline=None)
@given(offset=i64, topic=topics, body=st.binary(max_size=600), queue_id=st.integers(0, 1024), flag=i32,
       queue_offset=i64, sys_flag=st.sampled_from([0, 0x2, 0x4, 0x8, 0xC]), born_ts=i64, store_ts=i64,
       born=hosts, store=hosts, reconsume=st.integers(0, 16), prepared=i64, properties=props)
def test_encode_decode_round_trip(offset, topic, body, queue_id, flag, queue_offset, sys_flag, born_ts, store_ts,
                                  born, store, reconsume, prepared, properties):
    raw = encode_record(commit_log_offset=offset, topic=topic, body=body, queue_id=queue_id, flag=flag,
                        queue_offset=queue_offset, sys_flag=sys_flag, born_timestamp=born_ts, born_host=born,
                        store_timestamp=store_ts, store_host=store, reconsume_times=reconsume,
                        prepared_transaction_offset=prepared, properties=properties)
    rec = decode_record(raw, base_offset=offset, check_crc=True)
    assert isinstance(rec, MessageRecord)
    assert rec.store_size == len(raw) == calc_msg_length(rec.sys_flag, len(body), len(topic.encode()),
                                                          len(encode_properties(properties).encode()))
    assert (rec.topic, rec.body, rec.queue_id, rec.flag, rec.queue_offset) == (topic, body, queue_id, flag,
                                                                              queue_offset)
    assert (rec.born_timestamp, rec.store_timestamp, rec.born_host, rec.store_host) == (born_ts, store_ts, born,
                                                                                      store)
    assert (rec.reconsume_times, rec.prepared_transaction_offset) == (reconsume, prepared)
    assert rec.properties == properties
    assert rec.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    assert bool(rec.sys_flag & BORNHOST_V6_FLAG) == born.is_v6
    assert bool(rec.sys_flag & STOREHOSTADDRESS_V6_FLAG) == store.is_v6
    assert decode_offset_msg_id(rec.msg_id) == (store, offset)
    assert len(rec.msg_id) == (56 if store.is_v6 else 32)


@settings(max_examples=200, deadline=None)
@given(properties=props, trailing=st.booleans())
def test_properties_with_and_without_trailing_separator(properties, trailing):
    text = encode_properties(properties) + ("\x02" if trailing and properties else "")
    assert parse_properties(text) == properties


def test_properties_parser_follows_upstream_rules():
    assert parse_properties("") == {}
    assert parse_properties("a\x01b\x02") == {"a": "b"}  # 4.9.0 trailing separator
    assert parse_properties("ab\x02c\x01d") == {"c": "d"}  # segment without separator skipped
    assert parse_properties("\x01bc\x02k\x01v") == {"k": "v"}  # separator first: skipped
    assert parse_properties("kv\x01\x02x\x01yz") == {"x": "yz"}  # separator last: skipped
    assert parse_properties("k\x011\x02k\x012") == {"k": "2"}  # later duplicate wins
    assert parse_properties("k\x01a=b:c d") == {"k": "a=b:c d"}


def test_offset_msg_id_example_from_spec():
    host = HostAddress.parse("192.168.1.10:10911")
    assert offset_msg_id(host, 0x1234) == "C0A8010A00002A9F0000000000001234"


def test_ipv6_hosts_grow_the_record_by_12_bytes_each():
    v6 = HostAddress.parse("[::1]:10911")
    v4 = HostAddress.parse("127.0.0.1:10911")
    base = len(encode_record(commit_log_offset=0, topic="t", body=b"x", born_host=v4, store_host=v4))
    assert len(encode_record(commit_log_offset=0, topic="t", body=b"x", born_host=v6, store_host=v4)) == base + 12
    assert len(encode_record(commit_log_offset=0, topic="t", body=b"x", born_host=v6, store_host=v6)) == base + 24
    assert str(v6) == "0:0:0:0:0:0:0:1:10911"


def test_the_layout_table_gives_the_stored_positions_with_ipv4_and_ipv6_hosts():
    # the positions RocketMQ 4.9.8's DefaultAppendMessageCallback writes (docs/protocol.md §1.2)
    assert dict(field_positions(0)) == {
        "TOTALSIZE": 0, "MAGICCODE": 4, "BODYCRC": 8, "QUEUEID": 12, "FLAG": 16, "QUEUEOFFSET": 20,
        "PHYSICALOFFSET": 28, "SYSFLAG": 36, "BORNTIMESTAMP": 40, "BORNHOST": 48, "STORETIMESTAMP": 56,
        "STOREHOSTADDRESS": 64, "RECONSUMETIMES": 72, "PREPAREDTRANSACTIONOFFSET": 76, "BODY": 84, "TOPIC": 88,
        "PROPERTIES": 89}
    both_v6 = field_positions(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    assert (both_v6["STORETIMESTAMP"], both_v6["STOREHOSTADDRESS"], both_v6["BODY"]) == (68, 76, 108)
    assert field_positions(STOREHOSTADDRESS_V6_FLAG)["RECONSUMETIMES"] == 84
    assert field_positions(COMPRESSED_FLAG) is field_positions(0)  # only the host bits matter
    assert (MIN_RECORD_SIZE_BYTES, V4_HEADER_BYTES) == (91, 88)
    assert [f.name for f in RECORD_FIELDS if f.variable] == ["BODY", "TOPIC", "PROPERTIES"]
    # a record's bytes sit where the table says: the codec writes every field at its position
    v6 = HostAddress.parse("[::1]:10911")
    rec = encode_record(commit_log_offset=7, topic="t", body=b"xyz", store_host=v6, queue_offset=5,
                        reconsume_times=3, prepared_transaction_offset=9)
    at = field_positions(STOREHOSTADDRESS_V6_FLAG)
    assert struct.unpack_from(">q", rec, at["PHYSICALOFFSET"])[0] == 7
    assert struct.unpack_from(">q", rec, at["QUEUEOFFSET"])[0] == 5
    assert rec[at["STOREHOSTADDRESS"]:at["STOREHOSTADDRESS"] + 16] == v6.ip
    assert struct.unpack_from(">iq", rec, at["RECONSUMETIMES"]) == (3, 9)
    assert struct.unpack_from(">i", rec, at["BODY"])[0] == 3 and rec[at["BODY"] + 4:at["BODY"] + 7] == b"xyz"


def test_compressed_body_inflated_by_sysflag():
    body = b"order " * 2000
    raw = encode_record(commit_log_offset=0, topic="t", body=zlib.compress(body),
                        sys_flag=COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE)
    rec = decode_record(raw)
    assert rec.decompressed_body() == body
    assert decompress_body(zlib.compress(body), COMPRESSED_FLAG) == body  # type 0 = ZLIB for old producers
    assert decompress_body(b"plain", 0) == b"plain"


def test_unsupported_or_corrupt_compression_names_offset_and_field():
    with pytest.raises(CommitLogFormatError, match=r"LZ4.*offset 77.*field BODY"):
        decompress_body(b"xx", COMPRESSED_FLAG | COMPRESSION_LZ4_TYPE, offset=77)
    with pytest.raises(CommitLogFormatError, match=r"inflate.*offset 5.*field BODY"):
        decompress_body(b"not zlib", COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE, offset=5)


@pytest.mark.parametrize("kind", ["ZLIB", "LZ4", "ZSTD"])
def test_compress_body_as_the_java_client_and_inflate_body_round_trip(kind):
    body = b"".join(b"event %d;" % i for i in range(5000))
    stored, flags = compress_body(body, kind)
    assert flags & COMPRESSED_FLAG and compression_type_name(flags) == kind
    assert len(stored) < len(body) // 2
    assert inflate_body(stored, flags) == body == inflate_body(stored, flags, max_bytes=len(body))
    with pytest.raises(BodyDecodeError, match=f"^BODY: {kind} body decompresses to more than "
                                              f"{len(body) - 1} bytes$"):
        inflate_body(stored, flags, max_bytes=len(body) - 1)
    assert decompress_body(stored, flags) == body
    assert inflate_body(stored, 0) == stored  # not flagged: the stored bytes


def test_inflate_body_names_what_is_wrong():
    cases = [(b"junk", COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE, "ZLIB body does not inflate"),
             (zlib.compress(b"x" * 100)[:-3], COMPRESSED_FLAG, "ZLIB body does not inflate"),
             (b"junk", COMPRESSED_FLAG | COMPRESSION_LZ4_TYPE, "LZ4 body is not an LZ4 frame"),
             (b"junk", COMPRESSED_FLAG | COMPRESSION_ZSTD_TYPE, "ZSTD body is not a zstd frame"),
             (b"junk", COMPRESSED_FLAG | 0x700, "unknown compression type UNKNOWN\\(7\\) \\(sysFlag 0x701\\)")]
    for stored, flags, reason in cases:
        with pytest.raises(BodyDecodeError, match=reason) as err:
            inflate_body(stored, flags, max_bytes=1000)
        assert err.value.field == "BODY"


def test_check_body_crc_masks_to_31_bits_and_names_both_values():
    body = b"\x00" * 3 + b"crc"
    check_body_crc(body, zlib.crc32(body) & 0x7FFFFFFF)
    with pytest.raises(BodyDecodeError, match=r"^BODYCRC: mismatch: stored 0xFFFFFFFF, computed 0x[0-9A-F]{8} over "
                                              r"the 6 stored body bytes$"):
        check_body_crc(body, -1)
    rec = decode_record(encode_record(commit_log_offset=0, topic="t", body=body, body_crc_value=5))
    assert rec.body_crc == 5


def _record(offset=1000, **kw):
    return encode_record(commit_log_offset=offset, topic="TopicA", body=b"hello", properties={"TAGS": "t"}, **kw)


def test_bad_magic_names_offset_field_and_file():
    raw = bytearray(_record())
    raw[4:8] = b"\x12\x34\x56\x78"
    with pytest.raises(CommitLogFormatError) as err:
        decode_record(raw, base_offset=1000, file="00000000000000000000")
    assert err.value.offset == 1000 and err.value.field == "MAGICCODE"
    assert "00000000000000000000" in str(err.value) and "0x12345678" in str(err.value)


def test_truncated_record():
    raw = _record()
    with pytest.raises(CommitLogFormatError, match="truncated") as err:
        decode_record(raw[:-3], base_offset=1000)
    assert err.value.offset == 1000
    with pytest.raises(CommitLogFormatError, match="truncated"):
        decode_record(raw[:5], base_offset=1000)


def test_size_past_the_end_of_the_file():
    raw = _record()
    with pytest.raises(CommitLogFormatError, match="past the end of the file") as err:
        decode_record(raw + b"\0" * 10, base_offset=1000, file_end=len(raw) - 1, file="f")
    assert err.value.field == "TOTALSIZE"


def test_totalsize_below_minimum_and_inconsistent_lengths():
    raw = bytearray(_record())
    bad = bytearray(raw)
    struct.pack_into(">i", bad, 0, 50)
    with pytest.raises(CommitLogFormatError, match="minimum") as err:
        decode_record(bad)
    assert err.value.field == "TOTALSIZE"
    bad = bytearray(raw)
    struct.pack_into(">i", bad, 84, 4000)  # body length far past TOTALSIZE
    with pytest.raises(CommitLogFormatError) as err:
        decode_record(bad)
    assert err.value.field == "BODY"
    bad = bytearray(raw) + b"\0\0"
    struct.pack_into(">i", bad, 0, len(raw) + 2)  # properties length disagrees with TOTALSIZE
    with pytest.raises(CommitLogFormatError) as err:
        decode_record(bad)
    assert err.value.field == "PROPERTIES"


def test_v6_sysflag_bits_on_a_record_too_small_for_them():
    raw = bytearray(encode_record(commit_log_offset=0, topic="t", body=b"x"))  # IPv4 hosts, 101 bytes
    struct.pack_into(">i", raw, 36, BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    with pytest.raises(CommitLogFormatError, match="too small for the fixed fields") as err:
        decode_record(raw, base_offset=64)
    assert err.value.field == "TOTALSIZE" and err.value.offset == 64


def test_crc_mismatch_only_when_checked():
    raw = bytearray(_record())
    raw[88] ^= 0xFF  # first body byte
    assert isinstance(decode_record(raw), MessageRecord)
    with pytest.raises(CommitLogFormatError, match="BODYCRC mismatch") as err:
        decode_record(raw, base_offset=1000, check_crc=True)
    assert err.value.field == "BODYCRC" and err.value.offset == 1000


def test_blank_records_and_file_walk():
    size = 4096
    first = _record(offset=0)
    second = _record(offset=len(first))
    used = len(first) + len(second)
    data = first + second + encode_blank(size - used) + b"\0" * (size - used - 8)
    recs = list(iter_records(data, base_offset=0, file_end=size))
    assert [type(r) for r in recs] == [MessageRecord, MessageRecord, BlankRecord]
    assert recs[2] == BlankRecord(used, size - used)
    short_blank = bytearray(data)
    struct.pack_into(">i", short_blank, used, size)  # blank claims more than the file has
    with pytest.raises(CommitLogFormatError, match="END_FILE"):
        list(iter_records(short_blank, base_offset=0, file_end=size))
    assert struct.unpack(">i", encode_blank(8)[4:])[0] == BLANK_MAGIC_CODE
    with pytest.raises(ValueError):
        encode_blank(7)


def test_encode_limits():
    with pytest.raises(ValueError, match="127"):
        encode_record(commit_log_offset=0, topic="x" * 128, body=b"")
    with pytest.raises(ValueError, match="32767"):
        encode_record(commit_log_offset=0, topic="t", body=b"", properties={"k": "v" * 40000})
    assert len(encode_record(commit_log_offset=0, topic="", body=b"")) == MIN_RECORD_SIZE_BYTES


@settings(max_examples=100, deadline=None)
@given(st.lists(st.builds(BatchEntry, i32, st.binary(max_size=200), st.just("") | st.builds(encode_properties, props)),
                max_size=8))
def test_batch_body_round_trip(entries):
    assert decode_batch_body(encode_batch_body(entries)) == entries


def test_batch_body_errors_name_the_field():
    raw = encode_batch_body([BatchEntry(0, b"abc", "k\x01v")])
    with pytest.raises(CommitLogFormatError) as err:
        decode_batch_body(raw[:-1])
    assert err.value.field in ("PROPERTIES", "BODY")
    with pytest.raises(CommitLogFormatError):
        decode_batch_body(raw[:10])


def test_body_crc_of_empty_body_is_zero():
    assert body_crc(b"") == 0
