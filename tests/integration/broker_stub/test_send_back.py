"""Consumer retries on the stub (issue 14 §2): CONSUMER_SEND_MSG_BACK and sends to ``%RETRY%group``.

A stub master with short delay levels; the messages are sent by the stub's producer and handed back with raw
CONSUMER_SEND_MSG_BACK requests as a 4.9.8 push consumer sends them (``offset`` = the message's CommitLog
offset, ``delayLevel`` 0 = "let the broker pick", ``maxReconsumeTimes``). Checked: the copy parked in
SCHEDULE_TOPIC_XXXX (level 3 + reconsumeTimes, RETRY_TOPIC / ORIGIN_MESSAGE_ID / WAIT=false / DELAY), its
delivery into ``%RETRY%group`` after the delay, the dead-letter queue ``%DLQ%group`` once reconsumeTimes
reaches maxReconsumeTimes (or for a negative delay level), the topics' configs, and each refusal's code and
remark as a 4.9.8 broker answers them.
"""

from __future__ import annotations

import time

from broker_stub.javautil import fastjson_loads
from connector.client.producer import Producer
from connector.protocol.commitlog import MessageRecord, decode_offset_msg_id
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import pull, queue_offset, read_commitlog, remoting_request, wait_for

TOPIC = "RetriedOrders"
GROUP = "cg_send_back"
LEVELS = "1s 1s 1s 1s 1s 1s"  # short levels: bounded waits (level 3 + reconsumeTimes is clamped to 6)
RETRY_TOPIC = f"%RETRY%{GROUP}"
DLQ_TOPIC = f"%DLQ%{GROUP}"


def send_back(addr: str, offset: int, *, group: str = GROUP, delay_level: int = 0, max_reconsume_times: int | None = 2,
              origin_msg_id: str | None = None, version: int | None = None,
              drop: str | None = None) -> RemotingCommand:
    """One CONSUMER_SEND_MSG_BACK as MQClientAPIImpl.consumerSendMessageBack builds it."""
    header = {"offset": offset, "group": group, "delayLevel": delay_level, "originMsgId": origin_msg_id,
              "originTopic": TOPIC, "maxReconsumeTimes": max_reconsume_times}
    if drop is not None:
        header.pop(drop)
    cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header)
    if version is not None:
        cmd.version = version
    return remoting_request(addr, cmd)


def _record_at(commitlog_dir, offset: int) -> MessageRecord:
    return next(r for r in read_commitlog(commitlog_dir) if isinstance(r, MessageRecord)
                and r.commit_log_offset == offset)


def _last_record(commitlog_dir) -> MessageRecord:
    return [r for r in read_commitlog(commitlog_dir) if isinstance(r, MessageRecord)][-1]


def _topic_config(addr: str, topic: str) -> dict:
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    return fastjson_loads(resp.body)["topicConfigTable"][topic]


