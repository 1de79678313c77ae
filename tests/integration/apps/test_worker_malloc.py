"""The shared test session's Python workers keep freed memory: glibc's thresholds reach them as
spark.executorEnv (streaming_apps.worker_malloc, set by build_spark_session)."""

from __future__ import annotations

from streaming_apps.worker_malloc import WORKER_MALLOC_ENV


def test_the_shared_sessions_python_workers_get_the_malloc_thresholds(spark):
    names = sorted(WORKER_MALLOC_ENV)
    seen = spark.range(2).rdd.map(lambda _, names=names: [__import__("os").environ.get(n) for n in names]).collect()
    assert seen == [[WORKER_MALLOC_ENV[n] for n in names]] * 2
    for name, value in WORKER_MALLOC_ENV.items():
        assert spark.conf.get(f"spark.executorEnv.{name}") == value
