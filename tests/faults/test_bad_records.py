"""Bad records end to end (docs/source.md, "Bad records"): a stub master holds, among good order events, a body
flagged compressed that is not zlib, an LZ4-typed body that is not an LZ4 frame, an unknown compression type,
a body corrupted on disk after it was stored (BODYCRC mismatch) and a zlib bomb (1 MB stored, 1 GiB
inflated), plus good LZ4 and ZSTD bodies in the Java client's frame formats.

- ``hareplica run bronze`` (Spark path and direct landing) lands every record exactly once: the table equals
  the broker's CommitLog, bad records with their stored bytes and a ``decodeError``;
- ``mode=FAILFAST`` fails naming broker, offset, CommitLog file and field;
- silver puts the bad records in its dead-letter table ``silver_quarantine``, the error naming the decodeError;
- decoding the bomb through the executor's read path keeps the process's peak memory bounded.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import msgpack
import pytest

from broker_stub.launcher import BrokerProcess
from connector.decode.bodies import bad_body
from connector.decode.kernels import PURE_PYTHON_ENV
from connector.errors import BodyDecodeError
from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_LZ4_TYPE,
    COMPRESSION_ZLIB_TYPE,
    COMPRESSION_ZSTD_TYPE,
    DEFAULT_MAX_INFLATED_BODY_BYTES,
    V4_HEADER_BYTES,
    check_body_crc,
    compress_body,
    decode_offset_msg_id,
    encode_properties,
    file_name,
    inflate_body,
)
from connector.protocol.remoting import RemotingCommand, RequestCode
from streaming_apps.apps import AppConfig, AppError, run_app
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.query import query_tables
from streaming_apps.spark_session import register_data_sources
from streaming_apps.workload import order_events
from tests.support.brokers import remoting_request
from tests.support.processes import run_json_script

MAPPED_FILE_SIZE = 2 * 1024 * 1024
BODY_POSITION = V4_HEADER_BYTES  # the body of a record with IPv4 born and store hosts starts 88 bytes in
APP_TIMEOUT_S = 300
PEAK_RSS_BOUND_MB = 512  # a 1 GiB inflate cannot fit; the bounded decode needs ~64-130 MiB over the interpreter


def zlib_bomb(inflated: int = 1 << 30) -> bytes:
    """A zlib stream of ``inflated`` zero bytes (~1 MB stored for 1 GiB), built without holding it inflated."""
    try:
        from zlib_ng import zlib_ng as zlib_module
    except ImportError:  # pragma: no cover - zlib-ng is a dependency
        import zlib as zlib_module
    compressor = zlib_module.compressobj(9)
    chunk = bytes(1 << 20)
    out = bytearray()
    for _ in range(inflated // len(chunk)):
        out += compressor.compress(chunk)
    return bytes(out + compressor.flush())


def send_raw(broker: BrokerProcess, topic: str, stored: bytes, sys_flag: int, tags: str) -> int:
    """SEND_MESSAGE_V2 with the body bytes and sysFlag as given (a client compressed them, or claims it did);
    returns the record's CommitLog offset."""
    header = {"a": "bad-records-test", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": sys_flag,
              "g": int(time.time() * 1000), "h": 0, "i": encode_properties({"TAGS": tags}), "j": 0, "k": False,
              "m": False}
    resp = remoting_request(broker.remoting_addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, stored),
                            timeout_s=30)
    assert resp.code == 0, resp.remark
    return decode_offset_msg_id(resp.ext_fields["msgId"])[1]


