"""Upkeep of the Delta tables the sink writes: compaction, checkpoints and vacuum (delta-rs operations behind one
call the apps and ``hareplica maintain`` can schedule) and orphan-file removal (:func:`find_orphan_files`: Parquet
files the sink wrote that no commit references). The steps, the orphan rules and the schedule: docs/delta.md
"3. Maintenance" and "2. The sink `format(\"deltalake\")`".
"""

from __future__ import annotations

import logging
import posixpath
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from connector.delta.deltalog import logged_file_names
from connector.delta.features import check_writable
from connector.delta.file_names import SINK_FILE_NAME
from connector.delta.files import data_file_infos, referenced_file_names, table_filesystem
from connector.delta.location import normalize_table_uri, open_delta_table
from connector.delta.options import DEFAULT_MAINTENANCE_EVERY_BATCHES, DEFAULT_ORPHAN_GRACE_PERIOD_MS
from connector.errors import DeltaSinkError

log = logging.getLogger(__name__)



def find_orphan_files(table_uri: str, *, grace_period_ms: int = DEFAULT_ORPHAN_GRACE_PERIOD_MS,
                      now_ms: int | None = None) -> list[str]:
    """Paths (relative to the table root) of the sink's files that no commit references (module docstring).

    Args:
        grace_period_ms: files modified less than this many ms before ``now_ms`` are kept.
        now_ms: the current time in ms since the epoch (default: the clock).
    Raises:
        DeltaSinkError: no Delta table at ``table_uri``, or its log cannot be read completely.
    """
    uri = normalize_table_uri(table_uri)
    table = open_delta_table(uri)
    if table is None:
        raise DeltaSinkError(f"no Delta table at {uri}: cannot tell orphan files from data files")
    known = logged_file_names(uri) | referenced_file_names(table)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    orphans = []
    for rel, info in data_file_infos(uri):
        if not SINK_FILE_NAME.match(info.base_name) or info.base_name in known:
            continue
        mtime_ms = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else now_ms
        if now_ms - mtime_ms < grace_period_ms:
            continue
        orphans.append(rel)
    return sorted(orphans)


def remove_orphan_files(table_uri: str, *, grace_period_ms: int = DEFAULT_ORPHAN_GRACE_PERIOD_MS,
                        dry_run: bool = False, now_ms: int | None = None) -> list[str]:
    """Delete the orphan files :func:`find_orphan_files` reports; returns their relative paths.

    Raises:
        DeltaSinkError: as :func:`find_orphan_files`.
    """
    uri = normalize_table_uri(table_uri)
    orphans = find_orphan_files(uri, grace_period_ms=grace_period_ms, now_ms=now_ms)
    if dry_run or not orphans:
        return orphans
    fs, root = table_filesystem(uri)
    for rel in orphans:
        try:
            fs.delete_file(posixpath.join(root, rel))
        except FileNotFoundError:
            pass
    log.info("removed %d orphan files from Delta table %s", len(orphans), uri)
    return orphans


def run_maintenance(table_uri: str, *, compact: bool = True, target_size: int | None = None,
                    checkpoint: bool = True, vacuum: bool = False, vacuum_retention_hours: int | None = None,
                    orphan_grace_period_ms: int | None = None, cleanup_log: bool = False) -> dict[str, Any]:
    """Compact small files, write a checkpoint, optionally vacuum and remove orphans, in that order.

    Args:
        compact: run ``optimize.compact`` (bin-packing to ``target_size`` bytes; delta-rs default 100 MiB).
            Only small files are rewritten, the result has the same rows; appends may commit meanwhile.
        checkpoint: write a Delta checkpoint at the version reached.
        vacuum: delete tombstoned files older than the retention (also implied by ``vacuum_retention_hours``).
        vacuum_retention_hours: the vacuum retention; None uses the table's
            ``delta.deletedFileRetentionDuration`` (7 days by default), which delta-rs also enforces as a minimum.
        orphan_grace_period_ms: when set, remove orphan files older than this (module docstring).
        cleanup_log: delete commit files older than ``delta.logRetentionDuration`` (30 days) behind a checkpoint.
    Returns:
        ``{"version": int, "compaction": {...} | None, "vacuumed": [...], "orphans": [...]}``.
    Raises:
        DeltaSinkError: no Delta table at ``table_uri``.
        connector.delta.features.UnsupportedTableFeatureError: a table feature delta-rs's maintenance would
            break (e.g. columnMapping, rowTracking of a table Spark wrote), before anything is changed.
    """
    uri = normalize_table_uri(table_uri)
    table = open_delta_table(uri)
    if table is None:
        raise DeltaSinkError(f"no Delta table at {uri} to maintain")
    check_writable(table, uri, "maintenance")
    result: dict[str, Any] = {"compaction": None, "vacuumed": [], "orphans": []}
    if compact:
        result["compaction"] = table.optimize.compact(target_size=target_size)
        table = open_delta_table(uri)
    if checkpoint:
        table.create_checkpoint()
        if cleanup_log:
            table.cleanup_metadata()
    if vacuum or vacuum_retention_hours is not None:
        result["vacuumed"] = table.vacuum(retention_hours=vacuum_retention_hours, dry_run=False)
    if orphan_grace_period_ms is not None:
        result["orphans"] = remove_orphan_files(uri, grace_period_ms=orphan_grace_period_ms)
    result["version"] = table.version()
    log.info("maintained Delta table %s at version %d: %s", uri, result["version"],
             {k: (len(v) if isinstance(v, list) else v) for k, v in result.items() if k != "version"})
    return result


