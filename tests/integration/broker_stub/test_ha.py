"""The master HA port (docs/protocol.md §2) against raw sockets: start rules, frame rules, heartbeats, acks,
housekeeping."""

from __future__ import annotations

import socket

import pytest

from connector.client.producer import Producer
from connector.protocol.ha import HA_TRANSFER_BATCH_SIZE_BYTES
from tests.support.brokers import HASocket, max_offset, runtime_info

FILE = 65536


def _fill(broker, n: int = 120, size: int = 2500) -> int:
    with Producer(broker.remoting_addr) as p:
        for f in [p.send_async("HaTopic", bytes([i % 256]) * size) for i in range(n)]:
            f.result(timeout=30)
    return max_offset(broker.remoting_addr)


def _commitlog_bytes(broker, start: int, end: int) -> bytes:
    out = bytearray()
    pos = start
    while pos < end:
        base = pos - pos % FILE
        data = (broker.commitlog_dir / f"{base:020d}").read_bytes()
        take = min(end, base + FILE) - pos
        out += data[pos - base:pos - base + take]
        pos += take
    return bytes(out)


def _check_data_frames(broker, frames, start: int, end: int) -> None:
    data = [f for f in frames if not f.is_heartbeat]
    assert data[0].master_phy_offset == start
    pos = start
    for f in data:
        assert f.master_phy_offset == pos  # contiguous
        assert 0 < len(f.body) <= HA_TRANSFER_BATCH_SIZE_BYTES
        assert f.master_phy_offset // FILE == (f.end_offset - 1) // FILE  # never crosses a file boundary
        pos = f.end_offset
    assert pos == end
    assert b"".join(f.body for f in data) == _commitlog_bytes(broker, start, end)


@pytest.fixture
def ha_broker(broker_factory):
    return broker_factory(mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=300)


def test_report_zero_starts_at_the_current_last_file(ha_broker):
    end = _fill(ha_broker)
    assert end > 3 * FILE
    with HASocket(ha_broker.ha_addr) as ha:
        ha.report(0)
        frames = ha.read_until(end, ack=True)
        _check_data_frames(ha_broker, frames, end - end % FILE, end)
        hb = ha.read_frame(timeout_s=5)
        assert hb.is_heartbeat and hb.master_phy_offset == end


def test_report_mid_offset_is_served_exactly_even_inside_a_record(ha_broker):
    end = _fill(ha_broker)
    with HASocket(ha_broker.ha_addr) as ha:
        ha.report(1001)
        frames = ha.read_until(end, ack=True, timeout_s=20)
        _check_data_frames(ha_broker, frames, 1001, end)
        # the first frame ends at the 32 KiB cap; the one reaching the file end is shorter
        lengths = [len(f.body) for f in frames if not f.is_heartbeat]
        assert lengths[0] == HA_TRANSFER_BATCH_SIZE_BYTES
        assert (FILE - 1001) % HA_TRANSFER_BATCH_SIZE_BYTES in lengths


def test_report_max_gets_heartbeats_at_max_only(ha_broker):
    end = _fill(ha_broker, n=10)
    with HASocket(ha_broker.ha_addr) as ha:
        ha.report(end)
        for _ in range(3):
            f = ha.read_frame(timeout_s=5)
            assert f.is_heartbeat and f.master_phy_offset == end
            ha.report(end)


def test_nothing_is_sent_before_the_first_report(ha_broker):
    _fill(ha_broker, n=5)
    with HASocket(ha_broker.ha_addr) as ha:
        with pytest.raises(TimeoutError):
            ha.read_frame(timeout_s=1.0)  # > 3 heartbeat intervals
        ha.report(0)
        first = ha.read_frame(timeout_s=5)  # the heartbeat interval has passed: a heartbeat at the start first
        assert first.is_heartbeat and first.master_phy_offset == 0
        second = ha.read_frame(timeout_s=5)
        assert not second.is_heartbeat and second.master_phy_offset == 0


def test_new_data_is_pushed_after_an_append(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=60000,
                            haHousekeepingInterval=120000)  # above the heartbeat period (config_rules)
    end = _fill(broker, n=3)
    with HASocket(broker.ha_addr) as ha, Producer(broker.remoting_addr) as p:
        ha.report(end)
        r = p.send("HaTopic", b"fresh bytes")
        f = ha.read_frame(timeout_s=5)
        assert not f.is_heartbeat and f.master_phy_offset == end == int(r.offset_msg_id[-16:], 16)
        assert b"fresh bytes" in f.body and f.end_offset == max_offset(broker.remoting_addr)


