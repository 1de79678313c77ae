"""Queries over the Delta tables: ``hareplica query "SQL"`` in deltalake's engine (:func:`query_tables`, the
default, no JVM) or in Spark SQL (:func:`register_spark_tables`, over Spark's Delta reader, falling back to
:func:`register_spark_views`, Parquet views of each table's current snapshot, without Spark's Delta jars). Tables
are the folders under ``--tables-root`` holding a ``_delta_log``, plus ``--table NAME=PATH``. The rules and the
engines' differences: docs/delta.md "5. Queries".
"""

from __future__ import annotations

import base64
import csv
import datetime as _dt
import io
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from connector.delta.location import error_line, open_delta_table
from connector.errors import DeltaTablePathError, HAReplicaError, StorageAccessError, StorageConfigError
from connector.storage import locations, store
from connector.storage.probe import check_location
from streaming_apps.defaults import DEFAULT_MAX_ROWS, ENGINE_DELTALAKE, ENGINE_SPARK, ENGINES, FORMATS

log = logging.getLogger(__name__)

#: Bytes of a binary value shown (hex) before it is cut.
BINARY_PREVIEW_BYTES = 16
#: Characters of a string value shown in table format before it is cut.
STRING_PREVIEW_CHARS = 80


class QueryError(HAReplicaError):
    """No tables, an unknown table, a failed SQL statement or a table the Spark view cannot represent."""


def discover_tables(tables_root: str | os.PathLike) -> dict[str, str]:
    """``{name: absolute path or s3:// location}`` of the Delta tables under ``tables_root`` (module docstring),
    sorted by name; in an object store, one listing of the root's "folders" and one of each one's ``_delta_log``."""
    if locations.is_uri(tables_root):
        return _discover_remote_tables(locations.resolve(tables_root, "--tables-root"))
    root = Path(tables_root).resolve()
    found: dict[str, str] = {}
    if (root / "_delta_log").is_dir():
        found[root.name] = str(root)
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and (child / "_delta_log").is_dir():
                found[child.name] = str(child)
    return found


def _discover_remote_tables(root: str) -> dict[str, str]:
    from pyarrow import fs as pafs

    fs, key = store.filesystem(root)

    def is_table(prefix: str) -> bool:
        return bool(fs.get_file_info(pafs.FileSelector(prefix + "/_delta_log", allow_not_found=True)))

    found: dict[str, str] = {}
    if is_table(key):
        found[key.rsplit("/", 1)[-1]] = root
    for info in fs.get_file_info(pafs.FileSelector(key, allow_not_found=True)):
        if info.type == pafs.FileType.Directory and not info.base_name.startswith(("_", ".")) and is_table(info.path):
            found[info.base_name] = f"s3://{info.path}"
    return dict(sorted(found.items()))


