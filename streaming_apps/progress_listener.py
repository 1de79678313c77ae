"""Lag monitoring: a StreamingQueryListener (:class:`ProgressFileListener`) that appends every micro-batch's
progress, with each broker's lag in CommitLog bytes, to a JSON-lines file that ``hareplica status`` reads
(:func:`read_events`, :func:`latest_status`); its own py4j bridge (:class:`JsonEventsBridge`) takes each event as
its JSON text. The line format, the lag rule and the bridge's cost: docs/delta.md §6.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import QueryIdleEvent, QueryStartedEvent, QueryTerminatedEvent

from connector.source.driver.batches import MAX_OFFSET_KEY
from streaming_apps.progress_file import ProgressFile, read_progress_texts

log = logging.getLogger(__name__)

#: The progress file is rotated (renamed to ``.1``) when it grows past this many bytes.
DEFAULT_MAX_PROGRESS_FILE_BYTES = 16 * 1024 * 1024


def utc_now_iso() -> str:
    """The current time as Spark writes progress timestamps: ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _parse_offset(value: Any) -> Any:
    """A source offset from progress JSON: Spark gives JSON text (or null); returns the parsed value."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def offset_lag_bytes(end_offset: Any, latest_offset: Any) -> dict[str, int] | None:
    """``{broker: latest - end}`` for offsets shaped like format("hareplica")'s ``{broker: int}``.

    Returns None when either offset is not such a dict (other sources, or no latestOffset reported).
    """
    if not isinstance(end_offset, dict) or not isinstance(latest_offset, dict):
        return None
    lag = {}
    for broker, latest in latest_offset.items():
        end = end_offset.get(broker)
        if isinstance(end, int) and isinstance(latest, int) and not isinstance(end, bool):
            lag[broker] = max(0, latest - end)
    return lag


def latest_of(end_offset: Any, latest_offset: Any) -> Any:
    """The brokers' commitLogMaxOffset behind a batch: the progress's ``latestOffset``, each broker raised to the
    ``"@maxOffset"`` the batch's end offset carries (:data:`connector.source.driver.batches.MAX_OFFSET_KEY`).

    On Spark 4.0/4.1 ``latestOffset`` is the batch end itself (Spark never asks ``reportLatestOffset`` there), so
    the end offset's entry is what shows the lag; other sources' offsets come back unchanged."""
    planned = end_offset.get(MAX_OFFSET_KEY) if isinstance(end_offset, dict) else None
    if not isinstance(planned, dict):
        return latest_offset
    merged = dict(latest_offset) if isinstance(latest_offset, dict) else {}
    for broker, value in planned.items():
        known = merged.get(broker)
        if isinstance(value, int) and not isinstance(value, bool):
            merged[broker] = value if not isinstance(known, int) or isinstance(known, bool) else max(known, value)
    return merged


def progress_record(progress: dict[str, Any]) -> dict[str, Any]:
    """The progress-file line (module docstring) of one StreamingQueryProgress given as its JSON dict."""
    sources = []
    total_lag: int | None = None
    for src in progress.get("sources") or []:
        start, end, latest = (_parse_offset(src.get(k)) for k in ("startOffset", "endOffset", "latestOffset"))
        latest = latest_of(end, latest)
        lag = offset_lag_bytes(end, latest)
        if lag is not None:
            total_lag = (total_lag or 0) + sum(lag.values())
        sources.append({"description": src.get("description"), "startOffset": start, "endOffset": end,
                        "latestOffset": latest, "numInputRows": src.get("numInputRows"), "lagBytes": lag})
    duration = progress.get("durationMs") or {}
    state_rows = sum(int(op.get("numRowsTotal") or 0) for op in progress.get("stateOperators") or [])
    return {
        "event": "progress",
        "time": progress.get("timestamp"),
        "query": progress.get("name"),
        "id": progress.get("id"),
        "runId": progress.get("runId"),
        "batchId": progress.get("batchId"),
        "numInputRows": progress.get("numInputRows"),
        "inputRowsPerSecond": _finite(progress.get("inputRowsPerSecond")),
        "processedRowsPerSecond": _finite(progress.get("processedRowsPerSecond")),
        "batchDurationMs": duration.get("triggerExecution", progress.get("batchDuration")),
        "durationMs": duration,
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "stateRows": state_rows,
        "sink": (progress.get("sink") or {}).get("description"),
        "lagBytes": total_lag,
        "sources": sources,
    }


def _finite(value: Any) -> Any:
    """JSON cannot hold NaN/Infinity (Spark reports NaN rates for empty batches): those become None."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    return value


