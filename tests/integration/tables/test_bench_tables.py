"""bench/tables.py in --quick mode on a tiny log: bronze and ``run tables`` land every message of both formats, Spark's
``from_avro`` and the tasks' decoder write the same rows, and the results hold every figure (speed is not judged
here; bench/ measures it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
# the bench in its own process (its Spark session needs the spark-avro jar, a static setting), results under tmp
RUN = ("import sys, pathlib, bench.common; bench.common.RESULTS_DIR = pathlib.Path(sys.argv[1]); "
       "from bench.tables import main; raise SystemExit(main(sys.argv[2:]))")


def test_quick_benchmark_writes_every_figure(tmp_path):
    # make test stages it (make jvm-peers); a missing jar is a failure, not a skip
    assert list((ROOT / ".jvm" / "spark-decoders" / "lib").glob("spark-avro_*.jar")), "run make jvm-peers"
    done = subprocess.run([sys.executable, "-c", RUN, str(tmp_path), "--quick", "--mib", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "tables_quick.json").read_text())["results"]
    assert results["quick"] is True and results["rounds"] == 1
    for fmt in ("avro", "protobuf"):
        assert results[f"{fmt}_messages"] > 0 and results[f"{fmt}_body_bytes"] > 900
        for app in ("bronze", "typed"):
            assert results[f"{fmt}_{app}_rows_s"] > 0 and results[f"{fmt}_{app}_worker_peak_rss_mib"] > 0
            assert set(results[f"{fmt}_{app}_data_cpu_s_by_kind"]) >= {"spark-jvm", "py-worker", "broker"}
        assert results[f"{fmt}_typed_vs_bronze"] > 0
        assert isinstance(results[f"{fmt}_goal_ratio_met"], bool)
    spark = results["where_to_decode"]
    assert spark["rows_equal"] is True
    for name in ("copy", "from_avro", "task_decoder"):
        assert results[f"avro_spark_{name}_rows_s"] > 0 and results[f"avro_spark_{name}_cpu_s_per_gb"] > 0
    assert results["avro_spark_from_avro_vs_task_decoder"] > 0
