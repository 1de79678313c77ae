"""Fixtures of the Spark-version compatibility module: the built sdist and wheel, and one fresh environment per
supported Spark minor holding that minor's locked runtime (requirements/spark-X.Y.txt, made with uv from its cache)
with the wheel installed on top, outside the checkout.

Each environment stands for a user's existing Spark runtime: the lock is installed first (uv, fast from its cache),
then the wheel with its ``apps`` extra (the command line the tests run) with that environment's own ``pip install
'hareplica-*.whl[apps]'``, so the fixture also checks that installing hareplica keeps the runtime's pyspark.
tests/compat/test_core_install.py installs the wheel without extras.

PyPI holds pyspark as an sdist only. uv would build it into its cache on every run whose index answers the
sdist's revalidation as modified (this machine's does: about 0.85 GB per Spark minor and run), so the lock's
pyspark is built once per version into the git-ignored ``.compat-wheels/`` and uv takes it from there. The wheel
is built without compression (setuptools' ``bdist_wheel --compression=stored``): pyspark is mostly jars, which
are zip files already, and deflating them again took 14 of a build's 34 CPU-seconds here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from connector.delta.faults import FAULT_INJECTION_ENV, FAULT_MARKER_ENV, FAULT_PAUSE_ENV
from connector.delta.reading import read_table
from connector.protocol.topics import is_system_topic
from tests.integration.connector.conftest import MAPPED_FILE_SIZE, start_fixture_master
from tests.support.brokers import max_offset

CHECKOUT = Path(__file__).resolve().parents[2]
#: Every Spark minor hareplica supports, each with its lock requirements/spark-X.Y.txt (README "Install into
#: your Spark").
SPARK_MINORS = ("4.0", "4.1", "4.2", "4.3")
UV = Path(sys.executable).parent / "uv"
INSTALL_TIMEOUT_S = 900
#: pyspark wheels built from PyPI's sdists, one per locked version, kept from run to run (git-ignored)
PYSPARK_WHEELS = CHECKOUT / ".compat-wheels"
#: how long one run of the user's script or of an app may take (s)
RUN_TIMEOUT_S = 420
#: the user's script's maxBytesPerTrigger: half a mapped file of the golden CommitLog
MAX_BYTES = MAPPED_FILE_SIZE // 2


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


@dataclass(frozen=True)
class SparkRuntime:
    """A user's Spark environment with hareplica installed: ``minor`` ("4.0"), its ``bin`` folder and the
    ``pyspark`` version the lock installed."""

    minor: str
    root: Path
    pyspark: str

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def env(self) -> dict[str, str]:
        """The environment of a shell where this venv is activated: nothing of the test run's Spark, Python path
        or fault injection leaks in."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SPARK_", "PYSPARK_", "PYTHON", "HAREPLICA_", "VIRTUAL_ENV"))}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.root)
        return env


def _run(cmd: list[str], **kwargs) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def locked_pyspark(minor: str) -> str:
    """The pyspark version requirements/spark-``minor``.txt pins ("4.0.5")."""
    lock = CHECKOUT / "requirements" / f"spark-{minor}.txt"
    found = re.search(r"^pyspark==(\S+)$", lock.read_text(), re.MULTILINE)
    assert found, f"{lock} pins no pyspark"
    return found.group(1)


