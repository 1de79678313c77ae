"""Real RocketMQ 4.9.8 Java producer → stub master, through the stub name server (issue 10 §2 c).

One stub name server and one stub ASYNC_MASTER for the module. ``JavaProducer`` (tests/java) sends single,
tagged/keyed messages with non-ASCII user properties and a flag, a batch, bodies ≥ 4 KiB the client compresses
(ZLIB, the default type), delayed and transactional messages, once with JSON and once with ROCKETMQ request
headers. Every send must be SEND_OK; RocketMQ's own MessageDecoder (``CommitLogDecoder``) must find every message
in the stub's CommitLog as sent; and ``hareplica inspect-commitlog`` must print exactly MessageDecoder's rows.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest

from tests.interop.java_fixtures import (
    COMPRESS_MSG_BODY_OVER_HOWMUCH,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_BITS,
    HALF_TOPIC,
    OP_HALF_TOPIC,
    SCHEDULE_TOPIC,
    assert_same_rows,
    decode_with_rocketmq,
    inspect_commitlog_text,
    sha256_b64,
    wait_for_route,
)
from tests.support.brokers import BrokerProcess, NameServerProcess, max_offset, wait_for
from tests.support.java_tools import JavaRun, run_java

SERIALIZE_TYPES = ("JSON", "ROCKETMQ")
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_TYPE_MASK = 0x3 << 2


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    """(name server, master) of the module; the master writes 16 KiB CommitLog files (several roll-overs)."""
    root = tmp_path_factory.mktemp("java-producer")
    with NameServerProcess.start(root / "namesrv") as ns, \
            BrokerProcess.start(root / "master", namesrvAddr=ns.addr, mappedFileSizeCommitLog=16384) as master:
        wait_for_route(ns.addr)
        yield ns, master


@pytest.fixture(scope="module")
def sends(peers, tmp_path_factory) -> dict[str, JavaRun]:
    """One JavaProducer run per header serialisation, each to its own topic: {serializeType: run}."""
    ns, _ = peers
    runs = {}
    for kind in SERIALIZE_TYPES:
        runs[kind] = run_java("JavaProducer", [f"namesrv={ns.addr}", f"topic=Java{kind}", f"group=pg_{kind}"],
                              props={"rocketmq.serialize.type": kind},
                              log_dir=tmp_path_factory.mktemp(f"client-{kind}"), timeout_s=90)
    return runs


@pytest.fixture(scope="module")
def stored(peers, sends, tmp_path_factory) -> JavaRun:
    """The master's CommitLog decoded by RocketMQ's MessageDecoder, after every send."""
    return decode_with_rocketmq(peers[1].commitlog_dir, tmp_path_factory.mktemp("decoder"))


def _by_uniq_key(rows: list[dict], topic: str | None = None) -> dict[str, dict]:
    """uniqKey → the first record carrying it (in CommitLog order): the message as the send stored it. A
    delayed message's later re-put into its real topic (the master's ScheduleMessageService) keeps the
    uniqKey and is not the stored-as-sent record."""
    out: dict[str, dict] = {}
    for r in rows:
        if r["uniqKey"] and (topic is None or r["topic"] == topic):
            out.setdefault(r["uniqKey"], r)
    return out


@pytest.mark.parametrize("kind", SERIALIZE_TYPES)
def test_every_send_is_send_ok(sends, kind):
    run = sends[kind]
    cases = [line["case"] for line in run.lines]
    assert sorted(set(cases)) == ["batch", "compressed", "delayed", "single", "tagskeys", "transaction"], cases
    for line in run.lines:
        assert line["serializeType"] == kind
        assert line["status"] == "SEND_OK", line
        assert line["brokerName"] == "broker-a"
        if line["case"] == "transaction":
            outcome = line["messages"][0]["userProperties"]["outcome"]
            assert line["localTransactionState"] == f"{outcome.upper()}_MESSAGE", line
        # the client's unique ids, one per message (comma-joined for a batch)
        assert line["msgId"].split(",") == [m["uniqKey"] for m in line["messages"]], line


@pytest.mark.parametrize("kind", SERIALIZE_TYPES)
def test_messages_stored_as_sent(sends, stored, kind):
    """Each message is in the CommitLog (by RocketMQ's MessageDecoder) with what the client sent: topic, queue,
    queue offset and offset msgId of its SendResult, tags, keys, user properties, flag, body (inflated) and the
    compression bits the 4.9.8 client sets for bodies of ≥ 4096 bytes (COMPRESSED | ZLIB = 0x301)."""
    rows = _by_uniq_key(stored.lines)
    topic = f"Java{kind}"
    for line in sends[kind].lines:
        offset_ids = (line["offsetMsgId"] or "").split(",")
        for i, sent in enumerate(line["messages"]):
            case = line["case"]
            if case == "transaction":  # the half message: parked in the half topic (committed one: next test)
                row = _by_uniq_key(stored.lines, HALF_TOPIC)[sent["uniqKey"]]
                assert row["properties"]["REAL_TOPIC"] == topic and row["properties"]["TRAN_MSG"] == "true"
            else:
                row = rows[sent["uniqKey"]]
                assert row["msgId"] == offset_ids[i], (case, row["msgId"], line["offsetMsgId"])
                assert row["queueOffset"] == line["queueOffset"] + i
            if case == "delayed":
                assert row["topic"] == SCHEDULE_TOPIC
                assert row["queueId"] == sent["delayTimeLevel"] - 1
                assert row["properties"]["REAL_TOPIC"] == topic
                assert row["properties"]["REAL_QID"] == str(line["queueId"])
                assert row["properties"]["DELAY"] == str(sent["delayTimeLevel"])
            elif case != "transaction":
                assert (row["topic"], row["queueId"]) == (topic, line["queueId"])
            assert row["tags"] == sent["tags"] and row["keys"] == sent["keys"], case
            for name, value in sent["userProperties"].items():
                assert row["properties"][name] == value, (case, name)
            assert row["flag"] == sent["flag"]
            assert row["bodyLength"] > 0
            assert sha256_b64(row["bodyDecompressedBase64"]) == sent["bodySha256"], case
            big = sent["bodyLength"] >= COMPRESS_MSG_BODY_OVER_HOWMUCH and case != "batch"
            expected_bits = (COMPRESSED_FLAG | COMPRESSION_TYPE_BITS["ZLIB"]) if big else 0
            assert row["sysFlag"] & 0x701 == expected_bits, (case, hex(row["sysFlag"]))


@pytest.mark.parametrize("kind", SERIALIZE_TYPES)
def test_transactions_end_as_on_a_real_broker(peers, sends, tmp_path_factory, kind):
    """A TransactionMQProducer's END_TRANSACTION (oneway) ends each half message as a 4.9.8 broker does: a commit
    puts the message into its real topic (sysFlag TRANSACTION_COMMIT_TYPE, preparedTransactionOffset = the half
    message's CommitLog offset, same queue, body, born timestamp and unique key), a rollback puts nothing there,
    and both write an op record (RMQ_SYS_TRANS_OP_HALF_TOPIC, tag d, body = the half message's queue offset)."""
    topic = f"Java{kind}"
    tx = [m for line in sends[kind].lines if line["case"] == "transaction" for m in line["messages"]]
    assert [m["userProperties"]["outcome"] for m in tx] == ["commit", "commit", "rollback"]

    def ended():
        run = decode_with_rocketmq(peers[1].commitlog_dir, tmp_path_factory.mktemp("decoder-tx"))
        halves = _by_uniq_key(run.lines, HALF_TOPIC)
        ops = {row["bodyDecompressedBase64"] for row in run.lines if row["topic"] == OP_HALF_TOPIC}
        done = all(m["uniqKey"] in halves and _b64(str(halves[m["uniqKey"]]["queueOffset"])) in ops for m in tx)
        return run if done else None

    run = wait_for(ended, f"op records for the transactions of {topic}", timeout_s=10, interval_s=0.5)
    halves = _by_uniq_key(run.lines, HALF_TOPIC)
    rows = _by_uniq_key(run.lines, topic)
    for sent in tx:
        half = halves[sent["uniqKey"]]
        if sent["userProperties"]["outcome"] == "rollback":
            assert sent["uniqKey"] not in rows
            continue
        row = rows[sent["uniqKey"]]
        assert row["sysFlag"] & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE, hex(row["sysFlag"])
        assert row["preparedTransactionOffset"] == half["commitLogOffset"]
        assert row["queueId"] == int(half["properties"]["REAL_QID"])
        assert sha256_b64(row["bodyDecompressedBase64"]) == sent["bodySha256"]
        assert row["bornTimestamp"] == half["bornTimestamp"]
    for op in (row for row in run.lines if row["topic"] == OP_HALF_TOPIC):
        assert (op["tags"], op["sysFlag"], op["bornHost"]) == ("d", 0, op["storeHost"])


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("ascii")).decode("ascii")


def _snapshot(master: BrokerProcess, into: Path) -> Path:
    """A copy of the master's CommitLog files holding exactly the records below its max offset at the time of the
    call: the broker goes on writing (delayed messages re-put, transaction op records), so bytes past that offset
    in the copy, whole or torn, are zeroed, and both decoders read the same complete records."""
    end = max_offset(master.remoting_addr)
    shutil.copytree(master.commitlog_dir, into)
    for f in into.iterdir():
        start = int(f.name)
        if start + f.stat().st_size > end:
            with open(f, "r+b") as fh:
                cut = max(0, end - start)
                fh.seek(cut)
                fh.write(bytes(f.stat().st_size - cut))
    return into


def test_inspect_commitlog_equals_message_decoder(peers, sends, tmp_path):
    """Every record the Java producer made the stub store (several CommitLog files) is printed by
    ``hareplica inspect-commitlog`` exactly as RocketMQ's MessageDecoder decodes it (both on one snapshot)."""
    commitlog = _snapshot(peers[1], tmp_path / "commitlog")
    files = sorted(p.name for p in commitlog.iterdir())
    assert len(files) >= 2, f"expected CommitLog roll-overs, files: {files}"
    (tmp_path / "decoder").mkdir()
    decoded = decode_with_rocketmq(commitlog, tmp_path / "decoder")
    assert len(decoded.lines) >= 2 * 18
    assert_same_rows(decoded, *inspect_commitlog_text(commitlog))


def test_decoder_program_reproduces_golden_ground_truth(fixture_dir, tmp_path):
    """The CommitLogDecoder program itself: on the CommitLog recorded from a real 4.9.8 broker it prints
    messages.jsonl (the MessageDecoder ground truth recorded with the fixtures) byte for byte."""
    run = decode_with_rocketmq(fixture_dir / "commitlog", tmp_path)
    assert run.stdout == (fixture_dir / "messages.jsonl").read_text(encoding="utf-8")
