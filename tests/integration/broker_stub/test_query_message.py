"""QUERY_MESSAGE and VIEW_MESSAGE_BY_ID on a stub broker (issue 14 §4; broker_stub/store/index.py).

Messages are sent by the stub's producer with KEYS; the requests are built as 4.9.8's MQClientAPIImpl
builds them (queryMessage, viewMessage). Checked: lookups by key and by UNIQ_KEY (with the
``_UNIQUE_KEY_QUERY`` flag), the time range, maxNum, the not-found answers, the index file on disk (one
file of the configured size), and that the index survives a clean restart and a kill -9.
"""

from __future__ import annotations

import struct
import time

from connector.client.producer import Producer
from connector.protocol.commitlog import MessageRecord, decode_offset_msg_id, decode_record
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import remoting_request, wait_for

TOPIC = "IndexedOrders"
SMALL_INDEX = {"maxHashSlotNum": 64, "maxIndexNum": 256}  # a 5,720-byte index file
FOREVER = 2 ** 62


def query(addr: str, key: str, *, topic: str = TOPIC, max_num: int = 32, begin: int = 0, end: int = FOREVER,
          unique: bool = False) -> RemotingCommand:
    """One QUERY_MESSAGE as MQClientAPIImpl.queryMessage sends it."""
    header = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin, "endTimestamp": end}
    cmd = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header)
    if unique:
        cmd.ext_fields["_UNIQUE_KEY_QUERY"] = "true"
    return remoting_request(addr, cmd)


def view(addr: str, offset: int) -> RemotingCommand:
    return remoting_request(addr, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}))


def records(body: bytes) -> list[MessageRecord]:
    out, pos = [], 0
    while pos < len(body):
        rec = decode_record(body, pos, check_crc=True)
        assert isinstance(rec, MessageRecord)
        out.append(rec)
        pos += rec.store_size
    return out


def _send_all(addr: str) -> list:
    with Producer(addr, "pg_index") as producer:
        return [producer.send(TOPIC, f"order {n}".encode(), keys=[f"order-{n}", "shared"], queue_id=n % 2)
                for n in range(5)]


def test_query_by_key_and_unique_key_and_view_by_offset(broker_factory):
    broker = broker_factory("master", **SMALL_INDEX)
    sent = _send_all(broker.remoting_addr)
    addr = broker.remoting_addr

    resp = query(addr, "order-3")
    assert resp.code == ResponseCode.SUCCESS
    [rec] = records(resp.body)
    assert (rec.topic, rec.body, rec.properties["UNIQ_KEY"]) == (TOPIC, b"order 3", sent[3].msg_id)
    assert int(resp.ext_fields["indexLastUpdatePhyoffset"]) == decode_offset_msg_id(sent[4].offset_msg_ids[0])[1]
    assert int(resp.ext_fields["indexLastUpdateTimestamp"]) >= rec.store_timestamp

    shared = records(query(addr, "shared").body)
    assert [r.body for r in shared] == [f"order {n}".encode() for n in range(5)]  # CommitLog order
    assert len(records(query(addr, "shared", max_num=2).body)) == 2
    assert len(records(query(addr, "shared", max_num=2, unique=True).body)) == 5  # defaultQueryMaxNum (32)

    uniq = query(addr, sent[1].msg_id, unique=True)
    assert [r.body for r in records(uniq.body)] == [b"order 1"]

    for resp in (query(addr, "nope"), query(addr, "order-3", topic="OtherTopic"),
                 query(addr, "order-3", begin=shared[-1].store_timestamp + 60_000)):
        assert (resp.code, resp.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                            "can not find message, maybe time range not correct")
        assert "indexLastUpdatePhyoffset" in resp.ext_fields

    offset = decode_offset_msg_id(sent[2].offset_msg_ids[0])[1]
    resp = view(addr, offset)
    assert resp.code == ResponseCode.SUCCESS
    assert [r.body for r in records(resp.body)] == [b"order 2"]
    resp = view(addr, 10 ** 12)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {10 ** 12}")

    [index_file] = list((broker.commitlog_dir.parent / "index").iterdir())
    raw = index_file.read_bytes()
    assert len(raw) == 40 + 64 * 4 + 256 * 20
    assert struct.unpack_from(">i", raw, 36)[0] == 1 + 5 * 3  # UNIQ_KEY + two KEYS per message


