"""Options of ``format("deltalake")`` (and of ``write_batch`` and the direct landing, which pass the same map),
case-insensitive as Spark passes them, and :func:`app_id_from_checkpoint`. The options, their defaults and why
the appId must change with the checkpoint: docs/delta.md "2. The sink `format(\"deltalake\")`".
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from connector.delta.location import CREATE_IN_NON_EMPTY_OPTION, normalize_table_uri
from connector.errors import DeltaSinkConfigError, StorageConfigError
from connector.options.declaration import SINK_OPTIONS as SINK
from connector.storage import store
from connector.storage.config import StorageConfig

#: The prefix of the sink options that are object-store settings, ``storage.AWS_ENDPOINT_URL`` (as Spark's Kafka
#: source passes ``kafka.*`` to its consumer; docs/object_storage.md "Credentials and settings"). Spark redacts
#: option values whose key names a secret in plans and its UI.
STORAGE_OPTION_PREFIX = "storage."
DEFAULT_TARGET_FILE_SIZE_BYTES = SINK.target_file_size.default  # delta-rs default for delta.targetFileSize
#: Files younger than this are never orphans: a micro-batch's files wait at most this long for their commit
#: (connector.delta.maintenance).
DEFAULT_ORPHAN_GRACE_PERIOD_MS = 60 * 60 * 1000
#: Default of the apps' ``--maintenance-every``: micro-batches between two maintenance runs of a table
#: (connector.delta.maintenance.MaintenancePolicy).
DEFAULT_MAINTENANCE_EVERY_BATCHES = 100
#: Parquet codec option value (the declared choices of ``compression``) -> (pyarrow codec, file-name infix as Spark
#: writes it).
COMPRESSION_CODECS = {
    "snappy": ("snappy", ".snappy"),
    "zstd": ("zstd", ".zstd"),
    "gzip": ("gzip", ".gz"),
    "lz4": ("lz4", ".lz4"),
    "brotli": ("brotli", ".br"),
    "none": ("none", ""),
    "uncompressed": ("none", ""),
}


@dataclass(frozen=True)
class DeltaSinkOptions:
    """Validated sink options (the module docstring gives their meaning and defaults).

    Attributes:
        table_uri: absolute local path or URI of the table root (relative paths are made absolute).
        app_id: Delta txn application id.
        partition_by: partition columns from the ``partitionBy`` option, or None when not given.
        target_file_size: bytes per Parquet file before rolling.
        compression: pyarrow Parquet codec name.
        codec_infix: file-name infix of the codec (``.snappy``...).
        create_in_non_empty_path: ``createTableInNonEmptyPath`` (create a new table next to other files).
        storage: the object-store settings the tasks and the commit use: this process's
            (:func:`connector.storage.store.active`) with the ``storage.KEY`` options over them.
    """

    table_uri: str
    app_id: str
    partition_by: tuple[str, ...] | None
    target_file_size: int
    compression: str
    codec_infix: str
    create_in_non_empty_path: bool = False
    storage: StorageConfig = field(default_factory=StorageConfig)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> DeltaSinkOptions:
        """Parse Spark's option map (keys case-insensitive).

        Raises:
            DeltaSinkConfigError: ``path`` or ``appId`` missing/blank, bad ``targetFileSize``,
                unknown ``compression``, empty names in ``partitionBy``.
        """
        opts = {str(k).lower(): v for k, v in options.items()}
        path = (opts.get(SINK.table_uri.name.lower()) or "").strip()
        if not path:
            raise DeltaSinkConfigError(
                f'format("deltalake") needs the table location: .option("{SINK.table_uri.name}", "/some/table") or '
                '.start("/some/table")')
        app_id = (opts.get(SINK.app_id.name.lower()) or "").strip()
        if not app_id:
            raise DeltaSinkConfigError(
                f'format("deltalake") needs option "{SINK.app_id.name}" for table {path}: a stable id per query (for '
                'example derived from its checkpointLocation); it is recorded as Delta txn(appId, batchId) so '
                'replayed batches are skipped')
        partition_by: tuple[str, ...] | None = None
        raw_partition = opts.get(SINK.partition_by.name.lower())
        if raw_partition is not None and raw_partition.strip():
            names = [n.strip() for n in raw_partition.split(",")]
            if any(not n for n in names) or len(set(names)) != len(names):
                raise DeltaSinkConfigError(f"option {SINK.partition_by.name}={raw_partition!r} for table {path} "
                                           "must be distinct, non-empty column names")
            partition_by = tuple(names)
        raw_size = str(opts.get(SINK.target_file_size.name.lower(), DEFAULT_TARGET_FILE_SIZE_BYTES)).strip()
        try:
            target = int(raw_size)
        except ValueError:
            target = -1
        if target <= 0:
            raise DeltaSinkConfigError(f"option {SINK.target_file_size.name}={raw_size!r} for table {path} must be "
                                       "a positive number of bytes")
        raw_codec = str(opts.get(SINK.compression.name.lower(), SINK.compression.default)).strip().lower()
        if raw_codec not in COMPRESSION_CODECS:
            raise DeltaSinkConfigError(f"option {SINK.compression.name}={raw_codec!r} for table {path} is not one of "
                                       f"{sorted(COMPRESSION_CODECS)}")
        codec, infix = COMPRESSION_CODECS[raw_codec]
        raw_create = str(opts.get(CREATE_IN_NON_EMPTY_OPTION.lower(), "false")).strip().lower()
        if raw_create not in ("true", "false"):
            raise DeltaSinkConfigError(
                f"option {CREATE_IN_NON_EMPTY_OPTION}={raw_create!r} for table {path} must be true or false")
        try:
            storage = _storage_config(storage_options_of(options))
            table_uri = normalize_table_uri(path)
        except StorageConfigError as e:
            raise DeltaSinkConfigError(f"table {path}: {e}") from None
        return cls(table_uri=table_uri, app_id=app_id, partition_by=partition_by,
                   target_file_size=target, compression=codec, codec_infix=infix,
                   create_in_non_empty_path=raw_create == "true", storage=storage)


def storage_options_of(options: Mapping[str, str]) -> dict[str, str]:
    """The ``storage.KEY`` options of an option map, as ``{KEY: value}``."""
    n = len(STORAGE_OPTION_PREFIX)
    return {str(k)[n:]: str(v) for k, v in options.items() if str(k).lower().startswith(STORAGE_OPTION_PREFIX)}


def storage_option_map(config: StorageConfig) -> dict[str, str]:
    """``config`` as ``storage.KEY`` options, for a writer that runs in another Python process (Spark's Python
    data sources plan in a process of their own)."""
    return {f"{STORAGE_OPTION_PREFIX}{k}": v for k, v in config.values.items()}


def _storage_config(extra: Mapping[str, str]) -> StorageConfig:
    """This process's storage settings with the ``storage.*`` options over them; with some given, they become the
    process's (:func:`connector.storage.store.use`: the commit on the driver uses them too)."""
    if not extra:
        return store.active()
    config = store.active().merged(extra, source=f"option {STORAGE_OPTION_PREFIX}")
    store.use(config)
    return config



def app_id_from_checkpoint(checkpoint_location: str, name: str = "hareplica") -> str:
    """A stable appId for a query: ``<name>-<16 hex digits of SHA-256 of the absolute checkpoint path>``.

    docs/delta.md "2. The sink": apps derive appId from the checkpoint location, so a restart from the same checkpoint
    keeps it and a query with a new checkpoint gets a new one.
    """
    return f"{name}-{hashlib.sha256(normalize_table_uri(checkpoint_location).encode('utf-8')).hexdigest()[:16]}"

