"""connector.client.ha with ``protocol="autoswitch"`` (connector.client.ha_autoswitch) over loopback against
deliberately broken AutoSwitch streams (a real 5.5.0 master never sends those; the real one is read in
tests/interop/test_source_real_5_controller.py)."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from connector.client.ha import HARangeFetcher
from connector.client.ha_autoswitch import probe_master
from connector.errors import DataLossError, HAFetchError, HAProtocolError, NotAnHAPortError
from connector.options.settings import FetchSettings
from connector.protocol.ha_autoswitch import (
    EpochEntry,
    HandshakeReply,
    SlaveHandshake,
    TransferHeader,
)

BYTES = bytes(range(256)) * 40  # 10240 CommitLog bytes of a pretend master


def read_handshake(data: bytes) -> SlaveHandshake:
    """The master's side of the 16-byte slave handshake (state, syncFromLastFile, isAsyncLearner, brokerId)."""
    state, last_file, learner, broker_id = struct.unpack(">ihhq", data)
    assert state == 1, f"expected a HANDSHAKE frame, got state {state}"
    return SlaveHandshake(broker_id, last_file == 1, learner == 1)


def read_report(data: bytes) -> int:
    """The master's side of a 12-byte TRANSFER report (state, the slave's max offset)."""
    state, offset = struct.unpack(">iq", data)
    assert state == 2, f"expected a TRANSFER report, got state {state}"
    return offset


class ScriptedMaster:
    """A loopback listener: per connection, reads the 16-byte handshake, sends ``reply`` (bytes), reads the
    first 12-byte report, then sends ``frames(report)`` and records reports until the client closes."""

    def __init__(self, reply: bytes, frames):
        self.reply, self.frames = reply, frames
        self.server = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.handshakes: list[SlaveHandshake] = []
        self.reports: list[int] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _read(self, conn, n):
        buf = b""
        while len(buf) < n:
            part = conn.recv(n - len(buf))
            if not part:
                raise ConnectionResetError
            buf += part
        return buf

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                try:
                    self.handshakes.append(read_handshake(self._read(conn, 16)))
                    conn.sendall(self.reply)
                    report = read_report(self._read(conn, 12))
                    self.reports.append(report)
                    conn.sendall(self.frames(report))
                    while True:
                        self.reports.append(read_report(self._read(conn, 12)))
                except OSError:
                    pass

    def close(self):
        self.server.close()


@pytest.fixture
def scripted():
    masters = []

    def start(reply, frames):
        masters.append(ScriptedMaster(reply, frames))
        return masters[-1]

    yield start
    for m in masters:
        m.close()


def frames_from(lo: int, hi: int, epoch: int = 1, epoch_start: int = 0, size: int = 4096) -> bytes:
    out = b""
    for at in range(lo, hi, size):
        body = BYTES[at:min(at + size, hi)]
        out += TransferHeader(at, len(body), epoch, epoch_start, hi).encode() + body
    return out


ONE_EPOCH = HandshakeReply(len(BYTES), 1, (EpochEntry(1, 0),)).encode()
TWO_EPOCHS = HandshakeReply(len(BYTES), 2, (EpochEntry(1, 0), EpochEntry(2, 6000))).encode()


def fetch(master, start, end, read_timeout_ms=2000, **kw) -> bytes:
    with HARangeFetcher(master.addr, start, end, protocol="autoswitch", broker="b",
                        settings=FetchSettings(read_timeout_ms=read_timeout_ms, max_outage_ms=0), **kw) as fetcher:
        return b"".join(bytes(c) for _, c in fetcher)


def test_a_range_across_an_epoch_boundary_reads_as_a_learner_reporting_its_start(scripted):
    master = scripted(TWO_EPOCHS, lambda r: frames_from(r, 6000, 1, 0) + frames_from(6000, len(BYTES), 2, 6000))
    assert fetch(master, 100, 9000) == BYTES[100:9000]
    assert master.handshakes == [SlaveHandshake(-1, False, True)] and set(master.reports) == {100}