def test_index_survives_clean_restart_and_kill9(broker_factory):
    broker = broker_factory("master", **SMALL_INDEX)
    sent = _send_all(broker.remoting_addr)
    broker.restart()
    assert [r.body for r in records(query(broker.remoting_addr, "order-4").body)] == [b"order 4"]
    assert len(records(query(broker.remoting_addr, sent[0].msg_id, unique=True).body)) == 1
    broker.kill9()
    broker.restart()  # abnormal: the index file (never full) is rebuilt from the re-dispatched CommitLog
    assert [r.body for r in records(query(broker.remoting_addr, "shared").body)] == [
        f"order {n}".encode() for n in range(5)]
    assert [r.body for r in records(query(broker.remoting_addr, "order-0").body)] == [b"order 0"]


def test_index_disabled_finds_nothing(broker_factory):
    broker = broker_factory("master", messageIndexEnable="false", **SMALL_INDEX)
    _send_all(broker.remoting_addr)
    assert query(broker.remoting_addr, "order-1").code == ResponseCode.QUERY_NOT_FOUND
    assert not (broker.commitlog_dir.parent / "index").exists()


def search_offset(addr: str, queue_id: int, timestamp: int, *, topic: str = TOPIC) -> RemotingCommand:
    """One SEARCH_OFFSET_BY_TIMESTAMP as MQClientAPIImpl.searchOffset sends it."""
    header = {"topic": topic, "queueId": queue_id, "timestamp": timestamp}
    return remoting_request(addr, RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header))


def test_search_offset_by_timestamp(broker_factory):
    broker = broker_factory("master", **SMALL_INDEX)
    addr = broker.remoting_addr
    with Producer(addr, "pg_search") as producer:
        sent = []
        for n in range(5):
            sent.append(producer.send(TOPIC, f"timed {n}".encode(), queue_id=0))
            time.sleep(0.02)  # distinct store times, 20 ms apart
    times = [records(view(addr, decode_offset_msg_id(s.offset_msg_ids[0])[1]).body)[0].store_timestamp for s in sent]
    assert times == sorted(set(times))

    def found(ts: int) -> int:
        resp = search_offset(addr, 0, ts)
        assert resp.code == ResponseCode.SUCCESS
        return int(resp.ext_fields["offset"])

    assert [found(t) for t in times] == [0, 1, 2, 3, 4]  # exact store times
    assert found(times[2] + 1) == 2 and found(times[3] - 1) == 3  # the nearer neighbour
    assert found(0) == 0
    assert found(times[-1] + 3_600_000) == 4  # later than all: the last entry (not the max offset 5)
    assert int(search_offset(addr, 3, times[0]).ext_fields["offset"]) == 0  # a queue without messages
    assert int(search_offset(addr, 0, times[0], topic="NoSuchTopic").ext_fields["offset"]) == 0


def test_slave_builds_the_same_index_and_answers_lookups(broker_factory):
    master = broker_factory("master", **SMALL_INDEX)
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr, **SMALL_INDEX)
    sent = _send_all(master.remoting_addr)
    resp = wait_for(lambda: (r := query(slave.remoting_addr, "shared")).code == ResponseCode.SUCCESS
                    and len(records(r.body)) == 5 and r, "the slave's index holds the 5 messages")
    assert [r.body for r in records(resp.body)] == [f"order {n}".encode() for n in range(5)]
    assert [r.body for r in records(query(slave.remoting_addr, sent[2].msg_id, unique=True).body)] == [b"order 2"]
    [master_file] = list((master.commitlog_dir.parent / "index").iterdir())
    [slave_file] = list((slave.commitlog_dir.parent / "index").iterdir())
    entries = 40 + 64 * 4  # header and slots of both; entries: the same keys at the same CommitLog offsets
    master_raw, slave_raw = master_file.read_bytes(), slave_file.read_bytes()
    assert master_raw[16:40] == slave_raw[16:40]  # begin/end offsets, slot and entry counts
    assert master_raw[40:entries] == slave_raw[40:entries]
    same = [(e[0], e[1], e[3]) for e in struct.iter_unpack(">iqii", master_raw[entries:entries + 16 * 20])]
    assert same == [(e[0], e[1], e[3]) for e in struct.iter_unpack(">iqii", slave_raw[entries:entries + 16 * 20])]
