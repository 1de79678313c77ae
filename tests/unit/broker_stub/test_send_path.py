"""The send path byte for byte: requests rebuilt from the golden fixture must store the fixture's records.

Each fixture record is turned back into the request a 4.9.8 Java producer sent (topic, queue, sysFlag,
flag, bornTimestamp, client properties string, body), passed through the stub's SendMessageProcessor
into a real CommitLog in tmp_path, and the stored record compared with the fixture bytes after patching
the three fields that depend on where and when it was stored (QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP).
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest

from broker_stub.broker import BrokerController
from broker_stub.config import config_from_properties
from broker_stub.remoting.server import RequestContext
from connector.protocol.commitlog import (
    BORNHOST_V6_FLAG,
    TRANSACTION_PREPARED_TYPE,
    BatchEntry,
    HostAddress,
    decode_record,
    encode_batch_body,
)
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

BATCH_SUFFIX = "CLUSTER\x01LocalCluster\x02WAIT\x01true"


def _controller(tmp_path: Path, **extra: str) -> BrokerController:
    props = {"brokerClusterName": "LocalCluster", "brokerName": "broker-a", "brokerIP1": "127.0.0.1",
             "listenPort": "20911", "storePathRootDir": str(tmp_path / "store"),
             "mappedFileSizeCommitLog": "1048576", **extra}
    controller = BrokerController(config_from_properties(props))
    controller.message_store.load()
    return controller


@pytest.fixture
def controller(tmp_path):
    c = _controller(tmp_path)
    yield c
    c.message_store.close()


def _records(fixture_dir):
    out = []
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            rec["raw"] = base64.b64decode(rec["propertiesRawBase64"]).decode("utf-8")
            rec["pairs"] = [kv.split("\x01", 1) for kv in rec["raw"].split("\x02")]
            out.append(rec)
    return out


def _fixture_bytes(fixture_dir, rec) -> bytes:
    data = (fixture_dir / "commitlog" / rec["file"]).read_bytes()
    return data[rec["filePosition"]:rec["filePosition"] + rec["storeSize"]]


def _send(controller, code, header, body, born):
    host, _, port = born.rpartition(":")
    ctx = RequestContext(HostAddress.parse(born), born)
    processor = controller.remoting_server.processors[code]
    return processor(ctx, RemotingCommand.request(code, header, body))


def _header(rec, topic, queue_id, sys_flag, props, *, batch=False, queue_nums=None):
    return {"a": "fixture_pg", "b": topic, "c": "TBW102",
            "d": queue_nums or (8 if topic.startswith("Q8") else 4), "e": queue_id, "f": sys_flag,
            "g": rec["bornTimestamp"], "h": 0 if batch else rec["flag"], "i": props, "j": rec["reconsumeTimes"],
            "k": False, "m": batch}


def _patched(stored: bytes, rec) -> bytes:
    """Stored bytes with QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP of the fixture record."""
    b = bytearray(stored)
    struct.pack_into(">qq", b, 20, rec["queueOffset"], rec["commitLogOffset"])
    sys_flag = struct.unpack_from(">i", b, 36)[0]
    struct.pack_into(">q", b, 56 + (12 if sys_flag & BORNHOST_V6_FLAG else 0), rec["storeTimestamp"])
    return bytes(b)


def _stored(controller, msg_id_offset: int, size: int) -> bytes:
    return controller.message_store.commit_log.get_data(msg_id_offset, size)


def _offset_of(resp) -> int:
    return int(resp.ext_fields["msgId"][-16:], 16)


def test_plain_sends_store_the_fixture_bytes(controller, fixture_dir):
    checked = 0
    for rec in _records(fixture_dir):
        keys = [k for k, _ in rec["pairs"]]
        if (rec["topic"].startswith(("RMQ_SYS", "%", "SCHEDULE")) or "REAL_TOPIC" in keys
                or rec["raw"].endswith(BATCH_SUFFIX)):
            continue
        client_props = "\x02".join(f"{k}\x01{v}" for k, v in rec["pairs"] if k != "CLUSTER") + "\x02WAIT\x01true"
        header = _header(rec, rec["topic"], rec["queueId"], rec["sysFlag"], client_props)
        resp = _send(controller, RequestCode.SEND_MESSAGE_V2, header, base64.b64decode(rec["bodyBase64"]),
                     rec["bornHost"])
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.ext_fields["MSG_REGION"] == "DefaultRegion" and resp.ext_fields["TRACE_ON"] == "true"
        stored = _stored(controller, _offset_of(resp), rec["storeSize"])
        assert _patched(stored, rec) == _fixture_bytes(fixture_dir, rec), rec["commitLogOffset"]
        checked += 1
    assert checked > 400


def test_delayed_sends_move_to_schedule_topic_like_the_fixture(controller, fixture_dir):
    checked = 0
    for rec in _records(fixture_dir):
        d = dict(rec["pairs"])
        if rec["topic"] != "SCHEDULE_TOPIC_XXXX" or "ORIGIN_MESSAGE_ID" in d:
            continue
        client_props = "\x02".join(f"{k}\x01{v}" for k, v in rec["pairs"]
                                   if k not in ("CLUSTER", "REAL_TOPIC", "REAL_QID"))
        header = _header(rec, d["REAL_TOPIC"], int(d["REAL_QID"]), rec["sysFlag"], client_props)
        resp = _send(controller, RequestCode.SEND_MESSAGE_V2, header, base64.b64decode(rec["bodyBase64"]),
                     rec["bornHost"])
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.ext_fields["queueId"] == d["REAL_QID"]  # the response names the requested queue
        stored = _stored(controller, _offset_of(resp), rec["storeSize"])
        assert _patched(stored, rec) == _fixture_bytes(fixture_dir, rec)
        assert rec["queueId"] == int(d["DELAY"]) - 1
        checked += 1
    assert checked == 12


def test_transaction_prepared_sends_become_half_messages_like_the_fixture(controller, fixture_dir):
    checked = 0
    for rec in _records(fixture_dir):
        d = dict(rec["pairs"])
        if rec["topic"] != "RMQ_SYS_TRANS_HALF_TOPIC" or "TRANSACTION_CHECK_TIMES" in d:
            continue
        client_props = "\x02".join(f"{k}\x01{v}" for k, v in rec["pairs"]
                                   if k not in ("CLUSTER", "REAL_TOPIC", "REAL_QID"))
        header = _header(rec, d["REAL_TOPIC"], int(d["REAL_QID"]), rec["sysFlag"] | TRANSACTION_PREPARED_TYPE,
                         client_props)
        resp = _send(controller, RequestCode.SEND_MESSAGE_V2, header, base64.b64decode(rec["bodyBase64"]),
                     rec["bornHost"])
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        stored = _stored(controller, _offset_of(resp), rec["storeSize"])
        assert _patched(stored, rec) == _fixture_bytes(fixture_dir, rec)
        checked += 1
    assert checked == 6


def test_batches_store_the_fixture_bytes(controller, fixture_dir):
    groups: list[list[dict]] = []
    for rec in _records(fixture_dir):
        if not rec["raw"].endswith(BATCH_SUFFIX) or rec["raw"].count("WAIT\x01") != 2:
            continue
        key = (rec["topic"], rec["queueId"], rec["bornTimestamp"])
        if groups and (groups[-1][0]["topic"], groups[-1][0]["queueId"], groups[-1][0]["bornTimestamp"]) == key:
            groups[-1].append(rec)
        else:
            groups.append([rec])
    assert sum(len(g) for g in groups) == 48
    for group in groups:
        entries = [BatchEntry(r["flag"], base64.b64decode(r["bodyBase64"]), r["raw"][:-len(BATCH_SUFFIX) - 1])
                   for r in group]
        first = group[0]
        header = _header(first, first["topic"], first["queueId"], 0, "WAIT\x01true", batch=True)
        resp = _send(controller, RequestCode.SEND_BATCH_MESSAGE, header, encode_batch_body(entries),
                     first["bornHost"])
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        msg_ids = resp.ext_fields["msgId"].split(",")
        assert len(msg_ids) == len(group)
        offsets = [int(m[-16:], 16) for m in msg_ids]
        assert offsets == sorted(offsets)
        for rec, off in zip(group, offsets, strict=True):
            stored = _stored(controller, off, rec["storeSize"])
            assert _patched(stored, rec) == _fixture_bytes(fixture_dir, rec)
        queue_offsets = [decode_record(_stored(controller, o, 1 << 20)).queue_offset for o in offsets]
        assert queue_offsets == list(range(queue_offsets[0], queue_offsets[0] + len(group)))


# --- request validation ------------------------------------------------------------------------------
def _simple_header(topic="TopicA", queue_id=0, props="WAIT\x01true", **over):
    h = {"a": "pg", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": 1_700_000_000_000, "h": 0,
         "i": props, "j": 0, "k": False, "m": False}
    h.update(over)
    return h


BORN = "127.0.0.1:40000"


@pytest.mark.parametrize(("header", "code", "remark"), [
    (_simple_header(topic="bad topic!"), ResponseCode.SYSTEM_ERROR, "illegal characters"),
    (_simple_header(topic="x" * 128), ResponseCode.SYSTEM_ERROR, "longer than topic max length"),
    (_simple_header(topic="SCHEDULE_TOPIC_XXXX"), ResponseCode.NO_PERMISSION, "forbidden"),
    (_simple_header(queue_id=4), ResponseCode.SYSTEM_ERROR, "queueId[4] is illegal"),
    ({k: v for k, v in _simple_header().items() if k != "b"}, ResponseCode.SYSTEM_ERROR, "<b> is null"),
    (_simple_header(g="soon"), ResponseCode.SYSTEM_ERROR, "<g>"),
])
def test_invalid_requests_get_upstream_codes(controller, header, code, remark):
    resp = _send(controller, RequestCode.SEND_MESSAGE_V2, header, b"body", BORN)
    assert resp.code == code
    assert remark in resp.remark


def test_auto_created_topics_take_min_of_client_and_tbw102_queues(controller):
    assert _send(controller, RequestCode.SEND_MESSAGE_V2, _simple_header(topic="T8", d=16), b"x", BORN).code == 0
    assert controller.topic_config_manager.select_topic_config("T8").writeQueueNums == 8
    assert _send(controller, RequestCode.SEND_MESSAGE_V2, _simple_header(topic="T4"), b"x", BORN).code == 0
    assert controller.topic_config_manager.select_topic_config("T4").writeQueueNums == 4
    saved = json.loads((controller.message_store.config_dir / "topics.json").read_text())
    assert saved["topicConfigTable"]["T4"]["readQueueNums"] == 4


def test_topic_not_exist_without_auto_create(tmp_path):
    c = _controller(tmp_path, autoCreateTopicEnable="false")
    try:
        resp = _send(c, RequestCode.SEND_MESSAGE_V2, _simple_header(), b"x", BORN)
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert "topic[TopicA] not exist" in resp.remark
        assert c.message_store.commit_log.max_offset == 0
    finally:
        c.message_store.close()


def test_v1_send_message_header_and_negative_queue_id(controller):
    header = {"producerGroup": "pg", "topic": "V1Topic", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
              "queueId": "-1", "sysFlag": "0", "bornTimestamp": "1", "flag": "7", "properties": "TAGS\x01a"}
    resp = _send(controller, RequestCode.SEND_MESSAGE, header, b"v1", BORN)
    assert resp.code == 0, resp.remark
    assert 0 <= int(resp.ext_fields["queueId"]) < 4
    rec = decode_record(_stored(controller, _offset_of(resp), 4096))
    assert rec.flag == 7 and rec.topic == "V1Topic" and rec.properties == {"TAGS": "a", "CLUSTER": "LocalCluster"}


def test_message_limits(tmp_path):
    c = _controller(tmp_path, maxMessageSize="1024", mappedFileSizeCommitLog="4096")
    try:
        ok = _send(c, RequestCode.SEND_MESSAGE_V2, _simple_header(), b"b" * 1024, BORN)
        assert ok.code == 0, ok.remark
        too_big = _send(c, RequestCode.SEND_MESSAGE_V2, _simple_header(), b"b" * 1025, BORN)
        assert too_big.code == ResponseCode.MESSAGE_ILLEGAL and "1024B" in too_big.remark
        long_props = _simple_header(props="K\x01" + "v" * 32768)
        assert _send(c, RequestCode.SEND_MESSAGE_V2, long_props, b"b", BORN).code == ResponseCode.MESSAGE_ILLEGAL
    finally:
        c.message_store.close()


def test_record_that_cannot_fit_a_file_is_refused_not_dropped(tmp_path):
    # maxMessageSize left at its 4 MiB default (an explicit one this large is refused at start, test_config_validation)
    c = _controller(tmp_path, mappedFileSizeCommitLog="4096")
    try:
        resp = _send(c, RequestCode.SEND_MESSAGE_V2, _simple_header(), b"b" * 5000, BORN)
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert c.message_store.commit_log.max_offset == 0
    finally:
        c.message_store.close()


def test_delay_level_above_table_is_clamped(controller):
    resp = _send(controller, RequestCode.SEND_MESSAGE_V2, _simple_header(props="DELAY\x0199\x02WAIT\x01true"),
                 b"d", BORN)
    assert resp.code == 0
    rec = decode_record(_stored(controller, _offset_of(resp), 4096))
    assert rec.topic == "SCHEDULE_TOPIC_XXXX" and rec.queue_id == 17
    assert rec.properties["DELAY"] == "18" and rec.properties["REAL_TOPIC"] == "TopicA"
    assert rec.properties["REAL_QID"] == "0" and rec.properties["WAIT"] == "true"


def test_prepared_and_rollback_types_get_queue_offset_zero_and_do_not_advance(controller):
    send = lambda flag: decode_record(_stored(controller, _offset_of(  # noqa: E731
        _send(controller, RequestCode.SEND_MESSAGE_V2, _simple_header(f=flag), b"t", BORN)), 4096))
    assert send(0).queue_offset == 0
    assert send(0x4).queue_offset == 0   # PREPARED without TRAN_MSG stays in the topic, offset 0
    assert send(0xC).queue_offset == 0   # ROLLBACK
    commit = send(0x8)
    assert commit.queue_offset == 1 and commit.transaction_type == 0x8
    assert send(0).queue_offset == 2


def test_wait_false_is_stripped_and_ipv6_born_host_sets_flag(controller):
    resp = _send(controller, RequestCode.SEND_MESSAGE_V2, _simple_header(props="WAIT\x01false\x02TAGS\x01x"), b"w",
                 "[::1]:5555")
    assert resp.code == 0
    rec = decode_record(_stored(controller, _offset_of(resp), 4096))
    assert "WAIT" not in rec.properties
    assert rec.sys_flag & BORNHOST_V6_FLAG and str(rec.born_host) == "0:0:0:0:0:0:0:1:5555"


def test_batch_with_delay_or_transaction_is_illegal_and_bad_body_is_system_error(controller):
    body = encode_batch_body([BatchEntry(0, b"a", "")])
    delayed = _simple_header(props="DELAY\x011\x02WAIT\x01true", m=True)
    assert _send(controller, RequestCode.SEND_BATCH_MESSAGE, delayed, body, BORN).code == ResponseCode.MESSAGE_ILLEGAL
    tx = _simple_header(f=0x4, m=True)
    assert _send(controller, RequestCode.SEND_BATCH_MESSAGE, tx, body, BORN).code == ResponseCode.MESSAGE_ILLEGAL
    bad = _send(controller, RequestCode.SEND_BATCH_MESSAGE, _simple_header(m=True), b"\0\0\0\x30garbage", BORN)
    assert bad.code == ResponseCode.SYSTEM_ERROR and "batch" in bad.remark
    assert controller.message_store.commit_log.max_offset == 0


def test_ipv6_store_host_sets_flag_and_long_msg_id(tmp_path):
    c = _controller(tmp_path, brokerIP1="::1")
    try:
        resp = _send(c, RequestCode.SEND_MESSAGE_V2, _simple_header(), b"six", BORN)
        assert resp.code == 0 and len(resp.ext_fields["msgId"]) == 56
        rec = decode_record(_stored(c, int(resp.ext_fields["msgId"][-16:], 16), 4096))
        assert rec.sys_flag & 0x20 and rec.store_host.is_v6 and rec.store_host.port == 20911
        assert rec.msg_id == resp.ext_fields["msgId"]
    finally:
        c.message_store.close()
