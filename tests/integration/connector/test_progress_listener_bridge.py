"""``ProgressFileListener`` on a real classic session: its own py4j bridge (``JsonEventsBridge``) writes the same
progress lines as PySpark's bridge, with two py4j calls per progress event instead of about 200 (docs/delta.md §6).

The query is a stateful aggregation (so the progress holds a state operator) over Spark's Parquet file source,
one file per micro-batch, to Spark's ``noop`` sink; both listeners watch it at once.
"""

from __future__ import annotations

import threading
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j.java_gateway import JavaMember
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener

from streaming_apps.progress_listener import JsonEventsBridge, ProgressFileListener

pytestmark = pytest.mark.spark

BATCHES = 3
WAIT_S = 120
QUERY = "bridge-test"


class PySparkBridged(ProgressFileListener):
    """The same listener reached through PySpark's own bridge (``JStreamingQueryListener``)."""

    _jlistener = StreamingQueryListener._jlistener


@pytest.fixture
def py4j_calls(monkeypatch):
    """Counts the py4j calls each bridge's ``onQueryProgress`` makes: ``{bridge class name: calls}``."""
    counts: Counter[str] = Counter()
    inside = threading.local()
    real_call = JavaMember.__call__

    def counting_call(self, *args):
        label = getattr(inside, "label", None)
        if label is not None:
            counts[label] += 1
        return real_call(self, *args)

    def marked(cls):
        real = cls.onQueryProgress

        def on_query_progress(self, jevent):
            inside.label = cls.__name__
            try:
                return real(self, jevent)
            finally:
                inside.label = None
        monkeypatch.setattr(cls, "onQueryProgress", on_query_progress)

    monkeypatch.setattr(JavaMember, "__call__", counting_call)
    marked(JsonEventsBridge)
    marked(JStreamingQueryListener)
    return counts


def test_the_bridge_writes_pysparks_lines_with_two_py4j_calls_per_event(spark, tmp_path, py4j_calls):
    src = tmp_path / "in"
    src.mkdir()
    for f in range(BATCHES):
        pq.write_table(pa.table({"k": pa.array([f % 2, 1, 2], pa.int64())}), src / f"part-{f}.parquet")
    ours = ProgressFileListener(tmp_path / "ours.jsonl", query_names=[QUERY])
    theirs = PySparkBridged(tmp_path / "theirs.jsonl", query_names=[QUERY])
    for listener in (ours, theirs):
        spark.streams.addListener(listener)
    try:
        query = (spark.readStream.schema("k long").option("maxFilesPerTrigger", 1).parquet(str(src))
                 .groupBy("k").count().writeStream.queryName(QUERY).outputMode("update").format("noop")
                 .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        assert query.awaitTermination(WAIT_S)

        def progress_lines(records):
            return [r for r in records if r["event"] == "progress"]
        for listener in (ours, theirs):
            assert listener.wait_for(lambda records: len(progress_lines(records)) >= BATCHES, WAIT_S)
    finally:
        for listener in (ours, theirs):
            spark.streams.removeListener(listener)

    assert type(ours._jlistener) is type(theirs._jlistener)  # both are Spark's PythonStreamingQueryListenerWrapper
    mine, pyspark_lines = progress_lines(ours.records), progress_lines(theirs.records)
    assert [r["batchId"] for r in mine] == list(range(len(mine))) and len(mine) >= BATCHES
    assert mine == pyspark_lines  # the same lines, field for field
    assert all(r["numInputRows"] == 3 for r in mine[:BATCHES]) and mine[0]["stateRows"] >= 1
    events = len(mine)
    assert py4j_calls["JsonEventsBridge"] == 2 * events, py4j_calls
    assert py4j_calls["JStreamingQueryListener"] >= 20 * events, py4j_calls  # what the bridge saves
