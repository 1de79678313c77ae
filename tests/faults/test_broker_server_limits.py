"""Bounded server resources of the broker stub (issue 9 item 5, docs/broker_stub.md "Connections and frames").

Before: 40 connections each holding an unfinished 16 MiB frame plus 500 idle ones took the broker from
82 MB to 705 MB; no idle timeout, no connection cap; a bad JSON header escaped as an asyncio traceback.
"""

from __future__ import annotations

import socket
import struct
import time

from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode
from tests.support.brokers import HASocket, remoting_request, runtime_info, wait_for

MIB = 1024 * 1024


def _rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _settled_rss(pid: int, timeout_s: float = 15.0) -> int:
    """The RSS once three samples 0.2 s apart agree within 1 MiB (the broker has read what it will read)."""
    deadline = time.monotonic() + timeout_s
    samples = [_rss_bytes(pid)]
    while time.monotonic() < deadline:
        time.sleep(0.2)
        samples.append(_rss_bytes(pid))
        if len(samples) >= 3 and max(samples[-3:]) - min(samples[-3:]) < MIB:
            break
    return max(samples[-3:])


def _host_port(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


def _closed_by_peer(sock: socket.socket, timeout_s: float = 15.0) -> bool:
    """True once the peer closed (EOF or reset) within ``timeout_s``; False if it stays open."""
    sock.settimeout(timeout_s)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_unfinished_big_frames_and_idle_connections_keep_memory_bounded(broker_factory):
    broker = broker_factory()
    addr = _host_port(broker.remoting_addr)
    with Producer(broker.remoting_addr) as p:  # warm up every code path once
        p.send("MemTopic", b"x" * 1000)
    wait_for(lambda: _rss_bytes(broker.pid) > 0, "rss")
    base = _rss_bytes(broker.pid)
    idle = [socket.create_connection(addr, timeout=10) for _ in range(500)]
    big = []
    chunk = b"\0" * MIB
    for _ in range(40):  # each: a 16 MiB frame, all but its last byte sent
        s = socket.create_connection(addr, timeout=10)
        big.append(s)
        try:
            s.sendall(struct.pack(">i", 16 * MIB))
            for _ in range(15):
                s.sendall(chunk)
            s.sendall(chunk[:-1])
        except OSError:  # the broker closed it (over its pending-frame budget): fine
            pass
    grown = _settled_rss(broker.pid) - base
    for s in idle + big:
        s.close()
    assert grown < 200 * MIB, f"broker RSS grew by {grown / MIB:.0f} MiB"
    # it still serves, and it logged why it closed the big ones (one line each, no traceback)
    assert runtime_info(broker.remoting_addr)["commitLogMaxOffset"]
    log = broker.log_path.read_text()
    assert "serverMaxPendingFrameBytes" in log and "Traceback" not in log


def test_idle_connections_are_closed_after_server_channel_max_idle_time(broker_factory):
    broker = broker_factory(serverChannelMaxIdleTimeSeconds=1)
    with socket.create_connection(_host_port(broker.remoting_addr), timeout=10) as idle:
        assert _closed_by_peer(idle)
    with socket.create_connection(_host_port(broker.remoting_addr), timeout=10) as busy:
        for _ in range(4):  # a connection that keeps asking is not idle
            busy.sendall(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO).encode())
            busy.settimeout(10)
            assert busy.recv(65536)
            time.sleep(0.4)
    assert "idle" in broker.log_path.read_text()


def test_connection_cap_refuses_only_the_extra_connections(broker_factory):
    broker = broker_factory(serverMaxConnections=5)
    addr = _host_port(broker.remoting_addr)
    req = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO).encode()
    # the launcher's readiness probes connected and closed; one answered request on a connection of our own
    # means the broker's loop has run past their accept and EOF, so they no longer hold a slot
    probe = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    assert remoting_request(broker.remoting_addr, probe).code == 0
    held = [socket.create_connection(addr, timeout=10) for _ in range(5)]
    for s in held:  # each one is served (so counted) before the extra one connects
        s.sendall(req)
        assert s.recv(65536)
    extra = socket.create_connection(addr, timeout=10)
    assert _closed_by_peer(extra)
    extra.close()
    held[0].sendall(req)  # the connections under the cap still work
    held[0].settimeout(10)
    assert held[0].recv(65536)
    held.pop().close()
    wait_for(lambda: remoting_request(broker.remoting_addr, RemotingCommand.request(
        RequestCode.GET_BROKER_RUNTIME_INFO)).code == 0, "a slot frees up when a connection closes")
    for s in held:
        s.close()
    assert "serverMaxConnections" in broker.log_path.read_text()
    # the HA port has the same cap
    has = [HASocket(broker.ha_addr) for _ in range(5)]
    extra_ha = HASocket(broker.ha_addr)
    assert extra_ha.is_closed_by_peer(timeout_s=10)
    for h in has + [extra_ha]:
        h.close()


def test_bad_json_headers_are_one_rejection_line_and_close_only_their_connection(broker_factory):
    broker = broker_factory()
    addr = _host_port(broker.remoting_addr)
    with socket.create_connection(addr, timeout=10) as good:
        for header in (b'{"code":28,"opaque":1e400}', b'{"code":28,"flag":NaN}', b"[" * 5000,
                       b'{"code":28,"extFields":' + b"{\"a\":" * 3000):
            with socket.create_connection(addr, timeout=10) as bad:
                bad.sendall(struct.pack(">ii", 4 + len(header), len(header)) + header)
                assert _closed_by_peer(bad)
        good.sendall(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO).encode())
        good.settimeout(10)
        assert good.recv(65536)
    log = broker.log_path.read_text()
    assert log.count("remoting frame rejected") == 4
    assert "Traceback" not in log and "exc=" not in log