def resolve_tables(tables_root: str | os.PathLike | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Tables found under ``tables_root`` plus ``extra`` (``{name: path}``, overriding).

    Raises:
        QueryError: no table at all.
    """
    tables = discover_tables(tables_root) if tables_root is not None else {}
    for name, path in (extra or {}).items():
        tables[name] = locations.resolve(path, f"--table {name}")
    if not tables:
        raise QueryError(f"no Delta tables under {tables_root} (a table is a folder holding _delta_log); "
                         "run an app first or pass --table NAME=PATH")
    return tables


def query_tables(sql: str, tables: Mapping[str, str]) -> pa.Table:
    """Run ``sql`` over ``tables`` (``{name: path}``) with deltalake's query engine; the result as a pyarrow.Table.

    Raises:
        QueryError: a table cannot be opened, or the statement fails (DataFusion's message included).
    """
    from deltalake import QueryBuilder

    qb = QueryBuilder()
    for name, path in tables.items():
        qb.register(name, _open_table(name, path))
    try:
        # read through the query engine: DeltaTable.to_pyarrow_table can abort the process at exit (delta-rs #2184)
        return pa.RecordBatchReader.from_stream(qb.execute(sql)).read_all()
    except Exception as e:  # noqa: BLE001 - DataFusion errors
        raise QueryError(f"query failed: {error_line(e)} (tables: {', '.join(sorted(tables))})") from e


def _open_table(name: str, path: str):
    """The DeltaTable of table ``name``; QueryError (one line naming the path and the broken log file) otherwise."""
    try:
        table = open_delta_table(path)
    except DeltaTablePathError as e:
        raise QueryError(f"table {name}: {e}") from e
    except Exception as e:  # noqa: BLE001 - delta-rs raises several types
        raise QueryError(f"cannot open Delta table {name} at {path}: {error_line(e)}") from e
    if table is None:
        raise QueryError(f"table {name}: no Delta table at {path}")
    return table


def _json_value(value: Any) -> Any:
    """A result value as JSON: bytes as base64, times as ISO-8601, maps as objects."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {str(k): _json_value(v) for k, v in value}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def display_value(value: Any) -> str:
    """A result value for a terminal table: binary as a hex preview with its length, long strings cut."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        head = value[:BINARY_PREVIEW_BYTES].hex()
        return f"0x{head}{'…' if len(value) > BINARY_PREVIEW_BYTES else ''} ({len(value)} B)"
    if isinstance(value, _dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, str):
        return value if len(value) <= STRING_PREVIEW_CHARS else value[:STRING_PREVIEW_CHARS] + "…"
    if isinstance(value, list | dict):
        text = json.dumps(_json_value(value), separators=(",", ":"))
        return text if len(text) <= STRING_PREVIEW_CHARS else text[:STRING_PREVIEW_CHARS] + "…"
    return str(value)


def render(result: pa.Table, fmt: str = "table", *, max_rows: int | None = DEFAULT_MAX_ROWS, console=None,
           title: str | None = None) -> str | None:
    """Print (table, via rich) or return (jsonl, csv) a query result.

    ``table``: a rich table of at most ``max_rows`` rows and a line with the row count; returns None.
    ``jsonl``: one JSON object per row (binary base64, times ISO-8601); ``csv``: a header and rows.
    Both return the whole text. Raises QueryError for an unknown format.
    """
    rows = result.to_pylist()
    if fmt == "jsonl":
        return "".join(json.dumps({k: _json_value(v) for k, v in r.items()}, ensure_ascii=False) + "\n" for r in rows)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(result.column_names)
        for r in rows:
            writer.writerow(["" if v is None else (v if isinstance(v, str | int | float) else
                                                   json.dumps(_json_value(v))) for v in r.values()])
        return buf.getvalue()
    if fmt != "table":
        raise QueryError(f"--format {fmt!r} must be one of {', '.join(FORMATS)}")
    from rich.table import Table

    from streaming_apps.console_log import console as console_of

    console = console or console_of()
    table = Table(title=title)
    for name in result.column_names:
        table.add_column(name, overflow="fold")
    shown = rows if max_rows is None else rows[:max_rows]
    for r in shown:
        table.add_row(*(display_value(v) for v in r.values()))
    console.print(table)
    more = f" (first {len(shown)} shown; --max-rows to see more)" if len(shown) < len(rows) else ""
    console.print(f"{len(rows)} row{'s' if len(rows) != 1 else ''}{more}")
    return None


def query_command(sql: str, *, tables_root: str | None, tables: Mapping[str, str] | None = None, fmt: str = "table",
                  max_rows: int | None = DEFAULT_MAX_ROWS, engine: str = ENGINE_DELTALAKE,
                  jars: list[str] | None = None, master: str | None = None,
                  log_workdir: str | os.PathLike | None = None) -> int:
    """``hareplica query``: run and print; returns the exit code (0 ok, 1 query error).

    ``engine``: ``deltalake`` (default, no JVM) or ``spark`` (:func:`spark_query`, with ``jars`` or the
    staged Delta jars; with ``log_workdir``, Spark's and py4j's output go to its ``logs/query.log``,
    :mod:`streaming_apps.console_log`, named on stderr).
    """
    import sys

    from streaming_apps.console_log import console as console_of

    try:
        if engine not in ENGINES:
            raise QueryError(f"--engine {engine!r} must be one of {', '.join(ENGINES)}")
        if tables_root is not None and locations.is_uri(tables_root):
            check_location(tables_root, store.active(), "--tables-root")
        resolved = resolve_tables(tables_root, tables)
        if engine == ENGINE_SPARK:
            log_file = None
            if log_workdir is not None:
                from streaming_apps.console_log import open_log_file

                log_file = open_log_file(log_workdir, "query")
                if log_file is not None:
                    console_of(stderr=True).print(f"Spark's and py4j's log: {log_file}", highlight=False)
            result = spark_query(sql, resolved, jars=jars, master=master, log_file=log_file)
        else:
            result = query_tables(sql, resolved)
    except QueryError as e:
        console_of(stderr=True).print(f"[red]error:[/red] {e}", highlight=False)
        return 1
    except (StorageAccessError, StorageConfigError) as e:
        console_of(stderr=True).print(f"[red]error:[/red] {e}", highlight=False)
        return 2
    text = render(result, fmt, max_rows=max_rows)
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def spark_view_frame(spark, path: str):
    """A Spark DataFrame of a Delta table's current snapshot, read as Parquet (no Delta jars needed).

    Raises:
        QueryError: the table needs reader features (deletion vectors, column mapping...) plain
            Parquet reads would get wrong.
    """
    from pyspark.sql.types import StructType

    dt = store.delta_table(path)
    protocol = dt.protocol()
    if protocol.min_reader_version > 1 or (protocol.reader_features or []):
        raise QueryError(f"Delta table {path} needs reader version {protocol.min_reader_version} features "
                         f"{protocol.reader_features or []}: read it with Spark's Delta jars (format('delta'))")
    schema = StructType.fromJson(json.loads(dt.schema().to_json()))
    files = dt.file_uris()
    if not files:
        return spark.createDataFrame([], schema)
    df = spark.read.schema(schema).option("basePath", locations.for_spark(path)).parquet(
        *(locations.for_spark(f) for f in files))
    return df.select(*schema.fieldNames())


def register_spark_views(spark, tables_root: str | os.PathLike | None, tables: Mapping[str, str] | None = None
                         ) -> dict[str, Any]:
    """Register every Delta table (module docstring) as a Spark temporary view named like the table.

    Returns ``{name: DataFrame}``. Afterwards ``spark.sql("SELECT ... FROM bronze")`` works in that
    session. Raises QueryError as :func:`resolve_tables` and :func:`spark_view_frame`.
    """
    frames = {}
    for name, path in resolve_tables(tables_root, tables).items():
        df = spark_view_frame(spark, path)
        df.createOrReplaceTempView(name)
        frames[name] = df
        log.info("Spark view %s over Delta table %s", name, path)
    return frames


def spark_query(sql: str, tables: Mapping[str, str], *, jars: list[str] | None = None, master: str | None = None,
                log_file: str | os.PathLike | None = None) -> pa.Table:
    """Run ``sql`` in Spark SQL over ``tables`` (``{name: path}``); the result as a pyarrow.Table.

    Starts a Spark session on ``master`` (None: streaming_apps.spark_session.DEFAULT_MASTER) with ``jars``
    (default: the Delta jars ``make jvm-peers`` staged, :func:`streaming_apps.spark_session.staged_delta_jars`)
    and the Delta SQL extension when there are any, registers the tables with :func:`register_spark_tables`,
    runs the statement and stops Spark. ``log_file``: the driver JVM's output goes there (build_spark_session).

    Raises:
        QueryError: a table cannot be registered, or the statement fails (Spark's first message line).
    """
    from streaming_apps.spark_session import DEFAULT_MASTER, build_spark_session, staged_delta_jars, stop_session

    jars = list(jars) if jars else staged_delta_jars()
    with_delta = any(os.path.basename(j).startswith("delta-spark") for j in jars)
    conf = {}
    if any(locations.is_uri(path) for path in tables.values()):  # s3a:// reads: hadoop-aws and the store's settings
        from streaming_apps.object_store import staged_s3a_jars

        jars += [] if any("hadoop-aws" in os.path.basename(j) for j in jars) else staged_s3a_jars()
        conf = store.active().hadoop_conf()
    spark = build_spark_session("hareplica-query", master=master or DEFAULT_MASTER, jars=jars, delta=with_delta,
                                extra_conf=conf, log_file=log_file)
    try:
        register_spark_tables(spark, None, tables)
        try:
            return spark.sql(sql).toArrow()
        except Exception as e:  # noqa: BLE001 - AnalysisException, ParseException, Py4JJavaError
            raise QueryError(f"query failed: {error_line(e)} (tables: {', '.join(sorted(tables))})") from e
    finally:
        stop_session(spark)


def spark_has_delta(spark) -> bool:
    """True when Spark's Delta Lake classes load in the session's JVM (the delta-spark jars are there)."""
    jvm = spark.sparkContext._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable", False, loader)
        return True
    except Exception:  # noqa: BLE001 - py4j wraps ClassNotFoundException
        return False


def register_spark_tables(spark, tables_root: str | os.PathLike | None, tables: Mapping[str, str] | None = None
                          ) -> dict[str, Any]:
    """Register every Delta table as a Spark temporary view: Spark's own Delta reader, else Parquet views.

    With Spark's Delta jars (:func:`spark_has_delta`) each view is ``spark.read.format("delta").load(path)``
    (deletion vectors, column mapping, time travel all handled by Delta); without them this is
    :func:`register_spark_views` (a logged fallback). Returns ``{name: DataFrame}``.

    Raises:
        QueryError: as :func:`resolve_tables`; a table Spark cannot open (one line naming it).
    """
    resolved = resolve_tables(tables_root, tables)
    if not spark_has_delta(spark):
        log.warning("Spark has no Delta Lake classes: registering Parquet views of the current snapshots "
                    "(make jvm-peers stages the Delta jars)")
        return register_spark_views(spark, None, resolved)
    frames = {}
    for name, path in resolved.items():
        _open_table(name, path)  # one line for a missing or unreadable table, before Spark's own error
        try:
            df = spark.read.format("delta").load(locations.for_spark(path))
        except Exception as e:  # noqa: BLE001 - AnalysisException
            raise QueryError(f"table {name}: Spark cannot read Delta table {path}: {error_line(e)}") from e
        df.createOrReplaceTempView(name)
        frames[name] = df
        log.info("Spark view %s over Delta table %s (format delta)", name, path)
    return frames
