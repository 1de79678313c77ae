"""Fault injection at the Delta writers' commit points, for the crash tests (``tests/faults/test_delta_*.py``):
``HAREPLICA_DELTA_FAULT=POINT:BATCH[:TABLE]`` stops a writer at that point, with a marker file and a wait to be
killed, or with :class:`InjectedFaultError`. Workers inherit the driver's environment; unset, a point costs one
dictionary lookup. The points and variables: docs/delta.md "2. The sink", "Fault injection".
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import time

from connector.errors import DeltaSinkConfigError, InjectedFaultError

log = logging.getLogger(__name__)

#: ``POINT:BATCH[:TABLE]`` (module docstring), the marker file and the pause in seconds.
FAULT_INJECTION_ENV = "HAREPLICA_DELTA_FAULT"
FAULT_MARKER_ENV = "HAREPLICA_DELTA_FAULT_MARKER"
FAULT_PAUSE_ENV = "HAREPLICA_DELTA_FAULT_PAUSE_S"
#: the last is the metadata sync's (docs/metadata.md "Fault injection"): BATCH is then a snapshotId
FAULT_POINTS = ("after-task-write", "before-delta-commit", "after-delta-commit", "after-metadata-commit")
DEFAULT_FAULT_PAUSE_S = 600.0


def fault_point(point: str, batch_id: int | None, table_uri: str) -> None:
    """Stop here if ``HAREPLICA_DELTA_FAULT`` names this point, batch and table (module docstring).

    With a marker file configured: write it (JSON ``{"point", "batchId", "table", "pid"}``, atomically)
    and sleep until killed, at most ``HAREPLICA_DELTA_FAULT_PAUSE_S`` seconds.

    Raises:
        InjectedFaultError: the point is reached and no marker is configured, or nobody killed the
            process within the pause.
        DeltaSinkConfigError: the variable is malformed (unknown point, batch not a number).
    """
    spec = os.environ.get(FAULT_INJECTION_ENV)
    if not spec:
        return
    parts = spec.strip().split(":", 2)
    if len(parts) < 2 or parts[0] not in FAULT_POINTS or not parts[1].strip().isdigit():
        raise DeltaSinkConfigError(f"{FAULT_INJECTION_ENV}={spec!r} must be POINT:BATCH[:TABLE] with POINT one of "
                                   f"{', '.join(FAULT_POINTS)}")
    want_point, want_batch = parts[0], int(parts[1])
    want_table = parts[2].strip() if len(parts) == 3 else None
    table_name = posixpath.basename(table_uri.rstrip("/"))
    if point != want_point or batch_id != want_batch or (want_table and want_table != table_name):
        return
    what = f"fault injection point {point} reached in batch {batch_id} of Delta table {table_uri}"
    marker = os.environ.get(FAULT_MARKER_ENV)
    if not marker:
        raise InjectedFaultError(what)
    log.warning("%s: waiting to be killed (marker %s)", what, marker)
    tmp = f"{marker}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"point": point, "batchId": batch_id, "table": table_uri, "pid": os.getpid()}, fh)
    os.replace(tmp, marker)
    pause_s = float(os.environ.get(FAULT_PAUSE_ENV, DEFAULT_FAULT_PAUSE_S))
    deadline = time.monotonic() + pause_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
    raise InjectedFaultError(f"{what} and the process was not killed within {pause_s} s")
