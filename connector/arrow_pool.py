"""Which allocator hands out Arrow's buffers in the processes that decode, land and restore: jemalloc.

Those processes allocate and free batches of megabytes all the time; pyarrow's default pool, mimalloc, keeps the
pages of freed buffers, so a process's resident size grows past what it holds at once. The figures and the way to
choose another pool: docs/source.md "Speed and memory", docs/restore.md "Speed and memory".
"""

from __future__ import annotations

import os

import pyarrow as pa


def use_jemalloc() -> None:
    """Make jemalloc this process's default Arrow memory pool (``pa.set_memory_pool``), so that freed buffers'
    pages go back to the system. Arrays already allocated keep their own pool.

    Nothing when ``ARROW_DEFAULT_MEMORY_POOL`` is set (the operator chose a pool: pyarrow's own setting), when
    jemalloc already is the pool, or when this pyarrow was built without jemalloc. Safe to call once per task:
    a call after the first does nothing. Raises nothing.
    """
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL") or pa.default_memory_pool().backend_name == "jemalloc":
        return
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a pyarrow built without jemalloc
        pass
