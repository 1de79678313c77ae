"""connector.client.ha over loopback against byte streams a real 4.9.8 master sent (ha_stream/) and
against deliberately broken streams (the stub broker never sends those)."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from connector.client.ha import HARangeFetcher, prefetch_receives
from connector.errors import DataLossError, HAFetchError, HAProtocolError, NotAnHAPortError
from connector.options.settings import FetchSettings
from connector.protocol.ha import encode_transfer_header

MAPPED_FILE_SIZE = 1048576


@pytest.fixture(scope="module")
def commitlog(fixture_dir: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted((fixture_dir / "commitlog").iterdir()))


class ReplayMaster:
    """A loopback listener playing a master: for each connection, reads the first 8-byte report, calls
    ``script(report, conn)`` to send bytes, then records keep-alive reports until the client closes."""

    def __init__(self, script, port: int = 0):
        self.script = script
        self.server = socket.create_server(("127.0.0.1", port))
        self.server.settimeout(0.05)
        self._stop = threading.Event()
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.reports: list[list[int]] = []
        self.closed_by_client = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                reports: list[int] = []
                self.reports.append(reports)
                first = _read_exactly(conn, 8)
                if first is None:
                    continue
                reports.append(struct.unpack(">q", first)[0])
                try:
                    self.script(reports[0], conn)
                    while True:
                        more = _read_exactly(conn, 8)
                        if more is None:
                            self.closed_by_client.set()
                            break
                        reports.append(struct.unpack(">q", more)[0])
                except OSError:
                    self.closed_by_client.set()

    def close(self):
        self._stop.set()
        self.server.close()
        self._thread.join(5)


def _read_exactly(conn, n):
    buf = b""
    while len(buf) < n:
        try:
            part = conn.recv(n - len(buf))
        except OSError:
            return None
        if not part:
            return None
        buf += part
    return buf


@pytest.fixture
def replay():
    masters = []

    def start(script):
        m = ReplayMaster(script)
        masters.append(m)
        return m

    yield start
    for m in masters:
        m.close()


def fetch_all(fetcher) -> list[tuple[int, bytes]]:
    with fetcher:
        return list(fetcher)


def test_recorded_stream_of_a_real_master_reassembles_to_the_commitlog(replay, fixture_dir, commitlog):
    recorded = (fixture_dir / "ha_stream" / "report_boundary_554616.bin").read_bytes()
    meta = json.loads((fixture_dir / "ha_stream" / "report_boundary_554616.json").read_text())
    start, end = meta["reportedOffset"], meta["lastDataEndOffset"]
    master = replay(lambda report, conn: conn.sendall(recorded))
    got = fetch_all(HARangeFetcher(master.addr, start, end, settings=FetchSettings(heartbeat_interval_ms=100)))
    assert got[0][0] == start
    assert all(a[0] + len(a[1]) == b[0] for a, b in zip(got, got[1:], strict=False))  # contiguous, in order
    assert b"".join(chunk for _, chunk in got) == commitlog[start:end]
    assert master.closed_by_client.wait(5)
    assert master.reports[0] and set(master.reports[0]) == {start}  # never more than start


def test_chunks_are_views_of_receive_buffers_that_are_never_written_over(replay, fixture_dir, commitlog):
    """The executors' receive path copies no byte in user space: the chunks are the frames' bodies where
    recv_into put them, and they stay valid after later receives (so the decoder may append them as they are,
    docs/source.md "Speed and memory")."""
    recorded = (fixture_dir / "ha_stream" / "report_boundary_554616.bin").read_bytes()
    meta = json.loads((fixture_dir / "ha_stream" / "report_boundary_554616.json").read_text())
    start, end = meta["reportedOffset"], meta["lastDataEndOffset"]
    master = replay(lambda report, conn: conn.sendall(recorded))
    kept = [chunk for spans in prefetch_receives(HARangeFetcher(master.addr, start, end,
                                                                settings=FetchSettings(heartbeat_interval_ms=100)),
                                                 depth=4) for chunk in spans]
    assert all(isinstance(chunk, memoryview) for _, chunk in kept)
    assert b"".join(chunk for _, chunk in kept) == commitlog[start:end], "still intact after every receive"


def test_stops_exactly_at_the_range_end_and_closes(replay, fixture_dir, commitlog):
    recorded = (fixture_dir / "ha_stream" / "report_boundary_554616.bin").read_bytes()
    master = replay(lambda report, conn: conn.sendall(recorded))
    end = 554616 + 40000  # inside the second frame
    fetcher = HARangeFetcher(master.addr, 554616, end)
    got = fetch_all(fetcher)
    assert b"".join(c for _, c in got) == commitlog[554616:end]
    assert master.closed_by_client.wait(5)
    assert fetcher.max_reported_offset == 554616


def _frames(commitlog: bytes, start: int, end: int, size: int = 32768) -> bytes:
    out = bytearray()
    pos = start
    while pos < end:
        stop = min(end, pos + size, pos - pos % MAPPED_FILE_SIZE + MAPPED_FILE_SIZE)
        out += encode_transfer_header(pos, stop - pos) + commitlog[pos:stop]
        pos = stop
    return bytes(out)


def test_range_from_zero_reports_one_and_supplies_byte_zero(replay, commitlog):
    def script(report, conn):
        assert report == 1
        conn.sendall(encode_transfer_header(1, 0) + _frames(commitlog, 1, 100000))

    master = replay(script)
    fetcher = HARangeFetcher(master.addr, 0, 70000, settings=FetchSettings(heartbeat_interval_ms=50))
    got = fetch_all(fetcher)
    assert got[0][0] == 0 and got[0][1][:1] == b"\x00"  # byte 0 supplied by the fetcher
    assert b"".join(c for _, c in got) == commitlog[:70000]
    assert (fetcher.min_reported_offset, fetcher.max_reported_offset) == (1, 1) and master.reports[0][0] == 1


def test_keepalive_reports_repeat_the_start_offset(replay, commitlog):
    gate = threading.Event()

    def script(report, conn):
        gate.wait(5)  # silent master: the client must keep reporting meanwhile
        conn.sendall(_frames(commitlog, report, report + 1000))

    master = replay(script)
    fetcher = HARangeFetcher(master.addr, 5000, 6000, settings=FetchSettings(heartbeat_interval_ms=20))
    result = []
    t = threading.Thread(target=lambda: result.extend(fetch_all(fetcher)))
    t.start()
    deadline = time.monotonic() + 5
    while fetcher.report_count < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    t.join(5)
    assert fetcher.report_count >= 4 and (fetcher.min_reported_offset, fetcher.max_reported_offset) == (5000, 5000)
    assert b"".join(c for _, c in result) == commitlog[5000:6000]


def test_a_frame_that_does_not_continue_the_previous_one_is_a_protocol_error(replay, commitlog):
    def script(report, conn):
        conn.sendall(_frames(commitlog, report, report + 100) + _frames(commitlog, report + 101, report + 200))

    master = replay(script)
    with pytest.raises(HAProtocolError, match=r"frame at offset 5101, expected 5100"):
        fetch_all(HARangeFetcher(master.addr, 5000, 9000))


def test_garbage_instead_of_frames_is_a_protocol_error(replay):
    master = replay(lambda report, conn: conn.sendall(b"\x00" * 8 + b"\xff\xff\xff\xff"))
    with pytest.raises(HAProtocolError, match="bad HA transfer header"):
        fetch_all(HARangeFetcher(master.addr, 5000, 9000))


def test_silent_master_read_timeout_reconnects_then_fails_after_max_outage(replay):
    master = replay(lambda report, conn: None)
    with pytest.raises(HAFetchError, match=r"unreachable for \d+ ms \(\d+ attempts\), longer than maxOutageMs=400; "
                                           r"last error: no bytes from the master for 150 ms.*stopped at offset 5000"):
        fetch_all(HARangeFetcher(master.addr, 5000, 9000,
                                 settings=FetchSettings(read_timeout_ms=150, max_outage_ms=400,
                                                        heartbeat_interval_ms=50, reconnect_backoff_ms=10,
                                                        reconnect_backoff_max_ms=20)))
    assert len(master.reports) >= 2  # reconnected while the outage lasted


def test_connection_refused_fails_naming_the_address_once_max_outage_is_over():
    with socket.create_server(("127.0.0.1", 0)) as s:
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(HAFetchError, match=f"broker b HA {addr}: unreachable for .*maxOutageMs=0.*refused.*"
                                           r"range \[5, 9\) stopped at offset 5"):
        fetch_all(HARangeFetcher(addr, 5, 9, broker="b", settings=FetchSettings(max_outage_ms=0)))


def test_a_broker_down_for_a_while_is_waited_out_and_logged_once_each_way(commitlog, caplog):
    """Nothing listens on the port for ~1.5 s (refused), then a master serves: the fetch completes."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    masters = []

    def come_back():
        time.sleep(1.5)
        masters.append(ReplayMaster(lambda report, conn: conn.sendall(_frames(commitlog, report, 60000)),
                                    port=port))

    threading.Thread(target=come_back, daemon=True).start()
    caplog.set_level("DEBUG", logger="connector.client.reconnect")
    try:
        fetcher = HARangeFetcher(f"127.0.0.1:{port}", 7000, 60000, broker="b",
                                 settings=FetchSettings(max_outage_ms=30000, reconnect_backoff_ms=20,
                                                        reconnect_backoff_max_ms=200))
        got = fetch_all(fetcher)
    finally:
        for m in masters:
            m.close()
    assert b"".join(c for _, c in got) == commitlog[7000:60000]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2, warnings
    assert "broker b HA 127.0.0.1:" in warnings[0] and "unreachable" in warnings[0]
    assert "back after an outage of" in warnings[1]
    attempts = [r for r in caplog.records if r.levelname == "DEBUG" and "attempt" in r.getMessage()]
    assert len(attempts) >= 5  # retried with backoff, each attempt only at DEBUG
    assert fetcher.connections == 1 and fetcher.outage.outages == 1


