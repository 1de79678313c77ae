"""The task's read is one pipeline (issue 54): read_partition → Arrow stage → record stage → HA stage, traced on a
stub master serving the golden CommitLog (:class:`tests.support.stage_trace.StageTrace`).

Before, read_partition was a hub: for every HA chunk it entered client/ha.py for the chunk, then decode/stream.py
twice (the stream offset, the feed), so one 1 MiB partition entered stream.py 67 times and ha.py 34 times in
the window of its first batch, with 100 returns to a module already left.
"""

from __future__ import annotations

import pytest

from connector.options.parse import SourceOptions
from connector.source import HAReplicaStreamReader
from connector.source.task.read import read_task
from tests.integration.connector.conftest import brokers_option
from tests.support.stage_trace import StageTrace

#: entries from read_partition into the stages outside the pipeline's flow, in the first window (building the
#: decoder and the fetcher, composing the stages) and in the last (the final log line's counters, the closes)
SETUP = 4


@pytest.mark.parametrize("options", [
    {"arrowMaxRecordsPerBatch": "10"},  # the whole range is walked at once: batches of records already received
    {"arrowMaxBytesPerBatch": "65536"},  # a walk every 64 KiB: most batches pull bytes from the HA stage
    {"arrowMaxBytesPerBatch": "65536", "fetchPrefetchChunks": "0"},  # the HA stage on the task's thread
], ids=["records", "bytes", "no-prefetch"])
def test_each_stage_is_entered_once_per_batch(fixture_master, options):
    reader = HAReplicaStreamReader(SourceOptions.from_options({"brokers": brokers_option(fixture_master),
                                                               **options}))
    try:
        start = reader.initialOffset()
        partition = reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit()))[0]
        trace = StageTrace()
        batches = trace.drain(read_task(partition))
    finally:
        reader.stop()
    assert sum(b.num_rows for b in batches) == 136 and len(batches) >= 10  # the first mapped file's records
    assert len(trace.windows) == len(batches) + 1
    for i, window in enumerate(trace.windows):
        edge = SETUP if i in (0, len(trace.windows) - 1) else 0
        from_read = {to: n for (frm, to), n in window.handovers.items() if frm == "read.py" and to is not None}
        # the consumer enters the pipeline once; read_partition hands over only to the Arrow stage
        assert window.entries["read.py"] == 1, (i, window)
        assert sum(from_read.values()) <= 1 + edge, (i, window)
        # the Arrow stage (columns.py) and the record stage (stream.py) are each entered once per batch
        assert window.entries["columns.py"] <= 1 + edge, (i, window)
        assert window.entries["stream.py"] <= 1 + edge, (i, window)
        # the HA stage is pulled by the record stage only, once per receive: the only module control returns to
        # within a batch (a batch needing several receives)
        assert sum(n for (frm, to), n in window.handovers.items() if to == "ha.py" and frm != "stream.py") <= edge
        assert window.returns - window.returned_to["ha.py"] <= edge, (i, window)
    assert sum(w.entries["ha.py"] for w in trace.windows[1:-1]) > 0 or "arrowMaxBytesPerBatch" not in options
