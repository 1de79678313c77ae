"""What every app shares: configuration, the hareplica stream, the two Delta sinks, the progress listener and
maintenance. An app (bronze, silver, gold) is a module with ``NAME``, ``TABLES``, ``QUERY_NAMES`` and
``start(spark, config, sink) -> [StreamingQuery]``; :func:`start_app` picks the sink (``deltalake``, or ``delta``
raising :class:`DeltaJarsMissingError` without its jars), adds the listener and the table maintainer, and starts
the app's queries with checkpoints in ``checkpoint_root/APP`` and appIds derived from them. The apps:
docs/delta.md "4. The apps"; maintenance: "3. Maintenance"; the listener: "6. Lag monitoring".
"""

from __future__ import annotations

import glob
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connector.delta.foreach_batch import write_batch
from connector.delta.maintenance import DEFAULT_ORPHAN_GRACE_PERIOD_MS, MaintenancePolicy, TableMaintainer
from connector.delta.merge import FinalizeRows, MergeResult, merge_batch, spark_merge_batch
from connector.delta.options import app_id_from_checkpoint, storage_option_map
from connector.errors import HAReplicaError, StorageConfigError
from connector.spark_compat import available_now_problem
from connector.storage import locations, store
from streaming_apps.checkpoints import CHECKPOINT_FILE_MANAGER_CONF, use_checkpoint_file_manager
from streaming_apps.defaults import (
    DEFAULT_METADATA_SYNC_INTERVAL_MS,
    DEFAULT_TRIGGER,
    DEFAULT_WATERMARK,
    DEFAULT_WORKDIR,
    LANDING_DIRECT,
    LANDING_SPARK,
    LANDINGS,
    SINK_DELTA,
    SINK_DELTALAKE,
    SINKS,
)
from streaming_apps.object_store import configure_session, s3a_available, s3a_jars_hint
from streaming_apps.progress_listener import ProgressFileListener
from streaming_apps.worker_warmup import WARMUP_MODULES, Warmup, start_warmup

log = logging.getLogger(__name__)

#: the apps whose tables the source's tasks can write (--landing direct)
DIRECT_LANDING_APPS = ("bronze", "silver", "tables")
#: the apps that land a declaration of typed tables (docs/tables.md): direct landing and the deltalake sink only
DECLARED_APPS = ("silver", "tables")
C1_ONLY_JIT_APPS = ("gold",)  # apps whose driver JVM runs C1 only whatever the landing (AppConfig.c1_only_jit)
PARALLEL_GC_APPS = ("gold",)  # apps whose driver JVM collects with the parallel collector (AppConfig.parallel_gc)
TRIGGER_AVAILABLE_NOW = "available-now"
#: The Spark class that tells Spark's Delta Lake jars are on the classpath.
DELTA_SPARK_CLASS = "io.delta.sql.DeltaSparkSessionExtension"
#: How long :meth:`RunningApp.close` waits for the listener to see the queries end and for maintenance.
CLOSE_WAIT_S = 30.0


class AppError(HAReplicaError):
    """An app cannot start or failed: bad configuration, missing jars, a failed streaming query."""


class DeltaJarsMissingError(AppError):
    """``--sink delta`` was asked for but Spark's Delta Lake classes are not on the classpath."""


def delta_jars_hint(spark=None) -> str:
    """How to provide Spark's Delta jars (make jvm-peers or build.gradle stage them; --jars/spark.jars pass them).

    For a Spark Connect session ``spark``: the jars and the Delta conf belong to the Connect server's start.
    """
    from streaming_apps.spark_session import is_connect_session

    if spark is not None and is_connect_session(spark):
        return ("Over Spark Connect the server's Spark runs the query: start the Connect server with the Delta jars "
                "(--jars .jvm/delta/lib/*.jar, staged by `make jvm-peers`) and --conf spark.sql.extensions="
                f"{DELTA_SPARK_CLASS} --conf spark.sql.catalog.spark_catalog="
                "org.apache.spark.sql.delta.catalog.DeltaCatalog; or use --sink deltalake, which needs no jars.")
    return ("Spark's format(\"delta\") needs the delta-spark and delta-storage jars on the classpath: run `make "
            "jvm-peers` in the project checkout (stages them in .jvm/delta/lib, used when --jars is not given), or "
            "`gradle stageDeltaJars` (build.gradle copies them into build/jars) and pass `--jars build/jars/*.jar` "
            "(or set spark.jars); or use --sink deltalake, which needs no jars.")


