"""The streaming sink ``writeStream.format("deltalake")``: Parquet on executors, one Delta commit per batch.

DESIGN §4. Spark's own Delta sink needs the delta-spark jars; this sink needs none. It follows the
Python data source API of pyspark 4.2 (``DataSourceStreamArrowWriter``):

- ``write(iterator)`` runs on executors. It receives the micro-batch partition as pyarrow RecordBatches,
  writes Parquet files into the table folder (Hive-style ``col=value/`` sub-folders for partition
  columns, which are not stored in the files, as the Delta protocol requires), rolls files at about
  ``targetFileSize`` bytes, and returns a :class:`DeltaLakeCommitMessage` describing every file: path
  relative to the table root, size, partition values, modification time and Delta statistics
  (numRecords, minValues, maxValues, nullCount, taken from the Parquet footer).
- ``commit(messages, batchId)`` runs on the driver. It adds every file of the batch in ONE Delta
  transaction that also carries ``txn(appId, version=batchId)`` (Delta protocol "Transaction
  Identifiers"), using the ``deltalake`` (delta-rs) library. The first commit creates the table.
  If the table's transaction version for ``appId`` is already ``>= batchId``, the batch is a replay
  (the process died after the Delta commit and before Spark wrote its commit log): the files this replay
  wrote are removed and nothing is committed. Together with Spark's checkpoint this gives exactly-once.
- ``abort(messages, batchId)`` removes the files listed in the messages and, unless the batch did commit,
  every other file named for this appId and batch (tasks Spark cancelled report nothing), except files
  the table references.

Rules that keep committed data safe: a file is only ever deleted by this module if its name is not
referenced by the current table snapshot; every file name carries a random UUID, so names never collide.
File names start with ``part-<appTag>-b<batchId>-`` (:func:`batch_file_prefix`), so after a fresh commit
of batch N the files that earlier attempts of batch N left in the same folders (a run killed before its
commit, a task attempt whose result Spark dropped) are removed too. Files of other appIds and batches
are never touched; anything still left is for ``connector.delta_maintenance.remove_orphan_files``.

Empty batches are committed too (a commit with no files, carrying the txn), so the table's transaction
version always equals the last batchId Spark finished and a replay of an empty batch is still recognised.

``foreachBatch`` jobs that write several tables per micro-batch (the silver app: orders and quarantine)
use :func:`write_batch`, the same write and commit path for a static DataFrame: files written by
executors through ``mapInArrow``, one Delta commit per table carrying ``txn(appId, batchId)``, and a
batch already committed for that appId skipped without writing anything.

Fault injection (tests of the commit points, ``tests/faults/test_delta_*.py``). When the environment
variable ``HAREPLICA_DELTA_FAULT`` is ``POINT:BATCH`` or ``POINT:BATCH:TABLE`` (TABLE = the last path
element of the table location), the sink stops at that point of that micro-batch:

- ``after-task-write``: on an executor, after the task closed its Parquet files, before it returns them;
- ``before-delta-commit``: on the driver, every task's files are written, the Delta commit not yet made;
- ``after-delta-commit``: the Delta commit of the batch is made, Spark has not yet written its commit log
  (the files of earlier attempts of the batch are not yet removed either).

With ``HAREPLICA_DELTA_FAULT_MARKER=/some/file`` the process writes that file (JSON: point, batchId,
table, pid) and then waits up to ``HAREPLICA_DELTA_FAULT_PAUSE_S`` seconds (default 600) for the test to
SIGKILL it; without a marker it raises :class:`InjectedFaultError` at once. Workers inherit the
environment of the driver process, so setting the variables before the application starts suffices.
Unset (the default), the points cost one dictionary lookup.

Options (case-insensitive, as Spark passes them):

=================  ==========================================================================
``path``           table location (required; ``.start(path)`` passes it). Local path or URI.
``appId``          Delta txn application id (required): stable per query, e.g. derived from the
                   checkpoint location. Two queries writing one table need different appIds,
                   and so does a query restarted with a NEW checkpoint (its batch ids start at 0
                   again, and batches up to the old txn version would be skipped as replays).
``partitionBy``    comma-separated partition columns (default: the existing table's, else none).
                   Spark 4.2 does not pass ``DataStreamWriter.partitionBy(...)`` to Python data
                   sources, so this option is the only way to partition.
``targetFileSize`` bytes per Parquet file before rolling (default 104857600, delta-rs's default
                   ``delta.targetFileSize``).
``compression``    Parquet codec: snappy (default, as Spark), zstd, gzip, lz4, brotli, none.
``createTableInNonEmptyPath``  ``true`` creates the table in a folder that holds other files;
                   default ``false`` refuses (connector.delta_paths: only a missing or empty
                   folder becomes a table).
=================  ==========================================================================

A ``_delta_log`` that cannot be read is a :class:`connector.delta_paths.DeltaTablePathError` whose one
line names the table and the broken log file.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import hashlib
import json
import logging
import math
import os
import pickle
import posixpath
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from connector.delta_paths import (
    CREATE_IN_NON_EMPTY_OPTION,
    check_new_table_location,
    check_writable,
    open_delta_table,
)
from connector.protocol.errors import HAReplicaError

log = logging.getLogger(__name__)

# --- defaults and limits ---------------------------------------------------------------------------
DEFAULT_TARGET_FILE_SIZE_BYTES = 104_857_600  # delta-rs default for delta.targetFileSize
#: Arrow bytes buffered per open file before they are written as one Parquet row group.
ROW_GROUP_BUFFER_BYTES = 64 * 1024 * 1024
#: Arrow bytes a task may buffer over all open files before it flushes the largest buffer.
MAX_TASK_BUFFER_BYTES = 256 * 1024 * 1024
#: A file is closed once its on-disk size reaches this fraction of targetFileSize.
ROLL_FRACTION = 0.9
#: Rows of a file's first row group sampled to choose its dictionary-encoded columns.
DICTIONARY_SAMPLE_ROWS = 4096
#: A primitive column is dictionary-encoded when at most this fraction of the sampled values are distinct.
DICTIONARY_MAX_DISTINCT_FRACTION = 0.25
#: Delta's ``delta.dataSkippingStringPrefixLength``: string stats keep at most this many characters.
STATS_STRING_PREFIX_LENGTH = 32
#: Folder name Hive and Delta use for a null partition value.
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: Spark sets this local property on every task of a micro-batch (MicroBatchExecution.BATCH_ID_KEY).
SPARK_BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: Commit attempts when another writer wins the optimistic-concurrency race (delta-rs retries appends itself).
MAX_COMMIT_ATTEMPTS = 10
#: Parquet codec option value -> (pyarrow codec, file-name infix as Spark writes it).
COMPRESSION_CODECS = {
    "snappy": ("snappy", ".snappy"),
    "zstd": ("zstd", ".zstd"),
    "gzip": ("gzip", ".gz"),
    "lz4": ("lz4", ".lz4"),
    "brotli": ("brotli", ".br"),
    "none": ("none", ""),
    "uncompressed": ("none", ""),
}
#: Characters Spark/Hive percent-escape in partition folder names (ExternalCatalogUtils.escapePathName).
_PATH_ESCAPE_CHARS = frozenset('"#%\'*/:=?\\\x7f{[]^') | frozenset(chr(c) for c in range(0x01, 0x20))


#: Fault injection (module docstring): ``POINT:BATCH[:TABLE]``, the marker file and the pause in seconds.
FAULT_INJECTION_ENV = "HAREPLICA_DELTA_FAULT"
FAULT_MARKER_ENV = "HAREPLICA_DELTA_FAULT_MARKER"
FAULT_PAUSE_ENV = "HAREPLICA_DELTA_FAULT_PAUSE_S"
FAULT_POINTS = ("after-task-write", "before-delta-commit", "after-delta-commit")
DEFAULT_FAULT_PAUSE_S = 600.0

# --- errors ----------------------------------------------------------------------------------------
class DeltaSinkError(HAReplicaError):
    """Base class of the Delta sink's errors; the message names the table path and, where known, the batch."""


