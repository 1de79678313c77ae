"""The object-store settings this process uses, and the clients of a location built from them: a pyarrow file
system, delta-rs's ``storage_options``, a ``DeltaTable``. A driver sets them once (:func:`use`, from the CLI's
``--storage-option`` or the sink's ``storage.KEY`` options); the Delta writers carry them to the executors, which call
:func:`use` with them in each task. docs/object_storage.md "Credentials and settings".
"""

from __future__ import annotations

import functools
import os
import threading

from connector.storage.config import StorageConfig
from connector.storage.locations import S3_SCHEMES, is_uri, resolve, scheme_of

_lock = threading.Lock()
_active: StorageConfig | None = None


def use(config: StorageConfig) -> None:
    """Make ``config`` the settings of every object-store location this process opens from now on."""
    global _active
    with _lock:
        _active = config


def active() -> StorageConfig:
    """The settings :func:`use` set, else those of the environment (``AWS_*`` variables)."""
    global _active
    with _lock:
        if _active is None:
            _active = StorageConfig.from_options({})
        return _active


@functools.lru_cache(maxsize=4)
def _s3_filesystem(config: StorageConfig):
    return config.arrow_filesystem()


def filesystem(location: str | os.PathLike):
    """``(pyarrow FileSystem, path inside it)`` of a local path or an ``s3://`` / ``s3a://`` location.

    Raises:
        StorageConfigError: an unsupported URI scheme (:func:`connector.storage.locations.resolve`).
    """
    from pyarrow import fs as pafs

    text = resolve(location)
    if not is_uri(text):
        return pafs.LocalFileSystem(), text
    return _s3_filesystem(active()), text.split("://", 1)[1].rstrip("/")


def storage_options(location: str | os.PathLike) -> dict[str, str] | None:
    """delta-rs's ``storage_options`` for ``location``: None for a local path."""
    return active().delta_storage_options() if scheme_of(location) in S3_SCHEMES else None


def delta_location(location: str | os.PathLike) -> str:
    """``location`` as delta-rs takes it (:func:`connector.storage.locations.resolve`: ``s3a://`` as ``s3://``)."""
    return resolve(location)


def delta_table(location: str | os.PathLike, version: int | None = None):
    """``deltalake.DeltaTable`` at ``location`` (its current version, or ``version``) with this process's settings.

    Raises what deltalake raises (``TableNotFoundError`` for no table).
    """
    from deltalake import DeltaTable

    return DeltaTable(delta_location(location), version=version, storage_options=storage_options(location))
