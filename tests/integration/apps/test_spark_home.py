"""streaming_apps.spark_home: Python workers import the installed, byte-compiled pyspark instead of compiling
pyspark.zip's sources in every worker process (about 2 s of a cold ``hareplica run``)."""

from __future__ import annotations

import os

import pyspark

from streaming_apps import spark_home


def test_the_shared_sessions_python_workers_import_the_installed_pyspark(spark):
    files = spark.range(2).rdd.map(lambda _: __import__("pyspark").__file__).collect()
    assert files == [pyspark.__file__] * 2  # not .../python/lib/pyspark.zip/pyspark/__init__.py


def test_view_links_everything_but_the_source_zips(tmp_path):
    real = spark_home.pip_pyspark_dir()
    assert real is not None
    view = spark_home.spark_home_view(real, tmp_path)
    assert sorted(p.name for p in view.iterdir()) == sorted(p.name for p in real.iterdir() if p.name != "python")
    assert (view / "bin" / "spark-submit").resolve() == (real / "bin" / "spark-submit").resolve()
    assert spark_home.spark_home_view(real, tmp_path) == view  # made once


def test_a_users_spark_home_is_kept_and_a_view_is_left_for_archived_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert spark_home.use_spark_home_view() is None and os.environ["SPARK_HOME"] == "/opt/spark"
    monkeypatch.setenv("SPARK_HOME", str(spark_home.spark_home_view(spark_home.pip_pyspark_dir(), tmp_path)))
    spark_home.leave_spark_home_view()
    assert os.environ["SPARK_HOME"] == str(spark_home.pip_pyspark_dir())
