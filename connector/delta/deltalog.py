"""Reading the Delta log for the names of every file it has ever added or removed since the last checkpoint.

The table snapshot (``DeltaTable.get_add_actions``) lists live files only; a file a ``remove`` action
names is a tombstone kept for time travel until vacuum. Orphan detection (connector.delta.maintenance)
and the cleanup of a replayed batch (connector.delta.commit) must keep both, so they read the log
itself: the latest complete checkpoint and every later commit (Delta protocol "Delta Log Entries",
"Checkpoints"; file names in connector.delta.file_names).
"""

from __future__ import annotations

import json
import posixpath
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
from pyarrow import fs as pafs

from connector.delta.file_names import CHECKPOINT_FILE, COMMIT_FILE
from connector.delta.location import normalize_table_uri
from connector.errors import DeltaSinkError
from connector.storage import store


def _log_file_names(fs: pafs.FileSystem, log_dir: str) -> tuple[int | None, list[str], dict[int, str]]:
    """(latest complete checkpoint version, its part paths, {commit version: path} after it)."""
    infos = fs.get_file_info(pafs.FileSelector(log_dir, allow_not_found=True))
    commits: dict[int, str] = {}
    checkpoints: dict[int, dict[str, Any]] = {}
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        m = COMMIT_FILE.match(info.base_name)
        if m:
            commits[int(m.group(1))] = info.path
            continue
        m = CHECKPOINT_FILE.match(info.base_name)
        if m:
            entry = checkpoints.setdefault(int(m.group(1)), {"parts": [], "expected": 1})
            entry["parts"].append(info.path)
            if m.group(3):
                entry["expected"] = int(m.group(3))
    complete = [v for v, e in checkpoints.items() if len(e["parts"]) == e["expected"]]
    checkpoint_version = max(complete) if complete else None
    parts = sorted(checkpoints[checkpoint_version]["parts"]) if checkpoint_version is not None else []
    later = {v: p for v, p in commits.items() if checkpoint_version is None or v > checkpoint_version}
    return checkpoint_version, parts, later


def logged_file_names(table_uri: str) -> set[str]:
    """Base names of every file an ``add`` or ``remove`` action names in the latest checkpoint and later commits.

    Raises:
        DeltaSinkError: the log has a gap after the checkpoint or uses sidecar (V2) checkpoints, so the
            set could be incomplete (callers must then not delete anything).
    """
    uri = normalize_table_uri(table_uri)
    fs, root = store.filesystem(uri)
    log_dir = posixpath.join(root, "_delta_log")
    checkpoint_version, parts, commits = _log_file_names(fs, log_dir)
    names: set[str] = set()
    for part in parts:
        columns = pq.read_schema(part, filesystem=fs).names
        if "sidecar" in columns and len(
                pq.read_table(part, filesystem=fs, columns=["sidecar"]).column("sidecar").drop_null()):
            raise DeltaSinkError(f"table {uri}: checkpoint {part} uses sidecar files, which orphan detection "
                                 "does not read; nothing is deleted")
        kinds = [k for k in ("add", "remove") if k in columns]
        table = pq.read_table(part, filesystem=fs, columns=kinds)
        for kind in kinds:
            for entry in table.column(kind).drop_null().to_pylist():
                names.add(posixpath.basename(unquote(entry["path"])))
    expected = (checkpoint_version + 1) if checkpoint_version is not None else 0
    for version in sorted(commits):
        if version != expected:
            raise DeltaSinkError(f"table {uri}: Delta log version {expected} is missing (found {version}); "
                                 "nothing is deleted")
        expected += 1
        with fs.open_input_stream(commits[version]) as f:
            for line in f.read().decode("utf-8").splitlines():
                if not line.strip():
                    continue
                action = json.loads(line)
                for kind in ("add", "remove"):
                    if kind in action:
                        names.add(posixpath.basename(unquote(action[kind]["path"])))
    return names
