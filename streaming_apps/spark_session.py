"""One place that builds the SparkSession used by the apps, the demo, the benchmarks and the tests."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

#: Where ``make jvm-peers`` stages Spark's Delta jars (delta-spark, delta-storage), relative to a checkout.
STAGED_DELTA_JARS_DIR = Path(".jvm") / "delta" / "lib"
#: The source checkout this module was imported from (``streaming_apps/..``).
PROJECT_ROOT = Path(__file__).resolve().parent.parent


#: Spark conf that switches on Spark's own Delta Lake (needs the delta-spark jars on the classpath).
DELTA_SPARK_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def staged_delta_jars(roots: list[Path] | None = None) -> list[str]:
    """Absolute paths of the Delta jars ``make jvm-peers`` staged, or ``[]`` when there are none.

    Looks in ``STAGED_DELTA_JARS_DIR`` under each of ``roots`` (default: the current directory, then the
    checkout this module was imported from) and returns the ``*.jar`` files of the first folder holding
    any, sorted. ``hareplica run --sink delta`` and ``hareplica query --engine spark`` use them when no
    ``--jars`` are given (docs/real_peers.md, "Spark's own Delta Lake").
    """
    for root in roots if roots is not None else [Path.cwd(), PROJECT_ROOT]:
        folder = Path(root) / STAGED_DELTA_JARS_DIR
        jars = sorted(str(p.resolve()) for p in folder.glob("*.jar")) if folder.is_dir() else []
        if jars:
            return jars
    return []


def build_spark_session(app_name: str, *, master: str = "local[2]", local_dir: str | None = None,
                        ui: bool = False, extra_conf: dict[str, str] | None = None,
                        jars: list[str] | None = None, delta: bool = False):
    """Create (or get) a SparkSession with the hareplica data sources registered.

    Python workers use this interpreter (``PYSPARK_PYTHON``), so they import the installed project.
    ``extra_conf`` entries are passed through as Spark conf (e.g. ``spark.jars`` for Delta jars).
    ``jars`` (absolute paths) become ``spark.jars``; ``delta`` adds :data:`DELTA_SPARK_CONF` (give it
    only with the Delta jars: without their classes Spark logs that the extension cannot be loaded and
    ``format("delta")`` fails at first use). :func:`staged_delta_jars` finds the staged ones.
    Registers ``format("hareplica")`` and ``format("deltalake")``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName(app_name).master(master)
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    )
    if local_dir:
        builder = builder.config("spark.local.dir", local_dir)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if delta:
        for k, v in DELTA_SPARK_CONF.items():
            builder = builder.config(k, v)
    for k, v in (extra_conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register_data_sources(spark)
    return spark


def register_data_sources(spark) -> None:
    """Register hareplica's Python data sources on ``spark`` (idempotent)."""
    from connector.delta.landing import HAReplicaLandingDataSource
    from connector.delta.sink import DeltaLakeDataSource
    from connector.source import HAReplicaDataSource

    spark.dataSource.register(HAReplicaDataSource)
    spark.dataSource.register(HAReplicaLandingDataSource)
    spark.dataSource.register(DeltaLakeDataSource)
