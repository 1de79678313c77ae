"""Waiting out a broker outage: :class:`OutageWait`, one per broker connection of the executors' HA fetches and the
driver's remoting calls, spaces reconnect attempts with exponential backoff and jitter (Kafka clients'
``reconnect.backoff.ms`` rule), bounds the outage in total time and logs its start and end once each. Its bounds
are :class:`connector.options.settings.FetchSettings`, and its messages name the options from
:data:`connector.options.declaration.OPTIONS`. The rules: docs/source.md "Broker outages".
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from connector.options.declaration import OPTIONS

log = logging.getLogger(__name__)

JITTER = 0.2  # Kafka's CommonClientConfigs.RECONNECT_BACKOFF_JITTER


class OutageWait:
    """Backoff and outage clock of one connection to one broker (not thread-safe; one per reader).

    Args:
        what: who is waiting, for log lines, e.g. ``"broker broker-a HA 10.0.0.1:10912"``.
        backoff_ms: first backoff (ms), ``FetchSettings.reconnect_backoff_ms``.
        backoff_max_ms: largest backoff (ms), ``FetchSettings.reconnect_backoff_max_ms``.
        max_outage_ms: longest outage (ms) before :meth:`failed` returns False, ``FetchSettings.max_outage_ms``.
        clock: monotonic seconds (tests may pass their own).
        cancelled: an Event that, once set, ends a backoff sleep early (the caller then checks it).
    """

    def __init__(self, what: str, backoff_ms: int, backoff_max_ms: int, max_outage_ms: int, *,
                 clock: Callable[[], float] = time.monotonic, cancelled: threading.Event | None = None,
                 rng: random.Random | None = None):
        self.what = what
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = max(backoff_ms, backoff_max_ms)
        self.max_outage_ms = max_outage_ms
        self._clock = clock
        self._cancelled = cancelled or threading.Event()
        self._rng = rng or random.Random()
        self.started: float | None = None  # clock() of the first failure of the current outage
        self.attempts = 0  # failed attempts in the current outage
        self.outages = 0  # outages seen (ended or not)

    @property
    def active(self) -> bool:
        """True while an outage is going on (a failure since the last success)."""
        return self.started is not None

    def elapsed_ms(self) -> int:
        """How long the current outage has lasted (ms; 0 when there is none)."""
        return 0 if self.started is None else int((self._clock() - self.started) * 1000)

    def next_backoff_ms(self) -> float:
        """The wait before the next attempt (ms): exponential in the attempts so far, capped, jittered."""
        exp = min(self.attempts - 1, 30)
        base = min(self.backoff_ms * (2 ** max(exp, 0)), self.backoff_max_ms)
        return base * (1 - JITTER + 2 * JITTER * self._rng.random())

    def failed(self, error: object) -> bool:
        """Record a failed attempt; sleep the backoff and return True, or return False (no sleep) when the
        outage has lasted ``max_outage_ms`` (the caller raises then)."""
        if self.started is None:
            self.started = self._clock()
            self.attempts = 0
            self.outages += 1
            log.warning("%s: unreachable (%s); waiting up to %s=%d ms for it to come back", self.what,
                        error, OPTIONS.max_outage_ms.name, self.max_outage_ms)
        self.attempts += 1
        elapsed = self.elapsed_ms()
        if elapsed >= self.max_outage_ms:
            return False
        wait = min(self.next_backoff_ms(), self.max_outage_ms - elapsed)
        log.debug("%s: attempt %d failed after %d ms of outage (%s); next attempt in %.0f ms", self.what,
                  self.attempts, elapsed, error, wait)
        self._cancelled.wait(wait / 1000)
        return True

    def recovered(self) -> None:
        """The connection works again: log the end of the outage (once) and reset the clock."""
        if self.started is None:
            return
        log.warning("%s: back after an outage of %d ms (%d failed attempts)", self.what, self.elapsed_ms(),
                    self.attempts)
        self.started = None
        self.attempts = 0

    def give_up_message(self, error: object) -> str:
        """The text of the error a caller raises when :meth:`failed` returned False."""
        return (f"{self.what}: unreachable for {self.elapsed_ms()} ms ({self.attempts} attempts), longer than "
                f"{OPTIONS.max_outage_ms.name}={self.max_outage_ms}; last error: {error}")
