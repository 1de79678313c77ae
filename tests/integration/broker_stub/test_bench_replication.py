"""bench/replication.py in --quick mode: every part runs and writes its JSON (numbers are not judged here)."""

from __future__ import annotations

import json


def test_quick_benchmark_writes_every_figure(tmp_path, monkeypatch):
    import bench.common
    from bench.replication import run

    monkeypatch.setattr(bench.common, "RESULTS_DIR", tmp_path / "results")
    results = run(quick=True, work_dir=tmp_path)
    saved = json.loads((tmp_path / "results" / "replication_quick.json").read_text())["results"]
    keys = ("catchup_mb_s", "raw_sendfile_mb_s", "catchup_vs_raw", "sync_p50_ms", "sync_p99_ms", "async_p50_ms",
            "async_p99_ms", "produce_msgs_s_1", "produce_msgs_s_8")
    assert {k: saved[k] for k in keys} == {k: results[k] for k in keys}
    assert [k for k in keys if not results[k] > 0] == []
    assert results["catchup_bytes"] >= 16 * 1024 * 1024
    assert not list(tmp_path.glob("bench-replication-*"))  # the work folder is removed
