"""The `hareplica` command line: one entry point, one sub-command per job.

Sub-commands: ``inspect-commitlog``, ``broker``, ``produce``, ``demo``, ``run APP`` (bronze, silver, gold),
``query "SQL"``, ``maintain TABLE`` and ``status`` (docs/delta.md describes the last four).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys

from streaming_apps.arg_types import (
    DeprecatedAlias,
    Parser,
    add_storage_option_arg,
    add_where_flags,
    key_value,
    non_negative,
    offset,
    positive,
    seconds,
)


def installed_version() -> str:
    """The installed distribution's version (pyproject.toml ``version``), or ``unknown`` when run from a checkout
    that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hareplica")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hareplica",
        description="Replicate a RocketMQ CommitLog into Delta Lake over the classic HA protocol.")
    parser.add_argument("--log-level", default="WARNING",
                        help="level of hareplica's log records on the console (default WARNING); DEBUG also shows "
                             "Spark's and py4j's output and the traceback of an error")
    parser.add_argument("--verbose", action="store_true",
                        help="show Spark's and py4j's output on the console instead of the log file that commands "
                             "starting Spark write (WORKDIR/logs/NAME.log)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}",
                        help="print hareplica's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("inspect-commitlog", help="print every record of a CommitLog folder (offline)")
    p.add_argument("directory", help="CommitLog folder holding 20-digit mapped files")
    p.add_argument("--from", dest="from_offset", type=offset, default=0,
                   help="first CommitLog offset to print (records at or after it)")
    p.add_argument("--format", choices=("jsonl", "table"), default="jsonl",
                   help="jsonl: the fields of messages.jsonl; table: a readable summary")
    p.add_argument("--stop-at-first", action="store_true",
                   help="exit 2 at the first record with a bad body (default: list every record, flag the bad "
                        "ones on stderr with offset and file, exit 2 at the end)")

    p = sub.add_parser("broker", help="run the bundled RocketMQ 4.9.8 broker stub (python -m broker_stub)",
                       add_help=False)
    p.add_argument("broker_args", nargs=argparse.REMAINDER, help="arguments of python -m broker_stub (-c broker.conf)")

    p = sub.add_parser("produce", help="send a generated load to a broker with the bundled producer")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-b", "--broker-addr", dest="broker", help="the broker's remoting address HOST:PORT")
    where.add_argument("--broker", dest="broker", action=DeprecatedAlias, new="--broker-addr")
    p.add_argument("-t", "--topic", default=None,
                   help="topic (comma-separate several to spread the load); required for --workload load")
    p.add_argument("--count", type=positive, required=True, help="number of messages")
    p.add_argument("--body-bytes", type=positive, default=256, help="body size in bytes (default 256)")
    p.add_argument("--workload", choices=("load", "orders"), default="load",
                   help="load: generated bodies of --body-bytes (default); orders: the msgpack order events the "
                        "silver and gold apps decode, on their four topics")
    p.add_argument("--seed", type=int, default=20240611, help="orders: random seed of the events")

    p = sub.add_parser("demo", help="the main job on an embedded default: broker stub, workload, bronze Delta table")
    p.add_argument("--workdir", default="hareplica-demo", help="folder for the broker store, checkpoint and tables")
    p.add_argument("--messages", type=positive, default=100_000, help="messages to produce (default 100000)")
    p.add_argument("--keep", action="store_true", help="keep an existing workdir instead of starting fresh")

    _add_run_parser(sub)
    _add_query_parser(sub)
    _add_maintain_parser(sub)
    _add_status_parser(sub)
    from streaming_apps.restore_command import add_restore_parser

    add_restore_parser(sub)
    from streaming_apps.read_command import add_read_parser

    add_read_parser(sub)
    return parser


def _add_workdir_args(p: argparse.ArgumentParser, *, tables: bool = True) -> None:
    from streaming_apps.defaults import DEFAULT_WORKDIR

    p.add_argument("--workdir", default=DEFAULT_WORKDIR,
                   help=f"root of tables/, checkpoints/ and status/: a folder or s3://bucket/prefix "
                        f"(default {DEFAULT_WORKDIR})")
    if tables:
        p.add_argument("--tables-root", default=None, help="folder of the Delta tables (default WORKDIR/tables)")
    add_storage_option_arg(p)


#: what ``hareplica run``'s help adds to a source flag's meaning (the flag and the rest come from the declaration)
_SOURCE_FLAG_NOTES = {
    "starting_offsets": "; first start only",
    "starting_timestamp": "; wins over --starting-offsets; first start only",
}
#: the default ``hareplica run``'s help shows where the run's differs from the declaration's
_SOURCE_FLAG_DEFAULTS = {"min_partitions": "the cores of a local[N] master, else none"}


def _add_source_flags(p) -> None:
    """``hareplica run``'s flags of the source options the declaration marks ``app_flag``: each one's flag
    (``Option.flag``), dest (its attribute), type, default and help from its record
    (connector/options/declaration.py); a boolean true by default gets a ``--no-`` flag that turns it off."""
    from connector.options.declaration import OPTIONS

    for option in OPTIONS.values():
        if not option.app_flag:
            continue
        text = f"{option.meaning} (the source's {option.name}{_SOURCE_FLAG_NOTES.get(option.attr, '')})"
        if option.kind == "bool":
            p.add_argument(option.flag, dest=option.attr, action="store_false" if option.default else "store_true",
                           help=f"set {option.name} to {str(not option.default).lower()}: {text}")
            continue
        kind = {"int": positive if (option.minimum or 0) >= 1 else non_negative}.get(option.kind, str)
        default = _SOURCE_FLAG_DEFAULTS.get(option.attr, "none" if option.default is None else option.default)
        p.add_argument(option.flag, dest=option.attr, type=kind, default=option.default,
                       metavar="N" if option.kind == "int" else "VALUE", help=f"{text}; default {default}")


def _add_run_parser(sub) -> None:
    from connector.delta.options import (
        DEFAULT_MAINTENANCE_EVERY_BATCHES,
        DEFAULT_ORPHAN_GRACE_PERIOD_MS,
        DEFAULT_TARGET_FILE_SIZE_BYTES,
    )
    from streaming_apps.defaults import (
        DEFAULT_METADATA_SYNC_INTERVAL_MS,
        DEFAULT_TRIGGER,
        DEFAULT_WATERMARK,
        LANDINGS,
        SINKS,
    )
    from streaming_apps.spark_session import DEFAULT_MASTER

    p = sub.add_parser("run", help="run a streaming app: bronze, silver or gold (docs/delta.md)")
    p.add_argument("app", choices=("bronze", "silver", "gold", "tables"),
                   help="the app; tables: the typed tables of a declaration file (--config)")
    add_where_flags(p, required=True)
    p.add_argument("--config", default=None, metavar="FILE",
                   help="run tables: the declaration file (TOML) of the tables (docs/tables.md)")
    _add_workdir_args(p)
    p.add_argument("--checkpoint-root", default=None, help="folder of the checkpoints (default WORKDIR/checkpoints)")
    p.add_argument("--status-dir", default=None, help="folder of the progress files (default WORKDIR/status)")
    p.add_argument("--sink", choices=SINKS, default="deltalake",
                   help="deltalake: this project's sink, no jars (default); delta: Spark's format('delta'), "
                        "needs the Delta jars: --jars, else those `make jvm-peers` staged in .jvm/delta/lib")
    p.add_argument("--landing", choices=LANDINGS, default=None,
                   help="bronze, silver: direct = the executors write the Delta files as they decode "
                        "(format('hareplica-landing'); the default with --sink deltalake); spark = hareplica -> "
                        "Spark -> the sink (the default with --sink delta, and gold's only way)")
    p.add_argument("--jars", nargs="+", default=[], metavar="JAR",
                   help="jars for spark.jars (comma lists and globs allowed), e.g. build/jars/*.jar")
    p.add_argument("--trigger", default=DEFAULT_TRIGGER,
                   help=f"available-now (catch up, then stop) or an interval: 500ms, 1s, 2m "
                        f"(default {DEFAULT_TRIGGER})")
    _add_source_flags(p)
    p.add_argument("--warm-workers", type=non_negative, default=None,
                   help="Python workers to start while the query starts, so that its first micro-batch does not "
                        "wait for them (default: the cores of a local[N] master; 0 = none; cluster masters and "
                        "--remote: none)")
    p.add_argument("--option", dest="source_options", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="any other format('hareplica') option (repeatable)")
    p.add_argument("--metadata-sync-interval-ms", type=non_negative, default=DEFAULT_METADATA_SYNC_INTERVAL_MS,
                   metavar="MS",
                   help="bronze: land the masters' topics, subscription groups, consumer and delay offsets in the "
                        "broker_* tables every MS, as a RocketMQ slave syncs them; 0 = off "
                        f"(default {DEFAULT_METADATA_SYNC_INTERVAL_MS}; docs/metadata.md)")
    p.add_argument("--maintenance-every", type=non_negative, default=DEFAULT_MAINTENANCE_EVERY_BATCHES,
                   help="compact, checkpoint and vacuum every N micro-batches; 0 = never "
                        f"(default {DEFAULT_MAINTENANCE_EVERY_BATCHES})")
    p.add_argument("--vacuum-retention-hours", type=non_negative, default=None,
                   help="vacuum retention (default: the table's delta.deletedFileRetentionDuration, 168 h)")
    p.add_argument("--orphan-grace-ms", type=non_negative, default=DEFAULT_ORPHAN_GRACE_PERIOD_MS,
                   help="maintenance removes never-committed files older than this "
                        f"(default {DEFAULT_ORPHAN_GRACE_PERIOD_MS})")
    p.add_argument("--target-file-size", type=positive, default=None,
                   help=f"bytes per Parquet file of the deltalake sink (default {DEFAULT_TARGET_FILE_SIZE_BYTES})")
    p.add_argument("--watermark", default=DEFAULT_WATERMARK,
                   help=f"gold: event-time watermark delay (default '{DEFAULT_WATERMARK}')")
    p.add_argument("--topics", default=None,
                   help="silver/gold: comma-separated order topics, each TOPIC or TOPIC:TagA || TagB "
                        "(default the workload's)")
    p.add_argument("--master", default=DEFAULT_MASTER,
                   help=f"Spark master, e.g. spark://HOST:7077 (default {DEFAULT_MASTER}; under spark-submit, "
                        "its --master)")
    p.add_argument("--archives", action="append", default=[], metavar="ARCHIVE#ALIAS",
                   help="spark.archives: e.g. the packed environment hareplica-env.tar.gz#environment that "
                        "python -m streaming_apps.package builds (repeatable; docs/deployment.md)")
    p.add_argument("--conf", dest="spark_conf", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="any Spark conf, e.g. spark.pyspark.python=./environment/bin/python (repeatable)")
    p.add_argument("--max-runtime", type=seconds, default=None, metavar="SECONDS",
                   help="stop the app after this many seconds, between micro-batches (a micro-batch in flight "
                        "commits first), print what it landed and exit 0 (default: run until the trigger ends it "
                        "or SIGTERM / Ctrl-C)")
    p.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                   help="run the app's queries on this Spark Connect server instead of a Spark started here "
                        "(the server's Python imports this project; docs/delta.md, 'Spark Connect')")