def delta_jars_for(sink: str, jars: Sequence[str]) -> list[str]:
    """The jars ``hareplica run`` passes to Spark: ``jars`` when given, else for ``--sink delta`` the staged ones.

    Staged jars are those of :func:`streaming_apps.spark_session.staged_delta_jars` (``.jvm/delta/lib`` of
    the current directory or of the checkout, filled by ``make jvm-peers``). Returns ``[]`` when there are
    none; :class:`DeltaSink` then refuses to start unless Spark has the classes from elsewhere.
    """
    if jars or sink != SINK_DELTA:
        return list(jars)
    from streaming_apps.spark_session import staged_delta_jars

    staged = staged_delta_jars()
    if staged:
        log.info("--sink delta: using the staged Delta jars %s", ", ".join(staged))
    return staged


#: A table, checkpoint or status location of the apps: a local folder as a ``Path``, a location in an object store as
#: its ``s3://`` text (docs/object_storage.md "Locations").
Location = Path | str


def as_location(value: str | Path, what: str) -> Location:
    """``value`` resolved (:func:`connector.storage.locations.resolve`): an absolute ``Path`` or an ``s3://`` text.

    Raises:
        AppError: an unsupported URI scheme or an S3 URI without a bucket (naming ``what``).
    """
    try:
        text = locations.resolve(value, what)
    except StorageConfigError as e:
        raise AppError(str(e)) from None
    return text if locations.is_uri(text) else Path(text).resolve()


def under(root: Location, *names: str) -> Location:
    """``root/names…`` for either kind of :data:`Location`."""
    return root.joinpath(*names) if isinstance(root, Path) else locations.join(root, *names)


