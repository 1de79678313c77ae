"""connector.retry: bounded attempts (lost Delta commit races) and polling until a deadline."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from connector.retry import poll_until, retry_attempts


class Lost(Exception):
    pass


def _run(outcomes: list, max_attempts: int, retry_on, retries: list) -> object:
    """Run attempts that raise or return the next of ``outcomes``; ``on_retry`` calls go to ``retries``."""
    it = iter(outcomes)
    for attempt in retry_attempts(max_attempts, retry_on, on_retry=lambda n, e: retries.append((n, str(e)))):
        with attempt:
            value = next(it)
            if isinstance(value, BaseException):
                raise value
            return value, attempt.retry_state.attempt_number
    raise AssertionError("the loop ended without a result")


def test_a_retryable_error_starts_the_next_attempt_and_on_retry_sees_each_lost_one():
    retries: list = []
    assert _run([Lost("a"), Lost("b"), "done"], 10, Lost, retries) == ("done", 3)
    assert retries == [(1, "a"), (2, "b")]


def test_the_last_attempts_error_is_raised_as_it_is_without_an_on_retry_call():
    retries: list = []
    with pytest.raises(Lost, match="^c$"):
        _run([Lost("a"), Lost("b"), Lost("c"), "never"], 3, Lost, retries)
    assert retries == [(1, "a"), (2, "b")]


def test_other_errors_are_raised_at_once():
    retries: list = []
    with pytest.raises(KeyError):
        _run([Lost("a"), KeyError("k"), "never"], 10, Lost, retries)
    assert retries == [(1, "a")]


def test_a_predicate_chooses_the_errors_to_retry():
    retries: list = []

    def conflict(e: BaseException) -> bool:
        return "Concurrent" in str(e)

    assert _run([RuntimeError("io.delta.exceptions.ConcurrentAppendException"), 7], 10, conflict, retries) == (7, 2)
    with pytest.raises(RuntimeError, match="other"):
        _run([RuntimeError("other"), 7], 10, conflict, [])


def test_poll_until_returns_true_once_the_condition_holds():
    calls = []

    def third_time() -> bool:
        calls.append(1)
        return len(calls) >= 3

    assert poll_until(third_time, 30, 0.001) is True
    assert len(calls) == 3


def test_poll_until_returns_false_at_the_deadline():
    started = time.monotonic()
    assert poll_until(lambda: False, 0.05, 0.01) is False
    assert 0.05 <= time.monotonic() - started < 5


def test_poll_until_raises_the_conditions_error():
    def broken() -> bool:
        raise OSError("no /proc")

    with pytest.raises(OSError, match="no /proc"):
        poll_until(broken, 30, 0.01)


def test_the_task_workers_modules_import_neither_tenacity_nor_javaproperties():
    """Every Python task worker imports WARMUP_MODULES; tenacity (retries) and javaproperties (GET_BROKER_CONFIG
    bodies, with urllib, http and xml) are imported where they are used, never by a task."""
    script = ("import sys; from streaming_apps.worker_warmup import WARMUP_MODULES\n"
              "for name in WARMUP_MODULES: __import__(name)\n"
              "print(sorted(m for m in ('tenacity', 'javaproperties') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
