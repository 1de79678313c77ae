"""The slave's HA client against misbehaving masters: silence, discontinuous offsets, garbage (issue 3 items 4, 10)."""

from __future__ import annotations

import socket
import struct
import threading

from connector.protocol.ha import encode_transfer_header
from tests.support.brokers import max_offset, runtime_info, wait_for


class FakeMaster:
    """Accepts HA connections; ``on_report(conn, offset, first)`` decides what to send. Counts connections."""

    def __init__(self, on_report) -> None:
        self.on_report = on_report
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.accepted = 0
        self.closed_by_slave = 0
        self.reports: list[int] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        first = True
        pending = b""
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.closed_by_slave += 1
                    return
                pending += data
                while len(pending) >= 8:
                    offset = struct.unpack(">q", pending[:8])[0]
                    pending = pending[8:]
                    self.reports.append(offset)
                    try:
                        self.on_report(conn, offset, first)
                    except OSError:
                        return
                    first = False

    def close(self) -> None:
        self._stop.set()
        self.server.close()
        self.thread.join(timeout=5)


def _slave(broker_factory, master: FakeMaster, **extra):
    return broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.addr,
                          mappedFileSizeCommitLog=65536, **extra)


def test_silent_master_is_detected_by_the_time_since_the_last_read(broker_factory):
    master = FakeMaster(lambda conn, offset, first: None)  # reads reports, never writes
    try:
        slave = _slave(broker_factory, master, haHousekeepingInterval=800, haSendHeartbeatInterval=200)
        wait_for(lambda: master.closed_by_slave >= 1 and master.accepted >= 2,
                 "the slave to drop the silent master and reconnect", timeout_s=10)
        # the slave kept writing heartbeats all along (4.9.8 would never notice: it watches its own writes)
        assert len(master.reports) >= 3
        assert "silent" in slave.log_path.read_text()
    finally:
        master.close()


def test_discontinuous_master_offset_closes_the_connection_and_keeps_the_store(broker_factory):
    def on_report(conn, offset, first):
        if first and offset == 0:  # empty slave: 100 bytes at 0, then a frame that skips 7 bytes
            conn.sendall(encode_transfer_header(0, 100) + bytes(range(100)) + encode_transfer_header(107, 4) + b"oops")
        elif first:  # after reconnecting: again an offset that does not continue the slave's log
            conn.sendall(encode_transfer_header(offset + 7, 4) + b"oops")

    master = FakeMaster(on_report)
    try:
        slave = _slave(broker_factory, master, haSendHeartbeatInterval=200)
        wait_for(lambda: master.closed_by_slave >= 1, "the slave to close the discontinuous connection")
        assert max_offset(slave.remoting_addr) == 100  # the bad frame was not appended
        log = slave.log_path.read_text()
        assert "master pushed offset not equal the max phy offset in slave, SLAVE: 100 MASTER: 107" in log
        wait_for(lambda: master.accepted >= 3, "reconnect attempts with backoff")
    finally:
        master.close()


def test_garbage_from_the_master_is_a_protocol_error_not_a_crash(broker_factory):
    master = FakeMaster(lambda conn, offset, first: conn.sendall(b"\xff" * 64) if first else None)
    try:
        slave = _slave(broker_factory, master, haSendHeartbeatInterval=200)
        wait_for(lambda: master.closed_by_slave >= 2, "the slave to drop garbage connections")
        assert slave.is_running()
        info = runtime_info(slave.remoting_addr)
        assert info["commitLogMaxOffset"] == "0" and info["brokerRole"] == "SLAVE"
        assert "bad HA transfer header" in slave.log_path.read_text()
    finally:
        master.close()