def test_an_http_server_on_the_ha_port_is_named_not_retried(replay):
    master = replay(lambda report, conn: conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
    with pytest.raises(NotAnHAPortError, match=rf"{master.addr} \(broker broker\) is not a RocketMQ HA port: "
                                               r"it answered the 8-byte offset report with b'HTTP/1.1 400"):
        fetch_all(HARangeFetcher(master.addr, 5000, 9000, settings=FetchSettings(max_outage_ms=60000)))
    assert len(master.reports) == 1


def test_an_echo_server_on_the_ha_port_is_named(replay):
    master = replay(lambda report, conn: conn.sendall(struct.pack(">q", report)))
    with pytest.raises(NotAnHAPortError, match=r"is not a RocketMQ HA port.*less than one frame header"):
        fetch_all(HARangeFetcher(master.addr, 5000, 9000,
                                 settings=FetchSettings(read_timeout_ms=300, max_outage_ms=60000)))


DRIP_EVERY_S = 0.05
DRIP_FOR_S = 8.0


def test_a_master_dripping_a_frame_byte_by_byte_is_bounded_by_the_outage_limit(replay, commitlog):
    """Issue 22 item 6: one whole frame, then the next frame one byte at a time. Every recv gets a byte well
    within readTimeoutMs, so only a bound on the whole frame stops it: the fetch fails once the outage
    (reconnects that bring no new byte) has lasted maxOutageMs, not when the master stops dripping."""

    def script(report, conn):
        conn.sendall(_frames(commitlog, report, report + 1000))
        stop_at = time.monotonic() + DRIP_FOR_S
        for byte in _frames(commitlog, report + 1000, report + 3000):
            if time.monotonic() > stop_at:
                return
            conn.sendall(bytes([byte]))
            time.sleep(DRIP_EVERY_S)

    master = replay(script)
    started = time.monotonic()
    with pytest.raises(HAFetchError, match=r"longer than maxOutageMs=1000; last error: the master sent only \d+ "
                                           r"bytes of the frame at offset 6000 in 300 ms.*stopped at offset 6000"):
        fetch_all(HARangeFetcher(master.addr, 5000, 9000,
                                 settings=FetchSettings(read_timeout_ms=300, max_outage_ms=1000,
                                                        reconnect_backoff_ms=10, reconnect_backoff_max_ms=20)))
    held_s = time.monotonic() - started
    assert held_s < 0.3 + 1.0 + 2.0, f"held {held_s:.1f} s"  # readTimeoutMs + maxOutageMs + slack


def test_a_consumer_slower_than_read_timeout_does_not_count_against_a_frame(replay, commitlog):
    """Only time spent waiting for the master counts: a consumer that holds each chunk longer than
    readTimeoutMs while the next frame is half in the buffer does not make a stall."""

    def script(report, conn):
        data = _frames(commitlog, report, report + 40000, size=8000)
        for i in range(0, len(data), 5000):  # every send ends inside a frame
            conn.sendall(data[i:i + 5000])
            time.sleep(0.01)

    master = replay(script)
    fetcher = HARangeFetcher(master.addr, 5000, 45000, keep_views=True,
                             settings=FetchSettings(read_timeout_ms=200, max_outage_ms=0))
    got = []
    with fetcher:
        for chunk in fetcher:
            got.append(chunk)
            time.sleep(0.25)
    assert b"".join(c for _, c in got) == commitlog[5000:45000] and fetcher.connections == 1


def test_reconnect_resumes_without_duplicates_and_without_reporting_more(replay, commitlog):
    calls = []

    def script(report, conn):
        calls.append(report)
        if len(calls) == 1:
            conn.sendall(_frames(commitlog, report, report + 50000)[:40000])  # dies mid-frame
            conn.shutdown(socket.SHUT_RDWR)
        else:
            conn.sendall(_frames(commitlog, report, 200000))

    master = replay(script)
    fetcher = HARangeFetcher(master.addr, 7000, 120000, settings=FetchSettings(max_outage_ms=5000))
    got = fetch_all(fetcher)
    assert b"".join(c for _, c in got) == commitlog[7000:120000]
    assert calls == [7000, 7000] and {r for conn in master.reports for r in conn} == {7000}
    assert fetcher.connections == 2


def test_heartbeats_below_the_min_offset_mean_data_loss(replay):
    master = replay(lambda report, conn: conn.sendall(encode_transfer_header(report, 0) * 3))
    fetcher = HARangeFetcher(master.addr, 5000, 9000, broker="broker-a",
                             offsets_probe=lambda: (MAPPED_FILE_SIZE, 2 * MAPPED_FILE_SIZE))
    with pytest.raises(DataLossError, match=r"broker broker-a .* no longer holds CommitLog bytes \[5000, 9000\).*"
                                            r"commitLogMinOffset is 1048576"):
        fetch_all(fetcher)
    assert fetcher.lost_ranges == [(5000, 9000)]


def test_heartbeats_with_data_loss_allowed_skip_to_the_min_offset(replay, commitlog):
    def script(report, conn):
        if report < MAPPED_FILE_SIZE:
            conn.sendall(encode_transfer_header(report, 0))
        else:
            conn.sendall(_frames(commitlog, report, report + 70000))

    master = replay(script)
    fetcher = HARangeFetcher(master.addr, 5000, MAPPED_FILE_SIZE + 60000, fail_on_data_loss=False,
                             offsets_probe=lambda: (MAPPED_FILE_SIZE, 3 * MAPPED_FILE_SIZE))
    got = fetch_all(fetcher)
    assert got[0] == (MAPPED_FILE_SIZE, b"")  # the skip marker
    assert b"".join(c for _, c in got) == commitlog[MAPPED_FILE_SIZE:MAPPED_FILE_SIZE + 60000]
    assert fetcher.lost_ranges == [(5000, MAPPED_FILE_SIZE)]
    assert [r[0] for r in master.reports] == [5000, MAPPED_FILE_SIZE]


def test_heartbeats_while_the_broker_has_the_data_fail_after_retries(replay):
    master = replay(lambda report, conn: conn.sendall(encode_transfer_header(report, 0) * 10))
    with pytest.raises(HAFetchError, match=r"master sent 3 heartbeats in a row at offset 5000"):
        fetch_all(HARangeFetcher(master.addr, 5000, 9000, offsets_probe=lambda: (0, 20000),
                                 settings=FetchSettings(fetch_retries=2)))


def test_truncated_broker_tail_is_data_loss(replay):
    master = replay(lambda report, conn: conn.sendall(encode_transfer_header(report, 0)))
    with pytest.raises(DataLossError, match=r"\[5000, 9000\).*CommitLog now ends at 5000"):
        fetch_all(HARangeFetcher(master.addr, 5000, 9000, offsets_probe=lambda: (0, 5000)))


def test_empty_range_does_not_connect():
    fetcher = HARangeFetcher("127.0.0.1:1", 10, 10)
    assert fetch_all(fetcher) == [] and fetcher.connections == 0


def test_zero_keep_views_are_frame_views_that_decode_the_same(replay, commitlog):
    master = replay(lambda report, conn: conn.sendall(_frames(commitlog, report, 300000)))
    fetcher = HARangeFetcher(master.addr, 0, 250000, keep_views=False)
    joined = bytearray()
    kinds = set()
    with fetcher:
        for offset, chunk in fetcher:
            assert offset == len(joined)
            kinds.add(type(chunk))
            joined += chunk  # consumed before the next iteration, as the decoder does
    assert kinds == {memoryview} and bytes(joined) == commitlog[:250000]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"protocol": "dledger"}, r"unknown HA protocol 'dledger' \(expected one of classic, autoswitch\)"),
    ({"planned_epochs": [(1, 0)]}, r"planned_epochs: AutoSwitch HA arguments, not for the 'classic' protocol"),
])
def test_a_protocol_the_fetcher_does_not_speak_is_refused_at_once(kwargs, match):
    with pytest.raises(ValueError, match=match):
        HARangeFetcher("127.0.0.1:1", 0, 10, **kwargs)


