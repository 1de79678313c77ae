"""The streaming apps ``hareplica run APP`` starts: bronze, silver and gold (docs/delta.md).

``run_app(spark, config)`` starts an app (:func:`streaming_apps.apps.common.start_app`), waits until it
ends (Trigger.AvailableNow), its maximum run time passes or a stop is asked for, stops it between
micro-batches and returns what it did.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming_apps.apps import bronze, gold, silver
from streaming_apps.apps.common import AppConfig, AppError, DeltaJarsMissingError, RunningApp, start_app
from streaming_apps.metadata_sync import start_metadata_sync

log = logging.getLogger(__name__)

#: App name → module (NAME, TABLES, QUERY_NAMES, start).
APPS = {m.NAME: m for m in (bronze, silver, gold)}


@dataclass
class AppRunResult:
    """What one run did: micro-batches and rows over all its queries, its tables, maintenance runs, and what
    stopped it (``stopped_by``: None when its queries ended by themselves, Trigger.AvailableNow; else
    :data:`MAX_RUNTIME` or the name of the signal, ``SIGTERM`` / ``SIGINT``)."""

    app: str
    batches: int
    rows: int
    tables: dict[str, Path]
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0
    stopped_by: str | None = None


#: ``AppRunResult.stopped_by`` of a run that reached its ``max_runtime_s``.
MAX_RUNTIME = "max-runtime"
#: Seconds between two looks at the queries, the stop request and the run's progress.
POLL_S = 0.5
#: How long a stop waits for a running micro-batch to commit before interrupting it (RunningApp.stop).
STOP_BATCH_WAIT_S = 60.0


class StopRequest:
    """A stop the user asked for from outside the run (a signal handler): :meth:`set` records why; thread- and
    signal-safe (it only sets an attribute and an event)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason: str | None = None

    def set(self, reason: str) -> None:
        """Ask the run to stop; ``reason`` becomes ``AppRunResult.stopped_by`` (the first one given wins)."""
        if self.reason is None:
            self.reason = reason
        self.event.set()

    def __bool__(self) -> bool:
        return self.event.is_set()


#: The app of a declaration file (``hareplica run tables --config FILE``, :mod:`streaming_apps.tables.app`).
TABLES_APP = "tables"


def app_module(name: str):
    """The module of app ``name`` (bronze, silver, gold). Raises AppError naming the known apps."""
    try:
        return APPS[name]
    except KeyError:
        raise AppError(f"unknown app {name!r}: one of {', '.join((*APPS, TABLES_APP))}") from None


def app_of(config: AppConfig):
    """The app ``config`` runs: a module of :data:`APPS`, or for ``tables`` the
    :class:`streaming_apps.tables.app.TablesApp` of ``config.declaration``, for ``silver`` the TablesApp of its
    built-in declaration (:func:`streaming_apps.apps.silver.app`).

    Raises:
        AppError: an unknown app; the declaration's problem in one line (naming file, table and key).
    """
    if config.app == silver.NAME:
        return silver.app(config)
    if config.app != TABLES_APP:
        return app_module(config.app)
    from streaming_apps.tables.app import TablesApp
    from streaming_apps.tables.declaration import DeclarationError

    try:
        return TablesApp.load(config.declaration)
    except DeclarationError as e:
        raise AppError(str(e)) from None


def start(spark, config: AppConfig) -> RunningApp:
    """Start ``config.app`` on ``spark``; see :func:`streaming_apps.apps.common.start_app`."""
    return start_app(spark, config, app_of(config))


def run_app(spark, config: AppConfig, *, max_runtime_s: float | None = None, stop: StopRequest | None = None,
            on_progress: Callable[[dict[str, Any], int], None] | None = None) -> AppRunResult:
    """Run an app until its queries end (Trigger.AvailableNow), ``max_runtime_s`` seconds pass, or ``stop`` is
    set; then stop its queries between micro-batches and close it (:meth:`RunningApp.close`). Bronze runs the broker
    metadata sync beside its query (:func:`streaming_apps.metadata_sync.start_metadata_sync`); a run its queries
    ended (Trigger.AvailableNow) takes a last snapshot before it returns.

    ``max_runtime_s`` has the meaning of Spark's ``awaitTermination(timeout)``: after that long the queries are
    stopped, a micro-batch in flight being given :data:`STOP_BATCH_WAIT_S` to commit first; that is a success
    (``stopped_by`` :data:`MAX_RUNTIME`), as is a ``stop`` (``stopped_by`` its reason). ``on_progress(record,
    rows)`` is called in this thread for each micro-batch's progress record as it arrives, with the rows
    landed so far.

    Raises:
        AppError: the app could not start, a query failed, or a query could not be stopped cleanly.
        DeltaJarsMissingError: ``sink="delta"`` without Spark's Delta jars.
    """
    started = time.monotonic()
    deadline = None if max_runtime_s is None else started + max_runtime_s
    running = start(spark, config)
    try:
        sync = start_metadata_sync(config)
    except BaseException:
        running.close()
        raise
    stopped_by, shown, rows = None, 0, 0
    try:
        while True:
            remaining = POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.monotonic()))
            finished = running.wait(remaining)
            shown, rows = _report(running.progress, shown, rows, on_progress)
            if finished:
                break
            if stop:
                stopped_by = stop.reason
                break
            if deadline is not None and time.monotonic() >= deadline:
                stopped_by = MAX_RUNTIME
                break
    except BaseException:
        if sync is not None:
            sync.close()
        running.close()
        raise
    if sync is not None:  # an available-now run ends with a snapshot of the masters as the query ended
        sync.close(final_round=stopped_by is None)
    problems = running.close(STOP_BATCH_WAIT_S)
    _report(running.progress, shown, rows, on_progress)
    if problems:
        raise AppError(f"app {config.app} did not stop cleanly: {'; '.join(problems)}")
    progress = running.progress
    batches = len({(p.get("query"), p.get("batchId")) for p in progress})
    return AppRunResult(app=config.app, batches=batches, rows=sum(int(p.get("numInputRows") or 0) for p in progress),
                        tables=running.tables, maintenance=list(running.maintainer.results),
                        elapsed_s=time.monotonic() - started, stopped_by=stopped_by)


def progress_line(record: dict[str, Any], rows: int, with_query: bool = False) -> str:
    """The console's line for one micro-batch's progress record (streaming_apps.progress_listener): its batch id, the
    rows landed so far and the broker lag; ``with_query``: prefixed with the query's name (apps of several)."""
    where = f"{record.get('query')} " if with_query else ""
    return (f"  {where}micro-batch {record.get('batchId')}: {rows} rows landed so far, broker lag "
            f"{record.get('lagBytes')} bytes")


def _report(progress: list[dict[str, Any]], shown: int, rows: int,
            on_progress: Callable[[dict[str, Any], int], None] | None) -> tuple[int, int]:
    """Hand the progress records after the first ``shown`` to ``on_progress``; returns (shown, rows) after."""
    for record in progress[shown:]:
        rows += int(record.get("numInputRows") or 0)
        if on_progress is not None:
            on_progress(record, rows)
    return len(progress), rows


__all__ = ["APPS", "MAX_RUNTIME", "AppConfig", "AppError", "AppRunResult", "DeltaJarsMissingError", "RunningApp",
           "StopRequest", "app_module", "progress_line", "run_app", "start"]
