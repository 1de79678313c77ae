"""Delayed delivery on the stub (ScheduleMessageService, issue 14 item 1): a master re-puts each delayed
message into its real topic after the level's delay, once, also across a restart; delayOffset.json is
persisted in 4.9.8's layout and reaches the slave; a slave never delivers."""

from __future__ import annotations

from broker_stub.store.schedule import decode_delay_offsets
from connector.client.producer import Producer
from connector.protocol.commitlog import MessageRecord
from tests.support.brokers import pull, queue_offset, read_commitlog, runtime_info, wait_for

TOPIC = "DelayTopic"
LEVELS = "1s 3s 10s"  # short levels: bounded waits


def _delivered(addr: str) -> list[MessageRecord]:
    return [r for qid in range(2) if queue_offset(addr, TOPIC, qid) for r in pull(addr, TOPIC, qid, 0)[1]]


def test_delayed_messages_are_delivered_once_after_their_delay_across_a_restart(broker_factory):
    master = broker_factory("master", messageDelayLevel=LEVELS, mappedFileSizeCommitLog=1 << 20,
                            haSendHeartbeatInterval=300)
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr,
                           messageDelayLevel=LEVELS, mappedFileSizeCommitLog=1 << 20)
    with Producer(master.remoting_addr, timeout_ms=15000) as p:
        sent = {f"L1-{i}".encode(): p.send(TOPIC, f"L1-{i}".encode(), tags="tagA", keys=f"k{i}", delay_level=1,
                                           queue_id=i % 2) for i in range(4)}
        sent.update({f"L2-{i}".encode(): p.send(TOPIC, f"L2-{i}".encode(), delay_level=2, queue_id=1)
                     for i in range(3)})
    # level 1 (1 s) arrives first, level 2 (3 s) not yet: restart the master in between
    wait_for(lambda: len(_delivered(master.remoting_addr)) >= 4, "level-1 deliveries", timeout_s=20)
    master.restart()
    wait_for(lambda: len(_delivered(master.remoting_addr)) >= 7, "level-2 deliveries after the restart",
             timeout_s=30)
    wait_for(lambda: runtime_info(master.remoting_addr)["scheduleMessageOffset_2"] == "3,3",
             "level 2 delivered offset", timeout_s=10)
    info = runtime_info(master.remoting_addr)
    assert info["scheduleMessageOffset_1"] == "4,4"
    delivered = _delivered(master.remoting_addr)
    assert sorted(r.body for r in delivered) == sorted(sent)  # each exactly once, none lost
    originals = {r.body: r for r in read_commitlog(master.commitlog_dir)
                 if isinstance(r, MessageRecord) and r.topic == "SCHEDULE_TOPIC_XXXX"}
    delays = {"1": 1000, "2": 3000}
    for rec in delivered:
        orig = originals[rec.body]
        level = orig.properties["DELAY"]
        assert rec.store_timestamp >= orig.store_timestamp + delays[level]
        assert (rec.topic, rec.queue_id) == (TOPIC, int(orig.properties["REAL_QID"]))
        # 4.9.8 stores the old property string: DELAY/REAL_TOPIC/REAL_QID stay, the rest is kept
        assert rec.properties == orig.properties
        assert (rec.flag, rec.sys_flag, rec.born_timestamp, rec.reconsume_times) == (
            orig.flag, orig.sys_flag, orig.born_timestamp, orig.reconsume_times)
    l1_q0 = [r.body for r in delivered if r.queue_id == 0]
    assert l1_q0 == [b"L1-0", b"L1-2"]  # a level's queue is delivered in order
    # persisted in 4.9.8's layout, copied verbatim by the slave's metadata sync
    master_file = master.store_dir / "config" / "delayOffset.json"
    wait_for(lambda: decode_delay_offsets(master_file.read_text()).get(2) == 3, "delayOffset.json persist",
             timeout_s=25)
    assert master_file.read_text().startswith('{\n\t"offsetTable":{1:4,')
    slave_file = slave.store_dir / "config" / "delayOffset.json"
    wait_for(lambda: slave_file.exists() and decode_delay_offsets(slave_file.read_text()).get(2) == 3,
             "the slave's delayOffset.json", timeout_s=30)
    # the slave delivers nothing itself
    assert not any(k.startswith("scheduleMessageOffset_") for k in runtime_info(slave.remoting_addr))
