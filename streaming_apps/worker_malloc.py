"""glibc malloc in the Python task workers: freed memory kept for the next batch (docs/deployment.md §7,
"Freed memory in the task workers").

A landing task allocates and frees the same few large buffers for every batch it decodes and writes (the pending
CommitLog bytes, the decoded columns, ~8 MiB each). glibc hands blocks above its mmap threshold to ``mmap`` and
gives free memory above its trim threshold at the top of the heap back to the kernel; each time, the next batch's
buffers fault in fresh pages that the kernel zeroes. Fixing the thresholds above the task's working set keeps
those pages in the process (what that saves, measured: the docs section above).

The settings reach the workers as Spark's ``spark.executorEnv.[Name]``: Spark starts the Python worker daemon
with them, locally and on a cluster's executors; the driver, its JVM and the CLI keep glibc's defaults. A
user's own choice wins: nothing is set when the environment already sets one of glibc's threshold variables
(:data:`MALLOC_THRESHOLD_VARIABLES`) or a ``glibc.malloc`` tunable in ``GLIBC_TUNABLES``, and a Spark conf of
the user's own for a variable stands (``setdefault``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from streaming_apps.blas_threads import EXECUTOR_ENV_PREFIX

MIB = 1024 * 1024
#: glibc's variables and the values this project gives the workers: blocks up to 32 MiB (glibc's largest mmap
#: threshold on 64-bit) come from the heap, and up to 256 MiB free at its top stay in the process.
WORKER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 * MIB), "MALLOC_TRIM_THRESHOLD_": str(256 * MIB)}
#: glibc's variables that set a threshold of its own (any set: the user chose, nothing is changed)
MALLOC_THRESHOLD_VARIABLES = (*WORKER_MALLOC_ENV, "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def worker_malloc_conf(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark confs ``{"spark.executorEnv.MALLOC_MMAP_THRESHOLD_": "33554432", ...}`` that give the Python
    workers :data:`WORKER_MALLOC_ENV`, or ``{}`` when ``environ`` (default: ``os.environ``) already chose glibc's
    malloc thresholds."""
    environ = os.environ if environ is None else environ
    if any(name in environ for name in MALLOC_THRESHOLD_VARIABLES) or "glibc.malloc." in environ.get(
            "GLIBC_TUNABLES", ""):
        return {}
    return {EXECUTOR_ENV_PREFIX + name: value for name, value in WORKER_MALLOC_ENV.items()}
