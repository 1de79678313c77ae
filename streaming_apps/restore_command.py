"""``hareplica restore``: a broker's CommitLog written back from a bronze table, or a store checked against it
(docs/restore.md; the flags: docs/cli.md "hareplica restore").
"""

from __future__ import annotations

import sys

from streaming_apps.arg_types import non_negative

#: exit code of a restore that stopped before a gap in the table's offsets (the files up to it are written)
EXIT_GAP = 3


def add_restore_parser(sub) -> None:
    """Add the ``restore`` sub-command to ``sub`` (the subparsers of :func:`streaming_apps.cli.build_parser`)."""
    p = sub.add_parser("restore", help="write a broker's CommitLog files back from a bronze table, byte for byte, "
                                       "or check a store against the table")
    p.add_argument("table", help="the bronze table (folder or URI)")
    p.add_argument("--broker", required=True, help="the broker set's name (the table's broker column)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--store-dir", default=None, help="write the store here (DIR/commitlog must be empty)")
    what.add_argument("--verify", metavar="STORE_DIR", default=None,
                      help="compare the store at STORE_DIR with the table and name the first record that differs")
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


def run(args) -> int:
    """Run a parsed ``hareplica restore``; 0 when done (or the store equals the table), :data:`EXIT_GAP` when the
    restore stopped before a gap, 1 when ``--verify`` found a difference. RestoreError propagates (one line, exit
    1, from :func:`streaming_apps.cli.main`)."""
    from connector.restore import restore_commitlog, verify_store

    if args.verify is not None:
        if any(v is not None for v in (args.from_offset, args.from_timestamp, args.to_offset, args.to_timestamp)):
            sys.stderr.write("error: --verify compares the whole store; --from-*/--to-* do not apply\n")
            return 2
        difference = verify_store(args.table, args.broker, args.verify)
        if difference is not None:
            print(f"differs: {difference}")
            return 1
        print(f"same: every record of {args.verify} is the table's, byte for byte")
        return 0
    plan = restore_commitlog(args.table, args.broker, args.store_dir, from_offset=args.from_offset,
                             from_timestamp=args.from_timestamp, to_offset=args.to_offset,
                             to_timestamp=args.to_timestamp)
    if plan.skipped is not None:
        print(f"left out [{plan.skipped[0]}, {plan.skipped[1]}): the table lacks the first records of their file")
    print(f"restored broker {plan.broker} [{plan.start}, {plan.end}): {len(plan.files)} file(s) of "
          f"{plan.mapped_file_size} bytes, {plan.records} records, into {args.store_dir}/commitlog")
    if plan.missing is not None:
        print(f"missing [{plan.missing[0]}, {plan.missing[1]}): the table does not hold these bytes; the store ends "
              f"before them")
        return EXIT_GAP
    return 0