def test_the_frame_with_an_epochs_last_bytes_may_carry_the_next_epoch_as_a_real_master_sends_it(scripted):
    """Seen from a real 5.5.0 master: it moves to the next epoch entry before building the header of the frame
    that ends the current one, so that frame says (2, 6000) although its bytes are epoch 1's."""
    def frames(r):
        last = TransferHeader(4096, 6000 - 4096, 2, 6000, 6000).encode() + BYTES[4096:6000]
        return frames_from(r, 4096, 1, 0) + last + frames_from(6000, len(BYTES), 2, 6000)
    assert fetch(scripted(TWO_EPOCHS, frames), 0, 9000) == BYTES[:9000]
    # but only for a frame ending exactly where that next epoch starts
    def early(r):
        return frames_from(r, 4096, 1, 0) + TransferHeader(4096, 1000, 2, 6000, 6000).encode() + BYTES[4096:5096]
    with pytest.raises(HAProtocolError, match=r"frame \[4096, 5096\) is tagged epoch 2 starting at 6000"):
        fetch(scripted(TWO_EPOCHS, early), 0, 9000)


@pytest.mark.parametrize(("frames", "match"), [
    # bytes of epoch 2's range tagged epoch 1: the master's history is not the one it announced
    (lambda r: frames_from(r, 6000) + frames_from(6000, len(BYTES), 1, 0),
     r"frame \[6000, 10096\) is tagged epoch 1 starting at 0, but the master's handshake announced epoch 2 from "
     r"offset 6000"),
    # a frame running over the end of epoch 1
    (lambda r: frames_from(r, len(BYTES), 1, 0, size=5000), r"frame \[5000, 10000\) is tagged epoch 1 .* announced "
                                                            r"epoch 1 from offset 0 to 6000"),
    # a body announced larger than a real slave could ever take
    (lambda r: TransferHeader(r, 1 << 30, 1, 0, 0).encode(), r"field bodySize is 1073741824"),
    # a gap between frames
    (lambda r: frames_from(r, 4096) + frames_from(4200, 6000), r"frame at offset 4200, expected 4096"),
])
def test_a_broken_stream_fails_naming_what_and_where(scripted, frames, match):
    master = scripted(TWO_EPOCHS, frames)
    with pytest.raises(HAProtocolError, match=match):
        fetch(master, 0, 9000)


def test_reporting_zero_starts_at_the_masters_min_offset_and_the_bytes_below_are_lost(scripted):
    master = scripted(ONE_EPOCH, lambda r: frames_from(3000, len(BYTES)))
    with pytest.raises(DataLossError, match=r"no longer holds CommitLog bytes \[0, 3000\).*starts at 3000"):
        fetch(master, 0, 5000)
    with HARangeFetcher(master.addr, 0, 5000, protocol="autoswitch", broker="b", fail_on_data_loss=False) as fetcher:
        chunks = list(fetcher)
    assert b"".join(bytes(c) for _, c in chunks) == BYTES[3000:5000] and chunks[0][0] == 3000
    assert fetcher.lost_ranges == [(0, 3000)]


def test_a_peer_that_is_not_an_autoswitch_master_fails_at_once(scripted):
    master = scripted(b"HTTP/1.1 400 Bad Request\r\n\r\n", lambda r: b"")
    with pytest.raises(NotAnHAPortError, match=r"is not a RocketMQ AutoSwitch HA port: .*b'HTTP/1.1 400"):
        fetch(master, 0, 100)


def test_a_first_frame_that_never_completes_is_a_stall_not_a_crash(scripted):
    """The handshake showed the peer speaks AutoSwitch: a first transfer frame begun and not whole after
    readTimeoutMs is waited out like a silent master, bounded by maxOutageMs."""
    master = scripted(ONE_EPOCH, lambda r: TransferHeader(r, 100, 1, 0, 0).encode()[:10])
    with pytest.raises(HAFetchError, match=r"maxOutageMs=0; last error: the master sent only 10 bytes of the frame "
                                           r"at offset 0 in 300 ms"):
        fetch(master, 0, 100, read_timeout_ms=300)


class HalvingMaster(ScriptedMaster):
    """Sends each frame of ``frames(report)`` in two halves 60 ms apart: every frame waits for its second half."""

    def _serve(self):
        conn, _ = self.server.accept()
        with conn:
            self.handshakes.append(read_handshake(self._read(conn, 16)))
            conn.sendall(self.reply)
            self.reports.append(read_report(self._read(conn, 12)))
            for frame in self.frames(self.reports[-1]):
                conn.sendall(frame[:20])
                time.sleep(0.06)
                conn.sendall(frame[20:])
            time.sleep(5)


