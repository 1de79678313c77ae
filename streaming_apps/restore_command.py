"""``hareplica restore``: a broker's CommitLog written back from a bronze table, or a store checked against it
(docs/restore.md; the flags: docs/cli.md "hareplica restore").
"""

from __future__ import annotations

import sys

from streaming_apps.arg_types import DeprecatedAlias, add_storage_option_arg, non_negative

#: exit code of a restore that stopped before a gap in the table's offsets (the files up to it are written)
EXIT_GAP = 3
#: exit code of a ``--verify`` that found a difference
EXIT_DIFFERS = 1
#: exit code of a store folder that cannot be restored into or checked (not a folder, a stray file): bad input
EXIT_BAD_INPUT = 2


def add_restore_parser(sub) -> None:
    """Add the ``restore`` sub-command to ``sub`` (the subparsers of :func:`streaming_apps.cli.build_parser`)."""
    p = sub.add_parser("restore", help="write a broker's CommitLog files back from a bronze table, byte for byte, "
                                       "or check a store against the table")
    p.add_argument("table", help="the bronze table (folder or s3:// URI)")
    add_storage_option_arg(p)
    name = p.add_mutually_exclusive_group(required=True)
    name.add_argument("--broker-name", help="the broker set's name (brokerName, the table's broker column)")
    name.add_argument("--broker", dest="broker_name", action=DeprecatedAlias, new="--broker-name")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--store-dir", default=None, help="write the store here (DIR/commitlog must be empty or absent)")
    what.add_argument("--verify", metavar="STORE_DIR", default=None,
                      help="compare the store at STORE_DIR with the range of the table a restore with the same "
                           "--from-*/--to-* writes, and name the first file or record that differs")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-offset", type=non_negative, default=None,
                       help="start at the mapped file holding this CommitLog offset (a record's start)")
    start.add_argument("--from-timestamp", type=non_negative, default=None,
                       help="start at the mapped file holding the first record stored at or after this epoch ms")
    end = p.add_mutually_exclusive_group()
    end.add_argument("--to-offset", type=non_negative, default=None,
                     help="end before this CommitLog offset (a record boundary)")
    end.add_argument("--to-timestamp", type=non_negative, default=None,
                     help="end before the first record stored after this epoch ms")
    p.add_argument("--no-metadata", dest="metadata", action="store_false",
                   help="leave out config/topics.json, subscriptionGroup.json and consumerOffset.json (written by "
                        "default from the broker metadata tables beside the table)")


def run(args) -> int:
    """Run a parsed ``hareplica restore``; 0 when done (or the store equals the table's range), :data:`EXIT_GAP`
    when the restore stopped before a gap, :data:`EXIT_DIFFERS` when ``--verify`` found a difference (one
    ``differs:`` line), :data:`EXIT_BAD_INPUT` when the store folder cannot be used (one ``error:`` line naming
    the path). Another RestoreError propagates (one line, exit 1, from :func:`streaming_apps.cli.main`)."""
    from connector.arrow_pool import use_jemalloc
    from connector.errors import RestoreError, StorageAccessError, StorageConfigError
    from connector.restore import restore_commitlog, verify_store
    from connector.restore.store import check_empty_store, check_store_folder
    from connector.storage import store
    from connector.storage.probe import check_location

    try:  # the store folder first: bad input, refused before the table is read
        if args.verify is not None:
            check_store_folder(args.verify, must_exist=True)
        else:
            check_empty_store(args.store_dir)
        check_location(args.table, store.active(), "table")
    except (RestoreError, StorageAccessError, StorageConfigError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    use_jemalloc()  # restore at 1 GiB: peak RSS 289 MiB with mimalloc, 207 MiB with jemalloc
    ranges = {"from_offset": args.from_offset, "from_timestamp": args.from_timestamp, "to_offset": args.to_offset,
              "to_timestamp": args.to_timestamp}
    if args.verify is not None:
        difference = verify_store(args.table, args.broker_name, args.verify, **ranges)
        if difference is not None:
            print(f"differs: {difference}")
            return EXIT_DIFFERS
        print(f"same: the CommitLog of {args.verify} is the table's range of broker {args.broker_name}, file for "
              "file and byte for byte")
        return 0
    plan = restore_commitlog(args.table, args.broker_name, args.store_dir, metadata=args.metadata, **ranges)
    if plan.skipped is not None:
        print(f"left out [{plan.skipped[0]}, {plan.skipped[1]}): the table lacks the first records of their file")
    print(f"restored broker {plan.broker} [{plan.start}, {plan.end}): {len(plan.files)} file(s) of "
          f"{plan.mapped_file_size} bytes, {plan.records} records, into {args.store_dir}/commitlog")
    _print_metadata(plan.metadata)
    if plan.missing is not None:
        print(f"missing [{plan.missing[0]}, {plan.missing[1]}): the table does not hold these bytes; the store ends "
              f"before them")
        return EXIT_GAP
    return 0


def _print_metadata(metadata) -> None:
    """One line on the broker metadata written (a :class:`connector.restore.metadata.RestoredMetadata`), or on why
    none was; nothing with ``--no-metadata``."""
    if metadata is None:
        return
    if metadata.skipped is not None:
        print(f"info: {metadata.skipped}: the store gets no topics, subscription groups or consumer offsets")
        return
    from datetime import UTC, datetime

    at = datetime.fromtimestamp(metadata.snapshot_time_ms / 1000, UTC).isoformat(timespec="milliseconds")
    print(f"metadata of snapshot {metadata.snapshot_id} ({at}): {metadata.topics} topic(s), {metadata.groups} "
          f"subscription group(s), {metadata.offsets} consumer offset(s) ({metadata.capped} capped to the restored "
          f"ConsumeQueues) into {', '.join(p.name for p in metadata.files)}")