def _add_query_parser(sub) -> None:
    from streaming_apps.defaults import DEFAULT_MAX_ROWS, ENGINES, FORMATS

    p = sub.add_parser("query", help="run SQL over the Delta tables (deltalake's engine, no JVM; or Spark SQL)")
    p.add_argument("sql", help='the statement, e.g. "SELECT topic, count(*) FROM bronze GROUP BY topic"')
    _add_workdir_args(p)
    p.add_argument("--table", dest="tables", type=key_value, action="append", default=[], metavar="NAME=PATH",
                   help="register another Delta table (repeatable)")
    p.add_argument("--format", choices=FORMATS, default="table", help="table (default), jsonl or csv")
    p.add_argument("--max-rows", type=non_negative, default=DEFAULT_MAX_ROWS,
                   help=f"rows shown in table format (default {DEFAULT_MAX_ROWS}; 0 = all)")
    p.add_argument("--engine", choices=ENGINES, default=ENGINES[0],
                   help="deltalake: delta-rs + DataFusion, no JVM (default, about a second); spark: Spark SQL over "
                        "format('delta') with the Delta jars (~10 s to start Spark)")
    p.add_argument("--jars", nargs="+", default=[], metavar="JAR",
                   help="--engine spark: jars for spark.jars (default: the Delta jars make jvm-peers staged)")


