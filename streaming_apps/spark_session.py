"""One place that builds the SparkSession used by the apps, the demo, the benchmarks and the tests."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

from connector import register_data_sources  # noqa: F401 - re-exported: the apps and tests call it from here
from streaming_apps.blas_threads import EXECUTOR_ENV_CONF, OPENBLAS_THREADS_VARIABLE, single_blas_thread
from streaming_apps.jvm_cds import driver_java_options
from streaming_apps.spark_home import leave_spark_home_view, pip_pyspark_dir, use_spark_home_view
from streaming_apps.worker_malloc import worker_malloc_conf

log = logging.getLogger(__name__)

#: Where ``make jvm-peers`` stages Spark's Delta jars (delta-spark, delta-storage), relative to a checkout.
STAGED_DELTA_JARS_DIR = Path(".jvm") / "delta" / "lib"
#: The source checkout this module was imported from (``streaming_apps/..``).
PROJECT_ROOT = Path(__file__).resolve().parent.parent


#: Spark conf naming the Python interpreter of the executors' workers (PySpark's "Python Package Management").
EXECUTOR_PYTHON_CONF = "spark.pyspark.python"
DRIVER_JAVA_OPTIONS_CONF = "spark.driver.extraJavaOptions"
#: The driver JVM's JIT stops at the C1 compiler (docs/deployment.md "Start-up"): for sessions whose JVM moves no
#: rows (the direct landing: Python tasks decode and write) or recompiles its code every micro-batch (gold), C2's
#: compilations are CPU spent for nothing.
C1_ONLY_JIT = "-XX:TieredStopAtLevel=1"
_JIT_OPTIONS = ("TieredStopAtLevel", "TieredCompilation")  # a user's own JIT choice wins
#: The driver JVM collects garbage with HotSpot's throughput collector (docs/deployment.md "Start-up"): for gold,
#: whose JVM aggregates every event and whose garbage dies young, G1's concurrent cycles and humongous-object
#: handling cost more CPU per micro-batch than the parallel young collections.
PARALLEL_GC = "-XX:+UseParallelGC"
_GC_OPTION = re.compile(r"-XX:[+-]Use\w*GC\b")  # a user's own collector choice wins (the JVM refuses two)

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
    return staged_jars(STAGED_DELTA_JARS_DIR, roots)


def staged_jars(folder: Path, roots: list[Path] | None = None) -> list[str]:
    """Absolute paths of the ``*.jar`` files in ``folder`` (relative to a checkout) under the first of ``roots``
    (default: the current directory, then this checkout) that holds any, sorted; ``[]`` when none does."""
    for root in roots if roots is not None else [Path.cwd(), PROJECT_ROOT]:
        where = Path(root) / folder
        jars = sorted(str(p.resolve()) for p in where.glob("*.jar")) if where.is_dir() else []
        if jars:
            return jars
    return []


def jvm_has_class(spark, name: str) -> bool:
    """True when class ``name`` loads in the session's driver JVM (a classic session; py4j's error is False)."""
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - the one handle PySpark gives to the driver JVM
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(name, False, loader)
        return True
    except Exception:  # noqa: BLE001 - py4j wraps ClassNotFoundException
        return False


#: The Spark master of a session this project builds when none is named (``hareplica run``'s and the demo's).
DEFAULT_MASTER = "local[2]"

#: Spark conf sized for a cluster that a local session sets to its cores instead (docs/delta.md, "Spark's Delta on
#: a local master"): the partitions of Delta's snapshot state (Delta's default: 50, whatever the table) and the
#: tasks Spark lists files with in parallel (default 10,000: Delta's VACUUM lists a table with that many).
LOCAL_PARALLELISM_CONFS = ("spark.databricks.delta.snapshotPartitions",
                           "spark.sql.sources.parallelPartitionDiscovery.parallelism")


def local_cores(master: str) -> int | None:
    """The cores of a ``local`` / ``local[N]`` / ``local[*]`` Spark master (None for a cluster master): the
    default ``--min-partitions``, so that one large mapped file keeps every local core busy."""
    m = re.fullmatch(r"\s*local(?:\[(\d+|\*)(?:,\s*\d+)?\])?\s*", master)
    if m is None:
        return None
    if m.group(1) is None:
        return 1
    return os.cpu_count() or 1 if m.group(1) == "*" else int(m.group(1))


def local_parallelism_conf(master: str) -> dict[str, str]:
    """``{conf: cores}`` for each of :data:`LOCAL_PARALLELISM_CONFS` when ``master`` is local (``local_cores``),
    else ``{}``: a cluster keeps Spark's and Delta's defaults. On a local master the defaults slow Spark's Delta
    several times over (cold reads, checkpoints, VACUUM: measured in docs/delta.md, "Spark's Delta on a local
    master").
    """
    cores = local_cores(master)
    return {} if cores is None else {name: str(cores) for name in LOCAL_PARALLELISM_CONFS}


def build_spark_session(app_name: str, *, master: str = DEFAULT_MASTER, local_dir: str | None = None,
                        ui: bool = False, extra_conf: dict[str, str] | None = None,
                        jars: list[str] | None = None, delta: bool = False, c1_only_jit: bool = False,
                        parallel_gc: bool = False, log_file: str | Path | None = None):
    """Create (or get) a SparkSession with the hareplica data sources registered.

    Python workers use this interpreter (``PYSPARK_PYTHON``), so they import the installed project (and, through
    :func:`streaming_apps.spark_home.use_spark_home_view`, its byte-compiled pyspark), unless
    ``extra_conf`` names ``spark.pyspark.python`` (e.g. ``./environment/bin/python`` of an archive shipped
    with ``spark.archives``): then that path, and the Spark JVM starts in :func:`driver_launch_dir`.
    Under ``spark-submit`` its ``--master`` rules and ``master`` is not applied. Otherwise a local ``master``'s
    cores size Delta's snapshot partitions and Spark's parallel file listing (:func:`local_parallelism_conf`),
    unless ``extra_conf`` names them.
    ``extra_conf`` entries are passed through as Spark conf (e.g. ``spark.jars`` for Delta jars).
    ``jars`` (absolute paths) become ``spark.jars``; ``delta`` adds :data:`DELTA_SPARK_CONF` (give it
    only with the Delta jars: without their classes Spark logs that the extension cannot be loaded and
    ``format("delta")`` fails at first use). :func:`staged_delta_jars` finds the staged ones.
    The driver JVM maps the class-data-sharing archive of :mod:`streaming_apps.jvm_cds` when one was built
    for this java and SPARK_HOME (its options go first in ``spark.driver.extraJavaOptions``). ``c1_only_jit``
    adds :data:`C1_ONLY_JIT` to them (``AppConfig.c1_only_jit``: the direct landing, gold), unless the
    user's own options choose a JIT; ``parallel_gc`` adds :data:`PARALLEL_GC` (``AppConfig.parallel_gc``: gold),
    unless they choose a collector; none of these applies under ``spark-submit``, whose driver JVM already runs.
    OpenBLAS runs one thread in the driver's and the workers' processes unless the environment chose a count
    (:func:`streaming_apps.blas_threads.single_blas_thread`; the executors get it as ``spark.executorEnv``).
    The Python workers keep freed memory for the next batch unless the environment chose glibc's malloc
    thresholds (:func:`streaming_apps.worker_malloc.worker_malloc_conf`, as ``spark.executorEnv``).
    ``log_file``: when this call launches the driver JVM (no JVM yet in this process, not under ``spark-submit``),
    the JVM's standard output and error are appended to that file (Spark's log4j console lines, the JVM's own
    notices, and what the Python workers it starts write there), not to this process's console
    (:mod:`streaming_apps.console_log`).
    Registers ``format("hareplica")`` and ``format("deltalake")``.
    """
    single_blas_thread()  # before the JVM starts: it and every Python process it starts inherit the variable
    executor_python = (extra_conf or {}).get(EXECUTOR_PYTHON_CONF)
    if executor_python:  # PySpark takes the workers' interpreter from the environment, not from the conf
        os.environ["PYSPARK_PYTHON"] = executor_python
        leave_spark_home_view()  # that interpreter has no pyspark of its own: it needs pyspark.zip
    elif os.environ.setdefault("PYSPARK_PYTHON", sys.executable) == sys.executable:
        use_spark_home_view()  # workers import this interpreter's compiled pyspark, not pyspark.zip's sources
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    submitted = submitted_by_spark_submit()  # then spark-submit's --master rules, and it may be a cluster's
    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        builder = builder.master(master)
    builder = (
        builder
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
    conf = dict(extra_conf or {})
    if not submitted:
        for name, value in local_parallelism_conf(master).items():
            conf.setdefault(name, value)
    if OPENBLAS_THREADS_VARIABLE in os.environ:  # and the executors of a cluster, which do not inherit it
        conf.setdefault(EXECUTOR_ENV_CONF, os.environ[OPENBLAS_THREADS_VARIABLE])
    for name, value in worker_malloc_conf().items():
        conf.setdefault(name, value)
    cds = None if submitted else driver_java_options(os.environ.get("SPARK_HOME") or pip_pyspark_dir())
    options = driver_java_options_conf(conf.get(DRIVER_JAVA_OPTIONS_CONF, ""), cds=cds,
                                       c1_only_jit=c1_only_jit and not submitted,
                                       parallel_gc=parallel_gc and not submitted)
    if options:
        conf[DRIVER_JAVA_OPTIONS_CONF] = options
    for k, v in conf.items():
        builder = builder.config(k, v)
    with driver_launch_dir(executor_python):
        if log_file is not None and not submitted:
            launch_driver_jvm(builder, log_file)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    skip_installed_data_source_lookup(spark)
    register_data_sources(spark)
    return spark


def launch_driver_jvm(builder, log_file: str | Path) -> bool:
    """Launch the driver JVM for ``builder``'s session (a ``SparkSession.Builder``) with its standard output and
    error appended to ``log_file``; True when it was launched here, False when this process has a JVM already.

    PySpark's ``launch_gateway`` starts the JVM (``spark-submit`` with the session's conf, as
    ``builder.getOrCreate()`` would) and takes the ``Popen`` arguments for it; the ``SparkContext`` made on that
    gateway is the one ``getOrCreate`` then uses. The JVM writes to the file from its first line on, before
    log4j is configured. It runs in a process group of its own, so that a terminal's Ctrl-C reaches this
    process only (which then stops the queries between micro-batches), not the Python processes the JVM starts
    for the data sources' planning; the JVM still ends with this process (its gateway reads this process's pipe).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # noqa: SLF001 - a JVM of this process runs already: getOrCreate uses it
        return False
    conf = SparkConf()
    for key, value in builder._options.items():  # noqa: SLF001 - the conf getOrCreate passes to the JVM's launch
        conf.set(key, value)
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as output:  # the JVM keeps its own descriptors of the file
        gateway = launch_gateway(conf, popen_kwargs={"stdout": output, "stderr": output, "process_group": 0})
    SparkContext(conf=conf, gateway=gateway)
    return True


