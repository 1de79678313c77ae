"""``hareplica read``: land a batch range of the brokers' CommitLogs into the bronze table, for backfills
(docs/cli.md "hareplica read"; the read itself is docs/source.md "Batch reads").

The range is fixed before Spark reads it (each broker set's start and end offsets), and the rows are committed
with the apps' exactly-once Delta commit (:func:`connector.delta.foreach_batch.write_batch`) under a txn appId
derived from that range: the same range run again (after a crash, or by mistake) lands nothing twice, and a range
that overlaps records bronze already holds is refused (:func:`streaming_apps.landed.overlap`, the rule a bronze
stream without a checkpoint follows too).
"""

from __future__ import annotations

import hashlib
import json
import sys

from connector.errors import StorageAccessError, StorageConfigError
from connector.storage import locations, store
from connector.storage.probe import check_location
from streaming_apps.arg_types import add_storage_option_arg, add_where_flags, key_value
from streaming_apps.landed import overlap


def add_read_parser(sub) -> None:
    """The ``read`` sub-command's flags."""
    from connector.options.declaration import STARTING_OFFSETS_EARLIEST
    from streaming_apps.spark_session import DEFAULT_MASTER

    p = sub.add_parser("read", help="land a batch range of the CommitLogs into the bronze table (backfills)")
    add_where_flags(p, required=True)
    p.add_argument("--workdir", default="hareplica-data", help="root of tables/ (default hareplica-data)")
    p.add_argument("--tables-root", default=None, help="folder of the Delta tables (default WORKDIR/tables)")
    add_storage_option_arg(p)
    p.add_argument("--starting-offsets", default=STARTING_OFFSETS_EARLIEST,
                   help='earliest (default), latest or JSON {"broker-a": offset}')
    p.add_argument("--ending-offsets", default="latest", help='latest (default) or JSON {"broker-a": offset}')
    p.add_argument("--starting-timestamp", type=int, default=None, metavar="MS",
                   help="start at each broker set's first record stored at or after this time (ms since the epoch)")
    p.add_argument("--ending-timestamp", type=int, default=None, metavar="MS",
                   help="end before each broker set's first record stored at or after this time (ms)")
    p.add_argument("--option", dest="source_options", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE",
                   help="any other format('hareplica') option (repeatable)")
    p.add_argument("--master", default=DEFAULT_MASTER, help=f"Spark master (default {DEFAULT_MASTER})")


def source_options(args) -> dict[str, str]:
    """The ``format("hareplica")`` options of the command's flags."""
    from connector.options.declaration import OPTIONS

    options = dict(args.source_options)
    where = (OPTIONS.brokers.name, args.brokers) if args.brokers else (OPTIONS.namesrv_addr.name, args.namesrv_addr)
    options.update({where[0]: where[1], OPTIONS.starting_offsets.name: args.starting_offsets,
                    OPTIONS.ending_offsets.name: args.ending_offsets})
    for option, value in ((OPTIONS.starting_timestamp, args.starting_timestamp),
                          (OPTIONS.ending_timestamp, args.ending_timestamp)):
        if value is not None:
            options[option.name] = str(value)
    return options


def fixed_range(options: dict[str, str]) -> tuple[dict[str, int], dict[str, int]]:
    """Each broker set's start and end offsets of the range ``options`` name, resolved now (BatchPlanner,
    :func:`connector.source.driver.ranges.ending_offsets`); with ``namesrvAddr`` every set of the route must be
    read (:func:`check_route_read_whole`). Raises HAReplicaOptionError, BrokerAdminError, NameServerError."""
    from connector.options.parse import SourceOptions
    from connector.source.driver.batches import BatchPlanner
    from connector.source.driver.ranges import ending_offsets

    planner = BatchPlanner(SourceOptions.from_options(options))
    try:
        start = planner.initial_offsets()
        check_route_read_whole(planner)
        return start, ending_offsets(planner, start)
    finally:
        planner.close()