@dataclass
class AppConfig:
    """Everything an app run needs. Locations default to folders under ``workdir``; each is a local folder or an
    ``s3://`` URI (:data:`Location`).

    Attributes:
        app: bronze, silver or gold.
        brokers: the source's ``brokers`` option (``name=host:haPort[/host:remotingPort],...``); empty with
            ``namesrv_addr``.
        workdir: root of tables (``tables/``), checkpoints (``checkpoints/APP``) and status (``status/APP.jsonl``).
        storage_options: object-store settings over the process's (``--storage-option``; docs/object_storage.md).
        declaration: ``tables`` only: the declaration file of its tables (docs/tables.md).
        sink: ``deltalake`` (default, no jars) or ``delta`` (Spark's Delta Lake).
        landing: bronze only: ``direct`` (the executors write the Delta files as they decode,
            :mod:`connector.landing`; deltalake sink only) or ``spark`` (rows go through Spark into the
            sink). None (default): ``direct`` for bronze with the deltalake sink, else ``spark``.
        trigger: ``available-now`` (catch up, then stop) or a processing-time interval (``1s``, ``500ms``,
            ``2 minutes``; default 1s).
        starting_offsets, max_bytes_per_trigger, fail_on_data_loss, min_partitions: the source options of the
            same name (``minPartitions`` splits a large mapped file into several tasks,
            :mod:`connector.source.driver.partitions`).
        source_options: further ``format("hareplica")`` options.
        maintenance_every: micro-batches between maintenance runs (0: never; default 100).
        vacuum_retention_hours: vacuum retention (None: the table's, 7 days).
        orphan_grace_period_ms: never-committed files older than this are removed by maintenance.
        target_file_size: bytes per Parquet file of the deltalake sink (None: 100 MiB).
        watermark: gold's event-time watermark delay (a Spark interval, default ``1 minute``).
        topics: topics holding order events (silver and gold).
        namesrv_addr: the source's ``namesrvAddr`` option (``host:port;host:port``) instead of ``brokers``
            (docs/source.md "Discovery").
        metadata_sync_interval_ms: bronze only: the period of the broker metadata sync beside the query (ms; 0:
            off; default 10,000 as RocketMQ 4.9.8's ``SlaveSynchronize``; :mod:`streaming_apps.metadata_sync`).
        warm_workers: Python workers to start while the query starts (:mod:`streaming_apps.worker_warmup`), for a
            ``local[N]`` master only: N (the CLI's default), or 0 for none (default).
    """

    app: str
    brokers: str
    workdir: Location = Path(DEFAULT_WORKDIR)
    tables_root: Location | None = None
    checkpoint_root: Location | None = None
    status_dir: Location | None = None
    sink: str = SINK_DELTALAKE
    landing: str | None = None
    trigger: str = DEFAULT_TRIGGER
    starting_offsets: str = "earliest"
    max_bytes_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    source_options: dict[str, str] = field(default_factory=dict)
    maintenance_every: int = MaintenancePolicy.every_batches
    vacuum_retention_hours: int | None = None
    orphan_grace_period_ms: int | None = DEFAULT_ORPHAN_GRACE_PERIOD_MS
    target_file_size: int | None = None
    watermark: str = DEFAULT_WATERMARK
    topics: tuple[str, ...] | None = None
    warm_workers: int = 0
    metadata_sync_interval_ms: int = DEFAULT_METADATA_SYNC_INTERVAL_MS
    namesrv_addr: str | None = None
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)  # may hold a secret
    declaration: str | Path | None = None

    def __post_init__(self) -> None:
        self.workdir = as_location(self.workdir, "--workdir")
        self.tables_root = as_location(self.tables_root or under(self.workdir, "tables"), "--tables-root")
        self.checkpoint_root = as_location(self.checkpoint_root or under(self.workdir, "checkpoints"),
                                           "--checkpoint-root")
        self.status_dir = as_location(self.status_dir or under(self.workdir, "status"), "--status-dir")
        try:
            self.storage = store.active().merged(self.storage_options, source="--storage-option")
        except StorageConfigError as e:
            raise AppError(str(e)) from None
        if self.app == "tables" and self.declaration is None:
            raise AppError("run tables needs --config FILE, the declaration of its tables (docs/tables.md)")
        if self.app != "tables" and self.declaration is not None:
            raise AppError(f"--config is the declaration of run tables; {self.app} takes none")
        if self.sink not in SINKS:
            raise AppError(f"--sink {self.sink!r} must be one of {', '.join(SINKS)}")
        direct_ok = self.app in DIRECT_LANDING_APPS and self.sink == SINK_DELTALAKE
        if self.landing is None:
            self.landing = LANDING_DIRECT if direct_ok else LANDING_SPARK
        if self.landing not in LANDINGS:
            raise AppError(f"--landing {self.landing!r} must be one of {', '.join(LANDINGS)}")
        if self.landing == LANDING_DIRECT and not direct_ok:
            raise AppError("--landing direct writes the tables with this project's Delta writer inside the source's "
                           "tasks: it is for the bronze and silver apps with --sink deltalake")
        if self.app in DECLARED_APPS and self.landing != LANDING_DIRECT:
            raise AppError(f"run {self.app} lands its tables with --landing direct and --sink deltalake "
                           "(docs/tables.md)")
        if self.metadata_sync_interval_ms < 0:
            raise AppError(f"--metadata-sync-interval-ms {self.metadata_sync_interval_ms} must be >= 0 (0: off)")
        if self.maintenance_every < 0:
            raise AppError(f"--maintenance-every {self.maintenance_every} must be >= 0")
        if trigger_kwargs(self.trigger).get("availableNow"):
            from connector.options.declaration import OPTIONS

            limit = self.source_option_map().get(OPTIONS.max_bytes_per_trigger.name)
            problem = available_now_problem(int(limit) if limit and limit.isdigit() else None)
            if problem:
                raise AppError(problem)

    def table_path(self, table: str) -> Location:
        """The folder of table ``table`` (``tables_root/table``)."""
        return under(self.tables_root, table)

    def checkpoint(self, query: str | None = None) -> Location:
        """The checkpoint folder of the app's query ``query`` (default: the app's own, ``checkpoint_root/app``)."""
        return under(self.checkpoint_root, query or self.app)

    @property
    def object_store_locations(self) -> dict[str, str]:
        """``{flag: location}`` of the run's locations that are in an object store (empty for a local run)."""
        named = {"--tables-root": self.tables_root, "--checkpoint-root": self.checkpoint_root,
                 "--status-dir": self.status_dir}
        return {flag: str(where) for flag, where in named.items() if isinstance(where, str)}

    def app_id(self, query: str | None = None) -> str:
        """The Delta txn appId of a query: derived from its checkpoint location."""
        return app_id_from_checkpoint(str(self.checkpoint(query)), query or self.app)

    @property
    def c1_only_jit(self) -> bool:
        """True when the run's driver JVM is better off with the C1 compiler only (docs/deployment.md §7): the
        direct landing (its tasks send the JVM one message per task, not rows) and gold (Spark generates its
        aggregation's code anew every micro-batch, which C2 compiled again each time, for more CPU than the
        rows took)."""
        return self.landing == LANDING_DIRECT or self.app in C1_ONLY_JIT_APPS

    @property
    def parallel_gc(self) -> bool:
        """True when the run's driver JVM is better off with HotSpot's parallel (throughput) collector than with
        G1 (docs/deployment.md §7): gold, whose JVM aggregates every event into short-lived rows; G1 spent
        0.15-0.4 CPU-s of each micro-batch, up to a third of gold's JVM CPU, in concurrent cycles started by
        humongous allocations."""
        return self.app in PARALLEL_GC_APPS

    @property
    def status_file(self) -> Location:
        """The progress file of this app (``status_dir/APP.jsonl``)."""
        return under(self.status_dir, f"{self.app}.jsonl")

    def maintenance_policy(self) -> MaintenancePolicy:
        """The maintenance schedule and actions from these settings."""
        return MaintenancePolicy(every_batches=self.maintenance_every, vacuum=True,
                                 vacuum_retention_hours=self.vacuum_retention_hours,
                                 orphan_grace_period_ms=self.orphan_grace_period_ms)

    def storage_option_map(self) -> dict[str, str]:
        """The run's object-store settings as the writers' ``storage.KEY`` options (``{}`` for a local run): Spark's
        Python data sources check and plan in Python processes of their own, which this process's settings do
        not reach."""
        return storage_option_map(self.storage) if self.object_store_locations else {}

    def source_option_map(self) -> dict[str, str]:
        """The ``format("hareplica")`` options of this run: the broker sets (``namesrv_addr`` or ``brokers``), each
        option the declaration gives ``hareplica run`` a flag for whose attribute is a field here and not None
        (connector/options/declaration.py, ``app_flag``), then ``source_options`` over them."""
        from connector.options.declaration import OPTIONS

        where = OPTIONS.namesrv_addr if self.namesrv_addr else OPTIONS.brokers
        opts = {where.name: self.namesrv_addr or self.brokers}
        for option in OPTIONS.values():
            value = getattr(self, option.attr, None) if option.app_flag else None
            if value is not None:
                opts[option.name] = str(value).lower() if isinstance(value, bool) else str(value)
        opts.update(self.source_options)
        return opts


