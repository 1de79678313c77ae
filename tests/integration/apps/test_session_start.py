"""streaming_apps.spark_session.skip_installed_data_source_lookup: a session the project builds registers its data
sources without Spark's search for installed ones (docs/deployment.md §7, "Start-up").

A process of its own starts a session, registers the project's data sources, asks ``format("hareplica")`` for
a schema without its ``brokers`` option (the source is found and created, and refuses) and lists the Python
daemons the driver JVM started: with ``build_spark_session`` only the one that created the source. With
PySpark's own builder the same script shows the ``lookup_data_sources`` daemon too (the detector works).
"""

from __future__ import annotations

import pytest

from tests.support.processes import run_json_script

pytestmark = pytest.mark.spark

SCRIPT = """
import json, sys
from pathlib import Path
from pyspark import SparkContext
from streaming_apps.spark_session import build_spark_session, register_data_sources, stop_session

if sys.argv[1] == "build_spark_session":
    spark = build_spark_session("session-start-test", master="local[1]")
else:
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[1]").appName("session-start-test").getOrCreate()
    register_data_sources(spark)
try:  # the registered source is found and created: it refuses the missing option itself
    spark.read.format("hareplica").load().schema
    answer = "no error"
except Exception as e:
    answer = str(e)
jvm_pid = SparkContext._gateway.proc.pid
daemons = []
for entry in Path("/proc").iterdir():
    if entry.name.isdigit():
        try:
            stat, cmdline = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == jvm_pid and b"pyspark.daemon" in cmdline:
            daemons.append(cmdline.split(b"\\0")[-2].decode())
stop_session(spark)
print(json.dumps({"daemons": sorted(daemons), "answer": answer}))
"""


def _run(how: str) -> dict:
    return run_json_script(SCRIPT, how)[0]


def test_a_session_of_the_project_starts_no_lookup_of_installed_data_sources():
    out = _run("build_spark_session")
    assert out["daemons"] == ["pyspark.sql.worker.create_data_source"], out
    assert "brokers" in out["answer"], out["answer"][-2000:]


def test_pysparks_own_session_looks_installed_data_sources_up():
    out = _run("pyspark")
    assert "pyspark.sql.worker.lookup_data_sources" in out["daemons"], out
