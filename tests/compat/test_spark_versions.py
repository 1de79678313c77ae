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
import subprocess
from collections import Counter

import pytest

from tests.compat.conftest import MAX_BYTES, RUN_TIMEOUT_S, landed, run_user_app, spark_minors, start_user_app
from tests.integration.connector.conftest import MAPPED_FILE_SIZE
from tests.support.brokers import max_offset
from tests.support.processes import kill_at_marker, kill_session, log_tail

pytestmark = pytest.mark.compat

@spark_minors()
def test_the_wheel_keeps_the_runtime_pyspark_and_answers_version(runtime):
    assert runtime.pyspark.startswith(runtime.minor + ".")
    out = subprocess.run([str(runtime.bin / "hareplica"), "--version"], capture_output=True, text=True,
                         env=runtime.env(), cwd=runtime.root, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("hareplica "), out


@spark_minors("4.0", "4.1", "4.3")  # 4.2: the whole suite kills the same sink's driver at every commit point on 4.2.0
def test_user_app_lands_every_message_once_through_a_driver_kill(runtime, broker, expected, tmp_path):
    marker = tmp_path / "fault-marker.json"
    proc = start_user_app(runtime, tmp_path, broker, fault="before-delta-commit:1")
    reached = kill_at_marker(proc, marker, tmp_path / "crash.log", what="before-delta-commit:1",
                             timeout_s=RUN_TIMEOUT_S)
    assert json.loads(reached)["batchId"] == 1
    before = landed(tmp_path / "table")
    assert before and max(before.values()) == 1 and set(before) < set(expected), "only batch 0 is in the table"

    result = run_user_app(runtime, tmp_path, broker)
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