_INTERVAL = re.compile(r"^\s*(\d+)\s*(ms|s|m|h)\s*$")
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}


def trigger_kwargs(trigger: str) -> dict[str, Any]:
    """``DataStreamWriter.trigger`` keyword arguments for a ``--trigger`` value.

    ``available-now`` → ``availableNow=True``; ``500ms``/``1s``/``2m``/``1h`` or a Spark interval
    (``10 seconds``) → ``processingTime``. Raises AppError for anything else.
    """
    text = trigger.strip().lower()
    if text in (TRIGGER_AVAILABLE_NOW, "availablenow", "available_now"):
        return {"availableNow": True}
    m = _INTERVAL.match(text)
    if m:
        return {"processingTime": f"{int(m.group(1))} {_UNITS[m.group(2)]}"}
    if re.match(r"^\d+\s+(millisecond|second|minute|hour)s?$", text):
        return {"processingTime": text}
    raise AppError(f"--trigger {trigger!r} must be available-now or an interval like 500ms, 1s, 2m, '10 seconds'")


def hareplica_stream(spark, config: AppConfig, options: dict[str, str] | None = None, schema: str | None = None):
    """``spark.readStream.format("hareplica")`` with the run's source options (or ``options``); with ``schema`` (a
    DDL string) that schema, e.g. the output of a ``batchTransform`` in ``options`` (docs/source.md)."""
    reader = spark.readStream.format("hareplica")
    if schema is not None:
        reader = reader.schema(schema)
    for k, v in (config.source_option_map() if options is None else options).items():
        reader = reader.option(k, v)
    return reader.load()


