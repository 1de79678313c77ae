"""The driver JVM options hareplica adds (streaming_apps.spark_session.driver_java_options_conf) start a real JVM, with
and without a collector or JIT choice of the user's own (the JVM refuses two collectors)."""

from __future__ import annotations

import subprocess

import pytest

from streaming_apps.spark_session import PARALLEL_GC, driver_java_options_conf


def _java_version(options: str) -> subprocess.CompletedProcess:
    return subprocess.run(["java", *options.split(), "-version"], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("own", ["", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=4 -XX:+UseSerialGC"])
def test_golds_options_start_a_jvm_whatever_the_users_own(own):
    options = driver_java_options_conf(own, cds=None, c1_only_jit=True, parallel_gc=True)
    done = _java_version(options)
    assert done.returncode == 0, f"java {options} -version: {done.stderr}"


def test_two_collectors_are_refused_by_the_jvm_so_the_users_own_must_win():
    done = _java_version(f"{PARALLEL_GC} -XX:+UseG1GC")
    assert done.returncode != 0 and "collector" in (done.stdout + done.stderr).lower()
