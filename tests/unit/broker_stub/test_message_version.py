"""The stub CommitLog's MessageVersion choice (``autoMessageVersionOnTopicLen``, docs/protocol.md §8).

Off (the default, a 4.9.8 broker): a topic over 127 characters is MESSAGE_ILLEGAL before anything is
written, also when a delay level would move it to SCHEDULE_TOPIC_XXXX. On (as 5.x): a ``%RETRY%`` topic of
128–255 bytes is stored as a V2 record, other long topics stay MESSAGE_ILLEGAL. Recovery and the
topicQueueTable rebuild walk V2 records.
"""

from __future__ import annotations

import pytest

from broker_stub.javautil import JavaHashMap
from broker_stub.store.commit_log import CommitLog, MessageExtBrokerInner, PutMessageStatus
from broker_stub.store.mapped_file import MappedFileQueue
from broker_stub.store.recovery import rebuild_topic_queue_table, recover_commit_log
from connector.protocol.commitlog import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    HostAddress,
    MessageRecord,
    iter_records,
)

FILE = 64 * 1024
HOST = HostAddress.parse("127.0.0.1:10911")
RETRY_143 = "%RETRY%" + "g" * 136


def _log(path, *, auto: bool) -> CommitLog:
    q = MappedFileQueue(path, FILE)
    q.load()
    return CommitLog(q, max_message_size=1 << 20, max_delay_level=18, auto_message_version_on_topic_len=auto)


def _msg(topic: str, delay: int = 0) -> MessageExtBrokerInner:
    props = JavaHashMap({"TAGS": "t"})
    if delay:
        props.put("DELAY", str(delay))
    return MessageExtBrokerInner(topic=topic, queue_id=0, body=b"body", flag=0, properties=props,
                                 properties_string=props.to_properties_string(), sys_flag=0, born_timestamp=1,
                                 born_host=HOST, store_host=HOST)


@pytest.mark.parametrize(("topic", "off", "on"), [
    ("T" * 127, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE),
    (RETRY_143, None, MESSAGE_MAGIC_CODE_V2),
    ("%RETRY%" + "g" * 248, None, MESSAGE_MAGIC_CODE_V2),  # 255 bytes: 5.x HookUtils' limit
    ("%RETRY%" + "g" * 249, None, None),
    ("%DLQ%" + "g" * 136, None, None),  # no retry prefix: 5.x refuses it too
    ("T" * 128, None, None),
    ("é" * 64, None, None),  # 64 characters but 128 UTF-8 bytes: never a truncated length byte
])
def test_message_version_rules(tmp_path, topic, off, on):
    assert _log(tmp_path / "off", auto=False).message_version(topic) == off
    assert _log(tmp_path / "on", auto=True).message_version(topic) == on


def test_off_refuses_a_long_delayed_topic_before_the_schedule_move(tmp_path):
    cl = _log(tmp_path, auto=False)
    assert cl.put_message(_msg(RETRY_143, delay=3)).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert cl.max_offset == 0


def test_on_writes_v2_and_recovery_and_rebuild_read_it(tmp_path):
    cl = _log(tmp_path, auto=True)
    for topic in ("Short", RETRY_143, RETRY_143, "Short"):
        assert cl.put_message(_msg(topic)).status is PutMessageStatus.PUT_OK
    parked = cl.put_message(_msg(RETRY_143, delay=1))  # parked under SCHEDULE_TOPIC_XXXX: a V1 record
    assert parked.status is PutMessageStatus.PUT_OK
    end = cl.max_offset
    cl.mapped_file_queue.close()
    q = MappedFileQueue(tmp_path, FILE)
    q.load()
    report = recover_commit_log(q, abnormal=True, check_crc=True, checkpoint=None)
    assert (report.max_offset, report.records_checked, report.stop_reason) == (end, 5, None)
    recs = [r for r in iter_records(q.files[0].mapping[:end], base_offset=0, check_crc=True)
            if isinstance(r, MessageRecord)]
    assert [(r.topic, r.magic, r.queue_offset) for r in recs] == [
        ("Short", MESSAGE_MAGIC_CODE, 0), (RETRY_143, MESSAGE_MAGIC_CODE_V2, 0), (RETRY_143, MESSAGE_MAGIC_CODE_V2, 1),
        ("Short", MESSAGE_MAGIC_CODE, 1), ("SCHEDULE_TOPIC_XXXX", MESSAGE_MAGIC_CODE, 0)]
    assert rebuild_topic_queue_table(q) == {"Short-0": 2, f"{RETRY_143}-0": 2, "SCHEDULE_TOPIC_XXXX-0": 1}
    q.close()
