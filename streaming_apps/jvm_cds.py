"""Class data sharing for the Spark driver JVM: a dynamic AppCDS archive of the classes a hareplica run loads.

:func:`build_archive` (``python -m streaming_apps.jvm_cds``; ``make`` runs it) runs the demo's bronze job in a
child process whose driver JVM writes the archive (``-XX:ArchiveClassesAtExit``) and keeps it in the user's cache
under a name keyed by the java binary and the Spark jars directory; :func:`driver_java_options` gives
``build_spark_session`` the options that map it when one exists. Why, what it holds and who uses it:
docs/deployment.md "7. Start-up", "The class-data-sharing archive".
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from connector.retry import poll_until

log = logging.getLogger(__name__)

CACHE_ENV = "HAREPLICA_CACHE"
#: Set in the child process of build_archive: the path its driver JVM writes the archive to at exit.
DUMP_ENV = "HAREPLICA_CDS_DUMP"
#: Messages of the training run (enough for several micro-batches and a Delta commit or two).
TRAINING_MESSAGES = 3_000
BUILD_TIMEOUT_S = 300
#: A JVM that cannot use the archive says so in these log tags; off, it just starts without it.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def cache_dir() -> Path:
    """``$HAREPLICA_CACHE`` or ``~/.cache/hareplica``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "hareplica")


def java_binary() -> Path | None:
    """The java that Spark's launcher runs (``$JAVA_HOME/bin/java``, else ``java`` on PATH), resolved; None
    when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path(spark_home: str | os.PathLike) -> Path | None:
    """Where the archive for this java binary and ``spark_home`` lives (it may not exist yet); None without
    java. The key covers the java binary (path, size, mtime) and the names of ``spark_home/jars``, the
    driver's class path."""
    java = java_binary()
    if java is None:
        return None
    stat = java.stat()
    jars = Path(spark_home) / "jars"
    names = sorted(p.name for p in jars.iterdir()) if jars.is_dir() else []
    key = hashlib.sha256("\n".join([str(java), str(stat.st_size), str(stat.st_mtime_ns), str(Path(spark_home)),
                                    *names]).encode()).hexdigest()[:16]
    return cache_dir() / f"spark-cds-{key}.jsa"


def driver_java_options(spark_home: str | os.PathLike | None) -> str | None:
    """JVM options for the driver: write the archive (in build_archive's child), else map an existing one;
    None when neither applies."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump} {QUIET}"
    path = archive_path(spark_home) if spark_home else None
    if path is not None and path.is_file():
        return f"-XX:SharedArchiveFile={path} -Xshare:auto {QUIET}"
    return None


def build_archive(timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Run the training job in a child process and install its archive; returns the archive's path.

    Raises:
        RuntimeError: no java, the child failed or wrote no archive (its output's tail in the message).
    """
    from streaming_apps.spark_home import use_spark_home_view

    use_spark_home_view()
    target = archive_path(os.environ.get("SPARK_HOME") or _pyspark_dir())
    if target is None:
        raise RuntimeError("no java on PATH or in JAVA_HOME: cannot build the Spark class-data-sharing archive")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hareplica-cds-") as tmp:
        dump = Path(tmp) / "spark.jsa"
        env = {**os.environ, DUMP_ENV: str(dump)}
        train = [sys.executable, "-m", "streaming_apps.cli", "demo", "--workdir", str(Path(tmp) / "demo"),
                 "--messages", str(TRAINING_MESSAGES)]  # the demo's bronze job: broker stub, source, Delta sink
        done = subprocess.run(train, env=env, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
        _wait_for_writers(dump, timeout_s)
        if done.returncode != 0 or not dump.is_file():
            tail = (done.stdout + done.stderr)[-2000:]
            wrote = "an" if dump.is_file() else "no"
            raise RuntimeError(f"the training run exited {done.returncode} and wrote {wrote} archive:\n{tail}")
        staged = target.with_suffix(f".{os.getpid()}.tmp")
        shutil.move(str(dump), staged)
        os.replace(staged, target)  # atomic: a concurrent start sees the old file or the new one
    return target


def _wait_for_writers(dump: Path, timeout_s: float) -> None:
    """Wait until no process started with ``-XX:ArchiveClassesAtExit=<dump>`` runs: the JVM writes the archive
    as it exits, which may be after the Python process that started it has ended."""
    needle = f"-XX:ArchiveClassesAtExit={dump}".encode()

    def no_writer() -> bool:
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                if needle in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return False
            except OSError:
                continue
        return True

    poll_until(no_writer, timeout_s, 0.2)


def _pyspark_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streaming_apps.jvm_cds",
                                     description="Build the Spark driver JVM's class-data-sharing archive.")
    parser.parse_args(argv)
    try:
        path = build_archive()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        # a missing archive only costs start-up time: say so in one line, never fail the caller's setup
        print(f"hareplica: no Spark class-data-sharing archive ({str(exc).splitlines()[0]}); "
              "Spark starts without it", file=sys.stderr)
        log.debug("archive build failed", exc_info=True)
        return 0
    print(f"hareplica: Spark class-data-sharing archive {path} ({path.stat().st_size // (1024 * 1024)} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