class DeltaSinkConfigError(DeltaSinkError, ValueError):
    """A missing or invalid sink option (``path``, ``appId``, ``partitionBy``, ``targetFileSize``...)."""


class DeltaSchemaMismatchError(DeltaSinkError):
    """The stream's schema or partition columns differ from the existing Delta table's.

    Attributes:
        missing_in_stream: table columns the stream lacks.
        missing_in_table: stream columns the table lacks.
        type_mismatches: ``{column: (table type, stream type)}`` in Delta's type names.
    """

    def __init__(self, message: str, *, missing_in_stream: Sequence[str] = (), missing_in_table: Sequence[str] = (),
                 type_mismatches: Mapping[str, tuple[str, str]] | None = None):
        super().__init__(message)
        self.missing_in_stream = list(missing_in_stream)
        self.missing_in_table = list(missing_in_table)
        self.type_mismatches = dict(type_mismatches or {})


class DeltaCommitError(DeltaSinkError):
    """The Delta transaction of a batch could not be committed (after retries on concurrent commits)."""


class InjectedFaultError(DeltaSinkError):
    """Raised at a fault-injection point (``HAREPLICA_DELTA_FAULT`` without a marker file; module docstring)."""


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


# --- options ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeltaSinkOptions:
    """Validated sink options (see the module docstring for their meaning and defaults).

    Attributes:
        table_uri: absolute local path or URI of the table root (relative paths are made absolute).
        app_id: Delta txn application id.
        partition_by: partition columns from the ``partitionBy`` option, or None when not given.
        target_file_size: bytes per Parquet file before rolling.
        compression: pyarrow Parquet codec name.
        codec_infix: file-name infix of the codec (``.snappy``...).
        create_in_non_empty_path: ``createTableInNonEmptyPath`` (create a new table next to other files).
    """

    table_uri: str
    app_id: str
    partition_by: tuple[str, ...] | None
    target_file_size: int
    compression: str
    codec_infix: str
    create_in_non_empty_path: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> DeltaSinkOptions:
        """Parse Spark's option map (keys case-insensitive).

        Raises:
            DeltaSinkConfigError: ``path`` or ``appId`` missing/blank, bad ``targetFileSize``,
                unknown ``compression``, empty names in ``partitionBy``.
        """
        opts = {str(k).lower(): v for k, v in options.items()}
        path = (opts.get("path") or "").strip()
        if not path:
            raise DeltaSinkConfigError(
                'format("deltalake") needs the table location: .option("path", "/some/table") or .start("/some/table")')
        app_id = (opts.get("appid") or "").strip()
        if not app_id:
            raise DeltaSinkConfigError(
                f'format("deltalake") needs option "appId" for table {path}: a stable id per query (for example '
                'derived from its checkpointLocation); it is recorded as Delta txn(appId, batchId) so replayed '
                'batches are skipped')
        partition_by: tuple[str, ...] | None = None
        raw_partition = opts.get("partitionby")
        if raw_partition is not None and raw_partition.strip():
            names = [n.strip() for n in raw_partition.split(",")]
            if any(not n for n in names) or len(set(names)) != len(names):
                raise DeltaSinkConfigError(
                    f"option partitionBy={raw_partition!r} for table {path} must be distinct, non-empty column names")
            partition_by = tuple(names)
        raw_size = str(opts.get("targetfilesize", DEFAULT_TARGET_FILE_SIZE_BYTES)).strip()
        try:
            target = int(raw_size)
        except ValueError:
            target = -1
        if target <= 0:
            raise DeltaSinkConfigError(
                f"option targetFileSize={raw_size!r} for table {path} must be a positive number of bytes")
        raw_codec = str(opts.get("compression", "snappy")).strip().lower()
        if raw_codec not in COMPRESSION_CODECS:
            raise DeltaSinkConfigError(
                f"option compression={raw_codec!r} for table {path} is not one of {sorted(COMPRESSION_CODECS)}")
        codec, infix = COMPRESSION_CODECS[raw_codec]
        raw_create = str(opts.get(CREATE_IN_NON_EMPTY_OPTION.lower(), "false")).strip().lower()
        if raw_create not in ("true", "false"):
            raise DeltaSinkConfigError(
                f"option {CREATE_IN_NON_EMPTY_OPTION}={raw_create!r} for table {path} must be true or false")
        return cls(table_uri=normalize_table_uri(path), app_id=app_id, partition_by=partition_by,
                   target_file_size=target, compression=codec, codec_infix=infix,
                   create_in_non_empty_path=raw_create == "true")


def normalize_table_uri(path: str) -> str:
    """A table location as both pyarrow.fs and deltalake accept it: URIs unchanged, local paths absolute."""
    if "://" in path:
        return path.rstrip("/")
    if path.startswith("file:"):
        path = path[len("file:"):]
    return os.path.abspath(os.path.expanduser(path))


def _filesystem(table_uri: str):
    """(pyarrow FileSystem, root path inside it) for a table location."""
    from pyarrow import fs as pafs

    return pafs.FileSystem.from_uri(table_uri)


# --- schemas ---------------------------------------------------------------------------------------
def _normalize_type(t):
    """A Delta/Spark JSON type without nullability and metadata, for comparisons."""
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "struct":
        return {"type": "struct", "fields": [(f["name"], _normalize_type(f["type"])) for f in t["fields"]]}
    if kind == "array":
        return {"type": "array", "elementType": _normalize_type(t["elementType"])}
    if kind == "map":
        return {"type": "map", "keyType": _normalize_type(t["keyType"]), "valueType": _normalize_type(t["valueType"])}
    return t


