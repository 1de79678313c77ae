"""``hareplica maintain TABLE``: one Delta table compacted, checkpointed and vacuumed, its orphan files removed
(docs/cli.md "hareplica maintain"; what each step does: docs/delta.md §3, "Maintenance").
"""

from __future__ import annotations

import os
import sys

from streaming_apps.arg_types import tables_root_of


def table_location(args) -> str:
    """``maintain``'s table: a bare name under ``--tables-root`` (always, when that is an object store; on a disk,
    when that folder holds a table), else the path or URI given.

    Raises:
        StorageConfigError: ``--tables-root`` is a URI of a scheme :func:`connector.storage.locations.resolve`
            refuses, or an S3 URI without a bucket.
    """
    from connector.storage import locations

    root = tables_root_of(args)
    bare = "/" not in args.table and "://" not in args.table
    if bare and locations.is_uri(root):
        return locations.join(locations.resolve(root, "--tables-root"), args.table)
    candidate = os.path.join(root, args.table)
    return candidate if os.path.isdir(os.path.join(candidate, "_delta_log")) else args.table


def run(args) -> int:
    """Run ``hareplica maintain TABLE`` on the parsed ``args`` (:func:`streaming_apps.cli.build_parser`): compaction,
    checkpoint, vacuum and orphan removal as the flags ask, then one summary line (``--json``: one JSON object) on
    stdout. The exit code: 0, or 1 after one ``error:`` line when the maintenance failed."""
    import json
    import time

    from connector.delta.maintenance import run_maintenance, summarize_maintenance
    from connector.errors import DeltaSinkError
    from streaming_apps.console_log import console as console_of

    console = console_of(stderr=True)  # an error is one line, whatever the terminal width
    path = table_location(args)
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
