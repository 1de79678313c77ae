"""One OpenBLAS thread in the processes of a hareplica session: nothing in hareplica calls BLAS, so the spinning pool
numpy's OpenBLAS starts at import is CPU spent for nothing. Nothing is set when the environment already names a
thread count (``OPENBLAS_NUM_THREADS``, ``GOTO_NUM_THREADS`` or ``OMP_NUM_THREADS``). Why and where it is set:
docs/deployment.md "7. Start-up", "BLAS threads".
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
