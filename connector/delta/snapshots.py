"""The committing process's snapshots of its tables, kept across micro-batches (docs/performance.md "Object storage",
its requests per micro-batch).

Opening a table replays its log from the last checkpoint, and ``DeltaTable.transaction_version`` replays it once
more: three reads of every commit since the checkpoint per micro-batch, a number of GETs that grows with the table
until the next checkpoint. Here each table is opened once per process and brought up to date with
``update_incremental`` (the commits after the cached version only), and the txn version of each appId is carried
forward from the commits read since it was last known.

A table deleted and created again at the same location is noticed: the cached version's commit file must still be
the one read when the table was cached (size and modification time), else the table is opened afresh.
"""

from __future__ import annotations

import json
import posixpath
import threading
from dataclasses import dataclass

from pyarrow import fs as pafs

from connector.delta.location import normalize_table_uri, open_delta_table
from connector.storage import store

__all__ = ["current_table", "forget", "txn_version"]

_COMMIT_NAME = "{:020d}.json"


@dataclass
class _Cached:
    table: object  # deltalake.DeltaTable
    log_dir: str
    fs: pafs.FileSystem
    #: (size, mtime) of the commit file of the version the table was brought to, the identity check
    stamp: tuple | None
    #: (table version it was known at, the writer's txn version then or None)
    txn: tuple[int, int | None] | None = None


#: tables kept at most; the least recently opened is dropped first (a process commits to a few tables)
MAX_TABLES = 32

_lock = threading.Lock()
_cache: dict[tuple[str, str, str], _Cached] = {}


def _key(uri: str, app_id: str) -> tuple[str, str, str]:
    return normalize_table_uri(uri), app_id, repr(sorted((store.storage_options(uri) or {}).items()))


def _stamp(cached_fs: pafs.FileSystem, log_dir: str, version: int) -> tuple | None:
    info = cached_fs.get_file_info(posixpath.join(log_dir, _COMMIT_NAME.format(version)))
    if info.type != pafs.FileType.File:
        return None
    return info.size, info.mtime_ns


def current_table(uri: str, app_id: str):
    """The table at ``uri`` at its latest version, or None when there is none (as
    :func:`connector.delta.location.open_delta_table`, which it calls the first time and when the table was
    replaced). One object per table and writer (``app_id``): a writer commits from one thread at a time.

    Raises what :func:`~connector.delta.location.open_delta_table` raises.
    """
    key = _key(uri, app_id)
    with _lock:
        cached = _cache.get(key)
        if cached is not None:
            version = cached.table.version()
            if _stamp(cached.fs, cached.log_dir, version) == cached.stamp:
                cached.table.update_incremental()
                if cached.table.version() != version:
                    cached.stamp = _stamp(cached.fs, cached.log_dir, cached.table.version())
                return cached.table
            del _cache[key]
        table = open_delta_table(uri)
        if table is None:
            return None
        filesystem, root = store.filesystem(key[0])
        log_dir = posixpath.join(root, "_delta_log")
        _cache[key] = _Cached(table, log_dir, filesystem, _stamp(filesystem, log_dir, table.version()))
        while len(_cache) > MAX_TABLES:
            del _cache[next(iter(_cache))]
        return table


def txn_version(uri: str, app_id: str, table) -> int | None:
    """``table.transaction_version(app_id)`` for the table :func:`current_table` gave for ``(uri, app_id)``,
    reading only the commits since the version it was last asked at (all of the log the first time). None: no
    txn for ``app_id``."""
    with _lock:
        cached = _cache.get(_key(uri, app_id))
        mine = cached is not None and cached.table is table
        version = table.version()
        if mine and cached.txn is not None and cached.txn[0] <= version:
            txn = _txn_in_commits(cached, app_id, cached.txn, version)
            if txn is not _UNKNOWN:
                cached.txn = (version, txn)
                return txn
        txn = table.transaction_version(app_id)
        if mine:
            cached.txn = (version, txn)
        return txn


_UNKNOWN = object()


def _txn_in_commits(cached: _Cached, app_id: str, known: tuple[int, int | None], version: int):
    """The txn version of ``app_id`` after the commits ``known[0] + 1 .. version``, or _UNKNOWN when one of them
    cannot be read (then the whole log is asked)."""
    txn = known[1]
    for v in range(known[0] + 1, version + 1):
        try:
            with cached.fs.open_input_stream(posixpath.join(cached.log_dir, _COMMIT_NAME.format(v))) as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return _UNKNOWN
        for line in text.splitlines():
            if '"txn"' not in line:
                continue
            action = json.loads(line).get("txn")
            if action and action.get("appId") == app_id:
                txn = max(int(action["version"]), txn if txn is not None else -1)
    return txn


def forget(uri: str, app_id: str) -> None:
    """Drop the cached table of ``(uri, app_id)`` (after a failure whose effect on the table is unknown)."""
    with _lock:
        _cache.pop(_key(uri, app_id), None)