def _type_name(t) -> str:
    """Spark SQL spelling of a normalized type (``struct<a:long>``, ``array<string>``...)."""
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "struct":
        return "struct<" + ",".join(f"{n}:{_type_name(ft)}" for n, ft in t["fields"]) + ">"
    if kind == "array":
        return f"array<{_type_name(t['elementType'])}>"
    if kind == "map":
        return f"map<{_type_name(t['keyType'])},{_type_name(t['valueType'])}>"
    return json.dumps(t)


def delta_schema_of(schema: StructType):
    """The deltalake Schema of a Spark StructType (Delta's schema JSON is Spark's).

    Raises:
        DeltaSinkConfigError: a Spark type Delta cannot store (e.g. intervals).
    """
    from deltalake import Schema

    try:
        return Schema.from_json(schema.json())
    except Exception as e:  # delta-rs raises plain exceptions for unknown types
        raise DeltaSinkConfigError(
            f"the stream's schema cannot be stored in Delta: {e}; schema {schema.simpleString()}") from e


def check_schema_matches(table_uri: str, table_schema_json: str, table_partition_by: Sequence[str],
                         schema: StructType, partition_by: Sequence[str] | None) -> None:
    """Check that a stream may append to an existing table (no schema evolution).

    Column names and types must be equal (order and nullability are not compared; Parquet columns are
    resolved by name); ``partition_by``, when given, must equal the table's partition columns.

    Raises:
        DeltaSchemaMismatchError: naming the missing/extra columns and the differing types.
    """
    table_fields = {f["name"]: _normalize_type(f["type"]) for f in json.loads(table_schema_json)["fields"]}
    stream_fields = {f["name"]: _normalize_type(f["type"]) for f in json.loads(schema.json())["fields"]}
    missing_in_stream = [n for n in table_fields if n not in stream_fields]
    missing_in_table = [n for n in stream_fields if n not in table_fields]
    mismatches = {n: (_type_name(table_fields[n]), _type_name(stream_fields[n]))
                  for n in table_fields if n in stream_fields and table_fields[n] != stream_fields[n]}
    problems = []
    if missing_in_stream:
        problems.append(f"table columns missing in the stream: {', '.join(missing_in_stream)}")
    if missing_in_table:
        problems.append(f"stream columns not in the table: {', '.join(missing_in_table)}")
    for n, (tt, st) in mismatches.items():
        problems.append(f"column {n} is {tt} in the table but {st} in the stream")
    if partition_by is not None and list(partition_by) != list(table_partition_by):
        problems.append(f"partitionBy {list(partition_by)} differs from the table's partition columns "
                        f"{list(table_partition_by)}")
    if problems:
        raise DeltaSchemaMismatchError(
            f"the stream's schema does not match Delta table {table_uri}: " + "; ".join(problems),
            missing_in_stream=missing_in_stream, missing_in_table=missing_in_table, type_mismatches=mismatches)


_PARTITION_TYPES = ("string", "long", "integer", "short", "byte", "boolean", "date", "timestamp", "timestamp_ntz",
                    "float", "double")


def check_partition_columns(table_uri: str, schema: StructType, partition_by: Sequence[str]) -> None:
    """Partition columns must be top-level columns of an atomic, non-binary type, and not all columns.

    Raises:
        DeltaSinkConfigError: naming the offending column.
    """
    fields = {f["name"]: f["type"] for f in json.loads(schema.json())["fields"]}
    for name in partition_by:
        if name not in fields:
            raise DeltaSinkConfigError(
                f"partition column {name} of table {table_uri} is not a column of the stream ({', '.join(fields)})")
        t = fields[name]
        if not (isinstance(t, str) and (t in _PARTITION_TYPES or t.startswith("decimal"))):
            raise DeltaSinkConfigError(
                f"partition column {name} of table {table_uri} has type {_type_name(_normalize_type(t))}, "
                "which cannot be a partition column")
    if partition_by and len(partition_by) >= len(fields):
        raise DeltaSinkConfigError(f"table {table_uri} cannot be partitioned by every column {list(partition_by)}")


# --- partition values ------------------------------------------------------------------------------
def partition_value_string(value) -> str | None:
    """Serialize one partition value as the Delta protocol's ``partitionValues`` (None for null).

    Strings as-is ("" becomes null, as Spark does), numbers in decimal notation, booleans
    ``true``/``false``, dates ``YYYY-MM-DD``, timestamps with a time zone as ISO-8601 UTC
    ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, timestamps without one as ``YYYY-MM-DD HH:MM:SS.ffffff``
    (Delta PROTOCOL.md "Partition Value Serialization").
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value or None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            return value.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return str(value)


def escape_partition_path(value: str) -> str:
    """Percent-escape a partition value for a folder name, as Spark/Hive's escapePathName does."""
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPE_CHARS else c for c in value)


def partition_folder(columns: Sequence[str], values: Sequence[str | None]) -> str:
    """Hive-style relative folder ``a=1/b=x`` (no trailing slash; "" when unpartitioned)."""
    return "/".join(
        f"{escape_partition_path(c)}={HIVE_DEFAULT_PARTITION if v is None else escape_partition_path(v)}"
        for c, v in zip(columns, values, strict=True))


def delta_log_path(relative_path: str) -> str:
    """How ``add.path`` appears in the Delta log: the relative path as a URI reference (percent-encoded).

    deltalake's ``AddAction`` takes the plain path and encodes it itself; this is for reading logs.
    """
    return quote(relative_path, safe="/=")


# --- statistics ------------------------------------------------------------------------------------
def _is_container(t: pa.DataType) -> bool:
    """List-like and map types: their Parquet leaves get no Delta statistics."""
    return (pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t))


def _leaf_count(t: pa.DataType) -> int:
    """Parquet leaf columns an Arrow type becomes."""
    if pa.types.is_dictionary(t):
        return _leaf_count(t.value_type)
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if _is_container(t):
        return _leaf_count(t.value_type)
    return 1


def _stat_leaves(fields: Iterable[pa.Field],
                 prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], pa.DataType] | None]:
    """Parquet leaf columns in order: (path, type) for leaves reached through structs only, else None."""
    for f in fields:
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if pa.types.is_struct(t):
            yield from _stat_leaves([t.field(i) for i in range(t.num_fields)], prefix + (f.name,))
        elif _is_container(t):
            yield from (None for _ in range(_leaf_count(t)))
        else:
            yield prefix + (f.name,), t


def _ms_floor(ts: _dt.datetime) -> _dt.datetime:
    return ts - _dt.timedelta(microseconds=ts.microsecond % 1000)


def _ms_ceil(ts: _dt.datetime) -> _dt.datetime:
    rest = ts.microsecond % 1000
    return ts + _dt.timedelta(microseconds=1000 - rest) if rest else ts


