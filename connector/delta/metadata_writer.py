"""Landing broker metadata snapshots in the metadata tables (:mod:`connector.delta.metadata_tables`), exactly once:
read a table's state for a broker set (:func:`read_state`), keep the items whose value changed (:func:`changed_rows`),
append them in one Delta commit carrying ``txn(txn_app_id(broker), snapshotId)`` (:func:`append_snapshot`). The
rules: docs/metadata.md "When rows land" and "Exactly once".

Runs on the driver with delta-rs (the tables are small: a row per changed item).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connector.delta.commit import batch_already_committed
from connector.delta.faults import fault_point
from connector.delta.location import check_new_table_location, normalize_table_uri, open_delta_table
from connector.delta.metadata_tables import SNAPSHOT_COLUMNS, MetadataTable, txn_app_id
from connector.delta.reading import read_table
from connector.retry import retry_attempts
from connector.storage import store

log = logging.getLogger(__name__)

#: Append attempts when another commit (e.g. ``hareplica maintain`` compacting the table) wins the race.
MAX_APPEND_ATTEMPTS = 10
_SNAPSHOT_NAMES = frozenset(f.name for f in SNAPSHOT_COLUMNS)

Key = tuple
Values = dict[str, Any]


def item_json(item: Mapping) -> str:
    """One item of a master's table as the ``config`` column keeps it: compact JSON, keys sorted (fastjson writes a
    bean's properties sorted too), so that equal items give equal text."""
    return json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def value_columns(table: MetadataTable) -> tuple[str, ...]:
    """The columns of ``table`` after the snapshot columns that are not its key, ``deleted`` included."""
    return tuple(f.name for f in table.columns if f.name not in table.key)


@dataclass
class MetadataState:
    """A table's state for one broker set: ``last_snapshot`` (the table's txn version for the set's appId; None
    before its first commit) and, per key, the values of its last row (``deleted`` included)."""

    last_snapshot: int | None = None
    items: dict[Key, Values] = field(default_factory=dict)


def read_state(location: str, table: MetadataTable, broker: str) -> MetadataState:
    """The state of ``table`` (at ``location``, a local path or ``s3://``) for ``broker``: per key the row of the
    highest ``snapshotId``. A missing table is an empty state.

    Raises:
        DeltaTablePathError: the folder holds something that is not a readable Delta table.
    """
    uri = normalize_table_uri(location)
    dt = open_delta_table(uri)
    if dt is None:
        return MetadataState()
    state = MetadataState(last_snapshot=dt.transaction_version(txn_app_id(broker)))
    values = value_columns(table)
    rows = read_table(uri, columns=["snapshotId", *table.key, *values], filters=[("broker", "=", broker)]).to_pylist()
    for row in sorted(rows, key=lambda r: r["snapshotId"]):
        state.items[tuple(row[k] for k in table.key)] = {v: row[v] for v in values}
    return state


def changed_rows(table: MetadataTable, state: Mapping[Key, Values], items: Mapping[Key, Values]) -> list[Values]:
    """The rows a snapshot lands: each item of ``items`` (key → values without ``deleted``) whose values differ from
    ``state``'s last row for its key (or that is new, or was deleted), with ``deleted`` false; and for each key
    ``state`` holds, not deleted, that ``items`` lacks, its last values with ``deleted`` true. Rows hold the key and
    value columns (not the snapshot columns), in key order."""
    out: list[Values] = []
    for key in sorted(set(items) | set(state), key=_sort_key):
        previous = state.get(key)
        if key in items:
            current = {**items[key], "deleted": False}
            if previous != current:
                out.append({**dict(zip(table.key, key, strict=True)), **current})
        elif previous is not None and not previous.get("deleted"):
            out.append({**dict(zip(table.key, key, strict=True)), **previous, "deleted": True})
    return out


def _sort_key(key: Key) -> tuple:
    return tuple((0, k) if isinstance(k, int) else (1, str(k)) for k in key)


def append_snapshot(location: str, table: MetadataTable, broker: str, snapshot_id: int, snapshot_time_us: int,
                    rows: list[Values]) -> bool:
    """Append ``rows`` (from :func:`changed_rows`) as snapshot ``snapshot_id`` of ``broker`` taken at
    ``snapshot_time_us`` (µs since the epoch, UTC), in one commit with ``txn(txn_app_id(broker), snapshot_id)``;
    the table is created on its first snapshot, also without rows. Returns False, committing nothing, when the
    table's txn version for the set is already ``snapshot_id`` or later (a replay), or when ``rows`` is empty and
    the table exists.

    The fault point ``after-metadata-commit`` (``HAREPLICA_DELTA_FAULT=after-metadata-commit:SNAPSHOT_ID:TABLE``,
    :mod:`connector.delta.faults`) follows the commit.

    Raises:
        DeltaTablePathError: the folder is not empty and holds no Delta table.
        deltalake.exceptions.CommitFailedError: still conflicting after :data:`MAX_APPEND_ATTEMPTS` attempts.
    """
    import pyarrow as pa
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import CommitProperties, PostCommitHookProperties, Transaction

    uri = normalize_table_uri(location)
    if not rows and open_delta_table(uri) is not None:
        return False
    app_id = txn_app_id(broker)
    head = {"broker": broker, "snapshotId": snapshot_id, "snapshotTime": snapshot_time_us}
    data = pa.Table.from_pylist([{**head, **r} for r in rows], schema=table.schema)
    props = CommitProperties(app_transactions=[Transaction(app_id, snapshot_id)],
                             custom_metadata={"hareplica.appId": app_id, "hareplica.snapshotId": snapshot_id})

    # as the sink's commits: delta-rs's checkpoint every delta.checkpointInterval commits, no listing clean-up
    hooks = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)

    def log_conflict(attempt: int, error: BaseException) -> None:
        log.info("snapshot %d of %s into %s conflicted (attempt %d): %s", snapshot_id, broker, uri, attempt, error)

    for attempt in retry_attempts(MAX_APPEND_ATTEMPTS, CommitFailedError, on_retry=log_conflict):
        with attempt:
            dt = open_delta_table(uri)
            if dt is None:
                check_new_table_location(uri)
            elif batch_already_committed(dt.transaction_version(app_id), snapshot_id):
                log.warning("snapshot %d of broker set %s is already in %s: not landed again", snapshot_id, broker,
                            uri)
                return False
            write_deltalake(uri, data, mode="append", storage_options=store.storage_options(uri),
                            commit_properties=props, post_commithook_properties=hooks)
    log.info("snapshot %d of broker set %s: %d rows into %s", snapshot_id, broker, len(rows), uri)
    fault_point("after-metadata-commit", snapshot_id, uri)
    return True
