"""Shared fixtures: the golden RocketMQ 4.9.8 data folder and one Spark session per test run (per pytest-xdist
worker); how modules are shared out between the workers, longest first (CONTRIBUTING.md "How the suite is
grouped")."""

from __future__ import annotations

import json
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
#: Test-seconds per group (a module, or "packaging") from a whole ``make test`` run: the scheduler hands out the
#: longest groups first. A run with HAREPLICA_RECORD_SCOPE_SECONDS=FILE writes the figures of that run to FILE.
SCOPE_SECONDS_FILE = Path(__file__).parent / "scope_seconds.json"
RECORD_SCOPE_SECONDS_ENV = "HAREPLICA_RECORD_SCOPE_SECONDS"
#: The guess for a group the file does not list, per test: a unit module runs no broker, JVM or Spark
UNLISTED_UNIT_SECONDS_PER_TEST = 0.2
UNLISTED_SECONDS_PER_TEST = 10.0
#: The most the suite adds to the disk of its temporary folders at once (CONTRIBUTING.md "The disk": ``df`` every 5 s
#: through a whole ``make test`` of a fresh clone under /tmp peaked 11.9 GiB above its start; with room to spare).
SUITE_DISK_PEAK_BYTES = 14 * 1024**3


#: The JIT of every JVM the suite starts (Spark drivers and executors, real RocketMQ brokers, clients, mqadmin): C1
#: only. They live seconds to minutes on small data, where C2's compiler threads cost more CPU than they save, and
#: the suite is CPU-bound on 2 cores (CONTRIBUTING.md "Time"): a Spark start-up with two small jobs took 44 CPU-s with
#: the default tiers and 29 with C1 only. Passed as JDK_JAVA_OPTIONS, which every ``java`` launcher reads; a value
#: already set is kept.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Set :data:`TEST_JVM_OPTIONS` for every process the run starts (before pytest-xdist starts its workers)."""
    os.environ.setdefault("JDK_JAVA_OPTIONS", TEST_JVM_OPTIONS)


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


def scope_of(nodeid: str) -> str:
    """The group a test goes to a worker with: ``"packaging"`` for tests/cluster and tests/compat, else its module
    (``tests/unit/test_x.py``)."""
    return "packaging" if nodeid.startswith(PACKAGING) else nodeid.split("::", 1)[0]


def scope_seconds(path: Path = SCOPE_SECONDS_FILE) -> dict[str, float]:
    """``{group: test-seconds}`` of :data:`SCOPE_SECONDS_FILE` (empty when the file is missing). Raises
    pytest's usage error naming the file when it is not a JSON object of numbers."""
    if not path.exists():
        return {}
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(table, dict) or not all(isinstance(v, int | float) for v in table.values()):
            raise ValueError("not an object of numbers")
    except ValueError as e:
        raise pytest.UsageError(f"{path}: {e}") from e
    return table


def expected_seconds(scope: str, tests: int, table: dict[str, float]) -> float:
    """How long group ``scope`` of ``tests`` tests is expected to run: its figure in ``table``, else a guess per
    test (:data:`UNLISTED_UNIT_SECONDS_PER_TEST` in tests/unit, :data:`UNLISTED_SECONDS_PER_TEST` elsewhere)."""
    if scope in table:
        return table[scope]
    per_test = UNLISTED_UNIT_SECONDS_PER_TEST if scope.startswith("tests/unit/") else UNLISTED_SECONDS_PER_TEST
    return per_test * tests


def longest_first(groups: dict[str, int], table: dict[str, float]) -> list[str]:
    """The groups (``{scope: number of tests}``) in the order the workers take them: longest expected first
    (:func:`expected_seconds`), ties in the given order. Handing out the longest first keeps one long module from
    running alone at the end while the other worker has nothing left."""
    return sorted(groups, key=lambda scope: -expected_seconds(scope, groups[scope], table))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``make test`` runs ``-n 2 --dist loadscope`` (CONTRIBUTING.md "How the suite is grouped"): each module goes to
    one worker whole, so its module-scoped fixtures (a broker, a real peer) start once; tests/cluster and
    tests/compat go to one worker together. The groups are handed out longest first (:func:`longest_first`).
    Each worker holds one Spark session, started by the first test that needs it."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    table = scope_seconds()

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            order = longest_first({scope: len(unit) for scope, unit in self.workqueue.items()}, table)
            units = {scope: self.workqueue[scope] for scope in order}
            self.workqueue.clear()
            self.workqueue.update(units)
            super()._assign_work_unit(node)

    return Scheduling(config, log)


_recorded: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add each phase's duration to its group's test-seconds, for HAREPLICA_RECORD_SCOPE_SECONDS (on the xdist
    controller, which gets every worker's reports, or in a run without ``-n``)."""
    if os.environ.get(RECORD_SCOPE_SECONDS_ENV):
        scope = scope_of(report.nodeid)
        _recorded[scope] = _recorded.get(scope, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With HAREPLICA_RECORD_SCOPE_SECONDS=FILE, write the run's test-seconds per group (to 0.1 s, longest first)
    to FILE as :data:`SCOPE_SECONDS_FILE` holds them."""
    target = os.environ.get(RECORD_SCOPE_SECONDS_ENV)
    if target and not hasattr(session.config, "workerinput"):
        table = {scope: round(s, 1) for scope, s in sorted(_recorded.items(), key=lambda kv: -kv[1])}
        Path(target).write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """tests/fixtures/rocketmq-4.9.8: CommitLog files, messages.jsonl, blanks.jsonl, ha_stream/."""
    return FIXTURES


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The one Spark session of the test run, or of its pytest-xdist worker (local[2]; start-up takes ~20 s), with
    Spark's own Delta Lake and hadoop-aws's ``s3a://`` file system (``make jvm-peers`` → .jvm/s3a/lib).

    The staged delta-spark/delta-storage jars (``make jvm-peers`` → .jvm/delta/lib) and the Delta SQL
    extension and catalog are always on, so any test can use ``format("delta")``; missing jars fail.
    """
    from streaming_apps.spark_session import PROJECT_ROOT, STAGED_DELTA_JARS_DIR, build_spark_session, staged_delta_jars

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from tests.support.s3_server import staged_s3a_jars

    jars = staged_delta_jars([PROJECT_ROOT])
    if not jars:
        pytest.fail(f"Spark's Delta jars are not staged in {PROJECT_ROOT / STAGED_DELTA_JARS_DIR}: run make jvm-peers")
    jars += staged_s3a_jars()  # s3a:// checkpoints and reads (issue 51); the settings come per test
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


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """The one real S3 server of the test run, or of its pytest-xdist worker (S3Proxy over a local folder; start-up
    ~1-2 s), with the bucket ``hareplica-tests`` (tests/support/s3_server.py: ``endpoint``, ``env()``,
    ``storage_options()``, ``filesystem()``, ``hadoop_conf()``, ``restart()``). The staged jar (``make jvm-peers``
    → .jvm/s3proxy/lib) must be there: missing, the tests that use it fail."""
    from tests.support.s3_server import TEST_BUCKET, S3Server

    server = S3Server.start(tmp_path_factory.mktemp("s3-server"))
    try:
        server.create_bucket(TEST_BUCKET)
        yield server
    finally:
        server.stop()
