"""The stub's ``autoMessageVersionOnTopicLen`` (issue 13 §3): RocketMQ 5.x's MessageVersion V2 records.

A consumer group of 136 characters hands a message back: its retry topic ``%RETRY%<group>`` has 143
characters, more than a V1 record's 1-byte TOPIC length holds. With the option on, the stub parks the copy in
SCHEDULE_TOPIC_XXXX (a V1 record) and delivers it into the retry topic as a V2 record (MAGICCODE −626843477,
2-byte TOPIC length), as a 5.x broker does; its ConsumeQueue, pull and restart (ConsumeQueues rebuilt from
the CommitLog after kill -9) work as for any record. A long ``%DLQ%`` topic is refused as 5.x refuses it.
With the option off (the default: a 4.9.8 broker) the hand-back is refused with MESSAGE_ILLEGAL before
anything is written, as 4.9.8's store check does (docs/protocol.md §8).
"""

from __future__ import annotations

import shutil

from connector.protocol.commitlog import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, MessageRecord
from connector.protocol.remoting import ResponseCode
from tests.support.brokers import broker_config, max_offset, pull, queue_offset, read_commitlog, wait_for
from tests.support.message_version import (
    LONG_GROUP,
    LONG_RETRY_TOPIC,
    hand_back_long_group,
    raw_layout,
    record_bytes,
    send_back,
    send_origin,
    wait_long_retry_record,
)

FILE_SIZE = 1 << 20
LEVELS = "1s 1s 1s"


def test_long_retry_topic_is_stored_as_v2_dispatched_and_rebuilt_after_kill9(broker_factory):
    broker = broker_factory("master", autoMessageVersionOnTopicLen="true", messageDelayLevel=LEVELS,
                            mappedFileSizeCommitLog=FILE_SIZE)
    assert broker_config(broker.remoting_addr)["autoMessageVersionOnTopicLen"] == "true"
    hand_back_long_group(broker.remoting_addr)
    parked = [r for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord)][-1]
    assert (parked.topic, parked.magic) == ("SCHEDULE_TOPIC_XXXX", MESSAGE_MAGIC_CODE)
    assert parked.properties["REAL_TOPIC"] == LONG_RETRY_TOPIC

    rec = wait_long_retry_record(broker.commitlog_dir)
    raw = raw_layout(record_bytes(broker.commitlog_dir, rec, FILE_SIZE))
    assert (raw["magic"], raw["topicLengthPrefix"], raw["topicLength"]) == (-626843477, 2, 143)
    assert raw["topic"] == LONG_RETRY_TOPIC and raw["physicalOffset"] == rec.commit_log_offset
    assert (rec.magic, rec.topic, rec.reconsume_times, rec.body) == (MESSAGE_MAGIC_CODE_V2, LONG_RETRY_TOPIC, 1,
                                                                     b"hand me back")
    assert rec.properties["RETRY_TOPIC"] == "V2Origin" and rec.tags == "TagV2"
    read_commitlog(broker.commitlog_dir, check_crc=True)  # every record's body CRC holds

    wait_for(lambda: queue_offset(broker.remoting_addr, LONG_RETRY_TOPIC, 0) == 1, "the V2 record's CQ entry")
    _, pulled = pull(broker.remoting_addr, LONG_RETRY_TOPIC, 0, 0, group=LONG_GROUP)
    assert [(r.physical_offset, r.magic) for r in pulled] == [(rec.commit_log_offset, MESSAGE_MAGIC_CODE_V2)]

    # kill -9, ConsumeQueues gone: recovery walks the V2 record and the reput rebuilds its queue
    broker.kill9()
    shutil.rmtree(broker.store_dir / "consumequeue")
    broker.restart()
    assert queue_offset(broker.remoting_addr, LONG_RETRY_TOPIC, 0) == 1
    _, pulled = pull(broker.remoting_addr, LONG_RETRY_TOPIC, 0, 0, group=LONG_GROUP)
    assert [r.physical_offset for r in pulled] == [rec.commit_log_offset]
    # the queue goes on at offset 1 (the parked copy may be delivered once more: its level's offset was not
    # saved before the kill, at-least-once as upstream)
    hand_back_long_group(broker.remoting_addr)
    wait_for(lambda: queue_offset(broker.remoting_addr, LONG_RETRY_TOPIC, 0) >= 2, "the second V2 record")
    _, pulled = pull(broker.remoting_addr, LONG_RETRY_TOPIC, 0, 1, group=LONG_GROUP)
    assert pulled and {(r.magic, r.topic) for r in pulled} == {(MESSAGE_MAGIC_CODE_V2, LONG_RETRY_TOPIC)}
    assert [r.queue_offset for r in pulled] == list(range(1, 1 + len(pulled)))

    # the dead-letter topic %DLQ%<group> is no retry topic: 5.x refuses it over 127 characters. Nothing of it is
    # written (the end offset is no measure here: the schedule service may still deliver the parked copy again)
    resp = send_back(broker.remoting_addr, rec.commit_log_offset, delay_level=-1)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "MESSAGE_ILLEGAL")
    written = {r.topic for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord)}
    assert not {t for t in written if t.startswith("%DLQ%")}, written


def test_long_retry_topic_is_refused_before_anything_is_written_when_off(broker_factory):
    broker = broker_factory("master", messageDelayLevel=LEVELS, mappedFileSizeCommitLog=FILE_SIZE)
    assert broker_config(broker.remoting_addr)["autoMessageVersionOnTopicLen"] == "false"
    offset, msg_id = send_origin(broker.remoting_addr)
    end = max_offset(broker.remoting_addr)
    resp = send_back(broker.remoting_addr, offset, origin_msg_id=msg_id)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "MESSAGE_ILLEGAL")
    assert max_offset(broker.remoting_addr) == end  # nothing parked in SCHEDULE_TOPIC_XXXX either
    log = broker.log_path.read_text(encoding="utf-8")
    assert "put refused (MESSAGE_ILLEGAL): topic of 143 bytes" in log and "autoMessageVersionOnTopicLen=true" in log
    # a group whose retry topic fits V1 is handed back as before
    assert send_back(broker.remoting_addr, offset, group="cg_short").code == ResponseCode.SUCCESS