@pytest.mark.parametrize("first", [True, False])
def test_ack_above_max_offset_closes_the_connection(ha_broker, first):
    end = _fill(ha_broker, n=5)
    with HASocket(ha_broker.ha_addr) as ha:
        if not first:
            ha.report(end)
            assert ha.read_frame(timeout_s=5).is_heartbeat
        ha.report(end + 1)
        assert ha.is_closed_by_peer(timeout_s=5)
    assert "greater than local commitLog offset" in ha_broker.log_path.read_text()
    with HASocket(ha_broker.ha_addr) as ha:  # the port keeps serving others
        ha.report(end)
        assert ha.read_frame(timeout_s=5).master_phy_offset == end


def test_garbage_on_the_ha_port_closes_that_connection(ha_broker):
    end = _fill(ha_broker, n=5)
    with HASocket(ha_broker.ha_addr) as ha:
        ha.send_raw(b"\xff" * 8)  # a negative offset
        assert ha.is_closed_by_peer(timeout_s=5)
    with HASocket(ha_broker.ha_addr) as ha:
        ha.send_raw(b"GET / HTTP/1.1\r\n")  # 16 bytes: two huge offsets
        assert ha.is_closed_by_peer(timeout_s=5)
    assert max_offset(ha_broker.remoting_addr) == end


def test_housekeeping_closes_a_silent_connection(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=200, haHousekeepingInterval=1000)
    end = _fill(broker, n=2)
    with HASocket(broker.ha_addr) as ha:
        ha.report(end)
        assert ha.is_closed_by_peer(timeout_s=10)
    assert "ha housekeeping" in broker.log_path.read_text()


def test_a_stalled_reader_does_not_block_other_connections(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=1048576, haSendHeartbeatInterval=60000,
                            haHousekeepingInterval=120000)  # above the heartbeat period (config_rules)
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, _, port = broker.ha_addr.rpartition(":")
    stalled.connect((host, int(port)))
    try:
        stalled.sendall((1).to_bytes(8, "big"))  # asks for everything, then never reads
        with Producer(broker.remoting_addr, compress_msg_body_over_howmuch=1 << 30) as p:
            for f in [p.send_async("Big", bytes([i]) * 60000) for i in range(200)]:
                f.result(timeout=30)
        end = max_offset(broker.remoting_addr)
        assert end > 12_000_000  # far more than the socket buffers of the stalled connection
        with HASocket(broker.ha_addr) as ha:
            ha.report(1)
            frames = ha.read_until(end, ack=True, timeout_s=30)
            assert sum(len(f.body) for f in frames) == end - 1
        assert runtime_info(broker.remoting_addr)["commitLogMaxOffset"] == str(end)
    finally:
        stalled.close()


def test_a_slow_reader_with_a_small_window_gets_every_byte_through_half_sent_frames(broker_factory):
    """A slave that takes a few hundred bytes at a time through a 4 KiB receive buffer, 12 MB behind: once the
    master's socket buffer (at most 4 MiB here) is full, its sendmsg calls stop inside a frame, whose rest is
    copied aside once and sent first on the next write."""
    from connector.protocol.ha import TransferFrameReader

    broker = broker_factory(mappedFileSizeCommitLog=1048576)
    with Producer(broker.remoting_addr, compress_msg_body_over_howmuch=1 << 30) as p:
        for f in [p.send_async("Big", bytes([i]) * 60000) for i in range(200)]:
            f.result(timeout=30)
    end = max_offset(broker.remoting_addr)
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    host, _, port = broker.ha_addr.rpartition(":")
    slow.connect((host, int(port)))
    slow.settimeout(10)
    reader, got, pos = TransferFrameReader(), bytearray(), 1
    try:
        slow.sendall(pos.to_bytes(8, "big"))
        while pos < end:
            piece = slow.recv(700)
            assert piece, "the master closed the connection"
            reader.feed(piece)
            while (frame := reader.next_frame()) is not None:
                assert frame.master_phy_offset == pos, "frames continue where the last one ended"
                got += frame.body
                pos += len(frame.body)
    finally:
        slow.close()
    commitlog = b"".join(f.read_bytes() for f in sorted(broker.commitlog_dir.iterdir()))
    assert bytes(got) == commitlog[1:end]


def test_offset_the_master_no_longer_has_gets_heartbeats_only(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=200)
    end = _fill(broker)
    assert broker.stop() == 0
    (broker.commitlog_dir / f"{0:020d}").unlink()  # as if retention had deleted the first file
    broker.restart()
    info = runtime_info(broker.remoting_addr)
    assert info["commitLogMinOffset"] == str(FILE) and info["commitLogMaxOffset"] == str(end)
    with HASocket(broker.ha_addr) as ha:
        ha.report(100)
        for _ in range(3):
            f = ha.read_frame(timeout_s=5)
            assert f.is_heartbeat and f.master_phy_offset == 100
    assert "no longer has" in broker.log_path.read_text()
