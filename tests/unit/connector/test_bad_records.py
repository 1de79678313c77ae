"""Bad records (docs/source.md, "Bad records"): bodies that do not decompress, unknown compression types,
BODYCRC mismatches and zip bombs become rows with the stored bytes and a ``decodeError`` (PERMISSIVE, the
default) or a CommitLogFormatError naming broker, offset, file and field (FAILFAST); LZ4 and ZSTD bodies
in the 4.9.8 client's frame formats decompress. Every test runs through the native kernel and the NumPy path.
"""

from __future__ import annotations

import zlib

import lz4.frame
import pyarrow as pa
import pytest
import zstandard

from connector.decode.schema import ARROW_SCHEMA
from connector.decode.stream import CommitLogArrowDecoder
from connector.errors import CommitLogFormatError
from connector.options.settings import DecodeSettings
from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_LZ4_TYPE,
    COMPRESSION_ZLIB_TYPE,
    COMPRESSION_ZSTD_TYPE,
    body_crc,
    encode_record,
)
from tests.support.decoding import decode_commitlog_range, use_decode_kernels

ZLIB = COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE
LZ4 = COMPRESSED_FLAG | COMPRESSION_LZ4_TYPE
ZSTD = COMPRESSED_FLAG | COMPRESSION_ZSTD_TYPE
FILE_SIZE = 1 << 30
BOUND = 1 << 20  # maxInflatedBodyBytes in these tests


@pytest.fixture(params=["native", "numpy"], autouse=True)
def kernel(request, monkeypatch) -> str:
    """Every test runs twice: through the native kernel and through the NumPy path (same results)."""
    return use_decode_kernels(monkeypatch, request.param)


def java_lz4(body: bytes) -> bytes:
    """LZ4 frame as lz4-java's LZ4FrameOutputStream(out) writes it: 4 MiB blocks, independent, no checksums."""
    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                                     content_checksum=False, auto_flush=False)
    return c.begin() + c.compress(body) + c.flush()


def java_zstd(body: bytes, level: int = 5) -> bytes:
    """zstd frame as zstd-jni's ZstdOutputStream writes it: streamed, so no content size in the header."""
    c = zstandard.ZstdCompressor(level=level, write_content_size=False).compressobj()
    return c.compress(body) + c.flush()


def commitlog(records: list[tuple[bytes, int] | tuple[bytes, int, int]]) -> tuple[bytes, list[int]]:
    """CommitLog bytes of (stored body, sysFlag[, BODYCRC]) records and their offsets."""
    data, offsets = bytearray(), []
    for stored, sys_flag, *crc in records:
        offsets.append(len(data))
        data += encode_record(commit_log_offset=len(data), topic="t", body=stored, sys_flag=sys_flag,
                              body_crc_value=crc[0] if crc else None)
    return bytes(data), offsets


def decode(data: bytes, chunk: int = 4096, **kw) -> pa.Table:
    pieces = [(p, data[p:p + chunk]) for p in range(0, len(data), chunk)]
    batches = list(decode_commitlog_range(pieces, 0, len(data), FILE_SIZE, broker="broker-a", **kw))
    assert all(b.schema == ARROW_SCHEMA for b in batches)
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


def test_lz4_and_zstd_bodies_in_the_java_clients_frame_formats_decompress():
    text = b"".join(b"order %d shipped to region %d; " % (i, i % 7) for i in range(3000))
    lz4_body, zstd_body = java_lz4(text), java_zstd(text)
    # the frame headers the Java libraries write: LZ4 magic, FLG 0x60 (version 1, block independence), BD 0x70
    # (4 MiB blocks); zstd magic. The bodies really are compressed.
    assert lz4_body[:6] == bytes.fromhex("04224d186070") and zstd_body[:4] == bytes.fromhex("28b52ffd")
    assert len(lz4_body) < len(text) // 3 and len(zstd_body) < len(text) // 3
    data, _ = commitlog([(lz4_body, LZ4), (zstd_body, ZSTD), (zlib.compress(text, 5), ZLIB), (b"plain", 0),
                         (java_lz4(b""), LZ4), (java_zstd(bytes(100_000)), ZSTD)])
    table = decode(data)
    assert table.column("body").to_pylist() == [text, text, text, b"plain", b"", bytes(100_000)]
    assert table.column("decodeError").null_count == table.num_rows
    raw = decode(data, decompress_body=False).column("body").to_pylist()
    assert raw[:2] == [lz4_body, zstd_body]


