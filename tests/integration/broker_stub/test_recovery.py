"""Restart recovery: clean SIGTERM restarts and kill -9 with torn tails (docs/protocol.md §1.11)."""

from __future__ import annotations

import os

import pytest

from connector.client.producer import Producer
from connector.protocol.commitlog import MessageRecord
from tests.support.brokers import read_commitlog, runtime_info

FILE = 65536


def _send_many(broker, n: int, topic: str = "RecTopic") -> list:
    with Producer(broker.remoting_addr) as p:
        return [f.result(timeout=30) for f in [p.send_async(topic, f"m{i}".encode() * 50) for i in range(n)]]


def _max(broker) -> int:
    return int(runtime_info(broker.remoting_addr)["commitLogMaxOffset"])


def test_sigterm_restart_keeps_everything_and_continues(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE)
    first = _send_many(broker, 200)
    end = _max(broker)
    assert broker.stop() == 0
    broker.restart()
    assert _max(broker) == end
    assert "lastShutdown=normal" in broker.log_path.read_text()
    after = _send_many(broker, 8)
    assert int(after[0].offset_msg_id[-16:], 16) == end
    for q in range(4):  # queue offsets continue per queue
        before_q = max(r.queue_offset for r in first if r.queue_id == q)
        assert min(r.queue_offset for r in after if r.queue_id == q) == before_q + 1
    msgs = [r for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord)]
    assert len(msgs) == 208


@pytest.mark.parametrize("tail", ["garbage", "partial_record"])
def test_kill9_with_a_torn_tail_recovers_to_the_last_valid_record(broker_factory, tail):
    broker = broker_factory(mappedFileSizeCommitLog=FILE)
    results = _send_many(broker, 150)
    end = _max(broker)
    broker.kill9()
    assert (broker.store_dir / "abort").exists()
    last_file = broker.commitlog_dir / f"{end - end % FILE:020d}"
    pos = end % FILE
    with open(last_file, "r+b") as f:
        if tail == "garbage":
            f.seek(pos)
            f.write(b"\x00\x00\x02\x00" + os.urandom(300))
        else:
            last = results[-1]
            off = int(last.offset_msg_id[-16:], 16) - (end - end % FILE)
            f.seek(off)
            record = f.read(end - (end - end % FILE) - off)
            f.seek(pos)
            f.write(record[: len(record) // 2])  # a record torn in half
    # (a garbage file after the last one is no torn tail: tests/faults/test_broker_recovery_faults.py)
    broker.restart()
    log = broker.log_path.read_text()
    assert "lastShutdown=abnormal" in log
    assert _max(broker) == end
    with open(last_file, "rb") as f:
        f.seek(pos)
        assert not any(f.read())  # the torn tail is zeroed
    after = _send_many(broker, 4)
    assert int(after[0].offset_msg_id[-16:], 16) == end
    msgs = [r for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord)]
    assert len(msgs) == 154
    assert broker.stop() == 0
    assert not (broker.store_dir / "abort").exists()


def test_kill9_with_a_corrupted_last_record_drops_that_record(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE)
    results = _send_many(broker, 40)
    last_offset = int(results[-1].offset_msg_id[-16:], 16)
    broker.kill9()
    path = broker.commitlog_dir / f"{last_offset - last_offset % FILE:020d}"
    with open(path, "r+b") as f:
        f.seek(last_offset % FILE + 90)  # inside the body: BODYCRC no longer matches
        byte = f.read(1)
        f.seek(last_offset % FILE + 90)
        f.write(bytes([byte[0] ^ 0xFF]))
    broker.restart()
    assert _max(broker) == last_offset
    assert "BODYCRC" in broker.log_path.read_text()
    with Producer(broker.remoting_addr) as p:
        redo = p.send("RecTopic", b"redo", queue_id=results[-1].queue_id)
    assert int(redo.offset_msg_id[-16:], 16) == last_offset
    assert redo.queue_offset == results[-1].queue_offset  # the dropped record's queue offset is reused