def delta_jars_available(spark) -> bool:
    """True when Spark's Delta Lake classes (:data:`DELTA_SPARK_CLASS`) load in the driver JVM.

    Over Spark Connect the client cannot reach the server's JVM: there it is True when the server's
    ``spark.sql.extensions`` names the Delta extension (a server started with the Delta jars and conf).
    """
    from streaming_apps.spark_session import is_connect_session, jvm_has_class

    if is_connect_session(spark):
        return DELTA_SPARK_CLASS in (spark.conf.get("spark.sql.extensions", "") or "")
    return jvm_has_class(spark, DELTA_SPARK_CLASS)


def expand_jars(jars: Sequence[str]) -> list[str]:
    """Absolute paths of ``--jars`` values: comma-separated lists and globs expanded.

    Raises:
        AppError: a value matches no file.
    """
    out: list[str] = []
    for value in jars:
        for item in (s.strip() for s in value.split(",")):
            if not item:
                continue
            matches = sorted(glob.glob(os.path.expanduser(item)))
            if not matches:
                raise AppError(f"--jars {item!r}: no such file. {delta_jars_hint()}")
            out.extend(os.path.abspath(m) for m in matches)
    return out


class DeltaSink:
    """Where the apps write: this project's ``format("deltalake")`` or Spark's ``format("delta")``.

    Streaming queries go through :meth:`start_stream`; foreachBatch functions that write several tables
    use :meth:`write_batch`, those that upsert (output mode update) :meth:`merge_batch` (both idempotent
    per (appId, batchId) with either sink).

    Raises (constructor):
        DeltaJarsMissingError: ``delta`` asked for and the classes are missing (message: how to add them).
    """

    def __init__(self, spark, config: AppConfig):
        self.spark = spark
        self.config = config
        self.kind = config.sink
        if self.kind == SINK_DELTA and not delta_jars_available(spark):
            raise DeltaJarsMissingError(f"--sink delta: Delta Lake classes ({DELTA_SPARK_CLASS}) are not on "
                                        f"Spark's classpath. {delta_jars_hint(spark)}")

    def start_stream(self, df, *, table: str, query_name: str, partition_by: Sequence[str] = (),
                     output_mode: str = "append", checkpoint_query: str | None = None):
        """Start ``df.writeStream`` into table ``table`` (folder under tables_root); returns the StreamingQuery."""
        cfg = self.config
        checkpoint = cfg.checkpoint(checkpoint_query)
        writer = (df.writeStream.queryName(query_name).outputMode(output_mode)
                  .option("checkpointLocation", locations.for_spark(checkpoint)).trigger(**trigger_kwargs(cfg.trigger)))
        if self.kind == SINK_DELTALAKE:
            writer = writer.format("deltalake").option("appId", cfg.app_id(checkpoint_query))
            for key, value in cfg.storage_option_map().items():
                writer = writer.option(key, value)
            if partition_by:
                writer = writer.option("partitionBy", ",".join(partition_by))
            if cfg.target_file_size:
                writer = writer.option("targetFileSize", str(cfg.target_file_size))
        else:
            writer = writer.format("delta")
            if partition_by:
                writer = writer.partitionBy(*partition_by)
        log.info("starting %s into %s table %s (checkpoint %s)", query_name, self.kind, cfg.table_path(table),
                 checkpoint)
        return writer.start(str(cfg.table_path(table)) if self.kind == SINK_DELTALAKE
                            else locations.for_spark(cfg.table_path(table)))

    def write_batch(self, df, *, table: str, batch_id: int, partition_by: Sequence[str] = (),
                    checkpoint_query: str | None = None) -> None:
        """Append a foreachBatch DataFrame to ``table`` exactly once per (query appId, ``batch_id``)."""
        cfg = self.config
        path = str(cfg.table_path(table))
        app_id = cfg.app_id(checkpoint_query)
        if self.kind == SINK_DELTALAKE:
            write_batch(df, path, app_id, batch_id, partition_by=partition_by or None,
                        target_file_size=cfg.target_file_size)
            return
        writer = df.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", batch_id)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(path)

    def merge_batch(self, df, *, table: str, batch_id: int, keys: Sequence[str], partition_by: Sequence[str] = (),
                    finalize: FinalizeRows | None = None, checkpoint_query: str | None = None) -> MergeResult:
        """Upsert a small foreachBatch DataFrame into ``table`` by ``keys``, exactly once per (appId, ``batch_id``).

        One Delta MERGE per batch (:mod:`connector.delta.merge`): delta-rs on the driver (the rows are collected as
        Arrow) for ``deltalake``, Spark's ``MERGE INTO`` for ``delta``. With ``finalize``, ``df`` holds no flag
        column: the batch's own rows get it by ``finalize``'s rule first, as the table's others do: in Arrow after
        the collect for ``deltalake`` (:meth:`FinalizeRows.flagged_arrow`: no projection for Spark to plan and
        compile anew each batch, its cut-off being a new literal every time), with ``withColumn`` for ``delta``.
        """
        cfg = self.config
        path = str(cfg.table_path(table))
        app_id = cfg.app_id(checkpoint_query)
        if self.kind == SINK_DELTALAKE:
            rows, schema = df.toArrow(), df.schema
            if finalize is not None:
                rows, schema = finalize.flagged_arrow(rows, schema)
            return merge_batch(rows, schema, path, app_id, batch_id, keys=keys, partition_by=partition_by,
                               finalize=finalize)
        if finalize is not None:
            df = finalize.flagged_spark(df)
        return spark_merge_batch(df, path, app_id, batch_id, keys=keys, partition_by=partition_by, finalize=finalize)

    def maintenance_runner(self, policy: MaintenancePolicy) -> Callable[[str], dict[str, Any]]:
        """``runner(table_uri) -> result`` for the TableMaintainer: delta-rs, or Spark SQL for format("delta")."""
        if self.kind == SINK_DELTALAKE:
            return policy.run

        def spark_sql(table_uri: str) -> dict[str, Any]:
            # Spark's Delta writes checkpoints itself (every 10 commits); OPTIMIZE and VACUUM are SQL.
            metrics = self.spark.sql(f"OPTIMIZE delta.`{table_uri}`").collect()
            compaction = metrics[0]["metrics"].asDict() if metrics else {}
            retention = policy.vacuum_retention_hours
            if policy.vacuum:  # VACUUM reports the table, not the files it deleted: "vacuumed" stays empty
                self.spark.sql(f"VACUUM delta.`{table_uri}`" + (f" RETAIN {retention} HOURS" if retention else ""))
            version = self.spark.sql(f"DESCRIBE HISTORY delta.`{table_uri}` LIMIT 1").collect()[0]["version"]
            return {"version": version, "compaction": compaction, "vacuumed": [], "orphans": []}

        return spark_sql