def pyspark_wheel(version: str) -> Path:
    """The wheel of pyspark ``version`` in :data:`PYSPARK_WHEELS`, built there with pip (no cache, stored rather
    than deflated) when missing; a build that fails leaves nothing behind."""
    found = sorted(PYSPARK_WHEELS.glob(f"pyspark-{version}-*.whl"))
    if found:
        return found[0]
    PYSPARK_WHEELS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=PYSPARK_WHEELS) as tmp:
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-cache-dir",
              "--disable-pip-version-check", "--config-settings=--build-option=--compression=stored",
              "--wheel-dir", tmp, f"pyspark=={version}"])
        (built,) = Path(tmp).glob(f"pyspark-{version}-*.whl")
        return built.replace(PYSPARK_WHEELS / built.name)


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Dist:
    """``python -m build``'s sdist and wheel of the checkout; the wheel carries the compiled decode kernel."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(CHECKOUT)])
    (wheel,) = out.glob("hareplica-*.whl")
    (sdist,) = out.glob("hareplica-*.tar.gz")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert any(n.startswith("connector/decode/_decode_kernel") and n.endswith(".so") for n in names), names
    assert not any(n.startswith("tests/") for n in names)
    return Dist(wheel, sdist)


def spark_minors(*minors: str):
    """Parametrize a test over the :func:`runtime` of each of ``minors`` (default: every one hareplica supports)."""
    chosen = minors or SPARK_MINORS
    return pytest.mark.parametrize("runtime", chosen, indirect=True, ids=[f"spark-{m}" for m in chosen])


@pytest.fixture(scope="module")
def runtime(request, dist, tmp_path_factory) -> SparkRuntime:
    """A fresh venv with requirements/spark-X.Y.txt (pyspark from :func:`pyspark_wheel`), then ``pip install`` of
    the wheel with its ``apps`` extra on top (pyspark must stay); the minor comes from :func:`spark_minors`."""
    minor = request.param
    assert UV.exists(), f"{UV} is missing: the dev extra installs uv (make test does)"
    wheels = pyspark_wheel(locked_pyspark(minor)).parent
    root = tmp_path_factory.mktemp(f"spark-{minor}-env")
    _run([str(UV), "venv", "--quiet", "--seed", "--python", sys.executable, str(root)])  # --seed: with pip
    python = str(root / "bin" / "python")
    # --no-build: uv builds nothing into its cache; an sdist it would have to build fails the fixture
    _run([str(UV), "pip", "install", "--quiet", "--no-build", "--python", python, "--find-links", str(wheels), "-r",
          str(CHECKOUT / "requirements" / f"spark-{minor}.txt")])
    version = "import importlib.metadata as m; print(m.version('pyspark'))"
    before = _run([python, "-c", version]).strip()
    assert before.startswith(f"{minor}."), before
    _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{dist.wheel}[apps]"])
    after = _run([python, "-c", version]).strip()
    assert after == before, f"installing the wheel replaced pyspark {before} with {after}"
    return SparkRuntime(minor, root, after)


@pytest.fixture(scope="module")
def broker(tmp_path_factory, fixture_dir):
    """A stub master serving the golden 4.9.8 CommitLog (4 mapped files of 1 MiB, system-topic records included)."""
    b = start_fixture_master(tmp_path_factory.mktemp("compat-broker"), fixture_dir)
    try:
        yield b
    finally:
        b.kill9()


@pytest.fixture(scope="module")
def expected(fixture_dir) -> Counter:
    """commitLogOffset of every non-system message of the golden CommitLog, once each."""
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as fh:
        messages = [json.loads(line) for line in fh]
    return Counter(m["commitLogOffset"] for m in messages if not is_system_topic(m["topic"]))


def landed(table: Path) -> Counter:
    """commitLogOffset → how many rows of the Delta table at ``table`` hold it."""
    return Counter(read_table(str(table), columns=["commitLogOffset"]).column("commitLogOffset").to_pylist())


def start_user_app(runtime: SparkRuntime, work: Path, broker, *, fault: str | None = None) -> subprocess.Popen:
    """Start the user's script (user_app.py) with this runtime's spark-submit, from a folder outside the checkout,
    landing ``broker`` into ``work``/table under a processing-time trigger bounded by :data:`MAX_BYTES`; ``fault``:
    a fault-injection point of the sink (connector.delta.faults) where its driver pauses."""
    app = work / "user_app.py"
    shutil.copyfile(CHECKOUT / "tests" / "compat" / "user_app.py", app)
    env = runtime.env()
    if fault:
        env.update({FAULT_INJECTION_ENV: fault, FAULT_MARKER_ENV: str(work / "fault-marker.json"),
                    FAULT_PAUSE_ENV: "600"})
    cmd = [str(runtime.bin / "spark-submit"), "--master", "local[2]", str(app), f"broker-a={broker.ha_addr}",
           str(work / "table"), str(work / "checkpoint"), str(CHECKOUT), "--max-bytes", str(MAX_BYTES),
           "--processing-time-until", str(max_offset(broker.remoting_addr))]
    log = open(work / ("crash.log" if fault else "run.log"), "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=log,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def run_user_app(runtime: SparkRuntime, work: Path, broker) -> dict:
    """Run the user's script (:func:`start_user_app`, no fault) to its end and return its ``RESULT`` line's JSON,
    checked: exit 0, the runtime's own pyspark, hareplica imported from the environment's site-packages."""
    from tests.support.processes import kill_session, log_tail

    proc = start_user_app(runtime, work, broker)
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        kill_session(proc)
    assert proc.returncode == 0, log_tail(work / "run.log")
    (line,) = [ln for ln in out.decode().splitlines() if ln.startswith("RESULT ")]
    result = json.loads(line[len("RESULT "):])
    assert result["pyspark"] == runtime.pyspark and "site-packages" in result["connector"]
    return result
