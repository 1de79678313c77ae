"""One OpenBLAS thread in the processes of a hareplica session (docs/deployment.md §7, "BLAS threads").

numpy's wheels link OpenBLAS, which starts a pool of threads (one per core but one) as numpy is imported; each
thread spins waiting for work for a while before it sleeps. Nothing in hareplica calls BLAS, so the spinning is
CPU spent for nothing: on the 2-core machine, importing numpy and pyarrow took 0.33 CPU-s with the pool and
0.22 CPU-s with ``OPENBLAS_NUM_THREADS=1`` (three runs each), and a cold ``hareplica run bronze`` starts about
four processes that import numpy (the CLI, its Python task workers, Spark's planning workers), all of them on the
cores the run itself needs.

A user's own choice wins: nothing is set when the environment already names a thread count for OpenBLAS
(``OPENBLAS_NUM_THREADS``, ``GOTO_NUM_THREADS`` or ``OMP_NUM_THREADS``, which OpenBLAS reads in that order).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: The variable that sets OpenBLAS's thread count, and the value this project gives it.
OPENBLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"
SINGLE_THREAD = "1"
#: Variables OpenBLAS takes its thread count from (any of them set: the user chose, nothing is changed).
BLAS_THREAD_VARIABLES = (OPENBLAS_THREADS_VARIABLE, "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
#: The prefix of Spark's confs that set a variable in the executors' environment (``spark.executorEnv.[Name]``).
EXECUTOR_ENV_PREFIX = "spark.executorEnv."
#: Spark conf giving executors' Python workers the variable.
EXECUTOR_ENV_CONF = EXECUTOR_ENV_PREFIX + OPENBLAS_THREADS_VARIABLE


def single_blas_thread(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set ``OPENBLAS_NUM_THREADS=1`` in ``environ`` (default: this process's ``os.environ``, which the Spark JVM
    and its Python workers inherit) unless one of :data:`BLAS_THREAD_VARIABLES` is set already.

    Takes effect for a process that imports numpy after the call, so call it before numpy is imported (the CLI's
    first step, :func:`streaming_apps.spark_session.build_spark_session` before the JVM starts). Returns True
    when it set the variable, False when the user's choice stands.
    """
    environ = os.environ if environ is None else environ
    if any(name in environ for name in BLAS_THREAD_VARIABLES):
        return False
    environ[OPENBLAS_THREADS_VARIABLE] = SINGLE_THREAD
    return True