def _stat_json_value(value, t: pa.DataType, is_max: bool):
    """A min (``is_max`` False) or max statistic as Delta's stats JSON value, or None to omit it.

    Values are widened outward when they must be rounded (timestamps to ms, decimals to doubles),
    so the bounds stay true bounds for data skipping.
    """
    if value is None or pa.types.is_boolean(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t) \
            or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return None
    if pa.types.is_integer(t):
        return int(value)
    if pa.types.is_floating(t):
        v = float(value)
        return v if math.isfinite(v) else None
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        if len(value) <= STATS_STRING_PREFIX_LENGTH:
            return value
        return None if is_max else value[:STATS_STRING_PREFIX_LENGTH]
    if pa.types.is_decimal(t):
        v = float(value)
        if not math.isfinite(v):
            return None
        if is_max and decimal.Decimal(v) < value:
            v = math.nextafter(v, math.inf)
        elif not is_max and decimal.Decimal(v) > value:
            v = math.nextafter(v, -math.inf)
        return v
    if pa.types.is_date(t) and isinstance(value, _dt.date):
        return value.isoformat()
    if pa.types.is_timestamp(t) and isinstance(value, _dt.datetime):
        v = _ms_ceil(value) if is_max else _ms_floor(value)
        if t.tz is not None:
            if v.tzinfo is None:
                v = v.replace(tzinfo=_dt.UTC)
            return v.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    return None


def _set_nested(target: dict, path: tuple[str, ...], value) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def file_stats_json(metadata: pq.FileMetaData, data_schema: pa.Schema) -> str:
    """Delta per-file statistics JSON from a Parquet footer.

    ``{"numRecords": n, "minValues": {...}, "maxValues": {...}, "nullCount": {...}}`` with nested
    objects for struct fields. Min/max are omitted for booleans, binary, list and map columns, non-finite
    floats and strings' maxima longer than 32 characters (minima are cut to 32), as Delta allows: a
    missing statistic only disables data skipping on that column.
    """
    num_records = metadata.num_rows
    leaves = list(_stat_leaves(data_schema))
    stats: dict = {"numRecords": num_records}
    if len(leaves) != metadata.num_columns:
        log.debug("Parquet has %d leaf columns, Arrow schema %d: statistics limited to numRecords",
                  metadata.num_columns, len(leaves))
        return json.dumps(stats, separators=(",", ":"))
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}
    for j, leaf in enumerate(leaves):
        if leaf is None:
            continue
        path, t = leaf
        lo = hi = None
        null_count: int | None = 0
        minmax_known = True
        for r in range(metadata.num_row_groups):
            rg = metadata.row_group(r)
            st = rg.column(j).statistics
            if st is None or not st.has_null_count:
                null_count = None
            elif null_count is not None:
                null_count += st.null_count
            if st is not None and st.has_min_max:
                lo = st.min if lo is None or st.min < lo else lo
                hi = st.max if hi is None or st.max > hi else hi
            elif not (st is not None and st.has_null_count and st.null_count == rg.num_rows):
                minmax_known = False
        if null_count is not None:
            _set_nested(nulls, path, null_count)
        if minmax_known and lo is not None:
            v = _stat_json_value(lo, t, is_max=False)
            if v is not None:
                _set_nested(mins, path, v)
            v = _stat_json_value(hi, t, is_max=True)
            if v is not None:
                _set_nested(maxs, path, v)
    stats["minValues"] = mins
    stats["maxValues"] = maxs
    stats["nullCount"] = nulls
    return json.dumps(stats, separators=(",", ":"))


# --- commit messages -------------------------------------------------------------------------------
@dataclass(frozen=True)
class DataFileInfo:
    """One Parquet file a task wrote: everything its Delta ``add`` action needs.

    Attributes:
        path: path relative to the table root as stored on disk (partition folders escaped, not URI-encoded).
        size: file size in bytes.
        partition_values: ``{column: serialized value or None}`` (Delta partitionValues).
        modification_time: file modification time, ms since the epoch.
        stats: Delta statistics JSON (see :func:`file_stats_json`).
        num_records: rows in the file.
    """

    path: str
    size: int
    partition_values: dict[str, str | None]
    modification_time: int
    stats: str
    num_records: int

    def to_add_action(self):
        """The deltalake ``AddAction`` of this file (dataChange true)."""
        from deltalake.transaction import AddAction

        return AddAction(path=self.path, size=self.size, partition_values=dict(self.partition_values),
                         modification_time=self.modification_time, data_change=True, stats=self.stats)


@dataclass(frozen=True)
class DeltaLakeCommitMessage(WriterCommitMessage):
    """What one write task returns to the driver (picklable).

    Attributes:
        files: the Parquet files the task wrote, all closed and complete.
        partition_id: Spark partition id of the task.
        attempt: Spark task attempt number.
        batch_id: the micro-batch id from the task's local properties, or None when unknown.
    """

    files: list[DataFileInfo] = field(default_factory=list)
    partition_id: int = 0
    attempt: int = 0
    batch_id: int | None = None


def _files_of(messages: Iterable[WriterCommitMessage | None]) -> list[DataFileInfo]:
    out: list[DataFileInfo] = []
    for m in messages:
        if isinstance(m, DeltaLakeCommitMessage):
            out.extend(m.files)
    return out


