"""A SPARK_HOME view for pip-installed pyspark whose Python workers import the installed, byte-compiled pyspark
instead of ``pyspark.zip``: links to every entry of the pyspark package but ``python/``, and a ``jars/`` of links
except Janino's two jars (:data:`UNSIGNED_JARS`), copied without their signature files so the driver JVM neither
verifies their classes nor leaves them out of the class-data-sharing archive (:mod:`streaming_apps.jvm_cds`).
Used only when SPARK_HOME is unset and pyspark is pip-installed. Why: docs/deployment.md "7. Start-up",
"Byte-compiled modules" and "The class-data-sharing archive".
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

SPARK_HOME_ENV = "SPARK_HOME"
#: the pyspark package entry left out of the view: ``python/lib`` holds the source zips
LEFT_OUT = "python"
#: the view's folder of jars (links, and the unsigned copies)
JARS = "jars"
#: the jars the view copies without their signature: Janino's compiler and its API (``janino-3.1.9.jar``)
UNSIGNED_JARS = re.compile(r"(janino|commons-compiler)-[0-9][^/]*\.jar")
#: a jar's signature files: ``META-INF/<signer>.SF`` and its signature block (JAR File Specification)
SIGNATURE_FILE = re.compile(r"META-INF/[^/]+\.(SF|DSA|RSA|EC)", re.IGNORECASE)
#: the view's layout, part of its name: a view made by an earlier layout is never reused
VIEW_LAYOUT = "2"


def pip_pyspark_dir() -> Path | None:
    """The directory of a pip-installed pyspark (it has ``jars/`` and ``python/lib/pyspark.zip``), else None."""
    import pyspark

    root = Path(pyspark.__file__).resolve().parent
    if (root / JARS).is_dir() and (root / LEFT_OUT / "lib" / "pyspark.zip").is_file():
        return root
    return None


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hareplica"


def unsigned_copy(jar: Path, target: Path) -> None:
    """Write ``target``: the entries of the jar ``jar``, in order and with their compression, but its signature
    files (:data:`SIGNATURE_FILE`). Raises OSError or zipfile.BadZipFile for a jar that cannot be read."""
    with zipfile.ZipFile(jar) as source, zipfile.ZipFile(target, "w") as copy:
        for entry in source.infolist():
            if not SIGNATURE_FILE.fullmatch(entry.filename):
                copy.writestr(entry, source.read(entry), compress_type=entry.compress_type)


def _stage_jars(jars: Path, staging: Path) -> None:
    staging.mkdir()
    for entry in jars.iterdir():
        if UNSIGNED_JARS.fullmatch(entry.name) and entry.is_file():
            unsigned_copy(entry, staging / entry.name)
        else:
            (staging / entry.name).symlink_to(entry)


def spark_home_view(pyspark_dir: Path, cache_root: Path | None = None) -> Path:
    """The SPARK_HOME view of ``pyspark_dir`` (module doc), made on first use; returns its path.

    Its name holds the pyspark version and a hash of ``pyspark_dir`` and :data:`VIEW_LAYOUT`, so two installations
    never share one. It is created in a temporary sibling and renamed into place, so concurrent processes see it
    whole or not at all. Raises OSError when the cache directory cannot be written or a jar cannot be copied.
    """
    import pyspark

    root = cache_root or _cache_root()
    digest = hashlib.sha256(f"{pyspark_dir}\n{VIEW_LAYOUT}".encode()).hexdigest()[:12]
    home = root / f"spark-home-{pyspark.__version__}-{digest}"
    if home.is_dir():
        return home
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".spark-home-", dir=root))
    try:
        for entry in pyspark_dir.iterdir():
            if entry.name == JARS:
                _stage_jars(entry, staging / JARS)
            elif entry.name != LEFT_OUT:
                (staging / entry.name).symlink_to(entry)
        staging.rename(home)
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if home.is_dir():  # another process made it meanwhile
            return home
        raise OSError(f"cannot make the SPARK_HOME view {home}: {exc}") from exc
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
    if home and Path(home).name.startswith("spark-home-") and (Path(home) / "bin").is_symlink():
        real = pip_pyspark_dir()
        if real is not None:
            os.environ[SPARK_HOME_ENV] = str(real)
