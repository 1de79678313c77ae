"""CONSUMER_SEND_MSG_BACK's stored copies against the golden 4.9.8 data (broker_stub.remoting.send_back_processor).

The fixture's real 4.9.8 master stored three hand-backs of group ``fixture_cg_20240611``: two retries parked in
SCHEDULE_TOPIC_XXXX (DELAY 3, REAL_TOPIC ``%RETRY%...``) and one dead letter in ``%DLQ%...``. Built from the
same looked-up messages and put through the stub's CommitLog, the stub's copies must be stored byte for byte
alike (store timestamp aside).
"""

from __future__ import annotations

import base64

from broker_stub.metadata import SubscriptionGroupConfig
from broker_stub.remoting.send_back_processor import (
    SendBackHeader,
    SendBackRefused,
    max_reconsume_times,
    send_back_message,
)
from broker_stub.store.commit_log import CommitLog, PutMessageStatus
from broker_stub.store.mapped_file import MappedFileQueue
from connector.protocol.commitlog import MessageRecord, decode_offset_msg_id, decode_record
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode


def _hand_backs(rows: list[dict]) -> list[dict]:
    return [r for r in rows if "ORIGIN_MESSAGE_ID" in r["properties"]
            and (r["topic"] == "SCHEDULE_TOPIC_XXXX" or r["topic"].startswith("%DLQ%"))]


def test_stored_copies_equal_the_real_brokers(golden, tmp_path):
    rows, record = golden
    hand_backs = _hand_backs(rows)
    assert sorted(r["topic"][:5] for r in hand_backs) == ["%DLQ%", "SCHED", "SCHED"]
    queue = MappedFileQueue(tmp_path, 1 << 20)
    queue.load()
    commit_log = CommitLog(queue, max_message_size=4 << 20, max_delay_level=18)
    for row in hand_backs:
        props = row["properties"]
        looked = record(decode_offset_msg_id(props["ORIGIN_MESSAGE_ID"])[1])
        assert looked.reconsume_times == row["reconsumeTimes"] - 1
        topic, queue_id = props.get("REAL_TOPIC", row["topic"]), int(props.get("REAL_QID", row["queueId"]))
        msg = send_back_message(looked, topic, queue_id, int(props["DELAY"]))
        put = commit_log.put_message(msg)
        assert put.status is PutMessageStatus.PUT_OK
        stored = decode_record(commit_log.get_message(put.result.wrote_offset, put.result.wrote_bytes), 0)
        assert isinstance(stored, MessageRecord)
        assert stored.properties_raw == base64.b64decode(row["propertiesRawBase64"]), row["commitLogOffset"]
        assert (stored.topic, stored.queue_id, stored.sys_flag, stored.flag, stored.reconsume_times) == (
            row["topic"], row["queueId"], row["sysFlag"], row["flag"], row["reconsumeTimes"])
        assert (stored.born_timestamp, str(stored.born_host), str(stored.store_host)) == (
            row["bornTimestamp"], row["bornHost"], row["storeHost"])
        assert stored.body == base64.b64decode(row["bodyBase64"]) and stored.store_size == row["storeSize"]


def test_a_second_hand_back_keeps_the_first_retry_topic_and_origin_id(golden):
    rows, record = golden
    parked = next(r for r in _hand_backs(rows) if r["topic"] == "SCHEDULE_TOPIC_XXXX")
    retried = next(r for r in rows if r["topic"].startswith("%RETRY%") and r["uniqKey"] == parked["uniqKey"])
    looked = record(retried["commitLogOffset"])
    msg = send_back_message(looked, retried["topic"], 0, 4)
    assert msg.properties.get("RETRY_TOPIC") == parked["properties"]["RETRY_TOPIC"]
    assert msg.properties.get("ORIGIN_MESSAGE_ID") == parked["properties"]["ORIGIN_MESSAGE_ID"]
    assert (msg.properties.get("DELAY"), msg.properties.get("WAIT"), msg.reconsume_times) == ("4", "false", 2)


def test_header_parsing_and_the_maximum():
    ok = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK,
                                 {"offset": 42, "group": "g", "delayLevel": 0, "unitMode": True,
                                  "maxReconsumeTimes": 3})
    header = SendBackHeader.parse(ok)
    assert (header.offset, header.group, header.delay_level, header.unit_mode, header.max_reconsume_times) == (
        42, "g", 0, True, 3)
    bad = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": "x1", "group": "g", "delayLevel": 0})
    try:
        SendBackHeader.parse(bad)
        raise AssertionError("a bad offset must be refused")
    except SendBackRefused as exc:
        assert (exc.code, exc.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <offset> = 'x1' is not a number")
    group = SubscriptionGroupConfig("g")
    assert max_reconsume_times(group, None, 409) == 16
    assert max_reconsume_times(group, 2, 409) == 2
    assert max_reconsume_times(group, 2, 120) == 16  # older than V3_4_9: the group's retryMaxTimes
