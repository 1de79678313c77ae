"""CommitLog append rules (END_FILE blank, batches) and recovery, on real files in tmp_path."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from broker_stub.javautil import JavaHashMap
from broker_stub.store.checkpoint import StoreCheckpoint
from broker_stub.store.commit_log import CommitLog, MessageExtBatch, MessageExtBrokerInner, PutMessageStatus
from broker_stub.store.mapped_file import MappedFileQueue
from broker_stub.store.quarantine import CommitLogRecoveryError
from broker_stub.store.recovery import rebuild_topic_queue_table, recover_commit_log
from connector.protocol.commitlog import (
    BLANK_MAGIC_CODE,
    BatchEntry,
    BlankRecord,
    HostAddress,
    MessageRecord,
    calc_msg_length,
    encode_batch_body,
    iter_records,
)

FILE = 4096
HOST = HostAddress.parse("127.0.0.1:10911")
BORN = HostAddress.parse("127.0.0.1:50000")


def _queue(path, size=FILE) -> MappedFileQueue:
    q = MappedFileQueue(path, size)
    q.load()
    return q


def _log(path, size=FILE) -> CommitLog:
    return CommitLog(_queue(path, size), max_message_size=4 * 1024 * 1024, max_delay_level=18)


def _msg(body: bytes, topic="T", queue_id=0, sys_flag=0) -> MessageExtBrokerInner:
    props = JavaHashMap({"CLUSTER": "C"})
    return MessageExtBrokerInner(topic=topic, queue_id=queue_id, body=body, flag=0, properties=props,
                                 properties_string=props.to_properties_string(), sys_flag=sys_flag,
                                 born_timestamp=1, born_host=BORN, store_host=HOST)


def _size(body_len: int) -> int:
    return calc_msg_length(0, body_len, 1, len("CLUSTER\x01C"))


def _records(q: MappedFileQueue):
    out = []
    for mf in q.files:
        out += list(iter_records(mf.mapping[:mf.wrote_position], base_offset=mf.file_from_offset,
                                 file_end=mf.file_size, check_crc=True))
    return out


def test_end_file_rule_exact_boundaries(tmp_path):
    cl = _log(tmp_path)
    first = FILE - 8 - _size(0)  # leaves exactly msgLen + 8 for an empty-bodied message
    assert cl.put_message(_msg(b"a" * (first - _size(0)))).status is PutMessageStatus.PUT_OK
    rest = FILE - cl.max_offset
    body = rest - 8 - _size(0)
    r = cl.put_message(_msg(b"b" * body))  # msgLen + 8 == remaining: still fits
    assert r.result.wrote_offset == FILE - rest and cl.max_offset == FILE - 8
    r = cl.put_message(_msg(b"c"))  # 8 bytes left: blank of 8, message in the next file
    assert r.result.wrote_offset == FILE
    recs = _records(cl.mapped_file_queue)
    blank = [x for x in recs if isinstance(x, BlankRecord)]
    assert blank == [BlankRecord(FILE - 8, 8)]
    assert struct.unpack_from(">ii", cl.mapped_file_queue.files[0].mapping, FILE - 8) == (8, BLANK_MAGIC_CODE)
    assert [x.commit_log_offset for x in recs if isinstance(x, MessageRecord)] == [0, FILE - rest, FILE]
    assert cl.mapped_file_queue.files[1].file_name == f"{FILE:020d}"


def test_one_more_byte_goes_to_the_next_file(tmp_path):
    cl = _log(tmp_path)
    cl.put_message(_msg(b"a" * 100))
    rest = FILE - cl.max_offset
    r = cl.put_message(_msg(b"b" * (rest - 8 - _size(0) + 1)))
    assert r.result.wrote_offset == FILE
    assert [x for x in _records(cl.mapped_file_queue) if isinstance(x, BlankRecord)] == [
        BlankRecord(FILE - rest, rest)]


def test_batch_goes_whole_to_the_next_file(tmp_path):
    cl = _log(tmp_path)
    cl.put_message(_msg(b"a" * 3000))
    entries = [BatchEntry(i, bytes([65 + i]) * 300, f"UNIQ_KEY\x01u{i}") for i in range(4)]
    batch = MessageExtBatch(topic="T", queue_id=0, body=encode_batch_body(entries), flag=0,
                            properties=JavaHashMap({"CLUSTER": "C", "WAIT": "true"}), sys_flag=0, born_timestamp=5,
                            born_host=BORN, store_host=HOST)
    r = cl.put_messages(batch)
    assert r.status is PutMessageStatus.PUT_OK and r.result.msg_num == 4
    assert r.result.wrote_offset == FILE
    recs = [x for x in _records(cl.mapped_file_queue) if isinstance(x, MessageRecord)]
    assert [x.queue_offset for x in recs] == [0, 1, 2, 3, 4]
    assert [x.flag for x in recs[1:]] == [0, 1, 2, 3]
    assert recs[1].properties_raw == b"UNIQ_KEY\x01u0\x02CLUSTER\x01C\x02WAIT\x01true"
    assert {x.born_timestamp for x in recs[1:]} == {5}
    assert r.result.msg_id.count(",") == 3


def _fill(cl: CommitLog, n: int, body_len: int = 700) -> None:
    for i in range(n):
        assert cl.put_message(_msg(bytes([i % 256]) * body_len, topic=f"T{i % 2}")).status is PutMessageStatus.PUT_OK


def test_recovery_cuts_a_torn_tail_and_zeroes_it(tmp_path):
    cl = _log(tmp_path)
    _fill(cl, 12)
    end = cl.max_offset
    last = cl.mapped_file_queue.files[-1]
    garbage = b"\x00\x00\x01\x00" + os.urandom(40)  # TOTALSIZE 256, then junk: a torn record
    last.mapping[end - last.file_from_offset:end - last.file_from_offset + len(garbage)] = garbage
    cl.mapped_file_queue.close()
    q = _queue(tmp_path)
    report = recover_commit_log(q, abnormal=True, check_crc=True, checkpoint=None)
    assert report.max_offset == end and q.max_offset == end
    tail = q.files[-1].mapping[end - q.files[-1].file_from_offset:]
    assert not any(tail)
    table = rebuild_topic_queue_table(q)
    assert table == {"T0-0": 6, "T1-0": 6}
    q.close()


def _corrupt_a_record_before_the_last_file(tmp_path):
    cl = _log(tmp_path)
    _fill(cl, 20)
    q = cl.mapped_file_queue
    assert len(q.files) >= 4
    before_last = q.files[-2].file_tail_offset
    victim = [r for r in _records(q) if isinstance(r, MessageRecord) and r.commit_log_offset < before_last][-3]
    mf = q.find_mapped_file_by_offset(victim.commit_log_offset)
    body_pos = victim.commit_log_offset - mf.file_from_offset + 88
    mf.mapping[body_pos] ^= 0xFF
    q.close()
    return victim, {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}


def test_recovery_stops_at_a_crc_mismatch_before_the_last_file_and_changes_nothing(tmp_path):
    victim, before = _corrupt_a_record_before_the_last_file(tmp_path)
    q = _queue(tmp_path)
    with pytest.raises(CommitLogRecoveryError, match=f"offset {victim.commit_log_offset} .*BODYCRC") as info:
        recover_commit_log(q, abnormal=True, check_crc=True, checkpoint=None, store_root=tmp_path.parent / "root")
    assert info.value.offset == victim.commit_log_offset
    q.close()
    assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == before


def test_recovery_with_cut_corrupt_moves_later_files_to_quarantine(tmp_path):
    victim, before = _corrupt_a_record_before_the_last_file(tmp_path)
    q = _queue(tmp_path)
    root = tmp_path.parent / "root"
    report = recover_commit_log(q, abnormal=True, check_crc=True, checkpoint=None, cut_corrupt=True, store_root=root)
    assert report.max_offset == victim.commit_log_offset
    assert "BODYCRC" in report.stop_reason
    assert sorted(os.listdir(tmp_path)) == [mf.file_name for mf in q.files]
    moved = sorted(set(before) - set(os.listdir(tmp_path)))
    assert moved and all((Path(report.quarantine) / name).read_bytes() == before[name] for name in moved)
    q.close()


def test_normal_recovery_keeps_everything_and_a_trailing_blank_counts_as_data(tmp_path):
    cl = _log(tmp_path)
    _fill(cl, 5)
    end = cl.max_offset
    q = cl.mapped_file_queue
    q.files[-1].write_at(q.files[-1].wrote_position, struct.pack(">ii", FILE - q.files[-1].wrote_position,
                                                                  BLANK_MAGIC_CODE))
    q.close()
    q = _queue(tmp_path)
    report = recover_commit_log(q, abnormal=False, check_crc=True, checkpoint=None)
    assert end < report.max_offset == q.files[-1].file_tail_offset
    q.close()


def test_abnormal_recovery_starts_from_the_checkpointed_file(tmp_path):
    cl = _log(tmp_path)
    _fill(cl, 20)
    q = cl.mapped_file_queue
    ts = [struct.unpack_from(">q", mf.mapping, 56)[0] for mf in q.files]
    q.close()
    ckpt = StoreCheckpoint(tmp_path / "checkpoint")
    ckpt.physic_msg_timestamp = ts[2] + 3000
    q = _queue(tmp_path)
    report = recover_commit_log(q, abnormal=True, check_crc=True, checkpoint=ckpt)
    expected_start = max(i for i, t in enumerate(ts) if t <= ts[2])
    assert report.start_file == q.files[expected_start].file_name
    q.close()


def test_file_size_mismatch_refuses_to_load(tmp_path):
    (tmp_path / f"{0:020d}").write_bytes(b"\0" * 1000)
    with pytest.raises(ValueError, match="mappedFileSizeCommitLog"):
        _queue(tmp_path)