# --- executor side: Parquet files ------------------------------------------------------------------
def _parquet_leaf_paths(name: str, t: pa.DataType) -> Iterator[tuple[str, pa.DataType]]:
    """Dotted Parquet leaf column paths of an Arrow field, as pyarrow's ``use_dictionary`` list names them."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _parquet_leaf_paths(f"{name}.{t.field(i).name}", t.field(i).type)
    elif pa.types.is_map(t):
        yield from _parquet_leaf_paths(f"{name}.key_value.key", t.key_type)
        yield from _parquet_leaf_paths(f"{name}.key_value.value", t.item_type)
    elif _is_container(t):
        yield from _parquet_leaf_paths(f"{name}.list.element", t.value_type)
    else:
        yield name, t


def _is_binary_type(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or pa.types.is_binary_view(t))


def dictionary_columns(schema: pa.Schema, sample: pa.Table | None) -> list[str]:
    """Parquet leaf columns worth dictionary encoding, judged on the first rows of a file's first row group.

    Dictionary encoding pays only for repeating values (topic, queueId, hosts, tags...). On unique
    values (msgId, offsets, CRCs) pyarrow still hashes every value until the dictionary page reaches
    1 MiB before it falls back to PLAIN, which costs 20-35% of the write time of a bronze row group and
    saves nothing. Rules: binary columns never (payloads); other top-level primitive columns when at most
    :data:`DICTIONARY_MAX_DISTINCT_FRACTION` of the first :data:`DICTIONARY_SAMPLE_ROWS` values of
    ``sample`` are distinct; leaves of nested columns (maps, lists, structs) always, as pyarrow's
    default. The encoding never changes the values read back, nor the statistics.
    """
    out: list[str] = []
    for f in schema:
        leaves = list(_parquet_leaf_paths(f.name, f.type))
        nested = len(leaves) != 1 or leaves[0][0] != f.name
        for path, t in leaves:
            if _is_binary_type(t):
                continue
            if nested or sample is None or sample.num_rows == 0:
                out.append(path)
                continue
            column = sample.column(f.name).slice(0, DICTIONARY_SAMPLE_ROWS)
            distinct = pc.count_distinct(column, mode="all").as_py()
            if distinct <= max(1, int(len(column) * DICTIONARY_MAX_DISTINCT_FRACTION)):
                out.append(path)
    return out


def parquet_writer_options(schema: pa.Schema, compression: str, sample: pa.Table | None = None) -> dict:
    """Keyword arguments of ``pyarrow.parquet.ParquetWriter`` for the sink's data files of ``schema``.

    ``compression``: the pyarrow codec name (``DeltaSinkOptions.compression``); ``sample``: the first
    rows the file will hold, to choose the dictionary-encoded columns (:func:`dictionary_columns`).
    Column statistics stay on for every column: Delta's per-file statistics are read from them.
    """
    return {"compression": compression, "use_dictionary": dictionary_columns(schema, sample)}


class _OpenParquetFile:
    """One Parquet file being written: buffered batches become row groups; size known from the stream."""

    def __init__(self, fs, root: str, rel_path: str, schema: pa.Schema, compression: str,
                 partition_values: dict[str, str | None]):
        self.fs = fs
        self.rel_path = rel_path
        self.full_path = posixpath.join(root, rel_path)
        self.schema = schema
        self.partition_values = partition_values
        self.buffer: list[pa.RecordBatch] = []
        self.buffered_bytes = 0
        self.written_arrow_bytes = 0
        self.num_records = 0
        self.compression = compression
        self._collector: list[pq.FileMetaData] = []
        self.stream = fs.open_output_stream(self.full_path)
        #: created at the first flush, when the rows that choose the dictionary columns are known
        self.writer: pq.ParquetWriter | None = None

    def bytes_on_disk(self) -> int:
        return self.stream.tell()

    def estimated_size(self) -> float:
        """Bytes on disk after the buffer is written, estimated from the compression seen so far."""
        ratio = self.bytes_on_disk() / self.written_arrow_bytes if self.written_arrow_bytes else 1.0
        return self.bytes_on_disk() + self.buffered_bytes * ratio

    def append(self, batch: pa.RecordBatch) -> int:
        size = batch.nbytes
        self.buffer.append(batch)
        self.buffered_bytes += size
        return size

    def flush(self) -> int:
        """Write the buffer as one row group; returns the Arrow bytes released."""
        if not self.buffer:
            return 0
        table = pa.Table.from_batches(self.buffer, schema=self.schema)
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.stream, self.schema, metadata_collector=self._collector,
                                           **parquet_writer_options(self.schema, self.compression, table))
        self.writer.write_table(table, row_group_size=max(1, table.num_rows))
        released = self.buffered_bytes
        self.written_arrow_bytes += released
        self.num_records += table.num_rows
        self.buffer = []
        self.buffered_bytes = 0
        return released

    def close(self) -> DataFileInfo:
        self.flush()
        if self.writer is None:  # nothing was appended: still a valid (empty) Parquet file
            self.writer = pq.ParquetWriter(self.stream, self.schema, metadata_collector=self._collector,
                                           **parquet_writer_options(self.schema, self.compression))
        self.writer.close()
        self.stream.close()
        info = self.fs.get_file_info(self.full_path)
        metadata = self._collector[0]
        mtime_ms = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else int(time.time() * 1000)
        return DataFileInfo(path=self.rel_path, size=info.size, partition_values=dict(self.partition_values),
                            modification_time=mtime_ms, stats=file_stats_json(metadata, self.schema),
                            num_records=metadata.num_rows)

    def discard(self) -> None:
        """Close without caring for errors and delete the partial file."""
        for closer in ((self.writer.close, self.stream.close) if self.writer is not None else (self.stream.close,)):
            try:
                closer()
            except Exception:  # noqa: BLE001 - best effort on the failure path
                pass
        _delete_quietly(self.fs, self.full_path)


def _delete_quietly(fs, full_path: str) -> bool:
    try:
        fs.delete_file(full_path)
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        log.warning("could not delete %s: %s", full_path, e)
        return False


class _TaskFileWriter:
    """All files of one write task: splits batches by partition values, rolls at the target size."""

    def __init__(self, table_uri: str, partition_by: Sequence[str], compression: str, codec_infix: str,
                 target_file_size: int, name_prefix: str):
        self.fs, self.root = _filesystem(table_uri)
        self.partition_by = list(partition_by)
        self.compression = compression
        self.codec_infix = codec_infix
        self.target_file_size = target_file_size
        self.row_group_bytes = min(ROW_GROUP_BUFFER_BYTES, max(1, target_file_size))
        self.name_prefix = name_prefix
        self.open_files: dict[tuple, _OpenParquetFile] = {}
        self.closed: list[DataFileInfo] = []
        self.buffered_bytes = 0
        self._made_dirs: set[str] = set()
        self._data_schema: pa.Schema | None = None

    def _new_file(self, key: tuple, values: list[str | None]) -> _OpenParquetFile:
        folder = partition_folder(self.partition_by, values)
        name = f"{self.name_prefix}-{uuid.uuid4()}{self.codec_infix}.parquet"
        rel = f"{folder}/{name}" if folder else name
        parent = posixpath.dirname(posixpath.join(self.root, rel))
        if parent not in self._made_dirs:
            self.fs.create_dir(parent, recursive=True)
            self._made_dirs.add(parent)
        f = _OpenParquetFile(self.fs, self.root, rel, self._data_schema, self.compression,
                             dict(zip(self.partition_by, values, strict=True)))
        self.open_files[key] = f
        return f

    def _split(self, batch: pa.RecordBatch) -> list[tuple[tuple, pa.RecordBatch]]:
        if not self.partition_by:
            return [((), batch)]
        cols = [batch.column(batch.schema.get_field_index(c)) for c in self.partition_by]
        keys = pa.table(cols, names=self.partition_by).group_by(self.partition_by, use_threads=False).aggregate([])
        rows = keys.to_pylist()
        if len(rows) == 1:
            return [(tuple(rows[0][c] for c in self.partition_by), batch)]
        out = []
        for row in rows:
            mask = None
            for c, col in zip(self.partition_by, cols, strict=True):
                v = row[c]
                m = pc.is_null(col) if v is None else pc.fill_null(pc.equal(col, pa.scalar(v, col.type)), False)
                mask = m if mask is None else pc.and_(mask, m)
            out.append((tuple(row[c] for c in self.partition_by), batch.filter(mask)))
        return out

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self._data_schema is None:
            missing = [c for c in self.partition_by if batch.schema.get_field_index(c) < 0]
            if missing:
                raise DeltaSinkConfigError(f"partition columns {missing} are not in the batch schema {batch.schema}")
            self._data_schema = pa.schema([f for f in batch.schema if f.name not in self.partition_by])
        data_names = self._data_schema.names
        for key, part in self._split(batch):
            f = self.open_files.get(key)
            if f is None:
                f = self._new_file(key, [partition_value_string(v) for v in key])
            self.buffered_bytes += f.append(part.select(data_names) if self.partition_by else part)
            if f.buffered_bytes >= self.row_group_bytes or f.estimated_size() >= self.target_file_size:
                self.buffered_bytes -= f.flush()
                if f.bytes_on_disk() >= self.target_file_size * ROLL_FRACTION:
                    self.closed.append(f.close())
                    del self.open_files[key]
        while self.buffered_bytes > MAX_TASK_BUFFER_BYTES and self.open_files:
            released = max(self.open_files.values(), key=lambda o: o.buffered_bytes).flush()
            if not released:
                break
            self.buffered_bytes -= released

    def close(self) -> list[DataFileInfo]:
        for key in list(self.open_files):
            self.closed.append(self.open_files.pop(key).close())
        self.buffered_bytes = 0
        return self.closed

    def discard(self) -> None:
        """Delete every file of this task (failure path)."""
        for f in self.open_files.values():
            f.discard()
        self.open_files.clear()
        for info in self.closed:
            _delete_quietly(self.fs, posixpath.join(self.root, info.path))
        self.closed = []


# --- driver side: the Delta table --------------------------------------------------------------------
def load_table(table_uri: str):
    """The current DeltaTable at ``table_uri``, or None when no Delta table exists there yet.

    Raises:
        connector.delta_paths.DeltaTablePathError: the ``_delta_log`` cannot be read (one line naming it).
    """
    return open_delta_table(table_uri)


def referenced_file_names(table) -> set[str]:
    """Base names of every file the table's current snapshot references (add actions)."""
    paths = table.get_add_actions(flatten=True).column("path").to_pylist()
    return {posixpath.basename(unquote(p)) for p in paths}


