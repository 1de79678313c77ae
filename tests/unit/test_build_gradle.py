"""build.gradle names the Delta jars that match the locked Python versions (requirements/lock.txt), and the locks
agree with the ranges pyproject.toml declares (README "Install into your Spark")."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]


def _pins(lock: str = "lock.txt") -> dict[str, str]:
    """name -> exact version of a lock in requirements/ (``name==version`` lines)."""
    pins = {}
    for line in (ROOT / "requirements" / lock).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def _ranges() -> dict[str, SpecifierSet]:
    """name -> the SpecifierSet of every requirement in pyproject.toml, extras' included."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    return {r.name.lower(): r.specifier for r in reqs if r.name != "hareplica"}


def test_the_metadata_declares_ranges_and_every_lock_lies_inside_them():
    ranges = _ranges()
    runtime = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [r for r in runtime if "==" in r], "exact pins belong in requirements/lock.txt"
    for name in ("pyspark", "pyarrow", "numpy", "deltalake", "delta-spark"):
        assert any(s.operator == "<" for s in ranges[name]), f"{name} has no upper bound"
    for lock in ["lock.txt", *(f"spark-{m}.txt" for m in ("4.0", "4.1", "4.2", "4.3"))]:
        pins = _pins(lock)
        for name, spec in ranges.items():
            if name in pins:
                assert pins[name] in spec, f"requirements/{lock}: {name}=={pins[name]} is outside {spec}"
        assert pins["pyspark"].startswith(lock.removeprefix("spark-").removesuffix(".txt") + ".") or lock == "lock.txt"


def test_the_oldest_versions_are_the_lower_bounds_spark_4_0_tests():
    ranges, pins = _ranges(), _pins("spark-4.0.txt")
    for name in ("pyarrow", "numpy", "deltalake", "tenacity", "pyspark"):
        (lower,) = [s.version for s in ranges[name] if s.operator == ">="]
        if name == "pyspark":  # the newest patch release of the oldest minor
            lower = lower.removesuffix(".0")
        assert pins[name] == lower or pins[name].startswith(lower + "."), (name, pins[name], lower)


def _gradle_ext() -> dict[str, str]:
    text = (ROOT / "build.gradle").read_text()
    return dict(re.findall(r"^\s*(\w+Version)\s*=\s*'([^']+)'", text, re.M))


def test_versions_agree_with_pyproject():
    pins, ext = _pins(), _gradle_ext()
    assert ext["deltaVersion"] == pins["delta-spark"]
    assert ext["sparkVersion"] == pins["pyspark"]
    assert ext["scalaBinaryVersion"] == "2.13"
    assert ext["sparkBinaryVersion"] == ".".join(pins["pyspark"].split(".")[:2])


def test_maven_staging_pom_names_the_same_jars():
    """jvm/delta.pom.xml (what `make jvm-peers` stages for the tests) and build.gradle agree."""
    ext = _gradle_ext()
    pom = (ROOT / "jvm" / "delta.pom.xml").read_text()
    assert re.search(r"<delta.version>([^<]+)</delta.version>", pom).group(1) == ext["deltaVersion"]
    artifacts = re.findall(r"<artifactId>(delta-[^<]+)</artifactId>", pom)
    assert artifacts == [f"delta-spark_{ext['sparkBinaryVersion']}_{ext['scalaBinaryVersion']}", "delta-storage"]


def test_installed_pyspark_is_the_pinned_one():
    import pyspark

    assert pyspark.__version__ == _pins()["pyspark"]


@pytest.mark.skipif(shutil.which("gradle") is None,
                    reason="Debian's gradle is not installed on this machine (.ci/run installs it)")
def test_gradle_resolves_the_coordinates_offline(tmp_path):
    shutil.copy(ROOT / "build.gradle", tmp_path / "build.gradle")
    out = subprocess.run(["gradle", "--no-daemon", "--offline", "-q", "--project-cache-dir", str(tmp_path / ".gradle"),
                          "printDeltaCoordinates"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    ext = _gradle_ext()
    coords = [line for line in out.stdout.splitlines() if line.startswith("io.delta:")]
    version = ext["deltaVersion"]
    spark_artifact = f"delta-spark_{ext['sparkBinaryVersion']}_{ext['scalaBinaryVersion']}"
    assert coords == [f"io.delta:{spark_artifact}:{version}", f"io.delta:delta-storage:{version}"]


def test_rocketmq5_broker_coordinates_agree_with_the_staging_pom():
    """build.gradle's rocketmq5Broker (broker and controller) and jvm/rocketmq-5.pom.xml (staged by
    `make jvm-peers`) agree."""
    ext = _gradle_ext()
    pom = (ROOT / "jvm" / "rocketmq-5.pom.xml").read_text()
    assert re.search(r"<rocketmq.version>([^<]+)</rocketmq.version>", pom).group(1) == ext["rocketmq5Version"]
    artifacts = re.findall(r"<dependency>.*?<artifactId>([^<]+)</artifactId>", pom)
    assert artifacts == ["rocketmq-broker", "rocketmq-controller"]
    gradle = (ROOT / "build.gradle").read_text()
    for artifact in artifacts:
        assert f'rocketmq5Broker "org.apache.rocketmq:{artifact}:${{rocketmq5Version}}"' in gradle