def test_each_frame_has_its_own_read_timeout_budget(scripted):
    """readTimeoutMs bounds the wait for the rest of one frame, not the sum over the frames of a connection:
    ten frames that each wait 60 ms for their second half read within readTimeoutMs=300 without a reconnect."""
    def frames(r):
        return [TransferHeader(at, 100, 1, 0, 0).encode() + BYTES[at:at + 100] for at in range(r, r + 1000, 100)]

    master = HalvingMaster(ONE_EPOCH, frames)
    try:
        with HARangeFetcher(master.addr, 0, 1000, protocol="autoswitch", broker="b",
                            settings=FetchSettings(read_timeout_ms=300, max_outage_ms=0)) as fetcher:
            assert b"".join(bytes(c) for _, c in fetcher) == BYTES[:1000]
        assert fetcher.connections == 1
    finally:
        master.close()


def test_probe_reads_the_confirm_offset_of_the_first_frame(scripted):
    master = scripted(ONE_EPOCH, lambda r: TransferHeader(r, 10, 1, 0, 7777).encode() + BYTES[r:r + 10])
    state = probe_master(master.addr, 500)
    assert (state.confirm_offset, state.handshake.master_max_offset, master.reports[:1]) == (7777, len(BYTES), [500])
    assert probe_master(master.addr, len(BYTES)).confirm_offset is None  # nothing past it: no frame awaited


class DyingMaster(ScriptedMaster):
    """Sends ``frames(report)`` and then closes the connection and stops listening (a master killed mid-range)."""

    def _serve(self):
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn:
            self.handshakes.append(read_handshake(self._read(conn, 16)))
            conn.sendall(self.reply)
            self.reports.append(read_report(self._read(conn, 12)))
            conn.sendall(self.frames(self.reports[-1]))
        self.server.close()


def test_a_fetch_follows_a_master_switch_and_reads_the_rest_from_the_new_master(scripted):
    old = DyingMaster(ONE_EPOCH, lambda r: frames_from(r, 4096))
    new = scripted(TWO_EPOCHS, lambda r: frames_from(r, 6000) + frames_from(6000, len(BYTES), 2, 6000))
    located = []

    def locate():
        located.append(new.addr)
        return new.addr, "127.0.0.1:1"

    with HARangeFetcher(old.addr, 100, 6000, protocol="autoswitch", broker="b", planned_epochs=[(1, 0)],
                        locate_master=locate, settings=FetchSettings(reconnect_backoff_ms=1, max_outage_ms=10000)
                        ) as fetcher:
        got = b"".join(bytes(c) for _, c in fetcher)
    assert got == BYTES[100:6000] and fetcher.switches == [(old.addr, new.addr)]
    assert old.reports == [100] and new.reports[:1] == [100]  # the new master is asked for the range start again


def test_bytes_the_new_master_never_received_are_lost_and_named(scripted):
    # planned under epoch 1 up to 9000, but the new master's epoch 1 ended at 6000 (its epoch 2 starts there)
    master = scripted(TWO_EPOCHS, lambda r: frames_from(r, 6000) + frames_from(6000, len(BYTES), 2, 6000))
    with pytest.raises(DataLossError, match=r"no longer holds CommitLog bytes \[6000, 9000\).*agrees with the epochs "
                                            r"the range was planned under \(\[\(1, 0\)\]\) only up to offset 6000"):
        fetch(master, 5000, 9000, planned_epochs=[(1, 0)])
    with HARangeFetcher(master.addr, 5000, 9000, protocol="autoswitch", broker="b", planned_epochs=[(1, 0)],
                        fail_on_data_loss=False) as fetcher:
        chunks = list(fetcher)
    assert b"".join(bytes(c) for _, c in chunks) == BYTES[5000:6000]  # read up to the switch point, then skipped
    assert chunks[-1] == (9000, b"") and fetcher.lost_ranges == [(6000, 9000)]
    assert fetch(master, 5000, 6000, planned_epochs=[(1, 0)]) == BYTES[5000:6000]  # below the switch: agreed
