"""The executors' Python workers and the garbage collector: modules imported once, frozen out of it.

A Python worker that Spark reuses (``spark.python.worker.reuse``, the default) runs a full ``gc.collect()`` after
every task, and Python's own generation-2 collections during a task walk every tracked object of the process. In a
worker that has imported pyspark's worker, pyarrow, numpy and this project (pandas too, before
connector.arrow_numpy), that is about 86,000 objects that live as long as the process: each full
collection took 15-30 ms on the 2-core machine, several times per task. :func:`freeze_imports` collects once and
then moves every object alive into the permanent generation (``gc.freeze``, Python's mechanism for long-lived
processes), so later collections walk only what tasks allocate. It runs once per worker process, at the start of its
first partition read, after the task's imports.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_imports() -> None:
    """Collect once, then freeze every object alive out of the garbage collector; once per process."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True
