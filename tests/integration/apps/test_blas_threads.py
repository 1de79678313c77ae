"""The shared test session's Python workers and executors run OpenBLAS with one thread
(streaming_apps.blas_threads, set by build_spark_session)."""

from __future__ import annotations

from streaming_apps.blas_threads import EXECUTOR_ENV_CONF


def test_the_shared_sessions_python_workers_and_executors_get_one_blas_thread(spark):
    seen = spark.range(2).rdd.map(lambda _: __import__("os").environ.get("OPENBLAS_NUM_THREADS")).collect()
    assert seen == ["1", "1"]
    assert spark.conf.get(EXECUTOR_ENV_CONF) == "1"
