"""Bodies the real 4.9.8 Java client compressed with ZLIB, LZ4 and ZSTD decode through the source's Arrow decoder
(docs/source.md, "Compressed bodies"): the real producer sends to a stub master, the master's CommitLog bytes go
through :func:`tests.support.decoding.decode_commitlog_range` on both decode paths, and every body equals what
the client sent (SHA-256), with no ``decodeError``.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from streaming_apps.inspect_commitlog import commitlog_files
from tests.interop.java_fixtures import COMPRESSED_FLAG, COMPRESSION_TYPE_BITS, wait_for_route
from tests.support.brokers import max_offset
from tests.support.decoding import decode_commitlog_range, use_decode_kernels
from tests.support.fixtures import namesrv_factory  # noqa: F401 - fixture
from tests.support.java_tools import run_java


@pytest.fixture(params=["native", "numpy"])
def kernel(request, monkeypatch) -> str:
    """The test runs through the native kernel and through the NumPy path (same results)."""
    return use_decode_kernels(monkeypatch, request.param)


def test_java_client_lz4_zstd_zlib_bodies_decode_to_what_was_sent(broker_factory, namesrv_factory,  # noqa: F811
                                                                   tmp_path, kernel):
    ns = namesrv_factory()
    master = broker_factory("master", namesrvAddr=ns.addr)
    wait_for_route(ns.addr)
    sent = {}
    for kind in ("ZLIB", "LZ4", "ZSTD"):
        run = run_java("JavaProducer", [f"namesrv={ns.addr}", f"topic=Compressed{kind}", "group=pg_compressed",
                                        "cases=compressed"],
                       props={"rocketmq.message.compressType": kind}, log_dir=tmp_path / f"client-{kind}")
        assert [line["status"] for line in run.lines] == ["SEND_OK"] * 3, run.lines
        sent.update({line["messages"][0]["uniqKey"]: (kind, line["messages"][0]["bodySha256"]) for line in run.lines})
    (start, path), *rest = commitlog_files(master.commitlog_dir)
    assert not rest and start == 0
    data = path.read_bytes()
    end = max_offset(master.remoting_addr)
    table = pa.Table.from_batches(list(decode_commitlog_range([(0, data[:end])], 0, end, len(data),
                                                              broker="broker-a")))
    rows = {r["uniqKey"]: r for r in table.to_pylist() if r["uniqKey"] in sent}
    assert set(rows) == set(sent)
    for uniq, (kind, sha) in sent.items():
        row = rows[uniq]
        assert row["sysFlag"] & 0x701 == COMPRESSED_FLAG | COMPRESSION_TYPE_BITS[kind]
        assert row["decodeError"] is None
        assert hashlib.sha256(row["body"]).hexdigest() == sha, (kind, uniq)
