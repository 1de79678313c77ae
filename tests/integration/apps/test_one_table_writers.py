"""One bronze table, several writers (issue 49, docs/delta.md "One table, several writers"): ``hareplica read``
backfills and then ``hareplica run bronze`` with a new checkpoint. Before, the stream landed every backfilled
record a second time, with no warning; now the run is refused before Spark in one line naming the table, what it
holds and the ``--starting-offsets`` that starts after it, and with that start every record lands once. Real
``hareplica`` commands (their own Spark) against a real broker stub."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from connector.client.producer import Producer
from connector.delta.reading import read_table
from tests.support.brokers import max_offset
from tests.support.fixtures import broker_factory  # noqa: F401 - fixture

pytestmark = pytest.mark.spark

TOPIC = "WritersTopic"
TIMEOUT_S = 300


def produce(broker, first: int, count: int) -> list[int]:
    """``count`` messages ``w<i>``; returns the CommitLog offset after them (bytes)."""
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        for i in range(first, first + count):
            producer.send(TOPIC, b"w%d" % i + bytes(200))
    return max_offset(broker.remoting_addr)


def hareplica(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streaming_apps.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


def test_read_backfills_then_a_bronze_stream_with_a_new_checkpoint_lands_every_record_once(broker_factory,  # noqa: F811
                                                                                            tmp_path):
    broker = broker_factory("a", mappedFileSizeCommitLog=64 * 1024)
    workdir = tmp_path / "w"
    brokers = f"broker-a={broker.ha_addr}"
    middle = produce(broker, 0, 30)
    end = produce(broker, 30, 40)
    for start, stop in (("earliest", json.dumps({"broker-a": middle})),
                        (json.dumps({"broker-a": middle}), json.dumps({"broker-a": end}))):
        read = hareplica("read", "--workdir", str(workdir), "--brokers", brokers, "--starting-offsets", start,
                         "--ending-offsets", stop, cwd=tmp_path)
        assert read.returncode == 0, read.stderr[-3000:]
    produce(broker, 70, 20)
    run = ["run", "bronze", "--workdir", str(workdir), "--brokers", brokers, "--trigger", "available-now"]
    refused = hareplica(*run, cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr[-3000:]
    (line,) = refused.stderr.strip().splitlines()
    table = workdir / "tables" / "bronze"
    assert line.startswith(f"error: bronze ({table}) already holds 70 records of broker-a at commitLogOffset 0..")
    assert "checkpoint" in line and "(new)" in line, line
    suggested = re.search(r"--starting-offsets '(\{.*?\})'", line).group(1)
    assert json.loads(suggested) == {"broker-a": end}
    assert not (workdir / "checkpoints" / "bronze").exists()  # refused before the query started
    landed = hareplica(*run, "--starting-offsets", suggested, cwd=tmp_path)
    assert landed.returncode == 0, landed.stderr[-3000:]
    bodies = read_table(str(table), columns=["body"]).column("body").to_pylist()
    names = sorted(int(b.split(b"\0")[0][1:]) for b in bodies)
    assert names == list(range(90))  # every record once
