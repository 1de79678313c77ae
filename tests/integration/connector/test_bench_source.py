"""bench/source.py in --quick mode: every part runs and writes its JSON (numbers are not judged here)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.spark


def test_quick_benchmark_writes_every_figure(hareplica_spark, tmp_path, monkeypatch):
    import bench.common
    from bench.source import run

    monkeypatch.setattr(bench.common, "RESULTS_DIR", tmp_path / "results")
    results = run(quick=True, spark=hareplica_spark, work_dir=tmp_path)
    saved = json.loads((tmp_path / "results" / "source_quick.json").read_text())["results"]
    keys = ("decode_mb_s", "raw_recv_mb_s", "decode_vs_raw", "source_rows_s", "arrow_baseline_rows_s",
            "source_vs_baseline", "worker_peak_rss_mib")
    assert all(saved[k] == results[k] and results[k] > 0 for k in keys)
    assert results["worker_rows"] > 0 and results["spark_rows"] > 0
    assert not list(tmp_path.glob("bench-source-*"))  # the work folder is removed
