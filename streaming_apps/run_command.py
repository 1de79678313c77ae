"""``hareplica run APP``: one of the apps (bronze, silver, gold, tables) started in a Spark of its own or over
Spark Connect, checked before Spark starts, stopped cleanly on SIGTERM or Ctrl-C (docs/cli.md "hareplica run";
the apps: docs/delta.md, docs/tables.md).
"""

from __future__ import annotations

import logging
import os
import re


def warm_workers_of(args) -> int:
    """``run``'s Python workers to warm (streaming_apps.worker_warmup): ``--warm-workers``, else the cores of a
    ``local[N]`` master; 0 for a cluster master or ``--remote`` (tasks may land on any executor).

    Raises:
        AppError: ``--warm-workers`` above 0 with a cluster master or ``--remote``.
    """
    from streaming_apps.apps import AppError
    from streaming_apps.spark_session import local_cores

    cores = None if args.remote else local_cores(args.master)
    if cores is None:
        if args.warm_workers:
            where = "--remote" if args.remote else f"--master {args.master}"
            raise AppError(f"--warm-workers {args.warm_workers}: only for a local[N] master, not with {where} "
                           "(its tasks may land on any executor)")
        return 0
    return cores if args.warm_workers is None else args.warm_workers


def spark_conf_of(args) -> dict[str, str]:
    """The Spark conf of ``run``'s ``--conf`` and ``--archives``: local archive paths made absolute (the
    ``#alias`` kept), since the driver's JVM may start in another folder (spark_session.driver_launch_dir)."""
    conf = dict(args.spark_conf)
    archives = [a.strip() for value in args.archives for a in value.split(",") if a.strip()]
    if archives:
        local = [a if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", a) else os.path.abspath(a) for a in archives]
        conf["spark.archives"] = ",".join(filter(None, [conf.get("spark.archives"), *local]))
    return conf


def s3a_jars_for(config, jars: list[str]) -> list[str]:
    """The staged hadoop-aws jars (:func:`streaming_apps.object_store.staged_s3a_jars`) when the run's checkpoints,
    or its ``--sink delta`` tables, are in an object store and ``jars`` holds no hadoop-aws; else ``[]``.

    Raises:
        AppError: they are needed and none are staged (how to add them).
    """
    from connector.storage import locations
    from streaming_apps.apps import AppError
    from streaming_apps.object_store import s3a_jars_hint, staged_s3a_jars

    needed = locations.is_uri(config.checkpoint_root) or (
        config.sink == "delta" and locations.is_uri(config.tables_root))
    if not needed or any("hadoop-aws" in os.path.basename(j) for j in jars):
        return []
    staged = staged_s3a_jars()
    if not staged:
        raise AppError(f"--checkpoint-root {config.checkpoint_root}: Spark needs hadoop-aws for s3a:// checkpoints; "
                       + s3a_jars_hint())
    return staged


def object_store_conf(config) -> dict[str, str]:
    """Spark conf for a run with locations in an object store (:func:`streaming_apps.object_store.spark_conf`);
    ``{}`` for a local run."""
    from streaming_apps.object_store import spark_conf

    return spark_conf(config.storage) if config.object_store_locations else {}


def check_remote_run(args) -> None:
    """``run --remote``: refuse the flags that set up a Spark this process would start, then reach the server.

    Over Spark Connect the server's Spark runs the queries, so its master, jars and archives are given where
    the server starts (docs/delta.md, "Spark Connect"), not to the client. Silver and gold with ``--sink
    delta`` are refused: their tables would get a string type delta-rs cannot read (same section).

    Raises:
        ConnectSessionError: such a flag was given, the URL is bad, or no server answers there.
    """
    from streaming_apps.spark_session import DEFAULT_MASTER, ConnectSessionError, check_connect_server

    server_side = [flag for flag, given in (("--master", args.master != DEFAULT_MASTER), ("--jars", bool(args.jars)),
                                            ("--archives", bool(args.archives)))
                   if given]
    if server_side:
        raise ConnectSessionError(f"--remote {args.remote}: {', '.join(server_side)} set up a Spark that `hareplica "
                                  "run` starts; over Spark Connect give them to the Connect server's start")
    if args.sink == "delta" and args.app != "bronze":
        raise ConnectSessionError(f"--remote with --sink delta: {args.app}'s tables would get string columns typed "
                                  "'string collate UTF8_BINARY' (the Connect client names the collation), which "
                                  "delta-rs cannot read (maintenance, checks, hareplica query); use --sink deltalake")
    check_connect_server(args.remote)


def run(args) -> int:
    """Run ``hareplica run APP`` on the parsed ``args`` (:func:`streaming_apps.cli.build_parser`); the exit code.

    0 after the app stopped (``--max-runtime``, available-now, SIGTERM or Ctrl-C between micro-batches); 2 after
    one ``error:`` line for a refusal before Spark starts, a Spark Connect session not opened, the Delta jars
    missing or a table's schema changed while the app started; 1 for an app that failed (AppError); 130 for a
    second signal while stopping; for another error out of Spark the code :func:`streaming_apps.preflight.spark_failure`
    gives.
    """
    from pathlib import Path

    from connector.delta.schema import DeltaSchemaMismatchError
    from connector.options.declaration import OPTIONS
    from streaming_apps.apps import (
        MAX_RUNTIME,
        AppConfig,
        AppError,
        DeltaJarsMissingError,
        StopRequest,
        app_of,
        progress_line,
        run_app,
    )
    from streaming_apps.apps.common import (
        DEFAULT_WORKDIR,
        check_table_locations,
        check_table_schemas,
        delta_jars_for,
        expand_jars,
    )
    from streaming_apps.console_log import console as console_of
    from streaming_apps.console_log import open_log_file
    from streaming_apps.preflight import (
        PreflightError,
        check_brokers,
        check_run_config,
        check_starting_offsets,
        error_line,
        spark_failure,
    )
    from streaming_apps.spark_session import (
        ConnectSessionError,
        build_connect_session,
        build_spark_session,
        local_cores,
        stop_session,
    )

    console = console_of(stderr=True)  # an error is one line, whatever the terminal width
    try:
        config = AppConfig(
            app=args.app, brokers=args.brokers or "", namesrv_addr=args.namesrv_addr, workdir=args.workdir,
            tables_root=args.tables_root,
            checkpoint_root=args.checkpoint_root, status_dir=args.status_dir, sink=args.sink,
            landing=args.landing, trigger=args.trigger,
            starting_offsets=args.starting_offsets, max_bytes_per_trigger=args.max_bytes_per_trigger,
            fail_on_data_loss=args.fail_on_data_loss, source_options={**dict(args.source_options), **({} if (
                ms := args.starting_timestamp) is None else {OPTIONS.starting_timestamp.name: str(ms)})},
            min_partitions=args.min_partitions or (None if args.remote else local_cores(args.master)),
            warm_workers=warm_workers_of(args), metadata_sync_interval_ms=args.metadata_sync_interval_ms,
            maintenance_every=args.maintenance_every, vacuum_retention_hours=args.vacuum_retention_hours,
            orphan_grace_period_ms=args.orphan_grace_ms, target_file_size=args.target_file_size,
            watermark=args.watermark, declaration=args.config,
            topics=tuple(t.strip() for t in args.topics.split(",") if t.strip()) if args.topics else None)
        app = app_of(config)  # run tables: its declaration, checked before anything is asked of the brokers
        if args.remote:
            check_remote_run(args)
        jars = delta_jars_for(config.sink, expand_jars(args.jars))  # --sink delta: the staged jars by default
        jars += s3a_jars_for(config, jars)  # a checkpoint in an object store: hadoop-aws
        # before Spark starts: options (the source's own validation), folders, the brokers themselves, a JSON
        # starting offset against them, the table folders and the tables' schemas: a refusal is one line and
        # exit 2, no Spark banner
        source_options = check_run_config(config.source_option_map(), {
            "--workdir": config.workdir, "--tables-root": config.tables_root,
            "--checkpoint-root": config.checkpoint_root, "--status-dir": config.status_dir})
        check_brokers(source_options)
        check_starting_offsets(source_options, config.checkpoint())
        check_table_locations(config, app.TABLES)
        check_table_schemas(config, app)
    except (AppError, PreflightError, ConnectSessionError) as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return 2
    stop = StopRequest()
    previous = _stop_on_signals(stop)
    try:
        if args.remote:  # the Connect server's Spark runs the queries; --conf becomes session conf
            try:
                spark = build_connect_session(args.remote, extra_conf=dict(args.spark_conf))
            except ConnectSessionError as e:
                console.print(f"[red]error:[/red] {e}", highlight=False)
                return 2
        else:
            log_file = open_log_file(config.workdir if isinstance(config.workdir, Path) else DEFAULT_WORKDIR,
                                     config.app)
            if log_file is not None:
                console.print(f"Spark's and py4j's log: {log_file}", highlight=False)
            spark = build_spark_session(f"hareplica-{args.app}", master=args.master, jars=jars,
                                        delta=args.sink == "delta" and bool(jars),
                                        extra_conf={**object_store_conf(config), **spark_conf_of(args)},
                                        c1_only_jit=config.c1_only_jit, parallel_gc=config.parallel_gc,
                                        log_file=log_file)
            _stop_on_signals(stop)  # again: PySpark's SparkContext sets a SIGINT handler of its own (cancel, raise)
        several = len(app.QUERY_NAMES) > 1
        try:
            result = run_app(spark, config, max_runtime_s=args.max_runtime, stop=stop,
                             on_progress=lambda record, rows: console.print(progress_line(record, rows, several),
                                                                            highlight=False))
        except DeltaJarsMissingError as e:
            console.print(f"[red]error:[/red] {e}", highlight=False)
            return 2
        except DeltaSchemaMismatchError as e:  # a table written while the app started: refused, nothing written
            console.print(f"[red]error:[/red] {args.app}: {error_line(e)}", highlight=False)
            return 2
        except AppError as e:
            logging.getLogger(__name__).debug("the app failed", exc_info=True)
            console.print(f"[red]error:[/red] {args.app}: {error_line(e)}", highlight=False)
            return 1
        except Exception as e:  # noqa: BLE001 - Spark's own (starting a query): read while the session is alive
            logging.getLogger(__name__).debug("the app failed", exc_info=True)
            failure = spark_failure(e)
            console.print(f"[red]error:[/red] {args.app}: {failure.line}", highlight=False)
            return failure.exit_code
        finally:
            stop_session(spark)
    except KeyboardInterrupt:  # a second Ctrl-C while the app stopped: no clean stop waited for
        console.print(f"[red]error:[/red] {args.app}: interrupted again while stopping; the checkpoint holds every "
                      "committed micro-batch", highlight=False)
        return 130
    finally:
        _restore_signals(previous)
    if result.stopped_by:
        how = (f"after --max-runtime {args.max_runtime:g} s" if result.stopped_by == MAX_RUNTIME
               else f"by {result.stopped_by}")
        console.print(f"{result.app}: stopped {how}, between micro-batches", highlight=False)
    console.print(f"{result.app}: {result.rows} rows in {result.batches} micro-batches, {len(result.maintenance)} "
                  f"table maintenance runs, {result.elapsed_s:.1f} s", highlight=False)
    for name, path in result.tables.items():
        console.print(f"  table {name}: {path}", highlight=False)
    console.print(f"  progress: {config.status_file} (hareplica status --workdir {config.workdir})", highlight=False)
    return 0


#: The signals that stop ``hareplica run`` as a stop the user asked for.
STOP_SIGNALS = ("SIGTERM", "SIGINT")


def _stop_on_signals(stop) -> dict:
    """Make SIGTERM (a service manager's stop) and SIGINT (Ctrl-C) ask ``stop`` (a StopRequest) for a clean stop
    instead of raising in whatever py4j call the main thread is in; a second signal raises KeyboardInterrupt.
    Returns the previous handlers for :func:`_restore_signals`."""
    import signal

    def handler(signum, frame):
        if stop:
            raise KeyboardInterrupt
        stop.set(signal.Signals(signum).name)

    return {name: signal.signal(getattr(signal, name), handler) for name in STOP_SIGNALS}


def _restore_signals(previous: dict) -> None:
    import signal

    for name, handler in previous.items():
        signal.signal(getattr(signal, name), handler)
