"""The packed environment executors run: what it holds, and the decode fallback when its native kernel is missing.

Runs the environment's own interpreter (the venv that venv-pack packed, as an executor unpacks it), not the
test process's: the wheel brought ``connector.decode._decode_kernel``; pyspark and py4j are left to Spark; and an
interpreter that cannot import the kernel logs a warning and decodes the golden 4.9.8 CommitLog to the
same Arrow columns as the native kernel.
"""

from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.cluster

# decode the fixture CommitLog; print the kernels in use and a digest of every column. With argv[3] == "hide",
# connector.decode._decode_kernel cannot be imported (as in an environment built where no C compiler was).
_DIGEST = r"""
import hashlib, logging, sys
from pathlib import Path
if sys.argv[3] == "hide":
    sys.modules["connector.decode._decode_kernel"] = None
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
import pyarrow as pa
from connector.decode import kernels
from connector.decode.stream import CommitLogArrowDecoder
data = b"".join(f.read_bytes() for f in sorted(Path(sys.argv[1]).iterdir()))
end = int(sys.argv[2])
table = pa.Table.from_batches(list(CommitLogArrowDecoder(0, end, 1048576, broker="b").decode_all([(0, data[:end])])))
sink = pa.BufferOutputStream()
with pa.ipc.new_stream(sink, table.schema) as w:
    w.write_table(table)
print(kernels.active().name, table.num_rows, hashlib.sha256(sink.getvalue()).hexdigest())
"""
MAX_OFFSET = 3402931  # the golden CommitLog's end (tests/unit/connector/test_decode_kernel.py)


def _env_python(env_archive) -> str:
    return str(env_archive.env_dir / "bin" / "python")


def _digest(env_archive, fixture_dir, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([_env_python(env_archive), "-c", _DIGEST, str(fixture_dir / "commitlog"), str(MAX_OFFSET),
                           mode], capture_output=True, text=True, timeout=120, check=True, cwd=env_archive.env_dir,
                          env={"PATH": "/usr/bin:/bin"})


def test_the_packed_environment_holds_the_wheel_with_its_native_kernel_and_no_pyspark(env_archive):
    assert env_archive.native_kernel and env_archive.path.stat().st_size > 0
    probe = ("import importlib.util as u, connector, connector.decode._decode_kernel as k; "
             "print(connector.__file__); print(k.__file__); print(u.find_spec('pyspark'), u.find_spec('py4j'))")
    out = subprocess.run([_env_python(env_archive), "-c", probe], capture_output=True, text=True, timeout=60,
                         check=True, cwd=env_archive.env_dir, env={"PATH": "/usr/bin:/bin"}).stdout.splitlines()
    site = str(env_archive.env_dir / "lib")
    assert out[0].startswith(site) and out[1].startswith(site), "the project comes from the environment's wheel"
    assert out[2] == "None None", "pyspark and py4j come from Spark's python/lib on executors, not from the archive"
    assert not any(r.split("=")[0].split("<")[0].strip() in ("pyspark", "py4j", "delta-spark")
                   for r in env_archive.requirements)


def test_without_the_native_kernel_the_environment_warns_and_decodes_the_same_rows(env_archive, fixture_dir):
    native = _digest(env_archive, fixture_dir, "keep")
    fallback = _digest(env_archive, fixture_dir, "hide")
    assert native.stdout.split()[0] == "native" and "not built" not in native.stderr
    assert fallback.stdout.split()[0] == "numpy"
    assert "WARNING connector.decode.kernels connector.decode._decode_kernel is not built" in fallback.stderr
    assert fallback.stdout.split()[1:] == native.stdout.split()[1:], "same rows, same column bytes"
    assert int(native.stdout.split()[1]) > 0