BAD_CASES = {
    # name: (stored body, sysFlag, BODYCRC override or None, expected decodeError prefix)
    "not zlib": (b"this is not a zlib stream", ZLIB, None, "BODY: ZLIB body does not inflate"),
    "truncated zlib": (zlib.compress(b"abc" * 1000)[:-9], ZLIB, None, "BODY: ZLIB body does not inflate"),
    "old type 0, not zlib": (b"\x78\x9cbroken", COMPRESSED_FLAG, None, "BODY: ZLIB body does not inflate"),
    "lz4 garbage": (b"not an lz4 frame at all", LZ4, None, "BODY: LZ4 body is not an LZ4 frame"),
    "zlib flagged lz4": (zlib.compress(b"abc"), LZ4, None, "BODY: LZ4 body is not an LZ4 frame"),
    "truncated lz4": (java_lz4(b"q" * 5000)[:-6], LZ4, None, "BODY: LZ4 body is not an LZ4 frame"),
    "zstd garbage": (b"not a zstd frame either", ZSTD, None, "BODY: ZSTD body is not a zstd frame"),
    "truncated zstd": (java_zstd(bytes(range(256)) * 64)[:-5], ZSTD, None, "BODY: ZSTD body is not a zstd frame"),
    "unknown type 5": (zlib.compress(b"abc"), COMPRESSED_FLAG | 0x500, None, "BODY: unknown compression type "
                                                                             "UNKNOWN(5)"),
    "crc mismatch": (b"a body changed on disk", 0, 12345, "BODYCRC: mismatch: stored 0x00003039, computed 0x"),
    "crc mismatch, compressed": (zlib.compress(b"x" * 9000), ZLIB, 7, "BODYCRC: mismatch: stored 0x00000007"),
    "zlib bomb": (zlib.compress(bytes(BOUND + 1)), ZLIB, None,
                  f"BODY: ZLIB body decompresses to more than maxInflatedBodyBytes ({BOUND} bytes)"),
    "lz4 bomb": (java_lz4(bytes(BOUND + 1)), LZ4, None, "BODY: LZ4 body decompresses to more than"),
    "zstd bomb": (java_zstd(bytes(BOUND + 1)), ZSTD, None, "BODY: ZSTD body decompresses to more than"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_permissive_keeps_a_bad_record_with_its_stored_bytes_and_the_reason(case):
    stored, sys_flag, crc, reason = BAD_CASES[case]
    good = zlib.compress(b"good " * 2000)
    data, offsets = commitlog([(good, ZLIB), (b"before", 0), (stored, sys_flag, *([crc] if crc is not None else [])),
                               (good, ZLIB), (b"after", 0)])
    table = decode(data, max_inflated_body_bytes=BOUND)
    assert table.column("commitLogOffset").to_pylist() == offsets  # nothing lost, nothing stops
    assert table.column("body").to_pylist() == [b"good " * 2000, b"before", stored, b"good " * 2000, b"after"]
    errors = table.column("decodeError").to_pylist()
    assert errors[:2] == [None, None] and errors[3:] == [None, None]
    assert errors[2].startswith(reason), errors[2]
    assert "\n" not in errors[2]
    # FAILFAST: the error names broker, offset, file and field; the rows before it were complete
    field = reason.split(":")[0]
    with pytest.raises(CommitLogFormatError) as err:
        decode(data, max_inflated_body_bytes=BOUND, mode="FAILFAST")
    assert (err.value.offset, err.value.field, err.value.file) == (offsets[2], field, "00000000000000000000")
    assert str(err.value).startswith("broker broker-a: ")


def test_a_body_of_exactly_the_bound_is_good_and_one_byte_more_is_bad():
    data, _ = commitlog([(zlib.compress(bytes(BOUND)), ZLIB), (java_lz4(bytes(BOUND)), LZ4),
                         (java_zstd(bytes(BOUND)), ZSTD), (zlib.compress(bytes(BOUND + 1)), ZLIB)])
    table = decode(data, max_inflated_body_bytes=BOUND)
    assert [len(b) for b in table.column("body").to_pylist()[:3]] == [BOUND] * 3
    assert [e is None for e in table.column("decodeError").to_pylist()] == [True, True, True, False]


def test_bodycrc_is_checked_on_the_stored_bytes_and_can_be_turned_off():
    body = b"stored body"
    assert body_crc(body) == zlib.crc32(body) & 0x7FFFFFFF  # 31 bits, as UtilAll.crc32
    compressed = zlib.compress(b"y" * 8000)
    corrupt = bytearray(encode_record(commit_log_offset=0, topic="t", body=body))
    corrupt[-len(body) - 4] ^= 0x01  # flip one stored body byte after the CRC was written ("on disk")
    data = bytes(corrupt) + encode_record(commit_log_offset=len(corrupt), topic="t", body=compressed, sys_flag=ZLIB)
    table = decode(data)
    assert table.column("body").to_pylist()[0] == bytes([body[0] ^ 1]) + body[1:]
    assert table.column("decodeError").to_pylist()[0].startswith(
        f"BODYCRC: mismatch: stored 0x{body_crc(body):08X}, computed 0x{body_crc(bytes([body[0] ^ 1]) + body[1:]):08X}")
    assert table.column("decodeError").to_pylist()[1] is None  # the CRC of a compressed body is of its stored bytes
    off = decode(data, verify_body_crc=False)
    assert off.column("decodeError").null_count == 2
    # with decompressBody=false the CRC is still checked
    assert decode(data, decompress_body=False).column("decodeError").to_pylist()[0].startswith("BODYCRC:")


def test_bad_records_in_many_groups_and_batches_keep_order_and_count(kernel):
    # a bad body in every third record, bodies large enough to cut body groups and record batches
    records = []
    for i in range(60):
        if i % 3 == 1:
            records.append((b"\x78\x9c" + bytes([i]) * 50, ZLIB))
        else:
            records.append((zlib.compress(bytes([i]) * 40_000), ZLIB))
    data, offsets = commitlog(records)
    dec = CommitLogArrowDecoder(0, len(data), FILE_SIZE, broker="broker-a",
                                settings=DecodeSettings(max_bytes_per_batch=100_000))
    table = pa.Table.from_batches(list(dec.decode_all([(0, data)])), schema=ARROW_SCHEMA)
    assert table.column("commitLogOffset").to_pylist() == offsets
    errors = table.column("decodeError").to_pylist()
    assert [i for i, e in enumerate(errors) if e is not None] == list(range(1, 60, 3))
    assert [len(b) for b in table.column("body").to_pylist()] == [52 if i % 3 == 1 else 40_000 for i in range(60)]


def test_mode_is_checked():
    with pytest.raises(ValueError, match="mode 'DROPMALFORMED' is not one of PERMISSIVE, FAILFAST"):
        CommitLogArrowDecoder(0, 0, FILE_SIZE, broker="b", settings=DecodeSettings(mode="DROPMALFORMED"))


def test_bad_record_options_parse_with_defaults_and_name_what_is_wrong():
    from connector.errors import HAReplicaOptionError
    from connector.options.parse import SourceOptions

    decode = SourceOptions.from_options({"brokers": "a=h:2"}).decode
    assert (decode.mode, decode.verify_body_crc, decode.max_inflated_body_bytes) == ("PERMISSIVE", True, 64 << 20)
    decode = SourceOptions.from_options({"brokers": "a=h:2", "MODE": "failFast", "verifybodycrc": "false",
                                         "maxInflatedBodyBytes": "1073741824"}).decode
    assert (decode.mode, decode.verify_body_crc, decode.max_inflated_body_bytes) == ("FAILFAST", False, 1 << 30)
    for options, message in [({"mode": "DROPMALFORMED"}, "option mode='DROPMALFORMED': must be one of permissive, "
                                                         "failfast"),
                             ({"verifyBodyCRC": "yes"}, "option verifyBodyCRC='yes': must be true or false"),
                             ({"maxInflatedBodyBytes": "0"}, "option maxInflatedBodyBytes='0': must be >= 1"),
                             ({"maxInflatedBodyBytes": str(2 ** 31)}, "must be <= 1073741824")]:
        with pytest.raises(HAReplicaOptionError, match=message):
            SourceOptions.from_options({"brokers": "a=h:2", **options})