def test_send_back_parks_a_retry_copy_delivers_it_to_the_retry_topic_then_the_dlq(broker_factory):
    master = broker_factory("master", messageDelayLevel=LEVELS, mappedFileSizeCommitLog=1 << 20)
    with Producer(master.remoting_addr, "pg_send_back") as producer:
        sent = producer.send(TOPIC, b"retry me", tags="TagR", keys=["k1"], properties={"note": "值"}, queue_id=1)
    original_offset = decode_offset_msg_id(sent.offset_msg_ids[0])[1]
    original = _record_at(master.commitlog_dir, original_offset)

    # 1st hand-back (reconsumeTimes 0 → 1): parked in SCHEDULE_TOPIC_XXXX at level 3 (queue 2)
    resp = send_back(master.remoting_addr, original_offset, origin_msg_id=sent.msg_id)
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
    parked = _last_record(master.commitlog_dir)
    assert (parked.topic, parked.queue_id, parked.reconsume_times) == ("SCHEDULE_TOPIC_XXXX", 2, 1)
    props = parked.properties
    assert props["REAL_TOPIC"] == RETRY_TOPIC and props["REAL_QID"] == "0" and props["DELAY"] == "3"
    assert props["RETRY_TOPIC"] == TOPIC and props["ORIGIN_MESSAGE_ID"] == original.msg_id
    assert props["WAIT"] == "false"
    assert {k: v for k, v in props.items() if k not in ("REAL_TOPIC", "REAL_QID", "DELAY", "RETRY_TOPIC",
                                                        "ORIGIN_MESSAGE_ID", "WAIT")} == original.properties
    assert (parked.body, parked.flag, parked.sys_flag, parked.born_timestamp, str(parked.born_host),
            str(parked.store_host)) == (original.body, original.flag, original.sys_flag, original.born_timestamp,
                                        str(original.born_host), str(original.store_host))
    retry_cfg = _topic_config(master.remoting_addr, RETRY_TOPIC)
    assert (retry_cfg["readQueueNums"], retry_cfg["writeQueueNums"], retry_cfg["perm"]) == (1, 1, 6)

    # delivered into %RETRY%group after level 3's delay, with the parked properties
    wait_for(lambda: queue_offset(master.remoting_addr, RETRY_TOPIC, 0) == 1, "the retry copy", timeout_s=20)
    _, (retried,) = pull(master.remoting_addr, RETRY_TOPIC, 0, 0, group=GROUP)
    assert retried.properties == props and retried.reconsume_times == 1
    assert retried.store_timestamp >= parked.store_timestamp + 1000

    # 2nd hand-back (of the retry copy): level 3 + 1, ORIGIN_MESSAGE_ID and RETRY_TOPIC stay the first ones
    resp = send_back(master.remoting_addr, retried.physical_offset, origin_msg_id=sent.msg_id)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    parked2 = _last_record(master.commitlog_dir)
    assert (parked2.topic, parked2.queue_id, parked2.reconsume_times) == ("SCHEDULE_TOPIC_XXXX", 3, 2)
    assert parked2.properties["DELAY"] == "4" and parked2.properties["RETRY_TOPIC"] == TOPIC
    assert parked2.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
    wait_for(lambda: queue_offset(master.remoting_addr, RETRY_TOPIC, 0) == 2, "the second retry copy", timeout_s=20)
    _, records = pull(master.remoting_addr, RETRY_TOPIC, 0, 1, group=GROUP)

    # 3rd hand-back: reconsumeTimes 2 ≥ maxReconsumeTimes 2 → the dead-letter queue, at once, DELAY=0 kept
    resp = send_back(master.remoting_addr, records[0].physical_offset, origin_msg_id=sent.msg_id)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    dead = _last_record(master.commitlog_dir)
    assert (dead.topic, dead.queue_id, dead.reconsume_times) == (DLQ_TOPIC, 0, 3)
    assert dead.properties["DELAY"] == "0" and dead.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
    assert dead.properties["RETRY_TOPIC"] == TOPIC and dead.body == original.body
    assert queue_offset(master.remoting_addr, DLQ_TOPIC, 0) == 1
    dlq_cfg = _topic_config(master.remoting_addr, DLQ_TOPIC)
    assert (dlq_cfg["readQueueNums"], dlq_cfg["writeQueueNums"], dlq_cfg["perm"]) == (1, 1, 6)


def test_delay_level_and_max_reconsume_times_choices(broker_factory):
    master = broker_factory("master", messageDelayLevel=LEVELS, mappedFileSizeCommitLog=1 << 20)
    with Producer(master.remoting_addr, "pg_send_back") as producer:
        offsets = [decode_offset_msg_id(producer.send(TOPIC, f"m{i}".encode()).offset_msg_ids[0])[1]
                   for i in range(4)]
    addr, cl = master.remoting_addr, master.commitlog_dir
    # an explicit delay level is used as given (ConsumeConcurrentlyContext.delayLevelWhenNextConsume)
    assert send_back(addr, offsets[0], delay_level=2).code == ResponseCode.SUCCESS
    assert (_last_record(cl).queue_id, _last_record(cl).properties["DELAY"]) == (1, "2")
    # a negative one sends straight to the dead-letter queue
    assert send_back(addr, offsets[1], delay_level=-1).code == ResponseCode.SUCCESS
    assert _last_record(cl).topic == DLQ_TOPIC
    # maxReconsumeTimes 0 → dead at once; without it the group's retryMaxTimes (16) holds
    assert send_back(addr, offsets[2], max_reconsume_times=0).code == ResponseCode.SUCCESS
    assert _last_record(cl).topic == DLQ_TOPIC
    assert send_back(addr, offsets[3], max_reconsume_times=None).code == ResponseCode.SUCCESS
    assert _last_record(cl).topic == "SCHEDULE_TOPIC_XXXX"
    # a client older than V3_4_9 (ordinal 121) is not asked for maxReconsumeTimes: the header value is ignored
    assert send_back(addr, offsets[3], max_reconsume_times=0, version=120).code == ResponseCode.SUCCESS
    assert _last_record(cl).topic == "SCHEDULE_TOPIC_XXXX"
    assert send_back(addr, offsets[3], max_reconsume_times=0, version=121).code == ResponseCode.SUCCESS
    assert _last_record(cl).topic == DLQ_TOPIC


