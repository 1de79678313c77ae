"""RocketMQ 5.x MessageVersion V2 records made the way a broker makes them: a consumer hands a message back
(CONSUMER_SEND_MSG_BACK) for a group whose ``%RETRY%`` topic is longer than 127 characters
(docs/protocol.md §8).

Shared by the stub tests (tests/integration/broker_stub/test_message_version_v2.py) and the real 5.x interop
modules. :func:`raw_layout` reads a stored record's bytes by hand, independently of the project's decoder,
so a test can check the V2 layout itself (MAGICCODE, 2-byte TOPIC length) and compare a stub record with a
real broker's field by field.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

from connector.client.producer import Producer
from connector.protocol.commitlog import MESSAGE_MAGIC_CODE_V2, MessageRecord, decode_offset_msg_id
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import read_commitlog, remoting_request, wait_for

#: A consumer group of 136 characters (a client allows 255): its retry topic has 143, over V1's 127.
LONG_GROUP = "cg_v2_" + "g" * 130
LONG_RETRY_TOPIC = "%RETRY%" + LONG_GROUP
ORIGIN_TOPIC = "V2Origin"
_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP


def seed_long_group(store_root: Path) -> Path:
    """Write ``config/subscriptionGroup.json`` holding :data:`LONG_GROUP` into the store of a broker not started
    yet, as a broker upgraded from 5.3 or older keeps it (those created groups of up to 255 characters on the
    fly). RocketMQ 5.5.0 creates no group over 120 characters (``TopicValidator.GROUP_MAX_LENGTH``), neither on
    the fly nor through the admin request, but serves one it loads. Returns the file written."""
    path = Path(store_root) / "config" / "subscriptionGroup.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    group = {"groupName": LONG_GROUP, "consumeEnable": True, "consumeFromMinEnable": True,
             "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0,
             "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True}
    table = {"dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": int(time.time() * 1000)},
             "subscriptionGroupTable": {LONG_GROUP: group}}
    path.write_text(json.dumps(table), encoding="utf-8")
    return path


def send_origin(addr: str, body: bytes = b"hand me back") -> tuple[int, str]:
    """Send one message to :data:`ORIGIN_TOPIC` (keys, tags, a user property); returns (CommitLog offset, msgId)."""
    with Producer(addr, "pg_v2_origin") as producer:
        sent = producer.send(ORIGIN_TOPIC, body, tags="TagV2", keys=["kv2"], properties={"note": "v2"})
    assert sent.send_status == "SEND_OK", sent
    return decode_offset_msg_id(sent.offset_msg_ids[0])[1], sent.msg_id


def send_back(addr: str, offset: int, *, group: str = LONG_GROUP, delay_level: int = 1,
              origin_msg_id: str | None = None) -> RemotingCommand:
    """One CONSUMER_SEND_MSG_BACK as a push consumer sends it (maxReconsumeTimes 16); the broker's response."""
    header = {"offset": offset, "group": group, "delayLevel": delay_level, "originMsgId": origin_msg_id,
              "originTopic": ORIGIN_TOPIC, "maxReconsumeTimes": 16}
    return remoting_request(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header))


def hand_back_long_group(addr: str) -> None:
    """Send a message and hand it back for :data:`LONG_GROUP` with delay level 1 (the broker parks the copy
    in SCHEDULE_TOPIC_XXXX and delivers it to :data:`LONG_RETRY_TOPIC` when level 1's delay passed)."""
    offset, msg_id = send_origin(addr)
    resp = send_back(addr, offset, origin_msg_id=msg_id)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None), (resp.code, resp.remark)


def wait_long_retry_record(commitlog_dir: Path, *, timeout_s: float = 30.0) -> MessageRecord:
    """The first record of :data:`LONG_RETRY_TOPIC` in the CommitLog folder, once it is there."""
    def found():
        return next((r for r in read_commitlog(commitlog_dir, check_crc=False)
                     if isinstance(r, MessageRecord) and r.topic == LONG_RETRY_TOPIC), None)
    return wait_for(found, "the retry copy in the long retry topic", timeout_s=timeout_s, interval_s=0.2)


def record_bytes(commitlog_dir: Path, rec: MessageRecord, file_size: int) -> bytes:
    """The stored bytes of ``rec`` read from its CommitLog file."""
    start = rec.commit_log_offset // file_size * file_size
    with open(Path(commitlog_dir) / f"{start:020d}", "rb") as f:
        f.seek(rec.commit_log_offset - start)
        return f.read(rec.store_size)


def raw_layout(raw: bytes) -> dict:
    """The fields of one stored V1 or V2 record read by hand (docs/protocol.md §1.2, §8): the 2-byte TOPIC
    length prefix when MAGICCODE is V2's. Hosts as (ip bytes, port); properties as the stored text."""
    total, magic, body_crc, queue_id, flag, queue_offset, physical, sys_flag, born_ts = _HEAD.unpack_from(raw)
    p = _HEAD.size
    born_ip = 16 if sys_flag & 0x10 else 4
    born_host = (raw[p:p + born_ip], int.from_bytes(raw[p + born_ip:p + born_ip + 4], "big"))
    p += born_ip + 4
    store_ts = int.from_bytes(raw[p:p + 8], "big")
    p += 8
    store_ip = 16 if sys_flag & 0x20 else 4
    store_host = (raw[p:p + store_ip], int.from_bytes(raw[p + store_ip:p + store_ip + 4], "big"))
    p += store_ip + 4
    reconsume_times, prepared = struct.unpack_from(">iq", raw, p)
    p += 12
    body_len = int.from_bytes(raw[p:p + 4], "big")
    body = raw[p + 4:p + 4 + body_len]
    p += 4 + body_len
    prefix = 2 if magic == MESSAGE_MAGIC_CODE_V2 else 1
    topic_len = int.from_bytes(raw[p:p + prefix], "big")
    topic = raw[p + prefix:p + prefix + topic_len].decode("utf-8")
    p += prefix + topic_len
    props_len = int.from_bytes(raw[p:p + 2], "big")
    props = raw[p + 2:p + 2 + props_len].decode("utf-8")
    assert p + 2 + props_len == total == len(raw), (p, props_len, total, len(raw))
    return {"totalSize": total, "magic": magic, "bodyCRC": body_crc, "queueId": queue_id, "flag": flag,
            "queueOffset": queue_offset, "physicalOffset": physical, "sysFlag": sys_flag, "bornTimestamp": born_ts,
            "bornHost": born_host, "storeTimestamp": store_ts, "storeHost": store_host,
            "reconsumeTimes": reconsume_times, "preparedTransactionOffset": prepared, "body": body,
            "topicLengthPrefix": prefix, "topicLength": topic_len, "topic": topic, "properties": props}