def skip_installed_data_source_lookup(spark) -> bool:
    """Spare a session of this project the search for *installed* Python data sources; True when it was spared.

    The first use of a session's Python data sources (here :func:`register_data_sources`) makes Spark look for
    packages that ship one (``pyspark_*`` modules, found by ``pyspark.sql.worker.lookup_data_sources``) in a
    Python process of its own, and keep the answer for the JVM's life in ``DataSourceManager.dataSourceBuilders``
    (Spark 4.x; the lookup runs whenever the driver's Python command is found on the PATH). The sessions this
    project builds use only the sources it registers itself, so that cache is set to "none found" when it is
    still empty: no lookup process, and about 0.2 s less of a cold start (docs/deployment.md §7, "Start-up").
    Nothing changes when the JVM has looked already, or when this Spark has no such field (logged at debug
    level); installed sources then work as in any session.
    """
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # a Spark Connect session: the server's Spark looks up its own
        return False
    try:
        manager = getattr(getattr(jvm.org.apache.spark.sql.execution.datasources, "DataSourceManager$"), "MODULE$")
        if not manager.dataSourceBuilders().isEmpty():
            return False
        none_found = getattr(getattr(jvm.scala.collection.immutable, "Map$"), "MODULE$").empty()
        getattr(manager, "dataSourceBuilders_$eq")(jvm.scala.Some(none_found))
    except Exception:  # noqa: BLE001 - another Spark's internals: the lookup then runs as usual
        log.debug("the installed Python data sources' lookup could not be skipped", exc_info=True)
        return False
    return True


