"""Pytest fixtures around :mod:`tests.support.brokers` (import them from a conftest).

``broker_factory(name="broker", **props)`` starts a :class:`BrokerProcess` in ``tmp_path/name`` with the
given RocketMQ properties; every broker it started is stopped (SIGTERM, then SIGKILL) at teardown.
``namesrv_factory(name="namesrv")`` does the same for name-server stubs (:class:`NameServerProcess`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.brokers import BrokerProcess, NameServerProcess


@pytest.fixture
def broker_factory(tmp_path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def factory(name: str = "broker", **props: object) -> BrokerProcess:
        broker = BrokerProcess.start(tmp_path / name, **props)
        started.append(broker)
        return broker

    yield factory
    for broker in started:
        try:
            broker.stop()
        except Exception:  # noqa: BLE001 - teardown must reach every broker
            pass
        broker.kill9()


@pytest.fixture
def namesrv_factory(tmp_path) -> Iterator[Callable[..., NameServerProcess]]:
    """``namesrv_factory(name="namesrv")`` starts a name-server stub in ``tmp_path/name``; stopped at teardown."""
    started: list[NameServerProcess] = []

    def factory(name: str = "namesrv") -> NameServerProcess:
        ns = NameServerProcess.start(tmp_path / name)
        started.append(ns)
        return ns

    yield factory
    for ns in started:
        try:
            ns.stop()
        except Exception:  # noqa: BLE001 - teardown must reach every process
            pass
        ns.kill9()
