"""Shared fixtures: the golden RocketMQ 4.9.8 data folder and one Spark session per test run (per pytest-xdist
worker); how modules are shared out between the workers."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.fixtures import broker_factory  # noqa: F401 - shared fixture: stub brokers in tmp_path

FIXTURES = Path(__file__).parent / "fixtures" / "rocketmq-4.9.8"
#: test folders whose tests share session fixtures that build from the checkout (the wheel, the packed environment,
#: a Spark standalone cluster): one pytest-xdist worker runs them all
PACKAGING = ("tests/cluster/", "tests/compat/")
#: The most the suite adds to the disk of its temporary folders at once (CONTRIBUTING.md "The disk": ``df`` every 5 s
#: through a whole ``make test`` of a fresh clone under /tmp peaked 11.9 GiB above its start; with room to spare).
SUITE_DISK_PEAK_BYTES = 14 * 1024**3


def disk_problem(folder: Path, peak_bytes: int = SUITE_DISK_PEAK_BYTES) -> str | None:
    """Why the suite cannot run with its temporary folders under ``folder``, or None.

    Every broker the tests start, the stub and real RocketMQ alike, deletes CommitLog files that have not expired
    once its disk is more than 85 % used (RocketMQ's ``diskSpaceCleanForciblyRatio``, docs/broker_stub.md
    "Retention"), and the tests that read from the first message then fail. The disk must hold ``peak_bytes``
    more and stay at or below that ratio.
    """
    from broker_stub.store.retention import DISK_SPACE_CLEAN_FORCIBLY_RATIO

    st = os.statvfs(folder)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0 or (used + peak_bytes) / entire <= DISK_SPACE_CLEAN_FORCIBLY_RATIO:
        return None
    need = used + peak_bytes - int(DISK_SPACE_CLEAN_FORCIBLY_RATIO * entire)
    return (f"the disk of {folder} is {used / entire:.0%} used ({st.f_bavail * st.f_frsize / 1024**3:.1f} GiB "
            f"free): the suite adds up to {peak_bytes / 1024**3:.0f} GiB there and its brokers delete unexpired "
            f"CommitLog files above {DISK_SPACE_CLEAN_FORCIBLY_RATIO:.0%} (CONTRIBUTING.md \"The disk\"); free "
            f"{need / 1024**3:.1f} GiB more first (uv's cache: .venv/bin/uv cache prune)")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop before the first test, in one line, when the disk of the temporary folders is too full (see
    :func:`disk_problem`; ``HAREPLICA_TEST_DISK_PEAK_BYTES`` replaces the suite's peak); the xdist workers leave
    the check to the controller."""
    if hasattr(session.config, "workerinput"):
        return
    folder = Path(session.config.option.basetemp or tempfile.gettempdir())
    text = os.environ.get("HAREPLICA_TEST_DISK_PEAK_BYTES", str(SUITE_DISK_PEAK_BYTES))
    if not text.isdigit():
        pytest.exit(f"HAREPLICA_TEST_DISK_PEAK_BYTES={text!r} is not a number of bytes",
                    returncode=pytest.ExitCode.USAGE_ERROR)
    peak = int(text)
    problem = disk_problem(folder if folder.exists() else folder.parent, peak)
    if problem:
        pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``make test`` runs ``-n 2 --dist loadscope`` (CONTRIBUTING.md "How the suite is grouped"): each module goes to
    one worker whole, so its module-scoped fixtures (a broker, a real peer) start once; tests/cluster and
    tests/compat go to one worker together. Each worker holds one Spark session, started by the first test that
    needs it."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "packaging" if nodeid.startswith(PACKAGING) else super()._split_scope(nodeid)

    return Scheduling(config, log)


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """tests/fixtures/rocketmq-4.9.8: CommitLog files, messages.jsonl, blanks.jsonl, ha_stream/."""
    return FIXTURES


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The one Spark session of the test run, or of its pytest-xdist worker (local[2]; start-up takes ~20 s), with
    Spark's own Delta Lake.

    The staged delta-spark/delta-storage jars (``make jvm-peers`` → .jvm/delta/lib) and the Delta SQL
    extension and catalog are always on, so any test can use ``format("delta")``; missing jars fail.
    """
    from streaming_apps.spark_session import PROJECT_ROOT, STAGED_DELTA_JARS_DIR, build_spark_session, staged_delta_jars

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = staged_delta_jars([PROJECT_ROOT])
    if not jars:
        pytest.fail(f"Spark's Delta jars are not staged in {PROJECT_ROOT / STAGED_DELTA_JARS_DIR}: run make jvm-peers")
    session = build_spark_session(
        "hareplica-tests", local_dir=str(tmp_path_factory.mktemp("spark-local")), ui=False, jars=jars, delta=True)
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
