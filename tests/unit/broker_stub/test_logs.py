"""The broker stub's log lines (broker_stub.logs): ``kv`` and ``json`` (python-json-logger), one line each."""

from __future__ import annotations

import json
import logging
import sys

from broker_stub.logs import JsonFormatter, KeyValueFormatter


def _record(exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("broker_stub.x", logging.INFO, __file__, 1, "ha client connected master=%s n=%d",
                             ("127.0.0.1:10912", 5), exc_info)


def test_json_and_kv_log_lines():
    record = _record()
    obj = json.loads(JsonFormatter().format(record))
    assert obj["level"] == "INFO" and obj["logger"] == "broker_stub.x"
    assert obj["fields"] == {"master": "127.0.0.1:10912", "n": "5"}
    assert obj["ts"].endswith("Z")
    assert "master=127.0.0.1:10912" in KeyValueFormatter().format(record)


def test_json_lines_hold_exactly_the_documented_keys_in_order():
    record = _record()
    record.taskName = None  # set by Python 3.12+ on every record
    record.peer = "x"  # as logging's extra= would
    line = JsonFormatter().format(record)
    assert list(json.loads(line)) == ["ts", "level", "logger", "message", "fields"] and "\n" not in line
    try:
        raise ValueError("boom")
    except ValueError:
        failed = _record(sys.exc_info())
    obj = json.loads(JsonFormatter().format(failed))
    assert list(obj) == ["ts", "level", "logger", "message", "fields", "exc"]
    assert obj["exc"].startswith("Traceback") and obj["exc"].endswith("ValueError: boom")
    kv = KeyValueFormatter().format(failed)
    assert "\n" not in kv and " exc=Traceback" in kv and kv.startswith("ts=") and " level=INFO " in kv
