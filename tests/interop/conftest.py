"""Fixtures for the interop tests against real Java RocketMQ 4.9 processes (tests/support/jvm_peers.py).

``real_namesrv`` is one real name server per module. When a test fails, the report gets a section with the
console and log tails of every real process still running (their folders stay under pytest's tmp dir).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.jvm_peers import LIVE_PEERS, RealNameServer


@pytest.fixture(scope="module")
def real_namesrv(tmp_path_factory) -> Iterator[RealNameServer]:
    """One real 4.9 name server for the module (``.addr``); killed at the end (it keeps nothing worth a
    clean stop, which costs ~3 s)."""
    ns = RealNameServer.start(tmp_path_factory.mktemp("real-namesrv"))
    try:
        yield ns
    finally:
        ns.kill9()


@pytest.fixture(scope="module")
def hareplica_spark_session(spark):
    """The shared Spark session with ``format("hareplica")`` registered."""
    from streaming_apps.spark_session import register_data_sources

    register_data_sources(spark)
    return spark


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and LIVE_PEERS:
        for peer in list(LIVE_PEERS):
            report.sections.append((f"real peer {peer.what} in {peer.workdir}", peer.log_tail(30)))
    return report