def check_route_read_whole(planner) -> None:
    """With ``namesrvAddr``: every broker set of the name server's route has a master that answered, so the range
    names each set (a set left out would be missing from the range, and the read would fail inside Spark).

    Args:
        planner: the :class:`connector.source.driver.batches.BatchPlanner` that fixed the start.
    Raises:
        BrokerAdminError: one line naming each set left out, its master's remoting address (asked of the name
            server again) and the name server.
    """
    from connector.errors import BrokerAdminError, NameServerError

    discovery = planner.discovery
    if discovery is None:
        return
    left_out = sorted(set(discovery.seen) - set(planner.route.broker_names))
    if not left_out:
        return
    try:
        table = discovery.client.cluster_info()[1].broker_addr_table
    except NameServerError:
        table = {}
    masters = {name: getattr(table.get(name), "master_addr", None) for name in left_out}
    sets = "; ".join(f"broker set {name}: its master {addr} did not answer" if addr else
                     f"broker set {name}: the route names no master" for name, addr in masters.items())
    raise BrokerAdminError(f"{sets} (name server {discovery.answered_by}); a batch range needs the offsets of "
                           "every set of the route: read again when it answers, or name the sets to read with "
                           "--brokers")


#: the micro-batch id the range is committed under (one batch per appId, so the replay rule reads "landed")
READ_BATCH_ID = 0


def already_landed(path: str, app_id: str) -> bool:
    """True when the bronze table at ``path`` holds the commit of txn ``app_id`` (this exact range landed), by the
    writers' replay rule (:func:`connector.delta.commit.batch_already_committed`)."""
    from deltalake.exceptions import TableNotFoundError

    from connector.delta.commit import batch_already_committed

    try:
        return batch_already_committed(store.delta_table(path).transaction_version(app_id), READ_BATCH_ID)
    except TableNotFoundError:
        return False


def run(args) -> int:
    """Resolve the range, read it with ``spark.read.format("hareplica")`` and commit it into bronze once.
    Exit 0 with a line naming the range and the rows landed; 2 for bad options or brokers, found before Spark
    starts or while Spark plans the read, or a range overlapping records bronze holds; 1 for a failure while
    reading or writing. An error is one line, ``error: ...`` (its traceback only at DEBUG); Spark's and py4j's
    output go to ``WORKDIR/logs/read.log`` (:mod:`streaming_apps.console_log`), named once when Spark starts."""
    import logging

    from connector.errors import BrokerAdminError, HAReplicaOptionError, NameServerError
    from connector.options.declaration import OPTIONS

    options = source_options(args)
    try:
        start, end = fixed_range(options)
    except (HAReplicaOptionError, BrokerAdminError, NameServerError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    for option in (OPTIONS.starting_timestamp, OPTIONS.ending_timestamp):
        options.pop(option.name, None)
    options.update({OPTIONS.starting_offsets.name: json.dumps(start), OPTIONS.ending_offsets.name: json.dumps(end)})
    key = json.dumps({"start": start, "end": end}, sort_keys=True).encode()
    app_id = "hareplica-read-" + hashlib.sha256(key).hexdigest()[:16]
    try:
        root = locations.resolve(args.tables_root or locations.join(locations.resolve(args.workdir, "--workdir"),
                                                                    "tables"), "--tables-root")
        check_location(root, store.active(), "--tables-root")
    except (StorageConfigError, StorageAccessError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    path = locations.join(root, "bronze")
    held = None if already_landed(path, app_id) else overlap(path, start, end)
    if held is not None:
        sys.stderr.write(f"error: {held[0]}: read a range outside them, or exactly a range hareplica read landed "
                         "before (a no-op)\n")
        return 2

    from connector.delta.foreach_batch import write_batch
    from connector.landing import landed_source_schema
    from streaming_apps.apps.bronze import PARTITION_BY, store_date
    from streaming_apps.console_log import open_log_file
    from streaming_apps.preflight import spark_failure
    from streaming_apps.spark_session import build_spark_session, stop_session

    log_file = open_log_file(args.workdir if not locations.is_uri(args.workdir) else "hareplica-data", "read")
    if log_file is not None:
        sys.stderr.write(f"Spark's and py4j's log: {log_file}\n")
    spark = build_spark_session("hareplica-read", master=args.master, log_file=log_file)
    try:
        reader = spark.read.format("hareplica").schema(landed_source_schema())
        for key_, value in options.items():
            reader = reader.option(key_, value)
        df = reader.load().withColumn("storeDate", store_date())
        result = write_batch(df, path, app_id, READ_BATCH_ID, partition_by=PARTITION_BY)
    except Exception as exc:  # noqa: BLE001 - Spark's errors: their message is read while the session is alive
        logging.getLogger(__name__).debug("the read failed", exc_info=True)
        failure = spark_failure(exc)
        sys.stderr.write(f"error: {failure.line}\n")
        return failure.exit_code
    finally:
        stop_session(spark)
    landed = "already landed, nothing written" if result.skipped else f"{result.rows} rows landed"
    print(f"read {json.dumps(start)} -> {json.dumps(end)} into {path}: {landed}")
    return 0