def delete_unreferenced_files(table_uri: str, paths: Iterable[str], table=None) -> list[str]:
    """Delete those of ``paths`` (relative to the table root) that the current table snapshot does not reference.

    Every deletion of data files in this module goes through here, so a file the table references is
    never deleted. Returns the relative paths actually deleted.
    """
    paths = list(paths)
    if not paths:
        return []
    if table is None:
        table = load_table(table_uri)
    keep = referenced_file_names(table) if table is not None else set()
    fs, root = _filesystem(table_uri)
    return [rel for rel in paths
            if posixpath.basename(rel) not in keep and _delete_quietly(fs, posixpath.join(root, rel))]


def app_id_from_checkpoint(checkpoint_location: str, name: str = "hareplica") -> str:
    """A stable appId for a query: ``<name>-<16 hex digits of SHA-256 of the absolute checkpoint path>``.

    DESIGN §4: apps derive appId from the checkpoint location, so a restart from the same checkpoint
    keeps it and a query with a new checkpoint gets a new one.
    """
    return f"{name}-{hashlib.sha256(normalize_table_uri(checkpoint_location).encode('utf-8')).hexdigest()[:16]}"


def app_tag(app_id: str) -> str:
    """8 hex digits naming an appId in file names (SHA-256 prefix), so batch files of one query are findable."""
    return hashlib.sha256(app_id.encode("utf-8")).hexdigest()[:8]


def batch_file_prefix(app_id: str, batch_id: int) -> str:
    """Name prefix shared by every file any attempt of micro-batch ``batch_id`` of ``app_id`` writes."""
    return f"part-{app_tag(app_id)}-b{batch_id:06d}-"


def list_batch_files(table_uri: str, prefix: str, folders: Iterable[str] | None = None) -> list[str]:
    """Relative paths of data files whose name starts with ``prefix``.

    ``folders`` (relative, "" for the root) limits the listing to those folders, non-recursively; None
    lists the whole table folder except ``_delta_log`` and other ``_``/``.`` folders.
    """
    from pyarrow import fs as pafs

    fs, root = _filesystem(table_uri)
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
    if folders is None:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    else:
        infos = [i for folder in sorted(set(folders))
                 for i in fs.get_file_info(pafs.FileSelector(posixpath.join(root, folder) if folder else root,
                                                             allow_not_found=True))]
    out = []
    for info in infos:
        if info.type != pafs.FileType.File or not info.base_name.startswith(prefix):
            continue
        rel = posixpath.relpath(info.path, root)
        if not any(part.startswith(("_", ".")) for part in rel.split("/")[:-1]):
            out.append(rel)
    return sorted(out)