# --- scheduled maintenance (the apps) -----------------------------------------------------------------


@dataclass(frozen=True)
class MaintenancePolicy:
    """What a scheduled maintenance run does (arguments of :func:`run_maintenance`).

    Attributes:
        every_batches: completed micro-batches between runs; 0 disables the schedule.
        compact: bin-pack small files. ``target_size``: bytes per compacted file (None: delta-rs 100 MiB).
        checkpoint: write a Delta checkpoint (and drop commit files past the log retention).
        vacuum: delete tombstoned files older than ``vacuum_retention_hours`` (None: the table's
            ``delta.deletedFileRetentionDuration``, 7 days).
        orphan_grace_period_ms: remove the sink's never-committed files older than this (None: keep).
    """

    every_batches: int = DEFAULT_MAINTENANCE_EVERY_BATCHES
    compact: bool = True
    target_size: int | None = None
    checkpoint: bool = True
    vacuum: bool = True
    vacuum_retention_hours: int | None = None
    orphan_grace_period_ms: int | None = DEFAULT_ORPHAN_GRACE_PERIOD_MS

    def run(self, table_uri: str) -> dict[str, Any]:
        """:func:`run_maintenance` of one table with this policy. Raises DeltaSinkError as it does."""
        return run_maintenance(table_uri, compact=self.compact, target_size=self.target_size,
                               checkpoint=self.checkpoint, vacuum=self.vacuum,
                               vacuum_retention_hours=self.vacuum_retention_hours,
                               orphan_grace_period_ms=self.orphan_grace_period_ms, cleanup_log=self.checkpoint)


def summarize_maintenance(table_uri: str, result: dict[str, Any], duration_ms: float) -> dict[str, Any]:
    """A JSON-friendly line about one maintenance run (the progress file and ``hareplica maintain``).

    ``{"table", "version", "filesRemoved", "filesAdded", "vacuumed", "orphans", "durationMs"}``.
    """
    compaction = result.get("compaction") or {}
    return {"table": table_uri, "version": result.get("version"),
            "filesRemoved": int(compaction.get("numFilesRemoved", 0)),
            "filesAdded": int(compaction.get("numFilesAdded", 0)),
            "vacuumed": len(result.get("vacuumed") or []), "orphans": len(result.get("orphans") or []),
            "durationMs": round(duration_ms, 1)}


class TableMaintainer:
    """Runs maintenance on a stream's tables every N completed micro-batches, in one background thread.

    The apps call :meth:`batch_completed` from their StreamingQueryListener (batch ids of one query;
    repeated ids, e.g. progress of idle triggers, count once). When ``policy.every_batches`` batches
    completed since the last run, a run over every table starts in the background unless one is still
    going (then the next batch starts it). Appends keep committing meanwhile: compaction only replaces
    small files and delta-rs resolves the concurrent commits (the sink retries its append).
    Errors are logged and reported, never raised into the stream.

    Args:
        tables: table locations.
        policy: what a run does and how often.
        runner: ``runner(table_uri) -> result dict`` (default ``policy.run``; the apps pass Spark SQL
            OPTIMIZE/VACUUM for Spark's own Delta sink).
        on_result: called with one :func:`summarize_maintenance` dict per table and run, plus
            ``"error"`` when the run failed.
    """

    def __init__(self, tables: Sequence[str], policy: MaintenancePolicy, *,
                 runner: Callable[[str], dict[str, Any]] | None = None,
                 on_result: Callable[[dict[str, Any]], None] | None = None):
        self.tables = [normalize_table_uri(t) for t in tables]
        self.policy = policy
        self.runner = runner or policy.run
        self.on_result = on_result
        self.runs = 0
        self.results: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last_batch_id: int | None = None
        self._batches_since_run = 0

    def batch_completed(self, batch_id: int) -> bool:
        """Count micro-batch ``batch_id`` as done; start a background run when one is due. True if started."""
        with self._lock:
            if self._last_batch_id is not None and batch_id <= self._last_batch_id:
                return False
            self._last_batch_id = batch_id
            self._batches_since_run += 1
            if self.policy.every_batches <= 0 or self._batches_since_run < self.policy.every_batches:
                return False
            if self._thread is not None and self._thread.is_alive():
                return False
            self._batches_since_run = 0
            self._thread = threading.Thread(target=self._run_all, name="hareplica-maintenance", daemon=True)
            self._thread.start()
            return True

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the background run (if any); False when it is still going after ``timeout_s``."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    def _run_all(self) -> list[dict[str, Any]]:
        out = []
        for uri in self.tables:
            started = time.monotonic()
            try:
                if open_delta_table(uri) is None:
                    log.debug("maintenance: no Delta table at %s yet", uri)
                    continue
                summary = summarize_maintenance(uri, self.runner(uri), (time.monotonic() - started) * 1000)
            except Exception as e:  # noqa: BLE001 - maintenance must never break the stream
                log.warning("maintenance of Delta table %s failed: %s", uri, e)
                summary = {"table": uri, "error": f"{type(e).__name__}: {e}",
                           "durationMs": round((time.monotonic() - started) * 1000, 1)}
            out.append(summary)
            if self.on_result is not None:
                try:
                    self.on_result(summary)
                except Exception as e:  # noqa: BLE001
                    log.warning("maintenance result callback failed: %s", e)
        with self._lock:
            self.runs += 1
            self.results.extend(out)
        return out