def corrupt_body_on_disk(broker: BrokerProcess, offset: int) -> None:
    """Flip one byte of the stored body of the record at ``offset`` in its CommitLog file (the broker maps
    the file shared, so it serves the changed byte)."""
    path = broker.commitlog_dir / file_name(offset - offset % MAPPED_FILE_SIZE)
    with open(path, "r+b") as fh:
        fh.seek(offset % MAPPED_FILE_SIZE + BODY_POSITION + 3)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0x5A]))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The master and what it holds: ``broker.bad`` maps the offsets of the bad records to their kind,
    ``broker.bomb`` is the bomb's offset."""
    from connector.client.producer import Producer

    events = [(m.topic, m.body, m.tags) for m in order_events(240, seed=9)]
    with BrokerProcess.start(tmp_path_factory.mktemp("bad-records"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "bad-records-test") as producer:
            for f in [producer.send_async(*e[:2], tags=e[2]) for e in events[:120]]:
                assert f.result(timeout=60).send_status == "SEND_OK"
            order = events[0][1]
            big_order = msgpack.packb({**msgpack.unpackb(order), "note": "n" * 6000})
            bad = {
                send_raw(b, "OrderCreated", b"plain bytes, not a zlib stream",
                         COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE, "NOT_ZLIB"): "BODY: ZLIB body does not inflate",
                send_raw(b, "OrderCreated", b"not an LZ4 frame", COMPRESSED_FLAG | COMPRESSION_LZ4_TYPE,
                         "NOT_LZ4"): "BODY: LZ4 body is not an LZ4 frame",
                send_raw(b, "OrderPaid", compress_body(order)[0], COMPRESSED_FLAG | 0x600,
                         "UNKNOWN_TYPE"): "BODY: unknown compression type UNKNOWN(6)",
            }
            victim = send_raw(b, "OrderPaid", order, 0, "CRC_VICTIM")
            bad[victim] = "BODYCRC: mismatch"
            bomb = send_raw(b, "OrderShipped", zlib_bomb(), COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE, "BOMB")
            bad[bomb] = "BODY: ZLIB body decompresses to more than maxInflatedBodyBytes"
            for kind in ("LZ4", "ZSTD"):  # good bodies the 4.9.8 client compressed with LZ4 / ZSTD
                stored, flags = compress_body(big_order, kind)
                assert flags & (COMPRESSION_LZ4_TYPE | COMPRESSION_ZSTD_TYPE)
                send_raw(b, "OrderAudit", stored, flags, kind)
            for f in [producer.send_async(*e[:2], tags=e[2]) for e in events[120:]]:
                assert f.result(timeout=60).send_status == "SEND_OK"
        corrupt_body_on_disk(b, victim)
        b.bad, b.bomb = bad, bomb
        yield b


@pytest.fixture(scope="module")
def expected(broker) -> dict[int, tuple[bytes, str | None]]:
    """CommitLog offset → (body the table must hold, decodeError), from the broker's own files."""
    out = {}
    for _, rec in iter_commitlog_dir(broker.commitlog_dir, check_crc=False):
        try:
            check_body_crc(rec.body, rec.body_crc)
            out[rec.commit_log_offset] = (inflate_body(rec.body, rec.sys_flag,
                                                       max_bytes=DEFAULT_MAX_INFLATED_BODY_BYTES), None)
        except BodyDecodeError as exc:
            field, reason = bad_body(exc)  # as the decodeError column words it
            out[rec.commit_log_offset] = (rec.body, f"{field}: {reason}")
    assert {off for off, (_, err) in out.items() if err} == set(broker.bad)  # the setup stored what it meant to
    for off, prefix in broker.bad.items():
        assert out[off][1].startswith(prefix), out[off][1]
    return out


@pytest.fixture(scope="module")
def app_spark(spark):
    register_data_sources(spark)
    return spark


def _config(broker, workdir: Path, app: str, **kw) -> AppConfig:
    return AppConfig(app=app, brokers=f"broker-a={broker.ha_addr}", workdir=workdir, trigger="available-now",
                     max_bytes_per_trigger=MAPPED_FILE_SIZE, **kw)


@pytest.mark.spark
@pytest.mark.parametrize("landing", ["direct", "spark"])
def test_bronze_lands_bad_records_with_stored_bytes_and_decode_error_nothing_lost(app_spark, broker, expected,
                                                                                  tmp_path, landing):
    cfg = _config(broker, tmp_path, "bronze", landing=landing)
    result = run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert result.rows == len(expected)
    rows = query_tables("SELECT commitLogOffset, body, decodeError FROM bronze",
                        {"bronze": str(cfg.table_path("bronze"))}).to_pylist()
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert set(counts) == set(expected), "lost or foreign rows"
    assert max(counts.values()) == 1, "duplicated rows"
    got = {r["commitLogOffset"]: (r["body"], r["decodeError"]) for r in rows}
    assert {off for off, (_, err) in got.items() if err} == set(broker.bad)
    for off, (body, error) in expected.items():
        assert got[off] == (body, error), off
    assert len(got[broker.bomb][0]) < 2_000_000  # the bomb row holds its ~1 MB stored bytes, not 64 MiB


@pytest.mark.spark
def test_failfast_names_broker_offset_file_and_field(app_spark, broker, expected, tmp_path):
    first = min(broker.bad)
    cfg = _config(broker, tmp_path, "bronze", landing="direct", source_options={"mode": "FAILFAST"})
    with pytest.raises(AppError) as err:
        run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    message = str(err.value)
    assert ("broker broker-a: ZLIB body does not inflate" in message
            and f"at CommitLog offset {first} (file {file_name(first - first % MAPPED_FILE_SIZE)}), field BODY"
            in message), message[-3000:]


@pytest.mark.spark
def test_silver_quarantines_bad_records_with_the_decode_error(app_spark, broker, expected, tmp_path):
    cfg = _config(broker, tmp_path, "silver")
    run_app(app_spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    quarantine = query_tables("SELECT commitLogOffset, error, body FROM q",
                              {"q": str(cfg.table_path("silver_quarantine"))}).to_pylist()
    orders = query_tables("SELECT commitLogOffset FROM o", {"o": str(cfg.table_path("silver_orders"))}).to_pylist()
    by_offset = {r["commitLogOffset"]: r for r in quarantine}
    assert set(by_offset) == set(broker.bad)  # every order event, also LZ4/ZSTD ones, decoded; bad ones held back
    for off in broker.bad:
        assert by_offset[off]["error"] == f"bad record: {expected[off][1]}"
        assert by_offset[off]["body"] == expected[off][0]
    on_order_topics = [off for off in expected if off not in broker.bad]
    assert sorted(r["commitLogOffset"] for r in orders) == sorted(on_order_topics)
    assert all(msgpack.unpackb(expected[off][0])["orderId"] for off in on_order_topics[:5])


_READ_BOMB = r"""
import json, sys
from connector.decode.kernels import active
from connector.options.settings import FetchSettings
from connector.source import HAReplicaInputPartition, read_partition
ha, remoting, start, end, size, kernel = sys.argv[1:7]
assert active().name == kernel, active().name
part = HAReplicaInputPartition("broker-a", ha, remoting, int(start), int(end), int(size), FetchSettings())
rows = [(off, len(body), err) for b in read_partition(part) for off, body, err in
        zip(b.column("commitLogOffset").to_pylist(), b.column("body").to_pylist(), b.column("decodeError").to_pylist())]
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"rows": rows, "peak_mb": peak_kb // 1024}))
"""


@pytest.mark.parametrize("kernel", ["native", "numpy"])
def test_a_zip_bomb_never_takes_the_decoding_process_past_a_memory_bound(broker, kernel):
    bomb = next(rec for _, rec in iter_commitlog_dir(broker.commitlog_dir, broker.bomb, check_crc=False)
                if rec.commit_log_offset == broker.bomb)
    report, _ = run_json_script(_READ_BOMB, broker.ha_addr, broker.remoting_addr, str(broker.bomb),
                                str(broker.bomb + bomb.store_size), str(MAPPED_FILE_SIZE), kernel, timeout_s=180,
                                env={**os.environ, PURE_PYTHON_ENV: "1" if kernel == "numpy" else "0"})
    bomb_row = [r for r in report["rows"] if r[0] == broker.bomb]
    assert len(bomb_row) == 1 and bomb_row[0][2].startswith("BODY: ZLIB body decompresses to more than")
    assert report["peak_mb"] < PEAK_RSS_BOUND_MB, report["peak_mb"]
