"""A SPARK_HOME for pip-installed pyspark whose Python workers import the installed, byte-compiled pyspark.

Why: Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's ``PYTHONPATH``
(``PythonUtils.sparkPythonPath``). A pip-installed pyspark ships that zip with sources only, and Python's
zipimport never caches compiled code, so every worker process — the data-source planners (lookup,
create, plan read), the streaming source runner, each task worker — compiles pyspark from source again: about
0.5 CPU-s per process, most of it on the path before the first micro-batch starts. Measured on the catch-up
benchmark's machine (docs/source.md "Speed and memory"): a cold ``hareplica run bronze`` of a small log took
11.8 s with the zip and 9.6 s without it.

How: a directory beside the user's cache holding a symbolic link to every entry of the pyspark package
directory except ``python/`` (so ``bin/``, ``jars/``, ``conf/``... are pyspark's own). With it as SPARK_HOME the
zips Spark adds to ``PYTHONPATH`` do not exist, and workers import pyspark from the same installation the
driver uses (the same version as the jars, since both come from the one pip package).

It is only used when the user has not set SPARK_HOME and pyspark is pip-installed; a Spark cluster's executors
use their own Worker's SPARK_HOME and are not affected.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

SPARK_HOME_ENV = "SPARK_HOME"
#: the pyspark package entry left out of the view: ``python/lib`` holds the source zips
LEFT_OUT = "python"


def pip_pyspark_dir() -> Path | None:
    """The directory of a pip-installed pyspark (it has ``jars/`` and ``python/lib/pyspark.zip``), else None."""
    import pyspark

    root = Path(pyspark.__file__).resolve().parent
    if (root / "jars").is_dir() and (root / LEFT_OUT / "lib" / "pyspark.zip").is_file():
        return root
    return None


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hareplica"


def spark_home_view(pyspark_dir: Path, cache_root: Path | None = None) -> Path:
    """The SPARK_HOME view of ``pyspark_dir`` (module doc), made on first use; returns its path.

    Its name holds the pyspark version and a hash of ``pyspark_dir``, so two installations never share one.
    It is created in a temporary sibling and renamed into place, so concurrent processes see it whole or not
    at all. Raises OSError when the cache directory cannot be written.
    """
    import hashlib

    import pyspark

    root = cache_root or _cache_root()
    digest = hashlib.sha256(str(pyspark_dir).encode()).hexdigest()[:12]
    home = root / f"spark-home-{pyspark.__version__}-{digest}"
    if home.is_dir():
        return home
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".spark-home-", dir=root))
    for entry in pyspark_dir.iterdir():
        if entry.name != LEFT_OUT:
            (staging / entry.name).symlink_to(entry)
    try:
        staging.rename(home)
    except OSError:  # another process made it meanwhile
        for link in staging.iterdir():
            link.unlink()
        staging.rmdir()
    return home


def use_spark_home_view() -> str | None:
    """Set SPARK_HOME to the view of the pip-installed pyspark unless SPARK_HOME is already set (then, or when
    pyspark is not pip-installed or the cache is not writable, nothing changes). Returns the SPARK_HOME set, or
    None. Call it before the first SparkSession of the process is created."""
    if os.environ.get(SPARK_HOME_ENV):
        return None
    pyspark_dir = pip_pyspark_dir()
    if pyspark_dir is None:
        return None
    try:
        home = str(spark_home_view(pyspark_dir))
    except OSError as exc:
        log.debug("SPARK_HOME view not made (%s); Python workers will import pyspark from its zip", exc)
        return None
    os.environ[SPARK_HOME_ENV] = home
    return home


def leave_spark_home_view() -> None:
    """Point SPARK_HOME back at the pip-installed pyspark when it names a view (e.g. inherited from a parent
    process): needed when Python workers run another interpreter without pyspark installed (an executor
    environment shipped with ``spark.archives``), which then imports pyspark from ``python/lib/pyspark.zip``."""
    home = os.environ.get(SPARK_HOME_ENV)
    if home and Path(home).name.startswith("spark-home-") and (Path(home) / "jars").is_symlink():
        real = pip_pyspark_dir()
        if real is not None:
            os.environ[SPARK_HOME_ENV] = str(real)
