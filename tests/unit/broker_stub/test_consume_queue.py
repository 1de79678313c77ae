"""ConsumeQueue + ReputMessageService on real files: the golden 4.9.8 CommitLog, placeholders, recovery."""

from __future__ import annotations

import json
import shutil

import pytest

from broker_stub.config import MessageStoreConfig
from broker_stub.javautil import java_string_hash
from broker_stub.store.commit_log import CommitLog
from broker_stub.store.consume_queue import CQ_STORE_UNIT_SIZE, PLACEHOLDER_SIZE, ConsumeQueueStore
from broker_stub.store.mapped_file import MappedFileQueue
from broker_stub.store.reput import ReputMessageService
from connector.protocol.commitlog import encode_record

FILE = 1048576
DELAYS = MessageStoreConfig().delay_levels_ms()


def _open(commitlog_dir, store_dir, *, cq_file_size=60000, is_slave=False):
    queue = MappedFileQueue(commitlog_dir, FILE)
    queue.load()
    commit_log = CommitLog(queue, max_message_size=4 << 20, max_delay_level=18)
    cq_store = ConsumeQueueStore(store_dir / "consumequeue", cq_file_size)
    cq_store.load()
    reput = ReputMessageService(commit_log, cq_store, is_slave=is_slave, delay_levels_ms=DELAYS)
    return queue, commit_log, cq_store, reput


@pytest.fixture
def fixture_store(tmp_path, fixture_dir):
    shutil.copytree(fixture_dir / "commitlog", tmp_path / "commitlog")
    return tmp_path


def _messages(fixture_dir):
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_reput_of_the_golden_commitlog_indexes_every_message(fixture_store, fixture_dir):
    queue, _, cq_store, reput = _open(fixture_store / "commitlog", fixture_store)
    queue.files[-1].wrote_position = 3402931 - 3 * FILE  # as recovery leaves it
    reput.set_start()
    reput.catch_up()
    assert reput.reput_from_offset == 3402931 and reput.dispatch_behind_bytes == 0
    messages = _messages(fixture_dir)
    per_queue: dict[tuple[str, int], int] = {}
    for m in messages:
        cq = cq_store.find(m["topic"], m["queueId"])
        entry = cq.entry(m["queueOffset"])
        tags = m["properties"].get("TAGS")
        code = java_string_hash(tags) if tags else 0
        if m["topic"] == "SCHEDULE_TOPIC_XXXX":  # tagsCode = delivery time
            code = m["storeTimestamp"] + DELAYS[int(m["properties"]["DELAY"]) - 1]
        assert entry == (m["commitLogOffset"], m["storeSize"], code), m["commitLogOffset"]
        key = (m["topic"], m["queueId"])
        per_queue[key] = max(per_queue.get(key, 0), m["queueOffset"] + 1)
    assert {k: cq.max_offset_in_queue for k, cq in cq_store.table.items()} == per_queue
    assert cq_store.queue_offset_table()["FixOrders611-0"] == per_queue[("FixOrders611", 0)]
    cq_store.close()
    queue.close()


def test_prepared_and_rollback_records_are_not_dispatched(tmp_path):
    (tmp_path / "commitlog").mkdir()
    queue, commit_log, cq_store, reput = _open(tmp_path / "commitlog", tmp_path)
    offset, recs = 0, []
    for i, sys_flag in enumerate((0x0, 0x4, 0x8, 0xC, 0x0)):  # NOT, PREPARED, COMMIT, ROLLBACK, NOT
        qoff = 0 if sys_flag in (0x4, 0xC) else len([r for r in recs if r[1] not in (0x4, 0xC)])
        rec = encode_record(commit_log_offset=offset, topic="TxTopic", body=b"b%d" % i, queue_offset=qoff,
                            sys_flag=sys_flag, properties=b"")
        commit_log.append_data(offset, rec)
        recs.append((offset, sys_flag))
        offset += len(rec)
    reput.set_start()
    reput.catch_up()
    cq = cq_store.find("TxTopic", 0)
    assert cq.max_offset_in_queue == 3
    assert [cq.entry(i)[0] for i in range(3)] == [o for o, f in recs if f not in (0x4, 0xC)]
    cq_store.close()
    queue.close()


def test_slave_tail_cut_inside_a_record_waits_for_the_rest(tmp_path):
    (tmp_path / "commitlog").mkdir()
    queue, commit_log, cq_store, reput = _open(tmp_path / "commitlog", tmp_path, is_slave=True)
    a = encode_record(commit_log_offset=0, topic="T", body=b"x" * 500, queue_offset=0, properties=b"")
    b = encode_record(commit_log_offset=len(a), topic="T", body=b"y" * 500, queue_offset=1, properties=b"")
    commit_log.append_data(0, a + b[:100])  # an HA frame ending inside record b
    reput.set_start()
    reput.catch_up()
    assert cq_store.find("T", 0).max_offset_in_queue == 1 and reput.reput_from_offset == len(a)
    commit_log.append_data(len(a) + 100, b[100:])
    reput.catch_up()
    assert cq_store.find("T", 0).max_offset_in_queue == 2 and reput.dispatch_behind_bytes == 0
    cq_store.close()
    queue.close()


def test_queue_first_created_mid_stream_gets_placeholders_and_a_min_offset(tmp_path):
    cq_store = ConsumeQueueStore(tmp_path / "consumequeue", 100)  # 5 entries a file
    cq = cq_store.find_or_create("Late", 3)
    cq.put_message_position_info(5000, 200, 7, cq_offset=7)
    cq.put_message_position_info(5200, 200, 8, cq_offset=8)
    assert cq.min_offset_in_queue == 7 and cq.max_offset_in_queue == 9
    raw = (cq.dir / "00000000000000000100").read_bytes()
    assert raw[:CQ_STORE_UNIT_SIZE * 2] == (b"\0" * 8 + PLACEHOLDER_SIZE.to_bytes(4, "big") + b"\0" * 8) * 2
    assert cq.entry(7) == (5000, 200, 7) and cq.entry(6) is None  # below the min offset
    # a repeated dispatch of an already indexed record is ignored
    cq.put_message_position_info(5000, 200, 7, cq_offset=7)
    assert cq.max_offset_in_queue == 9
    cq_store.close()
    # reopened: recovery finds the end of the entries and the min offset again
    again = ConsumeQueueStore(tmp_path / "consumequeue", 100)
    again.load()
    again.recover(commit_log_min_offset=0, commit_log_max_offset=10_000)
    cq = again.find("Late", 3)
    assert (cq.min_offset_in_queue, cq.max_offset_in_queue, cq.max_physic_offset) == (7, 9, 5400)
    # a CommitLog that was cut back at 5200 drops the entry that points past it
    again.recover(commit_log_min_offset=0, commit_log_max_offset=5200)
    assert cq.max_offset_in_queue == 8 and cq.max_physic_offset == 5200
    again.close()


def test_expired_consume_queue_files_follow_the_commitlog_min_offset(tmp_path):
    cq_store = ConsumeQueueStore(tmp_path / "consumequeue", 100)
    cq = cq_store.find_or_create("Old", 0)
    for i in range(12):  # 3 files: entries 0-4, 5-9, 10-11
        cq.put_message_position_info(i * 1000, 1000, 0, cq_offset=i)
    assert cq.delete_expired_files(commit_log_min_offset=6000) == 1  # entries 0-4 all below 6000
    assert cq.min_offset_in_queue == 6 and cq.max_offset_in_queue == 12
    assert sorted(p.name for p in cq.dir.iterdir()) == ["00000000000000000100", "00000000000000000200"]
    cq_store.close()
