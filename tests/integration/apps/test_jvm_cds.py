"""streaming_apps.jvm_cds: the Spark driver JVM maps the class-data-sharing archive ``make`` built for this java and
SPARK_HOME (the start-up it saves is measured by bench/catchup.py, not here)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from streaming_apps import jvm_cds


def _mapped_cds_bytes(pid: int) -> int:
    """The bytes of CDS archives the JVM ``pid`` has mapped (base plus dynamic), from ``jcmd PID VM.info``."""
    out = subprocess.run(["jcmd", str(pid), "VM.info"], capture_output=True, text=True, timeout=60).stdout
    found = re.search(r"CDS archive\(s\) mapped at: .*?size (\d+)", out)
    assert found, f"jcmd VM.info shows no CDS mapping:\n{out[:2000]}"
    return int(found.group(1))


def test_the_shared_sessions_driver_maps_the_archive_make_built(spark):
    archive = jvm_cds.archive_path(os.environ["SPARK_HOME"])
    assert archive is not None and archive.is_file(), f"make test builds {archive} (python -m streaming_apps.jvm_cds)"
    jvm = spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in args
    # the dynamic archive is mapped on top of the JDK's base one: far more than the base archive alone
    assert _mapped_cds_bytes(int(jvm.java.lang.ProcessHandle.current().pid())) >= archive.stat().st_size


def test_options_write_when_training_map_when_built_and_nothing_without_an_archive(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_cds.CACHE_ENV, str(tmp_path / "cache"))
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"")
    assert jvm_cds.driver_java_options(home) is None  # nothing built for this SPARK_HOME
    path = jvm_cds.archive_path(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert jvm_cds.driver_java_options(home).startswith(f"-XX:SharedArchiveFile={path} -Xshare:auto")
    (home / "jars" / "delta.jar").write_bytes(b"")  # another class path: another archive
    assert jvm_cds.archive_path(home) != path and jvm_cds.driver_java_options(home) is None
    monkeypatch.setenv(jvm_cds.DUMP_ENV, str(tmp_path / "out.jsa"))
    assert jvm_cds.driver_java_options(home).startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'out.jsa'}")


def test_a_java_that_cannot_use_an_archive_starts_without_it_and_says_nothing(tmp_path):
    bogus = Path(tmp_path / "not-an-archive.jsa")
    bogus.write_bytes(b"\0" * 4096)
    done = subprocess.run(["java", f"-XX:SharedArchiveFile={bogus}", "-Xshare:auto", *jvm_cds.QUIET.split(),
                           "-version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "cds" not in (done.stdout + done.stderr).lower() and "archive" not in (done.stdout + done.stderr).lower()
