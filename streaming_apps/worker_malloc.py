"""glibc malloc thresholds for the Python task workers, so freed buffers stay in the process for the next batch:
the settings go to the workers as ``spark.executorEnv.[Name]`` (the driver, its JVM and the CLI keep glibc's
defaults), and nothing is set when the user already chose (:data:`MALLOC_THRESHOLD_VARIABLES`, a
``glibc.malloc`` tunable in ``GLIBC_TUNABLES``, or their own Spark conf). Why and the values: docs/deployment.md
"7. Start-up", "Freed memory in the task workers".
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
