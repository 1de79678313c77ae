"""A module whose import blocks: a test's named point inside a Spark task's Python worker.

Importing it creates the file named by ``HAREPLICA_TEST_BLOCK_MARKER`` (the test waits for it: the worker is now
inside the import) and then waits until the file named by ``HAREPLICA_TEST_BLOCK_RELEASE`` exists, at most
:data:`MAX_BLOCK_S` seconds. A warm-up job given this module (``streaming_apps.worker_warmup``) is thus still running
at the moment the test chooses.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MAX_BLOCK_S = 120.0
MARKER_ENV = "HAREPLICA_TEST_BLOCK_MARKER"
RELEASE_ENV = "HAREPLICA_TEST_BLOCK_RELEASE"

Path(os.environ[MARKER_ENV]).touch()
_release = Path(os.environ[RELEASE_ENV])
_deadline = time.monotonic() + MAX_BLOCK_S
while not _release.exists() and time.monotonic() < _deadline:
    time.sleep(0.05)
