"""streaming_apps.progress_listener: progress lines, broker lag, the progress file and its summary."""

from __future__ import annotations

import json

from streaming_apps.progress_listener import (
    ProgressFileListener,
    latest_status,
    offset_lag_bytes,
    progress_record,
    read_events,
)

# The shape of StreamingQueryProgress.json for a format("hareplica") → format("deltalake") batch (Spark 4.2).
PROGRESS = {
    "id": "4f7c5a1e-0000-4000-8000-000000000001", "runId": "4f7c5a1e-0000-4000-8000-000000000002",
    "name": "hareplica-bronze", "timestamp": "2026-01-01T00:00:01.000Z", "batchId": 7, "batchDuration": 812,
    "numInputRows": 1000, "inputRowsPerSecond": 990.5, "processedRowsPerSecond": "NaN",
    "durationMs": {"addBatch": 700, "latestOffset": 3, "triggerExecution": 812, "walCommit": 40},
    "eventTime": {"watermark": "2026-01-01T00:00:00.000Z"},
    "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": 12}, {"numRowsTotal": 3}],
    "sources": [{"description": "PythonMicroBatchStream", "startOffset": {"broker-a": 100, "broker-b": 5},
                 "endOffset": '{"broker-a": 2100, "broker-b": 5}', "latestOffset": {"broker-a": 5100, "broker-b": 5},
                 "numInputRows": 1000}],
    "sink": {"description": "PythonTable@1", "numOutputRows": -1},
}


def test_progress_record_carries_batch_rates_and_broker_lag():
    rec = progress_record(PROGRESS)
    assert rec["event"] == "progress" and rec["query"] == "hareplica-bronze" and rec["batchId"] == 7
    assert rec["numInputRows"] == 1000 and rec["inputRowsPerSecond"] == 990.5
    assert rec["processedRowsPerSecond"] == "NaN"  # Spark's JSON text NaN stays text; real NaN becomes None
    assert rec["batchDurationMs"] == 812 and rec["watermark"] == "2026-01-01T00:00:00.000Z"
    assert rec["stateRows"] == 15
    src = rec["sources"][0]
    assert src["endOffset"] == {"broker-a": 2100, "broker-b": 5}  # JSON text parsed
    assert src["lagBytes"] == {"broker-a": 3000, "broker-b": 0}
    assert rec["lagBytes"] == 3000
    json.dumps(rec, allow_nan=False)
    assert progress_record({**PROGRESS, "inputRowsPerSecond": float("nan")})["inputRowsPerSecond"] is None


def test_lag_needs_offsets_of_the_hareplica_shape():
    assert offset_lag_bytes({"a": 10}, {"a": 7}) == {"a": 0}  # never negative
    assert offset_lag_bytes({"a": 10}, None) is None
    assert offset_lag_bytes("5", {"a": 7}) is None
    assert offset_lag_bytes({"a": True}, {"a": 7}) == {}
    rec = progress_record({**PROGRESS, "sources": [{"description": "rate", "endOffset": "17", "latestOffset": None}]})
    assert rec["lagBytes"] is None and rec["sources"][0]["endOffset"] == 17


class _Event:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_listener_writes_watched_queries_and_status_summarizes_them(tmp_path):
    path = tmp_path / "status" / "bronze.jsonl"
    seen: list[dict] = []
    listener = ProgressFileListener(path, query_names={"hareplica-bronze"}, on_progress=seen.append)
    qid, other = PROGRESS["id"], "4f7c5a1e-0000-4000-8000-00000000000f"
    listener.onQueryStarted(_Event(id=qid, runId="r1", name="hareplica-bronze"))
    listener.onQueryStarted(_Event(id=other, runId="r2", name="someone-else"))
    for batch in (0, 1):
        listener.onQueryProgress(_Event(progress=_Event(json=json.dumps({**PROGRESS, "batchId": batch}))))
    listener.onQueryProgress(_Event(progress=_Event(json=json.dumps({**PROGRESS, "name": "someone-else"}))))
    listener.onQueryProgress(_Event(progress=_Event(json="{not json")))  # logged, not raised
    listener.write_event("maintenance", query="hareplica-bronze", table="/t", version=3)
    listener.onQueryTerminated(_Event(id=other, runId="r2", exception=None))
    listener.onQueryTerminated(_Event(id=qid, runId="r1", exception="boom: broker gone"))
    assert [r["batchId"] for r in seen] == [0, 1]
    events = list(read_events(path))
    assert [e["event"] for e in events] == ["started", "progress", "progress", "maintenance", "terminated"]
    assert all(e["time"].endswith("Z") for e in events)
    status = latest_status(events)
    assert set(status) == {"hareplica-bronze"}
    s = status["hareplica-bronze"]
    assert s["state"] == "failed" and s["exception"] == "boom: broker gone"
    assert s["batches"] == 2 and s["rows"] == 2000 and s["last"]["batchId"] == 1
    assert s["maintenance"]["version"] == 3
    # a restart: started again → running
    listener.onQueryStarted(_Event(id=qid, runId="r3", name="hareplica-bronze"))
    assert latest_status(read_events(path))["hareplica-bronze"]["state"] == "running"


def test_unreadable_lines_are_skipped_and_the_file_rotates(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"event": "started", "query": "q", "time": "t0"}\n{"event": "progr\n[1, 2]\n\n')
    assert [e["event"] for e in read_events(path)] == ["started"]
    listener = ProgressFileListener(path, max_bytes=300)
    for i in range(10):
        listener.write_event("progress", query="q", batchId=i, numInputRows=1)
    assert (tmp_path / "p.jsonl.1").exists()
    assert path.stat().st_size <= 300
    batches = [e["batchId"] for e in read_events(path) if e["event"] == "progress"]
    assert batches == sorted(batches) and batches[-1] == 9


def test_wait_for_wakes_at_the_record_that_makes_the_predicate_true(tmp_path):
    """RunningApp.close waits on this for the queries' terminated lines: woken by the record, not by polling."""
    import threading

    listener = ProgressFileListener(tmp_path / "p.jsonl")
    terminated = lambda records: any(r["event"] == "terminated" for r in records)  # noqa: E731
    assert listener.wait_for(terminated, 0.0) is False  # not yet, and no wait
    waiting = threading.Event()
    result: list[bool] = []

    def waiter():
        waiting.set()
        result.append(listener.wait_for(terminated, 60.0))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(10)
    listener.write_event("maintenance", query="q")  # another record: the waiter checks and keeps waiting
    listener.write_event("terminated", query="q")
    thread.join(30)
    assert not thread.is_alive() and result == [True]
    assert listener.wait_for(terminated, 0.0) is True