class DeltaLakeStreamWriter(DataSourceStreamArrowWriter):
    """Writes micro-batches to a Delta table with exactly-once semantics (DESIGN §4; module docstring).

    Created by :meth:`DeltaLakeDataSource.streamWriter` on the driver, pickled to executors for
    :meth:`write`, and created again on the driver for every :meth:`commit` / :meth:`abort`; it holds
    only options and the schema.
    """

    def __init__(self, options: DeltaSinkOptions, schema: StructType, partition_by: Sequence[str],
                 batch_id: int | None = None):
        """``batch_id``: the micro-batch the tasks write, when known up front (:func:`write_batch`);
        None takes it from Spark's task property ``streaming.sql.batchId``."""
        self.options = options
        self.schema = schema
        self.partition_by = tuple(partition_by)
        self.batch_id = batch_id

    # executors -------------------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaLakeCommitMessage:
        """Write this task's rows as Parquet files in the table folder; return their descriptions.

        Files are named ``part-<appTag>-b<batchId>-p<partitionId>-a<attempt>-<uuid><codec>.parquet``
        (see :func:`batch_file_prefix`; ``b<batchId>-`` is left out when Spark gives no batch id).
        On any error the files written so far are deleted before the error propagates.
        """
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx else 0
        attempt = ctx.attemptNumber() if ctx else 0
        batch_id = self.batch_id
        if batch_id is None:
            raw_batch = ctx.getLocalProperty(SPARK_BATCH_ID_PROPERTY) if ctx else None
            batch_id = int(raw_batch) if raw_batch not in (None, "") else None
        if batch_id is not None:
            prefix = batch_file_prefix(self.options.app_id, batch_id)
        else:
            prefix = f"part-{app_tag(self.options.app_id)}-"
        writer = _TaskFileWriter(self.options.table_uri, self.partition_by, self.options.compression,
                                 self.options.codec_infix, self.options.target_file_size,
                                 f"{prefix}p{partition_id:05d}-a{attempt}")
        try:
            for batch in iterator:
                writer.write(batch)
            files = writer.close()
            fault_point("after-task-write", batch_id, self.options.table_uri)
        except BaseException:
            writer.discard()
            raise
        log.debug("task partition %d attempt %d of batch %s wrote %d files to %s", partition_id, attempt,
                  batch_id, len(files), self.options.table_uri)
        return DeltaLakeCommitMessage(files=list(files), partition_id=partition_id, attempt=attempt,
                                      batch_id=batch_id)

    # driver ------------------------------------------------------------------------------------------
    def _commit_properties(self, batch_id: int):
        from deltalake.transaction import CommitProperties, Transaction

        return CommitProperties(
            app_transactions=[Transaction(self.options.app_id, batch_id)],
            custom_metadata={"hareplica.appId": self.options.app_id, "hareplica.batchId": batch_id},
        )

    def _check_table(self, table) -> None:
        check_schema_matches(self.options.table_uri, table.schema().to_json(), table.metadata().partition_columns,
                             self.schema, self.partition_by)

    def _remove_earlier_attempts(self, batch_id: int, paths: Sequence[str]) -> None:
        """After a fresh commit of ``batch_id``: delete files of earlier attempts of the same batch.

        They come from task attempts whose results Spark dropped and from runs that died before this
        batch's commit. Only the folders this batch wrote to are listed (cheap); no version of the table
        can reference such a file, since the txn version was below ``batch_id`` until this commit, and
        the deletion still checks the current snapshot. Best effort: errors are logged.
        """
        folders = {posixpath.dirname(p) for p in paths}
        if not folders:
            return
        uri = self.options.table_uri
        try:
            keep = set(paths)
            stale = [p for p in list_batch_files(uri, batch_file_prefix(self.options.app_id, batch_id), folders)
                     if p not in keep]
            if stale:
                deleted = delete_unreferenced_files(uri, stale)
                log.info("removed %d files of earlier attempts of batch %d of appId %s from %s", len(deleted),
                         batch_id, self.options.app_id, uri)
        except Exception as e:  # noqa: BLE001 - the batch is committed; leftovers are maintenance's job
            log.warning("could not list earlier attempts of batch %d in %s: %s", batch_id, uri, e)

    def _remove_unlogged_batch_files(self, batch_id: int, table) -> list[str]:
        """On a replay of the last committed batch: delete files of ``batch_id`` that no log entry names.

        They are left by attempts of the batch that died before its commit when the process then also
        died after the commit and before removing them (``_remove_earlier_attempts``). A file some
        ``add`` or ``remove`` action names is kept (time travel). Best effort: errors are logged.
        """
        from connector.delta_maintenance import logged_file_names

        uri = self.options.table_uri
        try:
            candidates = list_batch_files(uri, batch_file_prefix(self.options.app_id, batch_id))
            if not candidates:
                return []
            logged = logged_file_names(uri)
            stale = [p for p in candidates if posixpath.basename(p) not in logged]
            deleted = delete_unreferenced_files(uri, stale, table)
            if deleted:
                log.info("removed %d files of failed attempts of replayed batch %d of appId %s from %s",
                         len(deleted), batch_id, self.options.app_id, uri)
            return deleted
        except Exception as e:  # noqa: BLE001 - the batch is committed; leftovers are maintenance's job
            log.warning("could not look for failed attempts of batch %d in %s: %s", batch_id, uri, e)
            return []

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit the batch's files with ``txn(appId, batchId)`` in one Delta transaction, or skip a replay.

        A replay (table txn version for appId >= batchId) commits nothing and deletes the files the
        replay wrote. After a fresh commit, files left by earlier attempts of the batch are deleted.

        Raises:
            DeltaSchemaMismatchError: the table's schema changed under the stream (the batch's files are removed).
            DeltaCommitError: no commit after MAX_COMMIT_ATTEMPTS concurrent-commit conflicts.
        """
        from deltalake.exceptions import CommitFailedError, DeltaError
        from deltalake.transaction import create_table_with_add_actions

        uri, app_id = self.options.table_uri, self.options.app_id
        files = _files_of(messages)
        paths = [f.path for f in files]
        actions = [f.to_add_action() for f in files]
        rows = sum(f.num_records for f in files)
        fault_point("before-delta-commit", batchId, uri)
        last_error: Exception | None = None
        for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
            table = load_table(uri)
            if table is None:
                try:
                    create_table_with_add_actions(uri, delta_schema_of(self.schema), actions, mode="error",
                                                  partition_by=list(self.partition_by) or None,
                                                  commit_properties=self._commit_properties(batchId))
                except DeltaError as e:
                    if load_table(uri) is None:
                        raise DeltaCommitError(f"could not create Delta table {uri} with batch {batchId} of appId "
                                               f"{app_id}: {e}") from e
                    log.info("Delta table %s was created concurrently; retrying batch %d as an append", uri, batchId)
                    last_error = e
                    continue
                log.info("created Delta table %s with batch %d of appId %s: %d files, %d rows", uri, batchId,
                         app_id, len(files), rows)
                fault_point("after-delta-commit", batchId, uri)
                self._remove_earlier_attempts(batchId, paths)
                return
            try:
                self._check_table(table)
            except DeltaSchemaMismatchError:
                delete_unreferenced_files(uri, paths, table)
                raise
            committed = table.transaction_version(app_id)
            if committed is not None and committed >= batchId:
                deleted = delete_unreferenced_files(uri, paths, table)
                if attempt == 1 and committed == batchId:
                    deleted += self._remove_unlogged_batch_files(batchId, table)
                if attempt == 1:
                    log.warning("batch %d of appId %s is already in Delta table %s (txn version %d): replay "
                                "skipped, %d fresh files removed", batchId, app_id, uri, committed, len(deleted))
                else:
                    log.info("batch %d of appId %s was committed to %s concurrently (txn version %d); %d files "
                             "of this attempt removed", batchId, app_id, uri, committed, len(deleted))
                return
            try:
                table.create_write_transaction(actions, mode="append", schema=delta_schema_of(self.schema),
                                               partition_by=list(self.partition_by) or None,
                                               commit_properties=self._commit_properties(batchId))
            except CommitFailedError as e:
                log.info("commit of batch %d of appId %s to %s conflicted (attempt %d): %s", batchId, app_id, uri,
                         attempt, e)
                last_error = e
                continue
            log.info("committed batch %d of appId %s to %s: %d files, %d rows", batchId, app_id, uri, len(files), rows)
            fault_point("after-delta-commit", batchId, uri)
            self._remove_earlier_attempts(batchId, paths)
            return
        try:
            delete_unreferenced_files(uri, paths)
        except Exception as e:  # noqa: BLE001 - the commit error below is what matters
            log.warning("could not clean up the files of batch %d in %s: %s", batchId, uri, e)
        raise DeltaCommitError(f"could not commit batch {batchId} of appId {app_id} to Delta table {uri} after "
                               f"{MAX_COMMIT_ATTEMPTS} attempts: {last_error}") from last_error

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Remove the files of a failed batch, never a file the table references.

        Removed: the files in ``messages`` and, unless the batch's txn is already committed, every other
        file named for this appId and batch (tasks whose results Spark dropped when it cancelled them).
        Failed tasks (None messages) already removed their own files.
        """
        uri, app_id = self.options.table_uri, self.options.app_id
        candidates = {f.path for f in _files_of(messages)}
        table = load_table(uri)
        committed = table.transaction_version(app_id) if table is not None else None
        if committed is None or committed < batchId:
            candidates.update(list_batch_files(uri, batch_file_prefix(app_id, batchId)))
        deleted = delete_unreferenced_files(uri, sorted(candidates), table)
        log.warning("aborted batch %d of appId %s on %s (txn version %s): removed %d of %d candidate files",
                    batchId, app_id, uri, committed, len(deleted), len(candidates))


