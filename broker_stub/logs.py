"""Log lines of the broker stub and its name server: one line per record, ``kv`` or ``json``.

``kv`` (default) is ``ts=<UTC ISO-8601 ms> level=<LEVEL> logger=<name> <message>``, the message itself
written as ``key=value`` pairs. ``json`` is one object per line (python-json-logger) with ``ts``,
``level``, ``logger``, ``message``, ``fields`` (the message's ``key=value`` pairs, values as text) and
``exc`` when an exception is attached.
"""

from __future__ import annotations

import logging
import re
import sys
import time

from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter

LOG_FORMATS = ("kv", "json")
_FIELD = re.compile(r"(\w+)=(\S*)")


def _utc_ms(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    """``2026-01-02T03:04:05.678Z``: the record's time in UTC to the millisecond (formatter uses gmtime)."""
    return formatter.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z"


class KeyValueFormatter(logging.Formatter):
    """``ts=<UTC ISO-8601 ms> level=<LEVEL> logger=<name> <message>``, always one line per record."""

    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        text = f"ts={_utc_ms(self, record)} level={record.levelname} logger={record.name} {record.getMessage()}"
        if record.exc_info:
            text += " exc=" + self.formatException(record.exc_info).replace("\n", " | ")
        return text.replace("\n", " | ")


class JsonFormatter(_LibraryJsonFormatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``message``, ``fields`` (``key=value`` pairs of
    the message, values as text) and ``exc`` when an exception is attached."""

    converter = time.gmtime

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s", json_ensure_ascii=False,
                         rename_fields={"asctime": "ts", "levelname": "level", "name": "logger", "exc_info": "exc"})

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging API
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return _utc_ms(self, record)

    def process_log_record(self, log_data: dict) -> dict:
        # exactly the documented keys: attributes a library puts on records (``extra``, taskName) stay out
        out = {key: log_data.get(key) for key in ("ts", "level", "logger", "message")}
        out["fields"] = dict(_FIELD.findall(out["message"] or ""))
        if log_data.get("exc"):
            out["exc"] = log_data["exc"]
        return out


def configure_logging(level: str = "INFO", log_file: str | None = None, log_format: str = "kv") -> None:
    """Send every log record to stderr (and ``log_file``), formatted ``kv`` (KeyValueFormatter) or ``json``."""
    root = logging.getLogger()
    root.setLevel(level.upper())
    for h in list(root.handlers):
        root.removeHandler(h)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    formatter = JsonFormatter() if log_format == "json" else KeyValueFormatter()
    for h in handlers:
        h.setFormatter(formatter)
        root.addHandler(h)
