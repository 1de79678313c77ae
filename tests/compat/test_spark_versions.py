"""hareplica installed as a wheel into each supported Spark minor (4.0, 4.1, 4.2, 4.3), run as users run it.

Per Spark minor (tests/compat/conftest.py makes the environment; 4.0's also holds the oldest supported pyarrow,
numpy and deltalake): a user's own script (tests/compat/user_app.py, copied outside the checkout and run by that
environment's ``spark-submit``) lands a stub master's messages with ``format("hareplica")`` → ``format("deltalake")``
under ``maxBytesPerTrigger``, its driver is SIGKILLed at the sink's ``before-delta-commit`` point of batch 1 and
the script is run again; then the bronze app (``hareplica run bronze``, default direct landing, Trigger.AvailableNow)
lands the same broker. Every message must be in each table exactly once, read back with deltalake. On 4.2 the
whole suite runs on 4.2.0, tests/faults/test_delta_crash.py killing the same sink's driver at every commit point,
so only the wheel's install is checked here.

On 4.0/4.1 the source bounds micro-batches itself (no admission control there, connector.spark_compat), so
the batch spans are checked against ``maxBytesPerTrigger`` there as on 4.2+, and each batch's broker lag (Spark
never asks ``reportLatestOffset`` there) against the broker's max offset; ``hareplica run`` with
AvailableNow and ``--max-bytes-per-trigger`` stops at start with one line naming the Spark version.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from connector.delta.faults import FAULT_INJECTION_ENV, FAULT_MARKER_ENV, FAULT_PAUSE_ENV
from connector.delta.reading import read_table
from connector.protocol.topics import is_system_topic
from tests.compat.conftest import CHECKOUT, SparkRuntime, spark_minors
from tests.integration.connector.conftest import MAPPED_FILE_SIZE, start_fixture_master
from tests.support.brokers import max_offset
from tests.support.processes import kill_at_marker, kill_session, log_tail

pytestmark = pytest.mark.compat

RUN_TIMEOUT_S = 420
MAX_BYTES = MAPPED_FILE_SIZE // 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory, fixture_dir):
    """A stub master serving the golden 4.9.8 CommitLog (4 mapped files of 1 MiB, system-topic records included)."""
    b = start_fixture_master(tmp_path_factory.mktemp("compat-broker"), fixture_dir)
    try:
        yield b
    finally:
        b.kill9()


@pytest.fixture(scope="module")
def expected(fixture_dir) -> Counter:
    """commitLogOffset of every non-system message of the golden CommitLog, once each."""
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as fh:
        messages = [json.loads(line) for line in fh]
    return Counter(m["commitLogOffset"] for m in messages if not is_system_topic(m["topic"]))


def landed(table: Path) -> Counter:
    return Counter(read_table(str(table), columns=["commitLogOffset"]).column("commitLogOffset").to_pylist())


def _user_app(runtime: SparkRuntime, work: Path, broker, *, fault: str | None = None) -> subprocess.Popen:
    """Start the user's script with this runtime's spark-submit, from a folder outside the checkout."""
    app = work / "user_app.py"
    shutil.copyfile(CHECKOUT / "tests" / "compat" / "user_app.py", app)
    env = runtime.env()
    if fault:
        env.update({FAULT_INJECTION_ENV: fault, FAULT_MARKER_ENV: str(work / "fault-marker.json"),
                    FAULT_PAUSE_ENV: "600"})
    cmd = [str(runtime.bin / "spark-submit"), "--master", "local[2]", str(app), f"broker-a={broker.ha_addr}",
           str(work / "table"), str(work / "checkpoint"), str(CHECKOUT), "--max-bytes", str(MAX_BYTES),
           "--processing-time-until", str(max_offset(broker.remoting_addr))]
    log = open(work / ("crash.log" if fault else "run.log"), "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=log,
                            stdin=subprocess.DEVNULL, start_new_session=True)


@spark_minors()
def test_the_wheel_keeps_the_runtime_pyspark_and_answers_version(runtime):
    assert runtime.pyspark.startswith(runtime.minor + ".")
    out = subprocess.run([str(runtime.bin / "hareplica"), "--version"], capture_output=True, text=True,
                         env=runtime.env(), cwd=runtime.root, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("hareplica "), out


@spark_minors("4.0", "4.1", "4.3")  # 4.2: the whole suite kills the same sink's driver at every commit point on 4.2.0
def test_user_app_lands_every_message_once_through_a_driver_kill(runtime, broker, expected, tmp_path):
    marker = tmp_path / "fault-marker.json"
    proc = _user_app(runtime, tmp_path, broker, fault="before-delta-commit:1")
    reached = kill_at_marker(proc, marker, tmp_path / "crash.log", what="before-delta-commit:1",
                             timeout_s=RUN_TIMEOUT_S)
    assert json.loads(reached)["batchId"] == 1
    before = landed(tmp_path / "table")
    assert before and max(before.values()) == 1 and set(before) < set(expected), "only batch 0 is in the table"

    proc = _user_app(runtime, tmp_path, broker)
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        kill_session(proc)
    assert proc.returncode == 0, log_tail(tmp_path / "run.log")
    (line,) = [ln for ln in out.decode().splitlines() if ln.startswith("RESULT ")]
    result = json.loads(line[len("RESULT "):])
    assert result["pyspark"] == runtime.pyspark and "site-packages" in result["connector"]
    assert landed(tmp_path / "table") == expected
    assert Counter(result["batchRead"]) == expected  # spark.read of [earliest, latest): every message once
    # batch 1 again (from the offset log), then the rest, each bounded by maxBytesPerTrigger: the soft limit
    # ends a batch at the first known boundary past it, at most a mapped file further
    ends = [0] + [b["end"]["broker-a"] for b in result["batches"]]
    spans = [hi - lo for lo, hi in zip(ends, ends[1:], strict=False)][1:]
    assert len(result["batches"]) >= 3 and all(0 < s <= MAX_BYTES + MAPPED_FILE_SIZE for s in spans), result
    assert ends[-1] == max_offset(broker.remoting_addr)
    # a query held behind by maxBytesPerTrigger reports the true lag, also where Spark never asks
    # reportLatestOffset (4.0/4.1): the broker holds still, so each batch is behind by max offset - its end
    total = max_offset(broker.remoting_addr)
    assert [b["lag"] for b in result["batches"]] == [{"broker-a": total - e} for e in ends[1:]], result


@spark_minors("4.0", "4.1", "4.3")  # 4.2: the whole suite runs the apps on 4.2.0 (tests/integration/apps)
def test_bronze_app_lands_every_message_once(runtime, broker, expected, tmp_path):
    hareplica = [str(runtime.bin / "hareplica"), "--log-level", "WARNING", "run", "bronze",
                 "--brokers", f"broker-a={broker.ha_addr}", "--workdir", str(tmp_path), "--trigger", "available-now",
                 "--maintenance-every", "0"]
    limited = [*hareplica, "--max-bytes-per-trigger", str(MAX_BYTES)]
    if runtime.minor in ("4.0", "4.1"):
        refused = subprocess.run(limited, capture_output=True, text=True, env=runtime.env(), cwd=tmp_path,
                                 timeout=RUN_TIMEOUT_S)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 2 and len(lines) == 1, refused
        assert f"Spark {runtime.minor} runs Trigger.AvailableNow" in lines[0] and "maxBytesPerTrigger" in lines[0]
        assert not (tmp_path / "tables").exists(), "nothing is written before the refusal"
        command = hareplica
    else:
        command = limited
    with open(tmp_path / "bronze.log", "wb") as log:
        proc = subprocess.Popen(command, env=runtime.env(), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=RUN_TIMEOUT_S)
    finally:
        kill_session(proc)
    assert code == 0, log_tail(tmp_path / "bronze.log")
    assert landed(tmp_path / "tables" / "bronze") == expected
