"""Trying again: an operation retried a bounded number of times, or a condition polled until a deadline.

The project's retry loops outside the broker-outage wait (:mod:`connector.client.reconnect`, whose outage clock
outlives single calls) go through these two functions, built on the ``tenacity`` library:

* :func:`retry_attempts`: Delta commits and merges that lose an optimistic-concurrency race to another
  writer are run again at once, up to a fixed number of attempts (docs/delta.md "2. The sink");
* :func:`poll_until`: a driver waiting for something that sends no event (another process's exit, the
  progress listener's last record) checks at a fixed interval until a deadline.

Each caller keeps its own log lines: it logs in its ``except`` clause or through ``on_retry``. ``tenacity`` is
imported by the calls, not by this module: every Python task worker imports this module (through the direct
landing's commit) and never retries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenacity import RetryCallState, Retrying

RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]


def retry_attempts(max_attempts: int, retry_on: RetryOn, *,
                   on_retry: Callable[[int, BaseException], None] | None = None) -> Retrying:
    """The attempts of an operation: ``for attempt in retry_attempts(...): with attempt: <operation>``.

    The loop ends after the first attempt that raises nothing (a ``return`` inside ends it too). An
    error that ``retry_on`` accepts starts the next attempt at once, without a wait (a lost commit race
    is retried on a freshly read table); any other error is raised at once. When attempt
    ``max_attempts`` fails too, its error is raised as it is.

    Args:
        max_attempts: attempts in all (>= 1).
        retry_on: the exception class(es) to retry, or a predicate on the error.
        on_retry: called as ``on_retry(attempt_number, error)`` before each next attempt (never after
            the last one), e.g. to log the lost race; ``attempt_number`` counts from 1.
    Each ``attempt`` has ``attempt.retry_state.attempt_number`` (from 1).
    """
    from tenacity import Retrying, retry_if_exception, retry_if_exception_type, stop_after_attempt

    if isinstance(retry_on, type) or isinstance(retry_on, tuple):
        retry = retry_if_exception_type(retry_on)
    else:
        retry = retry_if_exception(retry_on)

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            on_retry(state.attempt_number, state.outcome.exception())

    return Retrying(stop=stop_after_attempt(max_attempts), retry=retry, reraise=True, before_sleep=before_sleep)


def poll_until(condition: Callable[[], bool], timeout_s: float, interval_s: float) -> bool:
    """Call ``condition()`` every ``interval_s`` seconds until it returns True.

    Returns:
        True as soon as ``condition()`` does; False once ``timeout_s`` seconds have passed since the first
        call without that. An error ``condition`` raises is raised at once.
    """
    from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

    retrying = Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(interval_s),
                        retry=retry_if_result(lambda done: not done), retry_error_callback=lambda state: False)
    return bool(retrying(condition))
