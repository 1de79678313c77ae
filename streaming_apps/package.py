"""Build the packed Python environment that Spark executors run hareplica from (docs/deployment.md).

The project's wheel with the native decode kernel, a fresh venv with its runtime dependencies at the lock file's
versions (except :data:`PROVIDED_BY_SPARK`), packed by ``venv-pack``: ``python -m streaming_apps.package --output
hareplica-env.tar.gz`` (or ``make env-archive``) from a source checkout. The steps, what is left out and why, and
how to submit with it: docs/deployment.md "1. Build the environment archive" and "2. Submit".
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: Distributions Spark supplies to executors' Python workers (SPARK_HOME/python/lib) or that they never import.
PROVIDED_BY_SPARK = frozenset({"pyspark", "py4j", "delta-spark"})
#: The extras the archive holds beside the core (pyproject.toml): the apps' tasks decode with them (gold's order
#: decoder, the typed tables' bodies) and their driver prints with them.
PACKED_EXTRAS = ("apps",)
#: The checkout this module was imported from.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: The exact versions the packed environment installs (pip constraints; README "Install into your Spark").
LOCK_FILE = Path("requirements") / "lock.txt"
#: What ``spark.pyspark.python`` names inside the unpacked archive (the ``#environment`` alias).
EXECUTOR_PYTHON = "./environment/bin/python"
NATIVE_KERNEL_RE = re.compile(r"^connector/decode/_decode_kernel\.[^/]*\.so$")
#: venv-pack filters: the dependencies' own test suites and C headers, which nothing imports at run time.
PACK_EXCLUDES = ("lib/python*/site-packages/*/tests/*",
                 "lib/python*/site-packages/pyarrow/include/*", "lib/python*/site-packages/pyarrow/src/*")


class PackageError(RuntimeError):
    """A step of the build failed (its command's output is in the message) or its result is unusable."""


@dataclass(frozen=True)
class EnvArchive:
    """A built archive: ``path`` (the .tar.gz), ``wheel``, ``env_dir`` (the unpacked environment, kept when
    asked), ``native_kernel`` (the wheel holds ``connector.decode._decode_kernel``), ``requirements`` installed
    beside the wheel, ``seconds`` per step (wheel, venv, pack)."""

    path: Path
    wheel: Path
    env_dir: Path | None
    native_kernel: bool
    requirements: tuple[str, ...]
    seconds: dict[str, float]


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise PackageError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")


def build_wheel(project_root: Path, out_dir: Path, python: str = sys.executable) -> Path:
    """``pip wheel --no-deps`` of ``project_root`` into ``out_dir``; returns the hareplica wheel's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _run([python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out_dir), str(project_root)],
         "building the hareplica wheel")
    wheels = sorted(out_dir.glob("hareplica-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise PackageError(f"pip wheel wrote no hareplica-*.whl into {out_dir}")
    return wheels[-1]


def wheel_has_native_kernel(wheel: Path) -> bool:
    """True when the wheel holds the compiled ``connector/decode/_decode_kernel.*.so``."""
    with zipfile.ZipFile(wheel) as zf:
        return any(NATIVE_KERNEL_RE.match(name) for name in zf.namelist())


def runtime_requirements(wheel: Path, extras: tuple[str, ...] = PACKED_EXTRAS) -> list[str]:
    """The wheel's ``Requires-Dist`` lines of its core and of ``extras`` (those without their ``extra ==`` marker),
    without the other extras' and without :data:`PROVIDED_BY_SPARK`.

    Raises PackageError when the wheel has no METADATA.
    """
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        if not names:
            raise PackageError(f"{wheel.name} has no .dist-info/METADATA")
        text = zf.read(names[0]).decode("utf-8")
    out = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement, _, marker = line.partition(":")[2].strip().partition(";")
        if "extra ==" in marker:
            if not any(f'extra == "{e}"' in marker.replace("'", '"') for e in extras):
                continue
            marker = ""
        requirement = requirement.strip() + (f";{marker}" if marker else "")
        name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
        if re.sub(r"[-_.]+", "-", name).lower() not in PROVIDED_BY_SPARK:
            out.append(requirement)
    return out


def make_env(env_dir: Path, wheel: Path, requirements: list[str], *, python: str | None = None,
             constraints: Path | None = None) -> None:
    """A fresh ``python -m venv --without-pip`` at ``env_dir`` holding ``wheel`` and ``requirements``, resolved
    within the pip constraints file ``constraints`` when given (the lock).

    ``python`` (default this interpreter's base one) makes the venv; the installs use this interpreter's
    pip (``pip --python``), so the environment carries no pip of its own.
    """
    base = python or getattr(sys, "_base_executable", sys.executable)
    if env_dir.exists():
        shutil.rmtree(env_dir)
    _run([base, "-m", "venv", "--without-pip", str(env_dir)], "creating the virtual environment")
    target = str(env_dir / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", target, "install", "--quiet", "--no-input",
           "--disable-pip-version-check"]
    pinned = ["-c", str(constraints)] if constraints else []
    _run([*pip, *pinned, *requirements], "installing the runtime dependencies")
    _run([*pip, "--no-deps", str(wheel)], "installing the hareplica wheel")


def pack_env(env_dir: Path, output: Path, *, compress_level: int = 4, python_prefix: str | None = None) -> Path:
    """``venv_pack.pack`` of ``env_dir`` into ``output`` (overwritten; :data:`PACK_EXCLUDES` left out)."""
    import venv_pack

    output.parent.mkdir(parents=True, exist_ok=True)
    return Path(venv_pack.pack(prefix=str(env_dir), output=str(output), force=True, compress_level=compress_level,
                               python_prefix=python_prefix, filters=[("exclude", p) for p in PACK_EXCLUDES]))


def build_env_archive(output: Path, *, project_root: Path = PROJECT_ROOT, work_dir: Path | None = None,
                      python: str | None = None, compress_level: int = 4, python_prefix: str | None = None,
                      allow_pure_python: bool = False, keep_env: bool = False) -> EnvArchive:
    """The three steps of the module docstring; returns an :class:`EnvArchive`.

    ``work_dir`` holds the wheel and the environment (default a temporary folder, removed unless
    ``keep_env``). Raises PackageError on a failed step, or when the wheel lacks the native kernel and
    ``allow_pure_python`` is false.
    """
    scratch = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="hareplica-env-"))
    seconds: dict[str, float] = {}
    try:
        started = time.monotonic()
        wheel = build_wheel(project_root, scratch / "wheels")
        native = wheel_has_native_kernel(wheel)
        if not native and not allow_pure_python:
            raise PackageError(f"{wheel.name} has no connector/decode/_decode_kernel (no C compiler or zlib headers?): "
                               "install them, or pass --allow-pure-python to ship the NumPy decode path")
        seconds["wheel"] = time.monotonic() - started
        started = time.monotonic()
        requirements = runtime_requirements(wheel)
        env_dir = scratch / "env"
        lock = project_root / LOCK_FILE
        make_env(env_dir, wheel, requirements, python=python, constraints=lock if lock.exists() else None)
        seconds["venv"] = time.monotonic() - started
        started = time.monotonic()
        path = pack_env(env_dir, Path(output).resolve(), compress_level=compress_level, python_prefix=python_prefix)
        seconds["pack"] = time.monotonic() - started
    finally:
        if not keep_env and work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return EnvArchive(path=path, wheel=wheel, env_dir=env_dir if keep_env or work_dir else None,
                      native_kernel=native, requirements=tuple(requirements), seconds=seconds)


def main(argv: list[str] | None = None) -> int:
    """``python -m streaming_apps.package``: build the archive and print how to submit with it."""
    p = argparse.ArgumentParser(prog="python -m streaming_apps.package", description=__doc__.splitlines()[0])
    p.add_argument("--output", default="build/hareplica-env.tar.gz", help="archive to write (default %(default)s)")
    p.add_argument("--python", default=None,
                   help="interpreter the environment is made from (default this one's base interpreter); it must "
                        "exist at the same path on every Worker")
    p.add_argument("--python-prefix", default=None, help="venv-pack's relinking of bin/python to PREFIX/bin/python")
    p.add_argument("--compress-level", type=int, default=4, choices=range(10), metavar="0-9",
                   help="gzip level (default 4)")
    p.add_argument("--allow-pure-python", action="store_true",
                   help="accept a wheel without the native decode kernel (executors use the NumPy path)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        built = build_env_archive(Path(args.output), python=args.python, compress_level=args.compress_level,
                                  python_prefix=args.python_prefix, allow_pure_python=args.allow_pure_python)
    except PackageError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    size_mib = os.path.getsize(built.path) / 2**20
    steps = ", ".join(f"{k} {v:.0f} s" for k, v in built.seconds.items())
    print(f"wrote {built.path} ({size_mib:.0f} MiB; {steps}; native decode kernel: {built.native_kernel})")
    print(f"submit with: --archives {built.path}#environment --conf spark.pyspark.python={EXECUTOR_PYTHON}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