def _add_maintain_parser(sub) -> None:
    p = sub.add_parser("maintain", help="compact, checkpoint, vacuum and clean a Delta table now")
    p.add_argument("table", help="a table name under --tables-root, or a table path")
    _add_workdir_args(p)
    p.add_argument("--no-compact", dest="compact", action="store_false", help="skip compaction")
    p.add_argument("--target-size", type=positive, default=None,
                   help="bytes per compacted file (default delta-rs's 104857600)")
    p.add_argument("--no-checkpoint", dest="checkpoint", action="store_false", help="skip the Delta checkpoint")
    p.add_argument("--no-vacuum", dest="vacuum", action="store_false", help="skip vacuum")
    p.add_argument("--vacuum-retention-hours", type=non_negative, default=None,
                   help="vacuum retention (default: the table's, 168 h; shorter is refused by delta-rs)")
    p.add_argument("--orphan-grace-ms", type=non_negative, default=None,
                   help="also remove never-committed sink files older than this many ms")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_status_parser(sub) -> None:
    p = sub.add_parser("status", help="progress and broker lag of the apps, from their progress files")
    p.add_argument("paths", nargs="*", help="progress files or folders (default WORKDIR/status)")
    _add_workdir_args(p)
    add_where_flags(p, required=False, purposes={
        "brokers": "also ask these brokers for their max offset now (lag now)",
        "namesrv_addr": "also show the broker sets these name servers route to, where each is read from, and their "
                        "max offset now (lag now)"})
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.add_argument("--prometheus", action="store_true",
                   help="print the lag and last batch of each query as Prometheus metrics (text format)")


