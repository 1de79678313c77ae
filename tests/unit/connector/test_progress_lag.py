"""The broker lag on every Spark: a batch's end offset carries each broker set's max offset (``"@maxOffset"``),
which the progress line, ``hareplica status`` and its Prometheus output use where Spark 4.0/4.1 report the batch
end as ``latestOffset`` (docs/delta.md "Lag monitoring")."""

from __future__ import annotations

import json

from streaming_apps.progress_listener import ProgressFileListener, latest_of, progress_record
from streaming_apps.status import collect_status, prometheus_text

END = {"broker-a": 2100, "broker-b": 5, "@lastRecord": {"broker-a": [2000, 100, 1, 2]},
       "@maxOffset": {"broker-a": 5100, "broker-b": 5}}


def progress(latest) -> dict:
    return {"name": "q", "id": "i", "runId": "r", "batchId": 3, "numInputRows": 10, "timestamp": "t",
            "sources": [{"description": "PythonMicroBatchStream", "startOffset": '{"broker-a": 100}',
                         "endOffset": json.dumps(END), "latestOffset": None if latest is None else json.dumps(latest),
                         "numInputRows": 10}]}


def test_spark_4_0_progress_whose_latest_offset_is_the_batch_end_shows_the_true_lag():
    rec = progress_record(progress(END))  # Spark 4.0/4.1: latestOffset is the end offset itself
    assert rec["sources"][0]["lagBytes"] == {"broker-a": 3000, "broker-b": 0}
    assert rec["lagBytes"] == 3000
    assert rec["sources"][0]["latestOffset"]["broker-a"] == 5100


def test_a_later_reported_latest_offset_wins_and_other_sources_are_unchanged():
    rec = progress_record(progress({"broker-a": 6000, "broker-b": 5}))  # Spark 4.2+: reportLatestOffset, later
    assert rec["sources"][0]["lagBytes"] == {"broker-a": 3900, "broker-b": 0}
    assert progress_record(progress(None))["lagBytes"] == 3000  # no latestOffset at all
    assert latest_of({"broker-a": 1}, {"broker-a": 9}) == {"broker-a": 9}
    assert latest_of("17", "42") == "42"


def test_status_and_its_prometheus_text_show_the_lag(tmp_path):
    listener = ProgressFileListener(tmp_path / "q.jsonl")
    listener._append(progress_record(progress(END)))
    status = collect_status([str(tmp_path)])
    text = prometheus_text(status)
    assert 'hareplica_query_lag_bytes{broker="broker-a",query="q"} 3000.0' in text
    assert 'hareplica_query_lag_bytes{broker="broker-b",query="q"} 0.0' in text
    assert 'hareplica_query_last_batch_id{query="q"} 3.0' in text
    assert 'hareplica_query_failed{query="q"} 0.0' in text
