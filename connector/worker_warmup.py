"""Python workers started while the query starts, so that its first micro-batch does not wait for them.

Spark forks an executor's Python worker when a task first needs one and keeps it for later tasks
(``spark.python.worker.reuse``, the default). A new worker imports pyspark's worker, pyarrow, numpy
and this project (not pandas: :mod:`connector.arrow_numpy`), and pays their first use: on the 2-core machine
about 0.7 CPU-s per worker, inside the first micro-batch of every run (README "Benchmarks", "Where the time
goes"). Meanwhile the driver spends about a second starting the query, most of it on one core.

:func:`start_warmup` uses that second: a background thread runs one small ``mapInArrow`` job of ``workers``
tasks, each of which imports ``modules``, builds an Arrow array and freezes the imports out of the garbage
collector (:func:`connector.worker_gc.freeze_imports`). The query's first tasks then take these idle workers.
A worker is reused only by a task of the same kind: Spark keeps one pool per interpreter, worker module and
environment, and its SQL runners (a Python data source's reads, ``mapInArrow``) set variables that an RDD's
do not. That is why the job is a ``mapInArrow`` and not an RDD ``foreachPartition``, whose workers the reads
would never get (both were tried; docs/deployment.md §7 "Python workers").

Only for a ``local[N]`` master: there the executor is the driver's own JVM and its ``N`` task slots take
every task. On a cluster, executors come and go and tasks land on any of them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import partial

log = logging.getLogger(__name__)

#: What every read of the connector imports in a worker: the source's read path and the direct landing's.
WARMUP_MODULES = ("connector.source.read", "connector.landing")
#: The schema of the warm-up job's rows (one per task): the worker's process id.
WARMUP_SCHEMA = "pid long"


def warm_worker(batches: Iterable, modules: Sequence[str]) -> Iterator:
    """The ``mapInArrow`` function of the warm-up job (runs in an executor's Python worker).

    Imports every module of ``modules`` (dotted names), builds one pyarrow array (its first use), freezes the
    imports (:func:`connector.worker_gc.freeze_imports`), drains ``batches`` and yields one RecordBatch of
    :data:`WARMUP_SCHEMA`: this worker's process id.
    """
    import importlib
    import os

    import numpy as np
    import pyarrow as pa

    from connector.arrow_numpy import from_numpy
    from connector.worker_gc import freeze_imports

    for name in modules:
        importlib.import_module(name)
    pids = from_numpy(np.array([os.getpid()]), pa.int64())
    freeze_imports()
    for _ in batches:
        pass
    yield pa.RecordBatch.from_arrays([pids], names=["pid"])


class Warmup:
    """A started warm-up job (:func:`start_warmup`): :meth:`wait` for the workers' process ids."""

    def __init__(self, spark, workers: int, modules: Sequence[str]):
        self.workers = workers
        self.pids: list[int] = []
        self.error: BaseException | None = None
        self.elapsed_s: float | None = None
        self._spark = spark
        self._modules = tuple(modules)
        self._thread = threading.Thread(target=self._run, name="hareplica-worker-warmup", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            job = (self._spark.range(self.workers, numPartitions=self.workers)
                   .mapInArrow(partial(warm_worker, modules=self._modules), WARMUP_SCHEMA))
            self.pids = [row.pid for row in job.collect()]
        except BaseException as e:  # noqa: BLE001 - a warm-up that fails costs the query nothing but the time
            self.error = e
            log.debug("warming %d Python worker(s) failed", self.workers, exc_info=True)
        self.elapsed_s = time.monotonic() - started
        log.debug("warmed %d Python worker(s) in %.2f s: pids %s", self.workers, self.elapsed_s, self.pids)

    def wait(self, timeout_s: float | None = None) -> list[int]:
        """The process ids of the warmed workers (empty if the job failed: :attr:`error`) once it has ended.

        Raises:
            TimeoutError: the job still runs after ``timeout_s`` seconds.
        """
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"the warm-up of {self.workers} Python worker(s) still runs after {timeout_s} s")
        return self.pids


def start_warmup(spark, workers: int, modules: Sequence[str] = WARMUP_MODULES) -> Warmup | None:
    """Start ``workers`` Python workers of a classic session ``spark`` with ``modules`` imported, in a background
    thread (module docstring); returns at once. None when ``workers`` < 1 (nothing started).

    Call it before starting the query, on a ``local[N]`` master with ``workers`` = N. A failure is logged at
    debug level only: the query's tasks then start their workers themselves, as without a warm-up.
    """
    if workers < 1:
        return None
    return Warmup(spark, workers, modules)
