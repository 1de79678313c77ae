"""Bodies compressed by the real 4.9.8 Java client with each of its CompressionTypes → stub master (issue 10 §2 c).

The 4.9.8 producer compresses a body of ≥ ``compressMsgBodyOverHowmuch`` (4096) bytes with the type named by the
system property ``rocketmq.message.compressType`` (ZLIB, the default, LZ4 or ZSTD; read once per producer), and
sets sysFlag COMPRESSED (0x1) plus the type in bits 8-10 (LZ4 0x100, ZSTD 0x200, ZLIB 0x300). Per type: every send
SEND_OK, the stored sysFlag carries that type, RocketMQ's MessageDecoder inflates each body to what was sent, and
``hareplica inspect-commitlog`` prints exactly MessageDecoder's rows.
"""

from __future__ import annotations

import pytest

from tests.interop.java_fixtures import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_BITS,
    assert_same_rows,
    decode_with_rocketmq,
    inspect_commitlog_text,
    sha256_b64,
    wait_for_route,
)
from tests.support.fixtures import namesrv_factory  # noqa: F401 - fixture
from tests.support.java_tools import run_java


@pytest.mark.parametrize("compress_type", ["ZLIB", "LZ4", "ZSTD"])
def test_compressed_bodies_round_trip(broker_factory, namesrv_factory, tmp_path,  # noqa: F811
                                      compress_type):
    ns = namesrv_factory()
    master = broker_factory("master", namesrvAddr=ns.addr)
    wait_for_route(ns.addr)
    run = run_java("JavaProducer", [f"namesrv={ns.addr}", f"topic=Compressed{compress_type}", "group=pg_compressed",
                                    "cases=compressed"],
                   props={"rocketmq.message.compressType": compress_type}, log_dir=tmp_path / "client")
    assert [line["status"] for line in run.lines] == ["SEND_OK"] * 3, run.lines
    decoded = decode_with_rocketmq(master.commitlog_dir, tmp_path / "decoder")
    rows = {r["uniqKey"]: r for r in decoded.lines}
    for line in run.lines:
        sent = line["messages"][0]
        row = rows[sent["uniqKey"]]
        assert row["sysFlag"] & 0x701 == COMPRESSED_FLAG | COMPRESSION_TYPE_BITS[compress_type], hex(row["sysFlag"])
        assert row["bodyLength"] < sent["bodyLength"]  # stored compressed
        assert sha256_b64(row["bodyDecompressedBase64"]) == sent["bodySha256"]
    assert_same_rows(decoded, *inspect_commitlog_text(master.commitlog_dir))