def _receive_buffer_while_fetching(master_addr: str, start: int, end: int,
                                   options: dict[str, str]) -> tuple[int, bytes]:
    """``(SO_RCVBUF of the HA socket while it receives, every byte fetched)`` with the fetch settings the source
    options ``options`` give (parsed as the driver parses them)."""
    from connector.options.parse import SourceOptions

    settings = SourceOptions.from_options({"brokers": f"broker-a={master_addr}", **options}).fetch
    fetcher = HARangeFetcher(master_addr, start, end, settings=settings)
    with fetcher:
        chunks = iter(fetcher)
        first = next(chunks)
        size = fetcher.conn._sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        got = bytes(first[1]) + b"".join(bytes(c) for _, c in chunks)
    return size, got


def test_receive_buffer_bytes_sets_the_ha_sockets_receive_buffer(replay, fixture_dir, commitlog):
    """Issue 54's example option: ``receiveBufferBytes`` (Kafka's ``receive.buffer.bytes``) becomes the HA
    socket's SO_RCVBUF, set before connecting (Linux reports twice the value asked); 0, the default, leaves the
    operating system's, which is larger than the small buffer asked here. The bytes are the same either way."""
    recorded = (fixture_dir / "ha_stream" / "report_boundary_554616.bin").read_bytes()
    meta = json.loads((fixture_dir / "ha_stream" / "report_boundary_554616.json").read_text())
    start, end = meta["reportedOffset"], meta["lastDataEndOffset"]
    small, got = _receive_buffer_while_fetching(replay(lambda report, conn: conn.sendall(recorded)).addr, start, end,
                                                {"receiveBufferBytes": "4096"})
    assert got == commitlog[start:end]
    assert small <= 2 * 4096
    default, got = _receive_buffer_while_fetching(replay(lambda report, conn: conn.sendall(recorded)).addr, start,
                                                  end, {})
    assert got == commitlog[start:end]
    assert default > 2 * 4096
