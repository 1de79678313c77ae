"""Table locations: open a Delta table with a one-line error naming the path and the first broken log file (never
delta-rs's multi-line error), and create tables only in a missing or empty folder unless
``createTableInNonEmptyPath``. The rules and what counts as empty: docs/delta.md "2. The sink", "Table locations".
"""

from __future__ import annotations

import json
import os
import posixpath

from connector.delta.file_names import CHECKPOINT_FILE, COMMIT_FILE, SINK_FILE_PREFIX
from connector.errors import DeltaTablePathError
from connector.options.declaration import SINK_OPTIONS
from connector.storage import locations, store

#: Foreign entries a refusal names before it says "…".
NAMED_ENTRIES = 3
#: The sink option that allows creating a table in a non-empty folder.
CREATE_IN_NON_EMPTY_OPTION = SINK_OPTIONS.create_in_non_empty_path.name


def normalize_table_uri(path: str) -> str:
    """A table location as both pyarrow.fs and deltalake accept it (:func:`connector.storage.locations.resolve`):
    ``s3://bucket/key``, or an absolute local path.

    Raises:
        StorageConfigError: an unsupported URI scheme.
    """
    return locations.resolve(path, "table")


def error_line(error: BaseException) -> str:
    """The first non-blank line of an exception's message (delta-rs appends a backtrace when RUST_BACKTRACE is set)."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__


def _local_root(table_uri: str) -> str | None:
    if table_uri.startswith("file://"):
        return table_uri[len("file://"):]
    return None if "://" in table_uri else table_uri


def find_unreadable_log_file(table_uri: str) -> str | None:
    """``"<file>: <what is wrong>"`` for the first log file of a local table that breaks the protocol, else None.

    Commit files (``NNNNNNNNNNNNNNNNNNNN.json``) must be UTF-8 with one JSON object per non-blank line;
    checkpoints must have a Parquet footer; ``_last_checkpoint`` must be one JSON object. Remote tables
    (URIs) are not scanned. Reads every log file: for error paths only.
    """
    root = _local_root(table_uri)
    if root is None:
        return None
    log_dir = os.path.join(root, "_delta_log")
    try:
        names = sorted(os.listdir(log_dir))
    except OSError as e:
        return f"{log_dir}: {e.strerror or e}"
    for name in names:
        path = os.path.join(log_dir, name)
        if COMMIT_FILE.match(name) or name == "_last_checkpoint":
            problem = _json_lines_problem(path)
        elif CHECKPOINT_FILE.match(name):
            problem = _parquet_problem(path)
        else:
            continue
        if problem:
            return f"{path}: {problem}"
    return None


def _json_lines_problem(path: str) -> str | None:
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                return f"line {number} is not UTF-8 (byte {e.start})"
            except ValueError as e:
                return f"line {number} is not JSON ({e})"
            if not isinstance(value, dict):
                return f"line {number} is not a JSON object"
    return None


def _parquet_problem(path: str) -> str | None:
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several types for torn files
        return f"not a Parquet file ({error_line(e)})"
    return None


def open_delta_table(table_uri: str):
    """The current ``deltalake.DeltaTable`` at ``table_uri``, or None when no Delta table is there.

    Raises:
        DeltaTablePathError: a ``_delta_log`` exists but cannot be read (one line: path, file, cause).
    """
    from deltalake.exceptions import TableNotFoundError

    try:
        return store.delta_table(table_uri)
    except TableNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001 - DeltaError, DeltaProtocolError, OSError, PyO3 panics
        culprit = find_unreadable_log_file(table_uri)
        if culprit is None and locations.is_uri(table_uri):  # the store, not the table, may be what failed
            raise DeltaTablePathError(f"cannot read Delta table {table_uri}: delta-rs: {error_line(e)}") from e
        where = f"{culprit}" if culprit else f"delta-rs: {error_line(e)}"
        raise DeltaTablePathError(f"{table_uri} is not a readable Delta table: {where}") from e


def foreign_entries(table_uri: str, limit: int = NAMED_ENTRIES) -> list[str]:
    """Up to ``limit`` paths (relative) of files in a folder that make it non-empty (module docstring); in an
    object store, the objects under the location's prefix (one listing, at table creation only)."""
    root = _local_root(table_uri)
    if root is None:
        return _foreign_objects(table_uri, limit)
    if not os.path.isdir(root):
        return []
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(files):
            if name.startswith((".", "_")) or SINK_FILE_PREFIX.match(name):
                continue
            found.append(posixpath.relpath(os.path.join(folder, name), root))
            if len(found) >= limit:
                return found
    return found


def _foreign_objects(table_uri: str, limit: int) -> list[str]:
    from pyarrow import fs as pafs

    fs, root = store.filesystem(table_uri)
    found = []
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        rel = posixpath.relpath(info.path, root)
        parts = rel.split("/")
        if info.type != pafs.FileType.File or any(p.startswith((".", "_")) for p in parts) or \
                SINK_FILE_PREFIX.match(parts[-1]):
            continue
        found.append(rel)
    return sorted(found)[:limit]


def check_new_table_location(table_uri: str, *, create_in_non_empty_path: bool = False) -> None:
    """Refuse to create a Delta table at ``table_uri`` when it is a file or a non-empty plain folder.

    Call it when :func:`open_delta_table` found no table. In an object store a "folder" is a key prefix: only
    the objects under it count.

    Raises:
        DeltaTablePathError: the location is a file, or holds other files and ``create_in_non_empty_path``
            is False (the message names the path, up to three of the files, and the option).
    """
    root = _local_root(table_uri)
    if root is not None and os.path.exists(root) and not os.path.isdir(root):
        raise DeltaTablePathError(f"{table_uri} is a file, not a folder: a Delta table is a folder")
    if create_in_non_empty_path:
        return
    entries = foreign_entries(table_uri, NAMED_ENTRIES + 1)
    if entries:
        named = ", ".join(entries[:NAMED_ENTRIES]) + (", …" if len(entries) > NAMED_ENTRIES else "")
        raise DeltaTablePathError(
            f"{table_uri} is not a Delta table (no _delta_log) and is not empty ({named}): refusing to create a "
            f"table there; use an empty folder, or set {CREATE_IN_NON_EMPTY_OPTION}=true to create the table next "
            "to those files")