class ProgressFileListener(StreamingQueryListener):
    """Appends the progress of the watched queries to a JSON-lines file (module docstring).

    Args:
        path: the file (folders are created), a local path or an ``s3://`` location
            (:class:`streaming_apps.progress_file.ProgressFile`); lines are appended, so restarts keep the history.
        query_names: watch only queries with these names (None: every query of the session).
        on_progress: called with each progress line after it is written (the apps count batches for
            maintenance with it); its errors are logged, never raised into Spark.
        max_bytes: rotate the file to ``path.1`` past this size.

    Register with ``spark.streams.addListener(listener)`` before starting the queries; remove it with
    ``spark.streams.removeListener(listener)`` when they are done. On a classic session the JVM reaches it
    through :class:`JsonEventsBridge` (module docstring); on Spark Connect, through PySpark's client.
    """

    def __init__(self, path: str | os.PathLike, *, query_names: Iterable[str] | None = None,
                 on_progress: Callable[[dict[str, Any]], None] | None = None,
                 max_bytes: int = DEFAULT_MAX_PROGRESS_FILE_BYTES):
        super().__init__()
        self.path = path if isinstance(path, str) and "://" in path else Path(path)
        self._file = ProgressFile(self.path, max_bytes)
        self.query_names = set(query_names) if query_names is not None else None
        self.on_progress = on_progress
        self.max_bytes = max_bytes
        self.records: list[dict[str, Any]] = []
        self._names: dict[str, str | None] = {}
        self._lock = threading.Condition()  # guards the file and records; notified at every record

    def _watched(self, name: str | None) -> bool:
        return self.query_names is None or name in self.query_names

    def write_event(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one line ``{"event": event, "time": now, **fields}``; returns it."""
        record = {"event": event, "time": utc_now_iso(), **fields}
        self._append(record)
        return record

    def _append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            try:
                self._file.append(line)
            except OSError as e:
                log.warning("could not write progress file %s: %s", self.path, e)
            self.records.append(record)
            self._lock.notify_all()

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(records)`` is true (checked now and after every new record, under the lock);
        False when ``timeout_s`` seconds pass first."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self.records), timeout_s)

    # --- StreamingQueryListener ---------------------------------------------------------------------
    def onQueryStarted(self, event) -> None:
        """Record the start of a watched query."""
        self._names[str(event.id)] = event.name
        if self._watched(event.name):
            self.write_event("started", query=event.name, id=str(event.id), runId=str(event.runId))

    @property
    def _jlistener(self):
        """The JVM listener PySpark's ``StreamingQueryManager.addListener``/``removeListener`` register for a
        classic session: Spark's ``PythonStreamingQueryListenerWrapper`` around a :class:`JsonEventsBridge`
        (made once; PySpark 4.0–4.3 read this property and nothing else of a listener)."""
        if getattr(self, "_jlistenerobj", None) is None:
            from pyspark import SparkContext

            self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(JsonEventsBridge(self))
        return self._jlistenerobj

    def onQueryProgress(self, event) -> None:
        """Record one micro-batch's progress and broker lag, then call ``on_progress``."""
        try:
            progress = json.loads(event.progress.json)
        except Exception as e:  # noqa: BLE001 - a listener must never throw into Spark's listener bus
            log.warning("unreadable query progress: %s", e)
            return
        self.record_progress(progress)

    def record_progress(self, progress: dict[str, Any]) -> None:
        """Record one StreamingQueryProgress given as its JSON dict (``onQueryProgress`` without the event)."""
        if not self._watched(progress.get("name")):
            return
        record = progress_record(progress)
        self._append(record)
        if self.on_progress is not None:
            try:
                self.on_progress(record)
            except Exception as e:  # noqa: BLE001
                log.warning("progress callback failed for batch %s: %s", record.get("batchId"), e)

    def onQueryIdle(self, event) -> None:
        """Idle triggers are not recorded (the last progress line stays the current state)."""

    def onQueryTerminated(self, event) -> None:
        """Record the end of a watched query with its exception, if any."""
        name = self._names.get(str(event.id))
        if self._watched(name):
            self.write_event("terminated", query=name, id=str(event.id), runId=str(event.runId),
                             exception=event.exception)


def read_events(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The lines of a progress file (and of its rotated ``.1`` before it), oldest first.

    Lines that are not JSON objects (a line cut by a crash) are skipped with a warning.
    """
    for p, text in read_progress_texts(path):
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                log.warning("skipping unreadable line %d of %s", n, p)
                continue
            if isinstance(record, dict):
                yield record


def latest_status(events: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per query name: its state now, from the events of a progress file.

    Returns ``{query: {"state": "running" | "terminated" | "failed", "started": time, "terminated":
    time | None, "exception": str | None, "last": last progress line | None, "batches": progress lines
    seen, "rows": rows over them, "maintenance": last maintenance line | None}}``; maintenance lines are
    attached to the query named in their ``query`` field.
    """
    out: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        return out.setdefault(name, {"state": "running", "started": None, "terminated": None, "exception": None,
                                     "last": None, "batches": 0, "rows": 0, "maintenance": None})

    for ev in events:
        name = ev.get("query") or "(unnamed)"
        kind = ev.get("event")
        if kind == "started":
            e = entry(name)
            e.update(state="running", started=ev.get("time"), terminated=None, exception=None)
        elif kind == "progress":
            e = entry(name)
            e["last"] = ev
            e["batches"] += 1
            e["rows"] += int(ev.get("numInputRows") or 0)
        elif kind == "terminated":
            e = entry(name)
            e.update(state="failed" if ev.get("exception") else "terminated", terminated=ev.get("time"),
                     exception=ev.get("exception"))
        elif kind == "maintenance":
            entry(name)["maintenance"] = ev
    return out


class JsonEventsBridge:
    """The py4j side of Spark's ``org.apache.spark.sql.streaming.PythonStreamingQueryListener`` for a
    :class:`ProgressFileListener`: a progress event reaches Python as its JSON text, ``progress().json()``
    (two py4j calls), and goes to :meth:`ProgressFileListener.record_progress`; the rare start, idle and
    termination events are converted as PySpark converts them. A progress event whose JSON cannot be read is
    logged (a warning), never raised into Spark's listener bus.
    """

    def __init__(self, listener: ProgressFileListener) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent) -> None:  # the Java interface's names
        self.listener.onQueryStarted(QueryStartedEvent.fromJObject(jevent))

    def onQueryProgress(self, jevent) -> None:
        try:
            progress = json.loads(jevent.progress().json())
        except Exception as e:  # noqa: BLE001 - a listener must never throw into Spark's listener bus
            log.warning("unreadable query progress: %s", e)
            return
        self.listener.record_progress(progress)

    def onQueryIdle(self, jevent) -> None:
        self.listener.onQueryIdle(QueryIdleEvent.fromJObject(jevent))

    def onQueryTerminated(self, jevent) -> None:
        self.listener.onQueryTerminated(QueryTerminatedEvent.fromJObject(jevent))

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