@dataclass
class RunningApp:
    """A started app: its queries, progress listener, maintainer and the warm-up of its Python workers
    (:mod:`streaming_apps.worker_warmup`; None without one). Use :meth:`wait` then :meth:`close`."""

    config: AppConfig
    spark: Any
    queries: list
    listener: ProgressFileListener
    maintainer: TableMaintainer
    tables: dict[str, Path]
    warmup: Warmup | None = None

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for every query to end (AvailableNow) or ``timeout_s``; False when one still runs.

        Raises:
            AppError: a query failed (its exception in the message).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for q in self.queries:
            # Spark's awaitTermination takes whole milliseconds and refuses 0 ('Timeout has to be positive')
            remaining = None if deadline is None else max(0.001, deadline - time.monotonic())
            try:
                finished = q.awaitTermination(remaining) if remaining is not None else q.awaitTermination()
            except Exception as e:  # noqa: BLE001 - StreamingQueryException
                raise AppError(f"{self.config.app}: query {q.name} failed: {e}") from e
            if finished is False:
                return False
        return True

    def stop(self, batch_wait_s: float = 0.0) -> list[str]:
        """Stop every query, as ``StreamingQuery.stop()`` does; the checkpoint stays consistent either way.

        With ``batch_wait_s`` > 0 a query whose micro-batch is running (its status' ``isTriggerActive``) is
        first given up to that many seconds to commit it, so that the stop comes between micro-batches; a
        micro-batch still running then is interrupted (Spark runs it again at the next start). Returns one line
        per query that could not be stopped or that ended with an error (empty: a clean stop).
        """
        problems = []
        for q in self.queries:
            try:
                if q.isActive:  # a query that ended (Trigger.AvailableNow) has nothing to stop
                    if batch_wait_s > 0:
                        _wait_between_batches(q, batch_wait_s)
                    q.stop()
                error = q.exception()
            except Exception as e:  # noqa: BLE001 - py4j and Spark errors of a query that did not stop
                log.debug("stopping %s", q.name, exc_info=True)
                problems.append(f"query {q.name} did not stop: {_first_line(e)}")
                continue
            if error is not None:
                problems.append(f"query {q.name} failed: {_first_line(error)}")
        return problems

    def close(self, batch_wait_s: float = 0.0) -> list[str]:
        """End the worker warm-up (its job cancelled if it still runs: :meth:`Warmup.end`), stop the queries
        (:meth:`stop` with ``batch_wait_s``), let the listener record their end, wait for maintenance, remove
        the listener. Returns :meth:`stop`'s problems, plus one when the listener did not see every query end."""
        if self.warmup is not None and not self.warmup.end(CLOSE_WAIT_S):
            log.warning("the worker warm-up still runs after %.0f s; leaving it in the background", CLOSE_WAIT_S)
        problems = self.stop(batch_wait_s)
        names = {q.name for q in self.queries}
        if not self.listener.wait_for(lambda records: names <= {r.get("query") for r in records
                                                                if r.get("event") == "terminated"}, CLOSE_WAIT_S):
            problems.append(f"the progress listener did not see every query end within {CLOSE_WAIT_S:.0f} s")
        if not self.maintainer.wait(CLOSE_WAIT_S):
            log.warning("maintenance still running after %.0f s; leaving it in the background", CLOSE_WAIT_S)
        try:
            self.spark.streams.removeListener(self.listener)
        except Exception as e:  # noqa: BLE001
            log.warning("removing the progress listener: %s", e)
        return problems

    @property
    def progress(self) -> list[dict[str, Any]]:
        """The progress lines recorded so far (this run)."""
        return [r for r in list(self.listener.records) if r.get("event") == "progress"]


