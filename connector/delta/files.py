"""Data files of a Delta table folder: listing the files of a micro-batch, and deleting only unreferenced ones.

The rule that keeps committed data safe: the writers delete a data file only through
:func:`delete_unreferenced_files`, which keeps every file the current table snapshot references. File
names come from connector.delta.file_names (every name carries a random UUID, so names never collide).
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Iterable
from urllib.parse import unquote

from connector.delta.location import open_delta_table
from connector.storage import store

log = logging.getLogger(__name__)


def table_filesystem(table_uri: str):
    """(pyarrow FileSystem, root path inside it) for a table location, with this process's storage settings
    (:func:`connector.storage.store.filesystem`)."""
    return store.filesystem(table_uri)


def table_storage_options(table_uri: str) -> dict[str, str] | None:
    """delta-rs's ``storage_options`` for a table location, with this process's storage settings
    (:func:`connector.storage.store.storage_options`; None for a local path)."""
    return store.storage_options(table_uri)


def delete_quietly(fs, full_path: str) -> bool:
    """Delete one file of ``fs``; True if deleted, False if it was missing or could not be deleted (logged)."""
    try:
        fs.delete_file(full_path)
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        log.warning("could not delete %s: %s", full_path, e)
        return False


def referenced_file_names(table) -> set[str]:
    """Base names of every file the table's current snapshot references (add actions)."""
    paths = table.get_add_actions(flatten=True).column("path").to_pylist()
    return {posixpath.basename(unquote(p)) for p in paths}


def delete_unreferenced_files(table_uri: str, paths: Iterable[str], table=None) -> list[str]:
    """Delete those of ``paths`` (relative to the table root) that the current table snapshot does not reference.

    Every deletion of data files by the writers goes through here, so a file the table references is
    never deleted. Returns the relative paths actually deleted.
    """
    paths = list(paths)
    if not paths:
        return []
    if table is None:
        table = open_delta_table(table_uri)
    keep = referenced_file_names(table) if table is not None else set()
    fs, root = table_filesystem(table_uri)
    return [rel for rel in paths
            if posixpath.basename(rel) not in keep and delete_quietly(fs, posixpath.join(root, rel))]


def data_file_infos(table_uri: str, folders: Iterable[str] | None = None) -> list[tuple[str, object]]:
    """``(path relative to the table root, pyarrow FileInfo)`` of the files that may be data files.

    ``folders`` (relative, "" for the root) limits the listing to those folders, non-recursively; None
    lists the whole table folder except ``_delta_log`` and other ``_``/``.`` folders. Missing folders
    are empty.
    """
    from pyarrow import fs as pafs

    fs, root = table_filesystem(table_uri)
    if folders is None:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    else:
        infos = [i for folder in sorted(set(folders))
                 for i in fs.get_file_info(pafs.FileSelector(posixpath.join(root, folder) if folder else root,
                                                             allow_not_found=True))]
    out = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        rel = posixpath.relpath(info.path, root)
        if not any(part.startswith(("_", ".")) for part in rel.split("/")[:-1]):
            out.append((rel, info))
    return out


def list_batch_files(table_uri: str, prefix: str, folders: Iterable[str] | None = None) -> list[str]:
    """Relative paths of data files whose name starts with ``prefix`` (``folders`` as :func:`data_file_infos`)."""
    from pyarrow import fs as pafs

    fs, root = table_filesystem(table_uri)
    if folders is not None and isinstance(fs, pafs.LocalFileSystem):
        # names only (no stat per entry): partition folders keep every tombstoned file until vacuum
        out = []
        for folder in sorted(set(folders)):
            try:
                with os.scandir(posixpath.join(root, folder) if folder else root) as entries:
                    out.extend(posixpath.join(folder, e.name) if folder else e.name for e in entries
                               if e.name.startswith(prefix) and e.is_file(follow_symlinks=False))
            except FileNotFoundError:
                continue
        return sorted(out)
    return sorted(rel for rel, info in data_file_infos(table_uri, folders) if info.base_name.startswith(prefix))
