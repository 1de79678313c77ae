"""Names of the files in a Delta table folder: the data files this project writes, and Delta's log files
(``<version:20 digits>.json`` commits, ``<version>.checkpoint[.<part>.<parts>].parquet`` checkpoints; Delta
protocol "Delta Log Entries" and "Checkpoints").

The functions here write the data-file names and :data:`SINK_FILE_PREFIX` / :data:`SINK_FILE_NAME` are built from
the same pieces, so a batch's attempts (:func:`batch_file_prefix`), orphan detection and the "is this folder empty"
rule all read the names the writers write. The scheme: docs/delta.md "2. The sink", "Exactly once".
"""

from __future__ import annotations

import hashlib
import re
import uuid

#: First characters of every data file this project writes (as Spark's own ``part-`` files).
DATA_FILE_PREFIX = "part-"
#: Hex digits of SHA-256 of the appId in a file name.
APP_TAG_DIGITS = 8

_APP_TAG_PATTERN = f"[0-9a-f]{{{APP_TAG_DIGITS}}}"
_BATCH_PATTERN = r"b\d+-"
_TASK_PATTERN = r"p\d+-a\d+-"
_UUID_PATTERN = r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"
_CODEC_PATTERN = r"(?:\.\w+)?"

#: The start of a name a task of this project wrote for a micro-batch (up to and including ``a<attempt>-``).
SINK_FILE_PREFIX = re.compile(f"^{re.escape(DATA_FILE_PREFIX)}{_APP_TAG_PATTERN}-(?:{_BATCH_PATTERN})?{_TASK_PATTERN}")
#: A whole data file name this project's writers produce (:func:`data_file_name`).
SINK_FILE_NAME = re.compile(f"{SINK_FILE_PREFIX.pattern}{_UUID_PATTERN}{_CODEC_PATTERN}\\.parquet$")

#: Delta log commit files: group 1 is the version.
COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
#: Delta log checkpoint files: group 1 the version, groups 2 and 3 the part and the number of parts (multi-part).
CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


def app_tag(app_id: str) -> str:
    """8 hex digits naming an appId in file names (SHA-256 prefix), so batch files of one query are findable."""
    return hashlib.sha256(app_id.encode("utf-8")).hexdigest()[:APP_TAG_DIGITS]


def batch_file_prefix(app_id: str, batch_id: int) -> str:
    """Name prefix shared by every file any attempt of micro-batch ``batch_id`` of ``app_id`` writes."""
    return f"{DATA_FILE_PREFIX}{app_tag(app_id)}-b{batch_id:06d}-"


def task_file_prefix(app_id: str, batch_id: int | None, partition_id: int, attempt: int) -> str:
    """Name prefix of the files of one task attempt, without the ``-<uuid>...`` that :func:`data_file_name` adds.

    ``batch_id`` None (Spark gave the task no batch id) leaves ``b<batchId>-`` out.
    """
    batch = batch_file_prefix(app_id, batch_id) if batch_id is not None else f"{DATA_FILE_PREFIX}{app_tag(app_id)}-"
    return f"{batch}p{partition_id:05d}-a{attempt}"


def data_file_name(task_prefix: str, codec_infix: str) -> str:
    """A new, unique data file name: ``<task_prefix>-<random uuid><codec_infix>.parquet``."""
    return f"{task_prefix}-{uuid.uuid4()}{codec_infix}.parquet"
