"""Recovery never deletes acknowledged data on its own (issue 9 item 4, docs/broker_stub.md "CommitLog files
and recovery").

A corrupt record in the 2nd of 8 CommitLog files plus an ``abort`` file (any kill -9 leaves one): 4.9.8
truncates there and deletes the 6 later files. The stub refuses to start, naming file, offset and what
follows; ``cutCorruptCommitLogOnRecover=true`` cuts there and MOVES what follows to a quarantine folder,
the ConsumeQueues staying consistent with the cut CommitLog. A torn tail of the last file is still
truncated (its bytes saved in the quarantine folder).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from broker_stub.launcher import BrokerStartError
from connector.client.producer import Producer
from connector.protocol.commitlog import MessageRecord
from tests.support.brokers import max_offset, pull, queue_offset, read_commitlog, wait_for

FILE = 65536
TOPIC = "RecoveryTopic"


def _send(addr: str, n: int, size: int = 1500) -> list:
    with Producer(addr, timeout_ms=15000) as p:
        return [f.result(timeout=30) for f in [p.send_async(TOPIC, bytes([i % 251]) * size, queue_id=i % 2)
                                                for i in range(n)]]


def _offset(result) -> int:
    return int(result.offset_msg_id[-16:], 16)


def _files(broker) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(broker.commitlog_dir.iterdir())}


def _eight_files_then_corrupt_the_second(broker_factory):
    """A broker with 8 CommitLog files, killed, with one record in the 2nd file corrupted (BODYCRC)."""
    broker = broker_factory(mappedFileSizeCommitLog=FILE, mappedFileSizeConsumeQueue=400)
    results = _send(broker.remoting_addr, 300)
    assert len(list(broker.commitlog_dir.iterdir())) == 8
    broker.kill9()
    assert (broker.store_dir / "abort").exists()
    # no checkpoint: abnormal recovery scans from the first file (as after a crash before the first checkpoint)
    (broker.store_dir / "checkpoint").unlink(missing_ok=True)
    in_second = [r for r in results if FILE < _offset(r) < 2 * FILE]
    victim = in_second[len(in_second) // 2]
    path = broker.commitlog_dir / f"{FILE:020d}"
    with open(path, "r+b") as f:
        f.seek(_offset(victim) - FILE + 300)  # inside the 1500-byte body: BODYCRC no longer matches
        byte = f.read(1)
        f.seek(_offset(victim) - FILE + 300)
        f.write(bytes([byte[0] ^ 0xFF]))
    return broker, results, victim


def test_corrupt_record_before_the_last_file_stops_the_broker_and_changes_nothing(broker_factory):
    broker, results, victim = _eight_files_then_corrupt_the_second(broker_factory)
    before = _files(broker)
    with pytest.raises(BrokerStartError):
        broker.restart()
    assert broker.process.returncode == 1
    log = broker.log_path.read_text().split("--- launch")[-1]
    errors = [line for line in log.splitlines() if "level=ERROR" in line]
    assert len(errors) == 1, errors
    line = errors[0]
    assert f"offset {_offset(victim)}" in line and f"{FILE:020d}" in line and "BODYCRC" in line
    assert "6 later file(s) holding data" in line
    assert f"{2 * FILE:020d} .. {7 * FILE:020d}" in line
    assert "cutCorruptCommitLogOnRecover=true" in line
    assert "Traceback" not in log
    assert _files(broker) == before  # nothing truncated, nothing deleted
    assert (broker.store_dir / "abort").exists()
    assert not (broker.store_dir / "quarantine").exists()


def test_operator_flag_cuts_there_and_moves_what_follows_to_quarantine(broker_factory):
    broker, results, victim = _eight_files_then_corrupt_the_second(broker_factory)
    before = _files(broker)
    cut = _offset(victim)
    broker.props["cutCorruptCommitLogOnRecover"] = "true"
    broker._write_conf()
    broker.restart()
    addr = broker.remoting_addr
    assert max_offset(addr) == cut
    log = broker.log_path.read_text()
    folder = Path(re.search(r"quarantine=(\S+)", log).group(1))
    assert folder.parent == broker.store_dir / "quarantine"
    # the six later files moved intact, the cut file's tail copied byte for byte
    for i in range(2, 8):
        name = f"{i * FILE:020d}"
        assert (folder / name).read_bytes() == before[name]
        assert not (broker.commitlog_dir / name).exists()
    tail = (folder / f"{FILE:020d}.tail-at-{cut - FILE}").read_bytes()
    assert tail == before[f"{FILE:020d}"][cut - FILE:cut - FILE + len(tail)]
    assert len(tail) >= 1500 and not any(before[f"{FILE:020d}"][cut - FILE + len(tail):])
    assert sorted(p.name for p in broker.commitlog_dir.iterdir()) == [f"{0:020d}", f"{FILE:020d}"]
    # ConsumeQueues agree with the cut CommitLog: exactly the records before the cut, per queue
    kept = [r for r in results if _offset(r) < cut]
    for q in (0, 1):
        expected = [_offset(r) for r in kept if r.queue_id == q]
        wait_for(lambda q=q, n=len(expected): queue_offset(addr, TOPIC, q) == n, f"queue {q} recovered")
        got, offset = [], 0
        while offset < len(expected):
            resp, records = pull(addr, TOPIC, q, offset)
            assert resp.code == 0, resp.remark
            got += records
            offset = int(resp.ext_fields["nextBeginOffset"])
        assert [r.physical_offset for r in got] == expected
    redo = _send(addr, 2)  # the log goes on from the cut, queue offsets from the last kept record
    assert _offset(redo[0]) == cut
    assert [(r.queue_id, r.queue_offset) for r in redo] == [
        (0, sum(1 for r in kept if r.queue_id == 0)), (1, sum(1 for r in kept if r.queue_id == 1))]
    assert broker.stop() == 0
    msgs = [r for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord)]
    assert len(msgs) == len(kept) + 2


def test_garbage_file_after_the_last_file_is_not_deleted(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE)
    _send(broker.remoting_addr, 20)
    end = max_offset(broker.remoting_addr)
    broker.kill9()
    garbage = os.urandom(FILE)
    extra = broker.commitlog_dir / f"{end - end % FILE + FILE:020d}"
    extra.write_bytes(garbage)
    with pytest.raises(BrokerStartError):
        broker.restart()
    assert extra.read_bytes() == garbage
    assert "1 later file(s) holding data" in broker.log_path.read_text()


def test_torn_tail_of_the_last_file_is_truncated_and_its_bytes_saved(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE)
    results = _send(broker.remoting_addr, 150)
    end = max_offset(broker.remoting_addr)
    broker.kill9()
    last = results[-1]
    last_file = broker.commitlog_dir / f"{end - end % FILE:020d}"
    start = _offset(last) - (end - end % FILE)
    with open(last_file, "r+b") as f:
        f.seek(start)
        record = f.read(end % FILE - start)
        f.seek(start + len(record) // 2)
        f.write(b"\0" * (len(record) - len(record) // 2))  # the last record torn in half
    broker.restart()
    assert max_offset(broker.remoting_addr) == _offset(last)
    with open(last_file, "rb") as f:
        f.seek(start)
        assert not any(f.read())
    log = broker.log_path.read_text()
    saved = Path(re.search(r"savedTo=(\S+)", log).group(1))
    assert saved.name == f"{last_file.name}.tail-at-{start}"
    assert saved.read_bytes() == record[:len(record) // 2]
    assert _send(broker.remoting_addr, 1)[0].offset_msg_id[-16:] == f"{_offset(last):016X}"
