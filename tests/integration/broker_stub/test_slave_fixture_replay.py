"""Wire compatibility with a real 4.9.8 master: a stub SLAVE fed the HA streams recorded from a real
RocketMQ 4.9.8 master (tests/fixtures/rocketmq-4.9.8/ha_stream) writes CommitLog files equal to the real
master's files, and reports what a real slave reports."""

from __future__ import annotations

import json
import shutil
import socket
import struct
import threading

import pytest

from tests.support.brokers import runtime_info, wait_for, wait_for_offset

FILE = 1048576
MASTER_MAX = 3402931


class ReplayMaster:
    """A one-connection HA "master": waits for the first 8-byte report, then sends a recorded stream.

    ``reports`` collects every offset the slave reported (in order).
    """

    def __init__(self, stream: bytes) -> None:
        self.stream = stream
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(20)
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.reports: list[int] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            conn, _ = self.server.accept()
            with conn:
                conn.settimeout(0.2)
                pending = b""
                sent = False
                while not self._stop.is_set():
                    try:
                        data = conn.recv(4096)
                    except TimeoutError:
                        continue
                    if not data:
                        return
                    pending += data
                    while len(pending) >= 8:
                        self.reports.append(struct.unpack(">q", pending[:8])[0])
                        pending = pending[8:]
                    if self.reports and not sent:
                        conn.sendall(self.stream)
                        sent = True
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def close(self) -> None:
        self._stop.set()
        self.server.close()
        self.thread.join(timeout=5)


def _frame_ends(stream: bytes) -> set[int]:
    ends, pos = set(), 0
    while pos < len(stream):
        offset, size = struct.unpack_from(">qi", stream, pos)
        ends.add(offset + size)
        pos += 12 + size
    return ends


@pytest.fixture
def replay(request):
    masters: list[ReplayMaster] = []

    def start(stream: bytes) -> ReplayMaster:
        m = ReplayMaster(stream)
        masters.append(m)
        return m

    yield start
    for m in masters:
        m.close()


def _start_slave(broker_factory, master: ReplayMaster, workdir_name: str = "slave", **extra):
    return broker_factory(workdir_name, brokerRole="SLAVE", brokerId=1, haMasterAddress=master.addr,
                          mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=500, **extra)


def _check_reports(master: ReplayMaster, meta: dict, stream: bytes) -> None:
    assert master.error is None, master.error
    assert master.reports[0] == meta["reportedOffset"]  # reported at once, the slave's own max offset
    later = master.reports[1:]
    assert later == sorted(later) and later[-1] == MASTER_MAX
    assert set(later) <= _frame_ends(stream) | {meta["reportedOffset"]}  # acks at frame ends only


def test_empty_slave_fed_report_0_stream_writes_the_real_last_file(broker_factory, replay, fixture_dir):
    stream = (fixture_dir / "ha_stream" / "report_0.bin").read_bytes()
    meta = json.loads((fixture_dir / "ha_stream" / "report_0.json").read_text())
    master = replay(stream)
    slave = _start_slave(broker_factory, master)
    wait_for_offset(slave.remoting_addr, MASTER_MAX)
    wait_for(lambda: master.reports and master.reports[-1] == MASTER_MAX, "the final ack")
    assert runtime_info(slave.remoting_addr)["commitLogMinOffset"] == str(3 * FILE)
    slave.stop()
    _check_reports(master, meta, stream)
    name = "00000000000003145728"
    assert sorted(p.name for p in slave.commitlog_dir.iterdir()) == [name]
    assert (slave.commitlog_dir / name).read_bytes() == (fixture_dir / "commitlog" / name).read_bytes()


def test_slave_at_a_record_boundary_fed_the_boundary_stream_equals_all_real_files(broker_factory, replay,
                                                                                   fixture_dir, tmp_path):
    stream = (fixture_dir / "ha_stream" / "report_boundary_554616.bin").read_bytes()
    meta = json.loads((fixture_dir / "ha_stream" / "report_boundary_554616.json").read_text())
    start = meta["reportedOffset"]
    store = tmp_path / "slave" / "store" / "commitlog"
    store.mkdir(parents=True)
    first = bytearray((fixture_dir / "commitlog" / "00000000000000000000").read_bytes())
    first[start:] = bytes(FILE - start)  # the slave holds the real bytes up to the boundary, nothing after
    (store / "00000000000000000000").write_bytes(first)
    master = replay(stream)
    slave = _start_slave(broker_factory, master)
    wait_for_offset(slave.remoting_addr, MASTER_MAX)
    wait_for(lambda: master.reports and master.reports[-1] == MASTER_MAX, "the final ack")
    slave.stop()
    _check_reports(master, meta, stream)
    real = sorted(p.name for p in (fixture_dir / "commitlog").iterdir())
    assert sorted(p.name for p in store.iterdir()) == real
    for name in real:
        assert (store / name).read_bytes() == (fixture_dir / "commitlog" / name).read_bytes(), name


def test_slave_at_max_accepts_the_recorded_heartbeats_and_stays(broker_factory, replay, fixture_dir, tmp_path):
    stream = (fixture_dir / "ha_stream" / "report_max_3402931.bin").read_bytes()
    store = tmp_path / "slave" / "store" / "commitlog"
    shutil.copytree(fixture_dir / "commitlog", store)
    master = replay(stream)
    slave = _start_slave(broker_factory, master)
    wait_for(lambda: len(master.reports) >= 3, "a first report and two heartbeat reports")
    info = runtime_info(slave.remoting_addr)
    assert info["slaveConnected"] == "true"  # heartbeats passed the continuity check
    assert info["masterPhyOffset"] == str(MASTER_MAX)
    assert info["commitLogMaxOffset"] == str(MASTER_MAX)
    assert set(master.reports) == {MASTER_MAX}
    slave.stop()
    for name in sorted(p.name for p in (fixture_dir / "commitlog").iterdir()):
        assert (store / name).read_bytes() == (fixture_dir / "commitlog" / name).read_bytes(), name