def driver_java_options_conf(own: str, *, cds: str | None, c1_only_jit: bool, parallel_gc: bool = False) -> str:
    """``spark.driver.extraJavaOptions`` of a session: the class-data-sharing options ``cds`` (or None), then
    :data:`C1_ONLY_JIT` when ``c1_only_jit`` and the user's own options ``own`` choose no JIT, then
    :data:`PARALLEL_GC` when ``parallel_gc`` and ``own`` names no collector (``-XX:+Use...GC``), then ``own``
    (space-separated JVM options; ``""`` when there are none at all)."""
    jit = C1_ONLY_JIT if c1_only_jit and not any(o in own for o in _JIT_OPTIONS) else None
    gc = PARALLEL_GC if parallel_gc and not _GC_OPTION.search(own) else None
    return " ".join(o for o in (cds, jit, gc, own) if o)


def submitted_by_spark_submit() -> bool:
    """True in a Python driver that ``spark-submit`` started (its JVM is already up and hands over its gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


@contextlib.contextmanager
def driver_launch_dir(executor_python: str | None):
    """Launch the driver's Spark JVM from a folder where a relative ``spark.pyspark.python`` resolves.

    Spark starts every Python worker with one interpreter path, the executors' ones and also those the
    driver's JVM starts for the Python data sources (planning, the streaming source's offsets), from its
    working directory. With ``./environment/bin/python`` (an archive's alias, docs/deployment.md), this
    makes a temporary folder holding ``environment`` → this process's ``sys.prefix``, makes it the working
    directory while the JVM starts, then returns to the previous one. Nothing is done for an absolute or
    no path, or under ``spark-submit`` (its JVM runs already: start it from such a folder yourself).

    Raises:
        ValueError: this environment has no file at the path below the alias (e.g. no ``bin/python``).
    """
    relative = Path(executor_python) if executor_python else None
    if relative is None or relative.is_absolute() or submitted_by_spark_submit():
        yield None
        return
    alias, *rest = [part for part in relative.parts if part != "."]
    if not rest or not (Path(sys.prefix) / Path(*rest)).exists():
        raise ValueError(f"{EXECUTOR_PYTHON_CONF}={executor_python}: the driver's environment {sys.prefix} has no "
                         f"{Path(*rest) if rest else alias}; run the driver from a virtual environment laid out as "
                         "the shipped one")
    folder = Path(tempfile.mkdtemp(prefix="hareplica-driver-"))
    (folder / alias).symlink_to(sys.prefix, target_is_directory=True)
    previous = os.getcwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(previous)




#: Session-level Spark SQL conf a Spark Connect session gets (runtime conf, settable per session over Connect;
#: the same values :func:`build_spark_session` gives a classic session).
CONNECT_SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
}


#: Spark Connect's default gRPC port (``spark.connect.grpc.binding.port``), used when a URL names none.
DEFAULT_CONNECT_PORT = 15002


class ConnectSessionError(RuntimeError):
    """A Spark Connect session cannot be made here (bad ``sc://`` URL, a classic session in this process)."""


def stop_session(spark) -> None:
    """``spark.stop()`` for a process that is about to end: stops the classic session without PySpark's two
    exit waits (docs/deployment.md §7, "Shutdown").

    - PySpark's ``SparkContext.stop`` stops the JVM's context, then shuts its accumulator server down and waits for
      it. That server handles the JVM's connection inside its one serving thread and looks at its stop flag once
      per second of polling: the wait took 0.8 s in a traced ``hareplica run``. Here the server is detached from
      the context, the JVM's context is stopped, and the server is then told to stop in a daemon thread that
      nothing waits for (the process's exit ends it; a Unix-domain socket's file is removed here). When the JVM
      ends first, the handler reads the end of its connection before it sees the stop flag; that ``EOFError`` is
      logged at debug level, where ``socketserver`` would print its stack on stderr.
    - When this process launched the driver JVM (not under ``spark-submit``), that JVM exits only once this
      process has ended (its gateway reads stdin until EOF), and HotSpot's exit then waits up to 300 ms for
      threads blocked in native calls, such as py4j's gateway server in ``accept``. Here the py4j gateway is shut
      down (its server socket and connections closed) and the JVM's stdin closed, so it exits now, beside this
      process's last steps. PySpark's gateway is reset, so a later session in this process starts a new JVM.

    A Spark Connect session, or a PySpark without these attributes, is simply stopped.
    """
    context = getattr(spark, "_sc", None)
    server = getattr(context, "_accumulatorServer", None)
    if server is None or not hasattr(server, "server_shutdown"):
        spark.stop()
        return
    context._accumulatorServer = None  # SparkContext.stop then stops the JVM's context only
    server.handle_error = _handler_error_at_debug
    try:
        spark.stop()
    finally:  # as pyspark does after the JVM's stop, without the wait
        server.server_shutdown = True  # the handler's poll loop ends at its next wake-up
        threading.Thread(target=server.shutdown, name="hareplica-accumulator-server-stop", daemon=True).start()
        if isinstance(server.server_address, str):  # Unix-domain socket (spark.python.unix.domain.socket.enabled)
            with contextlib.suppress(OSError):
                os.remove(server.server_address)
        _end_launched_jvm(type(context))


def _handler_error_at_debug(request, client_address) -> None:
    """``socketserver``'s ``handle_error`` for a stopping accumulator server: debug level, not a stack on stderr."""
    log.debug("the accumulator server's connection from %s ended", client_address, exc_info=True)


def _end_launched_jvm(context_class) -> None:
    """Shut the py4j gateway down and close the driver JVM's stdin, when this process launched that JVM
    (PySpark's ``launch_gateway`` keeps the process as ``gateway.proc``); reset PySpark's gateway.

    The JVM is told first (py4j's shutdown command: it closes its server and its callback connections), and the
    Python side's callback server is shut down only once each of its connections has read that end
    (:func:`_wait_for_callback_connections`): closing a connection from here while its thread still reads it
    made py4j log that thread's failure with a stack (``ValueError: PyMemoryView_FromBuffer(): info->buf must
    not be NULL``) after a clean run.
    """
    gateway = getattr(context_class, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    if proc is None:  # spark-submit launched this process: its JVM outlives it on purpose
        return
    context_class._gateway = None
    context_class._jvm = None
    try:
        try:
            gateway._gateway_client.shutdown_gateway()  # noqa: SLF001 - py4j's shutdown() without its server part
        except Exception:  # noqa: BLE001 - the JVM may be gone already: its connections are closed then
            log.debug("the py4j shutdown command did not reach the JVM", exc_info=True)
        _wait_for_callback_connections(gateway.get_callback_server(), CALLBACK_CLOSE_WAIT_S)
        gateway.shutdown_callback_server()
    finally:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # the gateway server's main loop exits at EOF: the JVM ends now


#: How long :func:`_end_launched_jvm` waits for the JVM's callback connections to end after its shutdown command.
CALLBACK_CLOSE_WAIT_S = 5.0


def _wait_for_callback_connections(server, timeout_s: float) -> bool:
    """Wait until every connection of py4j's callback server ``server`` (None: none started) has been closed by
    its own thread, which does so when it reads the JVM's end of it; False when one is still open after
    ``timeout_s`` seconds (it is then closed by the server's shutdown, as py4j does)."""
    if server is None:
        return True
    deadline = time.monotonic() + timeout_s
    while any(getattr(c, "socket", None) is not None for c in list(server.connections)):
        if time.monotonic() >= deadline:
            log.debug("a py4j callback connection is still open %.1f s after the JVM's shutdown", timeout_s)
            return False
        time.sleep(0.005)
    return True


def is_connect_session(spark) -> bool:
    """True when ``spark`` is a Spark Connect client session (it has no ``sparkContext`` nor py4j gateway)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def connect_address(remote: str) -> tuple[str, int]:
    """``(host, port)`` of a Spark Connect URL ``sc://HOST[:PORT][/;param=value...]`` (port 15002 when absent,
    Spark Connect's default ``spark.connect.grpc.binding.port``).

    Raises:
        ConnectSessionError: not an ``sc://`` URL, or a port that is not a number.
    """
    if not remote.startswith("sc://"):
        raise ConnectSessionError(f"--remote {remote!r}: a Spark Connect URL is sc://HOST:PORT")
    authority = remote[len("sc://"):].split("/", 1)[0]
    host, sep, port = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "")
    if not host or (sep and not port.isdigit()):
        raise ConnectSessionError(f"--remote {remote!r}: a Spark Connect URL is sc://HOST:PORT")
    return host, int(port) if sep else DEFAULT_CONNECT_PORT


def check_connect_server(remote: str, timeout_s: float = 5.0) -> None:
    """Fail fast when nothing listens at the Connect URL ``remote`` (the client would retry for minutes).

    Raises:
        ConnectSessionError: a bad URL, or no TCP connection to its host and port within ``timeout_s``.
    """
    import socket

    host, port = connect_address(remote)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as e:
        raise ConnectSessionError(f"--remote {remote}: no Spark Connect server answers at {host}:{port} ({e}); "
                                  "start one (docs/delta.md, \"Spark Connect\")") from e


def build_connect_session(remote: str, *, extra_conf: dict[str, str] | None = None):
    """A Spark Connect client session on the server at ``remote`` (``sc://HOST:PORT``), data sources registered.

    The server runs the queries: its Spark (master, jars, ``spark.pyspark.python``) is set where it starts,
    not here; ``extra_conf`` and :data:`CONNECT_SESSION_CONF` are set as session conf (runtime SQL conf only:
    Spark refuses a static one such as ``spark.jars`` over Connect). The data sources are registered on the
    session by class: the server's Python workers must import this project (docs/delta.md, "Spark Connect").
    PySpark switches this process to Connect mode (``SPARK_CONNECT_MODE_ENABLED``), so a process holds either
    a classic session or Connect ones, never both.

    Raises:
        ConnectSessionError: ``remote`` is not an ``sc://`` URL, this process already has a classic session, or
            the server refuses the session conf or the registration.
    """
    connect_address(remote)
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        spark = SparkSession.builder.remote(remote).getOrCreate()
    except PySparkRuntimeError as e:
        raise ConnectSessionError(f"--remote {remote}: {e}") from e
    try:  # the first calls that reach the server
        for key, value in {**CONNECT_SESSION_CONF, **(extra_conf or {})}.items():
            spark.conf.set(key, value)
        register_data_sources(spark)
    except Exception as e:  # noqa: BLE001 - gRPC and Spark errors of the server, e.g. a static conf
        spark.stop()
        raise ConnectSessionError(f"--remote {remote}: the server refused the session: "
                                  f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
    return spark
