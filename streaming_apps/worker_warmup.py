"""Python workers (and Spark's read-planner worker) started while a query starts, so that its first micro-batch
does not wait for them: :func:`start_warmup` runs one small ``mapInArrow`` job whose tasks import the project and
freeze those imports out of the garbage collector, and plans a batch read of :class:`PlannerWarmupSource` to start
the planner's daemon. Only for a ``local[N]`` master. Why a ``mapInArrow`` and not an RDD job, and what it saves:
docs/deployment.md §7 "Python workers".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import partial

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

log = logging.getLogger(__name__)

#: What every read of the connector imports in a worker: the source's read path and the direct landing's.
WARMUP_MODULES = ("connector.source.task.read", "connector.landing")
#: The schema of the warm-up job's rows (one per task): the worker's process id.
WARMUP_SCHEMA = "pid long"
#: What the read planner's worker imports to unpickle the connector's data source and build its stream reader.
PLANNER_MODULES = ("connector.source",)
#: The short name :class:`PlannerWarmupSource` is registered under, and its option naming the modules to import.
PLANNER_WARMUP_FORMAT = "hareplica-planner-warmup"
PLANNER_MODULES_OPTION = "modules"
#: The Spark job group of the warm-up job, which :meth:`Warmup.end` cancels.
WARMUP_JOB_GROUP = "hareplica-worker-warmup"
#: How long :meth:`Warmup.end` waits for the job's thread between two cancels, seconds.
END_POLL_S = 0.1


def warm_worker(batches: Iterable, modules: Sequence[str]) -> Iterator:
    """The ``mapInArrow`` function of the warm-up job (runs in an executor's Python worker).

    Imports every module of ``modules`` (dotted names), builds one pyarrow array (its first use), freezes the
    imports (:func:`connector.source.task.worker_gc.freeze_imports`), drains ``batches`` and yields one RecordBatch of
    :data:`WARMUP_SCHEMA`: this worker's process id.
    """
    import importlib
    import os

    import numpy as np
    import pyarrow as pa

    from connector.arrow_numpy import from_numpy
    from connector.source.task.worker_gc import freeze_imports

    for name in modules:
        importlib.import_module(name)
    pids = from_numpy(np.array([os.getpid()]), pa.int64())
    freeze_imports()
    for _ in batches:
        pass
    yield pa.RecordBatch.from_arrays([pids], names=["pid"])


class PlannerWarmupSource(DataSource):
    """``format("hareplica-planner-warmup")``: a batch source of no rows (schema :data:`WARMUP_SCHEMA`) whose
    reader imports the comma-separated modules of its ``modules`` option. Only :class:`Warmup` plans a read of it,
    so that Spark's read planner worker is up, with those modules imported, before the stream's first
    micro-batch (module docstring)."""

    @classmethod
    def name(cls) -> str:
        return PLANNER_WARMUP_FORMAT

    def schema(self) -> str:
        return WARMUP_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        """Runs in the planner worker: imports the modules, then returns a reader of one empty partition.

        Raises:
            ImportError: a module of the ``modules`` option cannot be imported.
        """
        import importlib

        for name in filter(None, self.options.get(PLANNER_MODULES_OPTION, "").split(",")):
            importlib.import_module(name)
        return _EmptyReader()


class _EmptyReader(DataSourceReader):
    """One partition, no rows (never read: the warm-up only plans)."""

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator:
        return iter(())


class Warmup:
    """A started warm-up (:func:`start_warmup`): the worker job's thread and the read planner's thread.
    :meth:`wait` for both; :attr:`error` / :attr:`planner_error` hold what failed (None when it worked)."""

    def __init__(self, spark, workers: int, modules: Sequence[str], planner_modules: Sequence[str] = PLANNER_MODULES):
        self.workers = workers
        self.pids: list[int] = []
        self.error: BaseException | None = None
        self.planner_error: BaseException | None = None
        self.elapsed_s: float | None = None
        self.planner_elapsed_s: float | None = None
        self._spark = spark
        self._modules = tuple(modules)
        self._planner_modules = tuple(planner_modules)
        self._planner_thread = threading.Thread(target=self._warm_planner, name="hareplica-planner-warmup",
                                                daemon=True)
        self._thread = threading.Thread(target=self._run, name="hareplica-worker-warmup", daemon=True)
        self._planner_thread.start()
        self._thread.start()

    def _warm_planner(self) -> None:
        started = time.monotonic()
        try:
            self._spark.dataSource.register(PlannerWarmupSource)
            frame = (self._spark.read.format(PLANNER_WARMUP_FORMAT)
                     .option(PLANNER_MODULES_OPTION, ",".join(self._planner_modules)).load())
            frame.rdd.getNumPartitions()  # plans the scan (the planner worker runs), runs no job
        except BaseException as e:  # noqa: BLE001 - the stream's first micro-batch then starts the planner itself
            self.planner_error = e
            log.debug("warming the read planner failed", exc_info=True)
        self.planner_elapsed_s = time.monotonic() - started
        log.debug("warmed the read planner in %.2f s", self.planner_elapsed_s)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            # a job group of its own (this thread's, with PySpark's pinned threads): Warmup.end cancels it
            self._spark.sparkContext.setJobGroup(WARMUP_JOB_GROUP, "hareplica: warming Python workers",
                                                 interruptOnCancel=True)
            job = (self._spark.range(self.workers, numPartitions=self.workers)
                   .mapInArrow(partial(warm_worker, modules=self._modules), WARMUP_SCHEMA))
            self.pids = [row.pid for row in job.collect()]
        except BaseException as e:  # noqa: BLE001 - a warm-up that fails costs the query nothing but the time
            self.error = e
            log.debug("warming %d Python worker(s) failed", self.workers, exc_info=True)
        self.elapsed_s = time.monotonic() - started
        log.debug("warmed %d Python worker(s) in %.2f s: pids %s", self.workers, self.elapsed_s, self.pids)

    def wait(self, timeout_s: float | None = None) -> list[int]:
        """The process ids of the warmed workers (empty if the job failed: :attr:`error`) once the job and the
        planner's warm-up have ended (each may take ``timeout_s`` seconds).

        Raises:
            TimeoutError: the job or the planner's warm-up still runs after ``timeout_s`` seconds.
        """
        for thread, what in ((self._thread, f"the warm-up of {self.workers} Python worker(s)"),
                             (self._planner_thread, "the read planner's warm-up")):
            thread.join(timeout_s)
            if thread.is_alive():
                raise TimeoutError(f"{what} still runs after {timeout_s} s")
        return self.pids

    def end(self, timeout_s: float) -> bool:
        """Cancel the worker job if it still runs, and wait up to ``timeout_s`` seconds for both threads to end;
        True when they have. Called before the session stops (``RunningApp.close``): a thread still inside a py4j
        call when the driver JVM goes away fails there, and py4j logs that failure with its stack on the root
        logger (docs/deployment.md §7, "Shutdown"). The planner's warm-up runs no job and is only waited for.
        A failed cancel is logged at debug level (the session may already be stopping).
        """
        deadline = time.monotonic() + timeout_s
        while self._thread.is_alive() and time.monotonic() < deadline:
            try:  # again until the thread ends: a cancel before the job's submission cancels nothing
                self._spark.sparkContext.cancelJobGroup(WARMUP_JOB_GROUP)
            except Exception:  # noqa: BLE001 - the thread is then waited for, as the planner's
                log.debug("cancelling the worker warm-up job failed", exc_info=True)
                break
            self._thread.join(min(END_POLL_S, max(0.0, deadline - time.monotonic())))
        for thread in (self._thread, self._planner_thread):
            thread.join(max(0.0, deadline - time.monotonic()))
        return not (self._thread.is_alive() or self._planner_thread.is_alive())


def start_warmup(spark, workers: int, modules: Sequence[str] = WARMUP_MODULES,
                 planner_modules: Sequence[str] = PLANNER_MODULES) -> Warmup | None:
    """Start ``workers`` Python workers of a classic session ``spark`` with ``modules`` imported, and Spark's read
    planner worker with ``planner_modules`` imported, in two background threads (module docstring); returns at
    once. None when ``workers`` < 1 (nothing started). Registers :class:`PlannerWarmupSource` on ``spark``.

    Call it before starting the query, on a ``local[N]`` master with ``workers`` = N. A failure is logged at
    debug level only: the query's tasks (or its first planning) then start their workers themselves, as without
    a warm-up.
    """
    if workers < 1:
        return None
    return Warmup(spark, workers, modules, planner_modules)
