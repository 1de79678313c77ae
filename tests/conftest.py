"""Shared fixtures: the golden RocketMQ 4.9.8 data folder and one Spark session per test run."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import broker_factory  # noqa: F401 - shared fixture: stub brokers in tmp_path

FIXTURES = Path(__file__).parent / "fixtures" / "rocketmq-4.9.8"


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """tests/fixtures/rocketmq-4.9.8: CommitLog files, messages.jsonl, blanks.jsonl, ha_stream/."""
    return FIXTURES


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The one Spark session of the test run (local[2]; start-up takes ~20 s)."""
    from streaming_apps.spark_session import build_spark_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = build_spark_session(
        "hareplica-tests", local_dir=str(tmp_path_factory.mktemp("spark-local")), ui=False)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _restore_root_logging():
    """Commands run in-process (hareplica, broker_stub) install root log handlers on the test's captured
    stderr; put the previous handlers back so nothing logs to a closed stream later."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
