"""hareplica installed without extras (``pip install hareplica``: pyproject.toml's ``dependencies`` alone) into a
Spark 4.3 runtime, as a user adds the connector to their Spark (README "Install into your Spark").

The environment gets the wheel and its core requirements at the versions of requirements/spark-4.3.txt (uv's
``--constraint``; pyspark from tests/compat/conftest.py's ``pyspark_wheel``) and passes ``pip check``. None of the
``apps`` and ``broker`` extras' packages is importable there; the ``hareplica`` command and the broker stub each
name their extra in one line; and a user's script (tests/compat/user_app.py, by that environment's
``spark-submit``) lands every message of a stub master (run from the project's own environment) exactly once with
``format("hareplica")`` → ``format("deltalake")``, and reads them all once with a batch read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from tests.compat.conftest import (
    CHECKOUT,
    UV,
    SparkRuntime,
    _run,
    landed,
    locked_pyspark,
    pyspark_wheel,
    run_user_app,
)

pytestmark = pytest.mark.compat

CORE_MINOR = "4.3"
#: the import names of the apps and broker extras' packages (pyproject.toml [project.optional-dependencies])
EXTRAS_MODULES = ("rich", "prometheus_client", "yaml", "pythonjsonlogger", "msgspec", "msgpack", "fastavro",
                  "google.protobuf")
_IMPORTABLE = """
import importlib.util, json, sys
found = []
for name in json.loads(sys.argv[1]):
    try:
        if importlib.util.find_spec(name) is not None:
            found.append(name)
    except ModuleNotFoundError:  # google.protobuf without google
        pass
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def core_runtime(dist, tmp_path_factory) -> SparkRuntime:
    """A fresh venv holding the wheel without extras and what its core requires, pinned by the Spark 4.3 lock."""
    assert UV.exists(), f"{UV} is missing: the dev extra installs uv (make test does)"
    wheels = pyspark_wheel(locked_pyspark(CORE_MINOR)).parent
    root = tmp_path_factory.mktemp("core-env")
    _run([str(UV), "venv", "--quiet", "--seed", "--python", sys.executable, str(root)])
    python = str(root / "bin" / "python")
    _run([str(UV), "pip", "install", "--quiet", "--no-build", "--python", python, "--find-links", str(wheels),
          "--constraint", str(CHECKOUT / "requirements" / f"spark-{CORE_MINOR}.txt"), str(dist.wheel)])
    _run([python, "-m", "pip", "check", "--disable-pip-version-check"])
    version = _run([python, "-c", "import importlib.metadata as m; print(m.version('pyspark'))"]).strip()
    return SparkRuntime(CORE_MINOR, root, version)


def test_the_core_install_holds_no_package_of_the_extras(core_runtime):
    found = json.loads(_run([str(core_runtime.python), "-c", _IMPORTABLE, json.dumps(EXTRAS_MODULES)],
                            cwd=core_runtime.root, env=core_runtime.env()))
    assert found == [], f"pip install hareplica (no extras) installed {found}"


@pytest.mark.parametrize(("command", "extra"), [(["hareplica", "--version"], "apps"),
                                                (["python", "-m", "broker_stub", "-c", "broker.conf"], "broker")],
                         ids=["hareplica", "broker_stub"])
def test_the_command_line_and_the_broker_stub_name_their_extra_in_one_line(core_runtime, command, extra):
    done = subprocess.run([str(core_runtime.bin / command[0]), *command[1:]], capture_output=True, text=True,
                          env=core_runtime.env(), cwd=core_runtime.root, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done
    assert f"pip install 'hareplica[{extra}]'" in lines[0] and lines[0].startswith("error: "), lines


def test_user_app_lands_every_message_once_with_the_core_alone(core_runtime, broker, expected, tmp_path):
    result = run_user_app(core_runtime, tmp_path, broker)
    assert landed(tmp_path / "table") == expected
    assert Counter(result["batchRead"]) == expected
