"""The `hareplica` command line: one entry point, one sub-command per job.

Sub-commands: ``inspect-commitlog``, ``broker``, ``produce``, ``demo``, ``run APP`` (bronze, silver, gold),
``query "SQL"``, ``maintain TABLE`` and ``status`` (docs/delta.md describes the last four), ``read`` and ``restore``;
the flags: docs/cli.md. This module holds the parser and hands each command to the module that runs it
(``run``: streaming_apps.run_command, ``maintain``: streaming_apps.maintain_command, ``restore``:
streaming_apps.restore_command, ``read``: streaming_apps.read_command).
"""

from __future__ import annotations

import argparse
import logging
import os
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
    tables_root_of,
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
        from streaming_apps.run_command import run

        return run(args)
    if args.command == "query":
        from streaming_apps.apps.common import AppError, expand_jars
        from streaming_apps.query import query_command

        try:
            jars = expand_jars(args.jars)
        except AppError as e:
            sys.stderr.write(f"error: {e}\n")
            return 2
        return query_command(args.sql, tables_root=tables_root_of(args), tables=dict(args.tables), fmt=args.format,
                             max_rows=args.max_rows or None, engine=args.engine, jars=jars, log_workdir=args.workdir)
    if args.command == "maintain":
        from streaming_apps.maintain_command import run as maintain

        return maintain(args)
    if args.command == "status":
        from connector.storage import locations
        from streaming_apps.status import status_command

        return status_command(args.paths or [locations.join(args.workdir, "status")], brokers=args.brokers,
                              as_json=args.json, prometheus=args.prometheus, namesrv_addr=args.namesrv_addr,
                              tables_root=tables_root_of(args))
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