def _tables_root(args) -> str:
    import os

    return args.tables_root or os.path.join(args.workdir, "tables")


def _table_location(args) -> str:
    """``maintain``'s table: a bare name under ``--tables-root`` (always, when that is an object store; on a disk,
    when that folder holds a table), else the path or URI given."""
    from connector.storage import locations

    root = _tables_root(args)
    bare = "/" not in args.table and "://" not in args.table
    if bare and locations.is_uri(root):
        return locations.join(locations.resolve(root, "--tables-root"), args.table)
    candidate = os.path.join(root, args.table)
    return candidate if os.path.isdir(os.path.join(candidate, "_delta_log")) else args.table


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


def _run(args) -> int:
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


def _maintain(args) -> int:
    import json
    import time

    from connector.delta.maintenance import run_maintenance, summarize_maintenance
    from connector.errors import DeltaSinkError
    from streaming_apps.console_log import console as console_of

    console = console_of(stderr=True)  # an error is one line, whatever the terminal width
    path = _table_location(args)
    started = time.monotonic()
    try:
        result = run_maintenance(path, compact=args.compact, target_size=args.target_size, checkpoint=args.checkpoint,
                                 vacuum=args.vacuum, vacuum_retention_hours=args.vacuum_retention_hours,
                                 orphan_grace_period_ms=args.orphan_grace_ms, cleanup_log=args.checkpoint)
    except DeltaSinkError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return 1
    except Exception as e:  # noqa: BLE001 - delta-rs errors (e.g. a retention below the table's minimum)
        from connector.delta.location import error_line

        console.print(f"[red]error:[/red] maintenance of {path} failed: {error_line(e)}", highlight=False)
        return 1
    from connector.delta.location import normalize_table_uri

    summary = summarize_maintenance(normalize_table_uri(path), result, (time.monotonic() - started) * 1000)
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        console_of().print(f"maintained {summary['table']}: version {summary['version']}, compaction removed "
                        f"{summary['filesRemoved']} and added {summary['filesAdded']} files, vacuumed "
                        f"{summary['vacuumed']}, orphans removed {summary['orphans']} ({summary['durationMs']:.0f} ms)",
                        highlight=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # `hareplica broker ...` forwards its arguments verbatim (they start with options such as -c,
    # which argparse.REMAINDER would not capture)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "broker":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from streaming_apps.console_log import install

    try:
        install(args.log_level, verbose=args.verbose)
    except ValueError as e:
        parser.error(str(e))
    try:
        return _dispatch(args, extra)
    except Exception as exc:  # noqa: BLE001 - one line for people; the traceback only at DEBUG
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            raise
        from streaming_apps.preflight import error_line

        sys.stderr.write(f"error: {error_line(exc)} (--log-level DEBUG shows the traceback)\n")
        return 1


def _use_storage_options(args) -> int | None:
    """Make ``--storage-option`` over the ``AWS_*`` variables this process's object-store settings; 2 (after one
    ``error:`` line) when one is malformed, else None."""
    from connector.errors import StorageConfigError
    from connector.storage import store
    from connector.storage.config import StorageConfig, parse_storage_options

    try:
        store.use(StorageConfig.from_options(parse_storage_options(getattr(args, "storage_options", None) or []),
                                             source="--storage-option"))
    except StorageConfigError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    return None


def _dispatch(args, extra: list[str]) -> int:
    """Run the parsed sub-command; returns the exit code."""
    refused = _use_storage_options(args)
    if refused is not None:
        return refused
    if args.command == "inspect-commitlog":
        from streaming_apps.inspect_commitlog import run

        return run(args.directory, args.from_offset, args.format, stop_at_first=args.stop_at_first)
    if args.command == "broker":
        from broker_stub.__main__ import main as broker_main

        return broker_main(extra + args.broker_args, prog="hareplica broker")
    if args.command == "produce":
        from streaming_apps.workload import produce_command, produce_orders_command

        if args.workload == "orders":
            return produce_orders_command(args.broker, args.count, seed=args.seed)
        if not args.topic:
            build_parser().error("produce --workload load needs --topic")
        return produce_command(args.broker, args.topic.split(","), args.count, args.body_bytes)
    if args.command == "demo":
        from broker_stub.__main__ import missing_extra_line

        missing = missing_extra_line("broker", "hareplica demo")
        if missing is not None:
            sys.stderr.write(f"error: {missing}\n")
            return 1
        from streaming_apps.demo import run_demo

        return run_demo(args.workdir, messages=args.messages, keep=args.keep)
    if args.command == "run":
        return _run(args)
    if args.command == "query":
        from streaming_apps.apps.common import AppError, expand_jars
        from streaming_apps.query import query_command

        try:
            jars = expand_jars(args.jars)
        except AppError as e:
            sys.stderr.write(f"error: {e}\n")
            return 2
        return query_command(args.sql, tables_root=_tables_root(args), tables=dict(args.tables), fmt=args.format,
                             max_rows=args.max_rows or None, engine=args.engine, jars=jars, log_workdir=args.workdir)
    if args.command == "maintain":
        return _maintain(args)
    if args.command == "status":
        from connector.storage import locations
        from streaming_apps.status import status_command

        return status_command(args.paths or [locations.join(args.workdir, "status")], brokers=args.brokers,
                              as_json=args.json, prometheus=args.prometheus, namesrv_addr=args.namesrv_addr,
                              tables_root=_tables_root(args))
    if args.command == "read":
        from streaming_apps.read_command import run as read

        return read(args)
    if args.command == "restore":
        from streaming_apps.restore_command import run as restore

        return restore(args)
    raise AssertionError(args.command)


def console_main() -> None:
    """The ``hareplica`` command (and ``python -m streaming_apps.cli``): :func:`main`, then the process ends with
    its exit code without Python's interpreter teardown.

    After a ``hareplica run`` that teardown (freeing every object of pyspark, py4j, pyarrow, deltalake and the
    project's modules, with no system call between) took 0.2-0.3 s of the command's wall time, after its last line
    was printed (docs/deployment.md §7, "Shutdown"). So the ``atexit`` handlers run (logging's flush, deltalake's
    tracing shutdown, pyarrow's S3 finalisation, whatever else registered one), the output streams are flushed,
    and ``os._exit`` ends the process. An exception or ``SystemExit`` out of :func:`main` (argparse's usage errors)
    takes Python's normal exit. Before :func:`main`, OpenBLAS is given one thread
    (:func:`streaming_apps.blas_threads.single_blas_thread`; docs/deployment.md §7, "BLAS threads"), and an install
    without the ``apps`` extra ends with one line naming it (exit code 1).
    """
    import atexit

    from broker_stub.__main__ import missing_extra_line
    from streaming_apps.blas_threads import single_blas_thread

    single_blas_thread()  # before anything imports numpy (docs/deployment.md §7, "BLAS threads")
    missing = missing_extra_line("apps", "hareplica")
    if missing is not None:  # the library's core install, without the command line's packages
        sys.stderr.write(f"error: {missing}\n")
        sys.exit(1)
    code = main()
    atexit._run_exitfuncs()  # noqa: SLF001 - CPython's own exit step, the only way to run the handlers before os._exit
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0 if code is None else code)


if __name__ == "__main__":
    console_main()
