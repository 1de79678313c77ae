"""The project's Python producer (connector/client/producer.py) → a real RocketMQ 4.9 master (issue 10 §2 g).

A real name server and a real ASYNC_MASTER (tests/support/jvm_peers.py) for the module. The Python producer
sends single messages (tags, keys, non-ASCII user properties, a flag; bodies ≥ 4 KiB zlib-compressed as the
4.9.8 client does) and a batch straight to the master: every send SEND_OK with one offset msgId per message.
A real Java push consumer and a real lite-pull consumer (``JavaConsumer``) then get every message exactly once
with its body, and the master's CommitLog, decoded by RocketMQ's MessageDecoder, holds what was sent and is
printed identically by ``hareplica inspect-commitlog``.
"""

from __future__ import annotations

import hashlib
import random

import pytest

from connector.client.producer import Message, Producer
from tests.interop.java_fixtures import (
    COMPRESS_MSG_BODY_OVER_HOWMUCH,
    assert_exactly_once,
    assert_same_rows,
    decode_with_rocketmq,
    inspect_commitlog_text,
    sha256_b64,
    wait_for_route,
)
from tests.support.java_tools import run_java
from tests.support.jvm_peers import RealBroker, killed_at_exit

TOPIC = "FromStubProducer"
SINGLES = 24
BATCH = 6


@pytest.fixture(scope="module")
def real_master(real_namesrv, tmp_path_factory):
    with killed_at_exit(RealBroker.start(tmp_path_factory.mktemp("real-master"), brokerRole="ASYNC_MASTER",
                                         namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=1 << 20)) as master:
        yield master


@pytest.fixture(scope="module")
def sent(real_namesrv, real_master) -> dict[str, dict]:
    """{UNIQ_KEY: what was sent (tags, keys, properties, flag, body sha256 and length)} — every send SEND_OK."""
    rng = random.Random(7)
    out: dict[str, dict] = {}
    with Producer(real_master.remoting_addr, "pg_stub_producer") as producer:
        for i in range(SINGLES):
            size = rng.choice([1, 500, 4096, 30000])
            body = (f"order {i} 数据 ".encode() * (size // 10 + 1))[:size] if size >= 4096 else rng.randbytes(size)
            spec = {"tags": f"Tag{i % 4}", "keys": f"key-{i} 键-{i}", "properties": {"note": f"ünï-值 = {i}"},
                    "flag": i % 3}
            result = producer.send(TOPIC, body, tags=spec["tags"], keys=spec["keys"].split(" "),
                                   properties=spec["properties"], flag=spec["flag"])
            assert result.send_status == "SEND_OK", result
            assert len(result.offset_msg_ids) == 1
            out[result.msg_id] = {**spec, "bodyLength": size, "bodySha256": hashlib.sha256(body).hexdigest()}
        bodies = [rng.randbytes(64 + i) for i in range(BATCH)]
        result = producer.send_batch(TOPIC, [Message(b, tags="BatchTag") for b in bodies])
        assert result.send_status == "SEND_OK", result
        ids = result.msg_id.split(",")
        assert len(ids) == BATCH and len(result.offset_msg_ids) == BATCH, result
        for uniq, body in zip(ids, bodies, strict=True):
            out[uniq] = {"tags": "BatchTag", "keys": None, "properties": {}, "flag": 0, "bodyLength": len(body),
                         "bodySha256": hashlib.sha256(body).hexdigest()}
    wait_for_route(real_namesrv.addr, TOPIC)
    return out


@pytest.mark.parametrize("mode", ["push", "litepull"])
def test_real_consumer_gets_every_message_once(real_namesrv, sent, tmp_path, mode):
    run = run_java("JavaConsumer", [f"mode={mode}", f"namesrv={real_namesrv.addr}", f"topic={TOPIC}",
                                    f"group=cg_stub_producer_{mode}", f"count={len(sent)}", "timeoutMs=60000"],
                   props={"rocketmq.client.rebalance.waitInterval": "1000"}, log_dir=tmp_path, timeout_s=90,
                   check=False)
    assert_exactly_once(run, {k: v["bodySha256"] for k, v in sent.items()}, TOPIC)


def test_real_master_stored_what_was_sent(real_master, sent, tmp_path):
    decoded = decode_with_rocketmq(real_master.commitlog_dir, tmp_path)
    rows = {r["uniqKey"]: r for r in decoded.lines if r["topic"] == TOPIC}
    assert set(rows) == set(sent)
    for uniq, spec in sent.items():
        row = rows[uniq]
        assert (row["tags"], row["keys"], row["flag"]) == (spec["tags"], spec["keys"], spec["flag"]), uniq
        for name, value in spec["properties"].items():
            assert row["properties"][name] == value
        assert sha256_b64(row["bodyDecompressedBase64"]) == spec["bodySha256"]
        compressed = spec["bodyLength"] >= COMPRESS_MSG_BODY_OVER_HOWMUCH and spec["tags"] != "BatchTag"
        assert row["sysFlag"] & 0x701 == (0x301 if compressed else 0), hex(row["sysFlag"])
    assert_same_rows(decoded, *inspect_commitlog_text(real_master.commitlog_dir))
