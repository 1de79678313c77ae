"""streaming_apps.spark_home: Python workers import the installed, byte-compiled pyspark instead of compiling
pyspark.zip's sources in every worker process (about 2 s of a cold ``hareplica run``)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

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
    assert sorted(p.name for p in (view / "jars").iterdir()) == sorted(p.name for p in (real / "jars").iterdir())
    copies = sorted(p.name for p in (view / "jars").iterdir() if not p.is_symlink())
    assert len(copies) == 2 and all(spark_home.UNSIGNED_JARS.fullmatch(name) for name in copies), copies
    assert spark_home.spark_home_view(real, tmp_path) == view  # made once


def _signature_files(jar: Path) -> list[str]:
    with zipfile.ZipFile(jar) as z:
        return [n for n in z.namelist() if spark_home.SIGNATURE_FILE.fullmatch(n)]


def test_janinos_jars_are_copied_without_their_signature_and_with_every_class(tmp_path):
    real = spark_home.pip_pyspark_dir()
    view = spark_home.spark_home_view(real, tmp_path)
    for copy in (p for p in (view / "jars").iterdir() if not p.is_symlink()):
        signed = real / "jars" / copy.name
        assert _signature_files(signed), f"{signed} is signed in this pyspark"
        assert _signature_files(copy) == []
        with zipfile.ZipFile(signed) as a, zipfile.ZipFile(copy) as b:
            kept = [i.filename for i in a.infolist() if i.filename not in _signature_files(signed)]
            assert [i.filename for i in b.infolist()] == kept
            assert all(a.read(name) == b.read(name) for name in kept)


def test_the_shared_sessions_driver_loads_janino_unsigned_from_the_view(spark):
    jvm = spark.sparkContext._jvm
    for name in ("org.codehaus.janino.ClassBodyEvaluator", "org.codehaus.commons.compiler.CompileException"):
        source = jvm.java.lang.Class.forName(name).getProtectionDomain().getCodeSource()
        assert source.getCertificates() is None, f"{name} was loaded from a signed jar"
        jar = Path(jvm.java.nio.file.Paths.get(source.getLocation().toURI()).toString())
        assert jar.parent == Path(os.environ["SPARK_HOME"]) / "jars" and not jar.is_symlink(), jar


def test_a_users_spark_home_is_kept_and_a_view_is_left_for_archived_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert spark_home.use_spark_home_view() is None and os.environ["SPARK_HOME"] == "/opt/spark"
    monkeypatch.setenv("SPARK_HOME", str(spark_home.spark_home_view(spark_home.pip_pyspark_dir(), tmp_path)))
    spark_home.leave_spark_home_view()
    assert os.environ["SPARK_HOME"] == str(spark_home.pip_pyspark_dir())
