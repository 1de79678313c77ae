"""connector.client.reconnect.OutageWait: Kafka-style exponential backoff with jitter, the maxOutageMs bound and
one log line when an outage starts and one when it ends (pure: a fake clock, no sleeping)."""

from __future__ import annotations

import logging
import random
import threading

from connector.client.reconnect import OutageWait


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(max_outage_ms: int = 10_000, seed: int = 1) -> tuple[OutageWait, FakeClock]:
    clock = FakeClock()
    cancelled = threading.Event()
    cancelled.set()  # backoff sleeps return at once
    return OutageWait("broker b HA h:1", 50, 1000, max_outage_ms, clock=clock, cancelled=cancelled,
                      rng=random.Random(seed)), clock


def test_backoff_doubles_up_to_the_max_with_twenty_percent_jitter():
    wait, _ = make()
    seen = []
    for _ in range(8):
        assert wait.failed("refused")
        seen.append(wait.next_backoff_ms())
    bases = [50, 100, 200, 400, 800, 1000, 1000, 1000]  # the wait after the n-th failure: 50 * 2**(n-1), capped
    for got, base in zip(seen, bases, strict=True):
        assert 0.8 * base <= got <= 1.2 * base
    assert len({round(x) for x in seen[4:]}) > 1  # jittered, not lock-step


def test_gives_up_once_the_outage_lasted_max_outage_ms_and_names_it():
    wait, clock = make(max_outage_ms=5000)
    assert wait.failed("refused")
    clock.now += 4.9
    assert wait.failed("refused")
    clock.now += 0.2
    assert not wait.failed("refused")
    assert wait.give_up_message("refused") == ("broker b HA h:1: unreachable for 5100 ms (3 attempts), longer than "
                                               "maxOutageMs=5000; last error: refused")


def test_one_warning_when_an_outage_starts_and_one_when_it_ends(caplog):
    wait, clock = make()
    caplog.set_level(logging.DEBUG, logger="connector.client.reconnect")
    for _ in range(5):
        wait.failed("refused")
        clock.now += 1
    wait.recovered()
    wait.recovered()  # no outage going on: nothing logged
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["broker b HA h:1: unreachable (refused); waiting up to maxOutageMs=10000 ms for it to come "
                        "back", "broker b HA h:1: back after an outage of 5000 ms (5 failed attempts)"]
    assert not wait.active and wait.outages == 1
    wait.failed("reset")  # a new outage starts a new clock
    assert wait.active and wait.outages == 2 and wait.elapsed_ms() == 0