def _wait_between_batches(query, timeout_s: float, poll_s: float = 0.05) -> bool:
    """Wait until ``query`` (a StreamingQuery) runs no micro-batch (its status' ``isTriggerActive`` is false) or
    has ended; False when one still runs after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("isTriggerActive"):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def _first_line(error: BaseException) -> str:
    from streaming_apps.preflight import error_line  # our error's own line inside Spark's wrapping, if any

    return error_line(error)


def check_table_locations(config: AppConfig, tables: Sequence[str]) -> None:
    """Each table folder must hold a readable Delta table, or be missing or empty (connector.delta.location).

    Checked for both sinks before any query starts (Spark's format("delta") would otherwise fail later
    with a JVM trace, or silently create a table in a folder holding other files).

    Raises:
        AppError: one line naming the table, its path and what is wrong there.
    """
    from connector.delta.location import check_new_table_location, open_delta_table
    from connector.errors import DeltaTablePathError

    for table in tables:
        uri = str(config.table_path(table))
        try:
            if open_delta_table(uri) is None:
                check_new_table_location(uri)
        except DeltaTablePathError as e:
            raise AppError(f"table {table}: {e}") from e


def check_table_schemas(config: AppConfig, app_module) -> None:
    """The app's own check of the tables it would append to (``app_module.check_tables(config)``, when it has
    one), made with deltalake before Spark starts: a table of another schema is refused before anything runs.

    Raises:
        AppError: one line naming the table and every difference (the table is not touched).
    """
    check = getattr(app_module, "check_tables", None)
    if check is not None:
        check(config)


def start_app(spark, config: AppConfig, app_module) -> RunningApp:
    """Start ``app_module`` (bronze, silver or gold) as described in the module docstring.

    Raises:
        DeltaJarsMissingError: ``--sink delta`` without the jars (nothing was started).
        AppError: bad configuration, a table folder that is unreadable or not empty, or a checkpoint in an object
            store without hadoop-aws on Spark's classpath (nothing was started).
    """
    from streaming_apps.spark_session import register_data_sources

    # first, so that the workers start on the second core while the driver starts the query
    warmup = start_warmup(spark, config.warm_workers, (*WARMUP_MODULES, *app_module.WORKER_MODULES))
    register_data_sources(spark)
    remote = locations.is_uri(config.checkpoint_root)
    if remote and not s3a_available(spark):
        raise AppError(f"--checkpoint-root {config.checkpoint_root}: Spark's classpath has no hadoop-aws for s3a:// "
                       f"checkpoints; {s3a_jars_hint()}")
    previous_manager = spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF, None)
    use_checkpoint_file_manager(spark, remote=remote)
    configure_session(spark, config.storage)
    store.use(config.storage)
    sink = DeltaSink(spark, config)
    check_table_locations(config, app_module.TABLES)
    policy = config.maintenance_policy()
    query_names = list(app_module.QUERY_NAMES)
    listener_ref: list[ProgressFileListener] = []

    def on_maintenance(summary: dict[str, Any]) -> None:
        listener_ref[0].write_event("maintenance", query=query_names[0], **summary)

    maintainer = TableMaintainer([str(config.table_path(t)) for t in app_module.TABLES], policy,
                                 runner=sink.maintenance_runner(policy), on_result=on_maintenance)

    def on_progress(record: dict[str, Any]) -> None:
        if record.get("batchId") is not None:
            maintainer.batch_completed(int(record["batchId"]))

    listener = ProgressFileListener(config.status_file, query_names=query_names, on_progress=on_progress)
    listener_ref.append(listener)
    spark.streams.addListener(listener)
    try:
        queries = app_module.start(spark, config, sink)
    except BaseException:
        spark.streams.removeListener(listener)
        raise
    finally:
        if remote:  # each query keeps the class it started with; the session's later local queries need theirs
            if previous_manager is None:
                spark.conf.unset(CHECKPOINT_FILE_MANAGER_CONF)
            else:
                spark.conf.set(CHECKPOINT_FILE_MANAGER_CONF, previous_manager)
    return RunningApp(config=config, spark=spark, queries=queries, listener=listener, maintainer=maintainer,
                      tables={t: config.table_path(t) for t in app_module.TABLES}, warmup=warmup)
