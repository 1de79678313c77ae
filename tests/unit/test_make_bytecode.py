"""``make bytecode`` (Makefile; docs/deployment.md §7, "Byte-compiled modules"): the README's commands byte-compile the
project's own modules first, and the target leaves a current ``.pyc`` beside every module."""

from __future__ import annotations

import importlib.util
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("connector", "broker_stub", "streaming_apps")


def make(*args: str) -> str:
    done = subprocess.run(["make", "-s", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("target", ["demo", "test", "bench"])
def test_the_readme_commands_byte_compile_first(target):
    plan = make("-n", target).splitlines()
    compile_at = [i for i, line in enumerate(plan) if "-m compileall -q connector broker_stub streaming_apps" in line]
    assert compile_at, f"make {target} does not byte-compile the project's modules:\n" + "\n".join(plan)
    first_python = min(i for i, line in enumerate(plan) if "hareplica demo" in line or "-m pytest" in line
                       or "-m bench." in line)
    assert compile_at[0] < first_python


def test_bytecode_leaves_a_current_pyc_beside_every_module():
    make("bytecode")
    stale = []
    for package in PACKAGES:
        for source in sorted((ROOT / package).rglob("*.py")):
            cached = Path(importlib.util.cache_from_source(str(source)))
            if not cached.exists():
                stale.append(f"{source.relative_to(ROOT)}: no {cached.name}")
                continue
            header = cached.read_bytes()[:16]  # magic, flags, source mtime, source size (PEP 552, timestamp mode)
            flags, mtime, size = struct.unpack("<III", header[4:16])
            stat = source.stat()
            if header[:4] != importlib.util.MAGIC_NUMBER or flags != 0 or (mtime, size) != (
                    int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF):
                stale.append(f"{source.relative_to(ROOT)}: {cached.name} is not current")
    assert not stale, stale
