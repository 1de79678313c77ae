"""Pytest fixtures around :mod:`tests.support.brokers` (import them from a conftest).

``broker_factory(name="broker", **props)`` starts a :class:`BrokerProcess` in ``tmp_path/name`` with the
given RocketMQ properties; every broker it started is stopped (SIGTERM, then SIGKILL) at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.brokers import BrokerProcess


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
