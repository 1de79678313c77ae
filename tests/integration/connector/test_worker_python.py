"""Spark's Python workers run an interpreter that imports hareplica (issue 54, docs/install.md "Install into your
Spark"): a user's own script, run by the project's interpreter without its virtual environment activated (so
``python3`` on ``PATH`` lacks numpy), registers the data sources and reads from a real broker stub. Before, the
workers ran ``python3`` from ``PATH`` and the first task failed with ``PYTHON_DATA_SOURCE_ERROR … No module named
'numpy'``; an interpreter that cannot import hareplica was never named."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from connector.client.producer import Producer
from tests.support.fixtures import broker_factory  # noqa: F401 - fixture

pytestmark = pytest.mark.spark

SCRIPT = textwrap.dedent("""
    import logging, sys
    from pyspark.sql import SparkSession
    import connector

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    connector.register_data_sources(spark)
    if len(sys.argv) > 1:
        print(f"rows={spark.read.format('hareplica').option('brokers', sys.argv[1]).load().count()}")
    spark.stop()
""")


def test_a_script_run_without_the_environment_activated_reads_and_a_bare_worker_python_is_named(
        broker_factory, tmp_path):  # noqa: F811
    broker = broker_factory("a", mappedFileSizeCommitLog=65536)
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        for i in range(5):
            producer.send("WorkerPythonTopic", b"m%d" % i)
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    (tmp_path / "script.py").write_text(SCRIPT)
    venv_bin = os.path.dirname(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if os.path.abspath(p) != venv_bin)
    env.pop("PYSPARK_PYTHON", None)
    script = [sys.executable, str(tmp_path / "script.py")]
    result = subprocess.run([*script, f"broker-a={broker.ha_addr}"], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().splitlines()[-1] == "rows=5"
    # an interpreter without hareplica, named by PYSPARK_PYTHON: one warning naming it and what it lacks
    result = subprocess.run(script, env={**env, "PYSPARK_PYTHON": str(bare / "bin" / "python")}, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING connector ")]
    assert len(warnings) == 1, result.stderr[-4000:]
    assert f"run {bare / 'bin' / 'python'} (PYSPARK_PYTHON" in warnings[0]
    assert "No module named 'numpy'" in warnings[0] and sys.executable in warnings[0]
