"""hareplica's Spark connector: ``format("hareplica")``, ``format("hareplica-landing")`` and ``format("deltalake")``.

In a user's own Spark application (README "Install into your Spark")::

    import connector
    connector.register_data_sources(spark)
    spark.readStream.format("hareplica").option("brokers", "broker-a=host:10912").load()
"""

from __future__ import annotations


def register_data_sources(spark) -> None:
    """Register hareplica's three Python data sources on the SparkSession ``spark`` (idempotent): ``hareplica``
    (connector.source), ``hareplica-landing`` (connector.landing) and ``deltalake`` (connector.delta.sink).

    A source the session holds already under its name is not registered again (Spark would log a warning that
    it replaced one); over Spark Connect, where this process cannot ask, each is registered. The Python workers
    that run them are chosen first (:func:`choose_worker_python`)."""
    from connector.delta.sink import DeltaLakeDataSource
    from connector.landing import HAReplicaLandingDataSource
    from connector.source import HAReplicaDataSource

    choose_worker_python(spark)
    session = getattr(spark, "_jsparkSession", None)  # None over Spark Connect
    manager = session.sessionState().dataSourceManager() if session is not None else None
    for source in (HAReplicaDataSource, HAReplicaLandingDataSource, DeltaLakeDataSource):
        if manager is None or not manager.dataSourceExists(source.name()):
            spark.dataSource.register(source)


#: the modules a Spark Python worker must import to run hareplica's data sources
WORKER_IMPORTS = ("numpy", "pyarrow", "connector.decode")


def choose_worker_python(spark) -> str | None:
    """Make Spark's Python workers run an interpreter that imports hareplica; returns the one they run (None over
    Spark Connect, where this process does not choose).

    PySpark hands the JVM ``PYSPARK_PYTHON``, or ``python3`` from ``PATH`` when it is unset, for every Python
    function and data source registered afterwards (``SparkContext.pythonExec``; ``spark.pyspark.python`` sets the
    variable under ``spark-submit``; set on the builder only, it is applied here the same way). With neither set
    and a local master, the workers run this process's own interpreter (``sys.executable``), as a driver run from
    a virtual environment that is not activated needs.
    Otherwise, on a local master, an interpreter that cannot import :data:`WORKER_IMPORTS` is named in one
    WARNING with what it lacks (the first task would fail with ``PYTHON_DATA_SOURCE_ERROR``); on a cluster's
    master the interpreter is only logged (its hosts are not this one). Docs: docs/install.md "Install into your
    Spark".
    """
    import logging
    import os
    import subprocess
    import sys

    log = logging.getLogger(__name__)
    sc = getattr(spark, "sparkContext", None) if getattr(spark, "_jsparkSession", None) is not None else None
    if sc is None:
        return None
    local = sc.master.startswith("local")
    if not os.environ.get("PYSPARK_PYTHON"):
        conf = sc.getConf().get("spark.pyspark.python")  # spark-submit would have set the variable from it
        if conf or local:
            sc.pythonExec = conf or sys.executable
    if not local or sc.pythonExec == sys.executable:
        log.info("Spark's Python workers run %s", sc.pythonExec)
        return sc.pythonExec
    probe = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)"
    try:
        result = subprocess.run([sc.pythonExec, "-c", probe, *WORKER_IMPORTS], capture_output=True, text=True,
                                timeout=120)
        lacks = None if result.returncode == 0 else (result.stderr.strip().splitlines() or ["failed"])[-1]
    except OSError as exc:
        lacks = f"it does not start: {exc}"
    except subprocess.TimeoutExpired:
        lacks = "it did not import them within 120 s"
    if lacks is not None:
        log.warning("Spark's Python workers run %s (PYSPARK_PYTHON or spark.pyspark.python), which cannot import "
                    "hareplica's data sources (%s): install hareplica into it, or unset both to use %s",
                    sc.pythonExec, lacks, sys.executable)
    return sc.pythonExec