class DeltaLakeDataSource(DataSource):
    """``format("deltalake")``: a streaming sink into a Delta table without Spark's Delta jars (DESIGN §4).

    Use: ``df.writeStream.format("deltalake").option("appId", "bronze").option("checkpointLocation", cp)
    .start("/path/to/table")``. Options are listed in the module docstring.
    """

    @classmethod
    def name(cls) -> str:
        return "deltalake"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DeltaLakeStreamWriter:
        """Validate options, partition columns and, if the table exists, its schema; return the writer.

        Raises:
            DeltaSinkConfigError: bad options or partition columns, or complete output mode (``overwrite``).
            DeltaSchemaMismatchError: the existing table's columns or partitioning differ from the stream's.
        """
        opts = DeltaSinkOptions.from_options(self.options)
        if overwrite:
            raise DeltaSinkConfigError(
                f'format("deltalake") supports outputMode "append" only (table {opts.table_uri})')
        return checked_stream_writer(opts, schema)


def checked_stream_writer(opts: DeltaSinkOptions, schema: StructType) -> DeltaLakeStreamWriter:
    """The sink's writer of ``schema`` rows into ``opts.table_uri``, checked on the driver before any task runs.

    Partition columns: the existing table's (``opts.partition_by``, when given, must equal them), else
    ``opts.partition_by`` or none. Raises DeltaSchemaMismatchError when the table's columns or partitioning
    differ, DeltaSinkConfigError for bad partition columns or a type Delta cannot hold.
    """
    table = load_table(opts.table_uri)
    if table is not None:
        check_writable(table, opts.table_uri, "append")
        check_schema_matches(opts.table_uri, table.schema().to_json(), table.metadata().partition_columns,
                             schema, opts.partition_by)
        partition_by = tuple(table.metadata().partition_columns)
    else:
        check_new_table_location(opts.table_uri, create_in_non_empty_path=opts.create_in_non_empty_path)
        partition_by = opts.partition_by or ()
    check_partition_columns(opts.table_uri, schema, partition_by)
    delta_schema_of(schema)
    return DeltaLakeStreamWriter(opts, schema, partition_by)


# --- foreachBatch: the same exactly-once write for a static DataFrame ---------------------------------
@dataclass(frozen=True)
class BatchWriteResult:
    """What :func:`write_batch` did.

    Attributes:
        table_uri: the table written.
        batch_id: the micro-batch id (Delta txn version for the appId).
        skipped: True when the table already holds this batch for the appId (nothing written).
        files: Parquet files committed.
        rows: rows committed.
    """

    table_uri: str
    batch_id: int
    skipped: bool
    files: int = 0
    rows: int = 0


def _task_message_rows(writer: DeltaLakeStreamWriter):
    """The ``mapInArrow`` function of :func:`write_batch`: write the task's rows, return its pickled message."""

    def run(iterator: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        message = writer.write(iterator)
        yield pa.record_batch([pa.array([pickle.dumps(message)], pa.binary())], names=["message"])

    return run


def write_batch(df, path: str, app_id: str, batch_id: int, *, partition_by: Sequence[str] | None = None,
                target_file_size: int | None = None, compression: str | None = None,
                create_in_non_empty_path: bool = False) -> BatchWriteResult:
    """Append a static DataFrame to a Delta table exactly once per ``(app_id, batch_id)``.

    For ``foreachBatch`` functions that write more than one table per micro-batch. Executors write the
    Parquet files (``df.mapInArrow``, same files and statistics as the streaming sink), the driver
    commits them in one transaction carrying ``txn(app_id, batch_id)``. When the table's txn version
    for ``app_id`` is already ``>= batch_id`` (a micro-batch replayed after a crash) nothing is written.
    A failed job removes what its tasks wrote (the abort path of the sink).

    Args:
        df: the rows to append (a batch DataFrame, e.g. the one foreachBatch receives).
        path: table location; created by the first commit.
        app_id: stable id of the writing query and table, e.g. from :func:`app_id_from_checkpoint`.
        batch_id: the micro-batch id (>= 0).
        partition_by: partition columns for a new table (must equal an existing table's when given).
        target_file_size: bytes per Parquet file (default 100 MiB), ``compression``: Parquet codec.
        create_in_non_empty_path: create a new table in a folder holding other files (default: refused).
    Raises:
        DeltaSinkConfigError, DeltaSchemaMismatchError, DeltaCommitError: as the streaming sink.
        connector.delta_paths.DeltaTablePathError: an unreadable ``_delta_log``, or a non-empty plain folder.
    """
    raw: dict[str, str] = {"path": path, "appId": app_id}
    if partition_by:
        raw["partitionBy"] = ",".join(partition_by)
    if target_file_size is not None:
        raw["targetFileSize"] = str(target_file_size)
    if compression is not None:
        raw["compression"] = compression
    if create_in_non_empty_path:
        raw[CREATE_IN_NON_EMPTY_OPTION] = "true"
    opts = DeltaSinkOptions.from_options(raw)
    if batch_id < 0:
        raise DeltaSinkConfigError(f"batch id {batch_id} for table {opts.table_uri} must be >= 0")
    schema = df.schema
    table = load_table(opts.table_uri)
    if table is not None:
        check_writable(table, opts.table_uri, "append")
        check_schema_matches(opts.table_uri, table.schema().to_json(), table.metadata().partition_columns,
                             schema, opts.partition_by)
        committed = table.transaction_version(app_id)
        if committed is not None and committed >= batch_id:
            log.warning("batch %d of appId %s is already in Delta table %s (txn version %d): skipped", batch_id,
                        app_id, opts.table_uri, committed)
            return BatchWriteResult(opts.table_uri, batch_id, skipped=True)
        partition_by = tuple(table.metadata().partition_columns)
    else:
        check_new_table_location(opts.table_uri, create_in_non_empty_path=opts.create_in_non_empty_path)
        partition_by = opts.partition_by or ()
    check_partition_columns(opts.table_uri, schema, partition_by)
    delta_schema_of(schema)
    writer = DeltaLakeStreamWriter(opts, schema, partition_by, batch_id=batch_id)
    try:
        rows = df.mapInArrow(_task_message_rows(writer), "message binary").collect()
    except BaseException:
        writer.abort([], batch_id)
        raise
    messages = [pickle.loads(r["message"]) for r in rows]
    files = _files_of(messages)
    writer.commit(messages, batch_id)
    return BatchWriteResult(opts.table_uri, batch_id, skipped=False, files=len(files),
                            rows=sum(f.num_records for f in files))
