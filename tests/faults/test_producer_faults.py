"""The bundled producer while its broker closes or dies under in-flight sends (issue 9 item 7).

The producer once raised ``AttributeError: 'NoneType' object has no attribute 'sendall'``: ``_invoke`` read
``self._sock`` twice while the reader thread cleared it. Every failure is now a BrokerConnectionError (an
MQClientException and a ConnectionError).
"""

from __future__ import annotations

import collections
import socket
import sys
import threading

import pytest

from connector.client.producer import Producer
from connector.errors import BrokerConnectionError, MQClientException
from tests.support.brokers import max_offset


def _hammer(producer: Producer, sends: int, threads: int, *, wait: bool,
            until: threading.Event | None = None) -> collections.Counter:
    """Send from several threads at once (``sends`` each, or fewer once ``until`` is set); count outcomes by
    exception type (``ok`` for a stored send)."""
    outcomes: collections.Counter = collections.Counter()
    lock = threading.Lock()

    def sender() -> None:
        for _ in range(sends):
            if until is not None and until.is_set():
                return
            try:
                fut = producer.send_async("RaceTopic", b"x" * 64)
                if wait:
                    fut.result(timeout=10)
                key = "ok"
            except BrokerConnectionError:
                key = "BrokerConnectionError"
            except MQClientException as exc:  # e.g. a timeout: named, allowed
                key = f"MQClientException: {exc}"
            except Exception as exc:  # noqa: BLE001 - the bug: anything else escapes
                key = f"{type(exc).__name__}: {exc}"
            with lock:
                outcomes[key] += 1

    workers = [threading.Thread(target=sender) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not any(w.is_alive() for w in workers)
    return outcomes


@pytest.fixture
def tiny_switch_interval():
    """Switch threads every microsecond so the reader thread interleaves with senders (the race's window)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def test_peer_closing_every_connection_gives_only_connection_errors(tiny_switch_interval):
    """A broker that accepts and closes at once (e.g. at its connection cap): 12,000 sends from 4 threads."""
    server = socket.create_server(("127.0.0.1", 0), backlog=512)
    addr = f"127.0.0.1:{server.getsockname()[1]}"
    stop = threading.Event()

    def accept_and_close() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    acceptor = threading.Thread(target=accept_and_close, daemon=True)
    acceptor.start()
    try:
        producer = Producer(addr, timeout_ms=2000)
        outcomes = _hammer(producer, 3000, 4, wait=False)
        producer.close()
    finally:
        stop.set()
        server.close()
    assert set(outcomes) <= {"ok", "BrokerConnectionError"}, outcomes
    assert outcomes["BrokerConnectionError"] > 0


def test_broker_killed_under_in_flight_sends_then_restarted(broker_factory, tiny_switch_interval):
    broker = broker_factory()
    producer = Producer(broker.remoting_addr, timeout_ms=3000)
    try:
        for _ in range(3):
            done = threading.Event()

            def kill_then_stop(done=done) -> None:
                broker.kill9()
                threading.Timer(0.3, done.set).start()  # sends go on 0.3 s against the dead broker

            killer = threading.Timer(0.3, kill_then_stop)
            killer.start()
            outcomes = _hammer(producer, 100_000, 4, wait=True, until=done)
            killer.join()
            assert set(outcomes) <= {"ok", "BrokerConnectionError"}, outcomes
            assert outcomes["BrokerConnectionError"] > 0  # the kill really hit sends in flight
            broker.restart()
            stored = max_offset(broker.remoting_addr)
            after = producer.send("RaceTopic", b"after restart")  # the producer reconnects by itself
            assert int(after.offset_msg_id[-16:], 16) == stored
    finally:
        producer.close()