def test_refusals_as_a_real_broker_answers_them(broker_factory):
    master = broker_factory("master", messageDelayLevel=LEVELS, autoCreateSubscriptionGroup=False)
    with Producer(master.remoting_addr, "pg_send_back") as producer:
        offset = decode_offset_msg_id(producer.send(TOPIC, b"x").offset_msg_ids[0])[1]
    addr = master.remoting_addr
    for field in ("offset", "group", "delayLevel"):
        resp = send_back(addr, offset, drop=field)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, f"the custom field <{field}> is null")
    resp = send_back(addr, offset)  # the group is not known and may not be created
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert resp.remark == f"subscription group not exist, {GROUP}"  # 4.9.8 adds a FAQ link
    resp = send_back(addr, offset, group="SELF_TEST_C_GROUP")  # a group every broker has
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = send_back(addr, 1 << 40, group="SELF_TEST_C_GROUP")
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {1 << 40}")


def test_read_only_broker_and_slave_refuse(broker_factory):
    master = broker_factory("master", messageDelayLevel=LEVELS, mappedFileSizeCommitLog=1 << 20)
    with Producer(master.remoting_addr, "pg_send_back") as producer:
        offset = decode_offset_msg_id(producer.send(TOPIC, b"x").offset_msg_ids[0])[1]
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr,
                           messageDelayLevel=LEVELS, mappedFileSizeCommitLog=1 << 20)
    wait_for(lambda: _has_record(slave.commitlog_dir, offset), "the slave to hold the message", timeout_s=20)
    resp = send_back(slave.remoting_addr, offset)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE")
    master.stop()
    read_only = broker_factory("ro", brokerPermission=4)
    resp = send_back(read_only.remoting_addr, 0)
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == "the broker[127.0.0.1] sending message is forbidden"


def _has_record(commitlog_dir, offset: int) -> bool:
    try:
        records = read_commitlog(commitlog_dir)
    except (OSError, ValueError):  # the slave's file is still being written
        return False
    return any(isinstance(r, MessageRecord) and r.commit_log_offset == offset for r in records)


def test_a_send_to_the_retry_topic_past_max_reconsume_times_goes_to_the_dlq(broker_factory):
    """The 4.9.8 client's fallback when CONSUMER_SEND_MSG_BACK fails: it sends the copy to ``%RETRY%group``
    itself with reconsumeTimes / maxReconsumeTimes in the header (SendMessageProcessor.handleRetryAndDLQ)."""
    master = broker_factory("master", messageDelayLevel=LEVELS)
    addr = master.remoting_addr
    header = {"producerGroup": "pg", "topic": RETRY_TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
              "queueId": 0, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0,
              "properties": "RETRY_TOPIC\x01" + TOPIC + "\x02WAIT\x01true", "reconsumeTimes": 1,
              "maxReconsumeTimes": 3}
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, header, b"below"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert _last_record(master.commitlog_dir).topic == RETRY_TOPIC
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, {**header, "reconsumeTimes": 3},
                                                          b"dead"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext_fields["queueId"] == "0"
    dead = _last_record(master.commitlog_dir)
    assert (dead.topic, dead.queue_id, dead.body, dead.reconsume_times) == (DLQ_TOPIC, 0, b"dead", 3)
    assert "DELAY" not in dead.properties  # the request's properties replace the broker's DELAY=0
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.SEND_MESSAGE,
                                                          {**header, "topic": "%RETRY%unknown_group"}, b"x"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark  # autoCreateSubscriptionGroup=true creates it
