"""The streaming apps ``hareplica run APP`` starts: bronze, silver and gold (docs/delta.md).

``run_app(spark, config)`` starts an app (:func:`streaming_apps.apps.common.start_app`), waits until it
ends (Trigger.AvailableNow) or is interrupted, and returns what it did.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming_apps.apps import bronze, gold, silver
from streaming_apps.apps.common import AppConfig, AppError, DeltaJarsMissingError, RunningApp, start_app

log = logging.getLogger(__name__)

#: App name → module (NAME, TABLES, QUERY_NAMES, start).
APPS = {m.NAME: m for m in (bronze, silver, gold)}


@dataclass
class AppRunResult:
    """What one run did: micro-batches and rows over all its queries, its tables, maintenance runs."""

    app: str
    batches: int
    rows: int
    tables: dict[str, Path]
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0


def app_module(name: str):
    """The module of app ``name``. Raises AppError naming the known apps."""
    try:
        return APPS[name]
    except KeyError:
        raise AppError(f"unknown app {name!r}: one of {', '.join(APPS)}") from None


def start(spark, config: AppConfig) -> RunningApp:
    """Start ``config.app`` on ``spark``; see :func:`streaming_apps.apps.common.start_app`."""
    return start_app(spark, config, app_module(config.app))


def run_app(spark, config: AppConfig, *, timeout_s: float | None = None) -> AppRunResult:
    """Run an app until its queries end (AvailableNow), ``timeout_s`` passes, or Ctrl-C; then close it.

    Raises:
        AppError: the app could not start, or a query failed.
        DeltaJarsMissingError: ``sink="delta"`` without Spark's Delta jars.
        TimeoutError: ``timeout_s`` passed with a query still running (it is stopped first).
    """
    started = time.monotonic()
    running = start(spark, config)
    try:
        finished = running.wait(timeout_s)
        if not finished:
            raise TimeoutError(f"app {config.app} still running after {timeout_s} s")
    except KeyboardInterrupt:
        log.warning("interrupted: stopping %s", config.app)
    finally:
        running.close()
    progress = running.progress
    batches = len({(p.get("query"), p.get("batchId")) for p in progress})
    return AppRunResult(app=config.app, batches=batches, rows=sum(int(p.get("numInputRows") or 0) for p in progress),
                        tables=running.tables, maintenance=list(running.maintainer.results),
                        elapsed_s=time.monotonic() - started)


__all__ = ["APPS", "AppConfig", "AppError", "AppRunResult", "DeltaJarsMissingError", "RunningApp", "app_module",
           "run_app", "start"]
