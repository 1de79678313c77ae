"""connector.source.task.worker_gc: a Python worker's modules are frozen out of the garbage collector once per process.

Run in a fresh interpreter each: freezing is process-wide, and the test process must keep collecting."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import gc, json
import pyarrow, connector.landing  # what a task worker has imported before its first read
from connector.source.task.worker_gc import freeze_imports

tracked = len(gc.get_objects())  # what a full collection walks
freeze_imports()
frozen = gc.get_freeze_count()
freeze_imports()  # a later task of the same worker: nothing more
print(json.dumps({"tracked": tracked, "frozen": frozen, "again": gc.get_freeze_count(),
                  "tracked_after": len(gc.get_objects())}))
"""


def test_the_worker_objects_leave_every_later_full_collection_once():
    out = json.loads(subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True,
                                    timeout=120).stdout)
    assert out["frozen"] > 10_000, "the imported modules' objects are frozen"
    assert out["again"] == out["frozen"], "only the first read of a worker freezes"
    assert out["tracked_after"] < out["tracked"] // 10, "a full collection then walks only what tasks allocate"
