"""build.gradle names the Delta jars that match the Python pins in pyproject.toml (issue 2 item 1)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for dep in deps:
        m = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[A-Za-z0-9_,.-]+\])?==([0-9.]+)", dep)  # extras: pyspark[connect]
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


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
