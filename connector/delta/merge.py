"""Upsert a micro-batch into a Delta table with one MERGE carrying ``txn(appId, batchId)``, exactly once: for
``foreachBatch`` queries in output mode ``update`` whose batches hold the full current value of each changed key
(gold). The same commit can set a flag column on rows the batch does not hold (:class:`FinalizeRows`).

Two writers, one rule: :func:`merge_batch` (delta-rs on the driver, the batch collected as Arrow, so it must be
small) and :func:`spark_merge_batch` (Spark's ``MERGE INTO`` with Delta's idempotent DML settings). The rules:
docs/delta.md "The replay rule" and "4. The apps", "gold → table `gold_orders_per_minute`".
"""

from __future__ import annotations

import datetime as _dt
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from connector.delta.commit import batch_already_committed
from connector.delta.faults import fault_point
from connector.delta.features import check_writable
from connector.delta.location import check_new_table_location, normalize_table_uri, open_delta_table
from connector.delta.schema import check_schema_matches, delta_schema_of
from connector.errors import DeltaCommitError
from connector.retry import retry_attempts
from connector.storage import store

log = logging.getLogger(__name__)

#: Merge attempts when another commit (e.g. maintenance compacting the table) wins the race.
MAX_MERGE_ATTEMPTS = 10
SOURCE_ALIAS = "s"
TARGET_ALIAS = "t"
#: Spark's Delta settings that make a DML command idempotent per (appId, version).
SPARK_TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
SPARK_TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
#: Spark's Delta reports a lost optimistic-concurrency race (e.g. with OPTIMIZE) with these exception classes.
SPARK_CONFLICT_MARK = "io.delta.exceptions.Concurrent"


@dataclass(frozen=True)
class FinalizeRows:
    """Table rows the batch does not hold whose ``time_column`` is at or before ``up_to_us`` get ``flag`` = true.

    Attributes:
        flag: a boolean column; only rows where it is false are rewritten.
        time_column: a timestamp column (e.g. gold's windowEnd).
        up_to_us: the cut-off, microseconds since the epoch (UTC).
    """

    flag: str
    time_column: str
    up_to_us: int

    def flagged_spark(self, df):
        """``df`` (a Spark DataFrame) with ``flag`` = ``time_column <= up_to_us`` appended: true for the batch's own
        rows the cut-off has passed, null where ``time_column`` is null."""
        from pyspark.sql import functions as F

        return df.withColumn(self.flag, F.col(self.time_column) <= F.timestamp_micros(F.lit(int(self.up_to_us))))

    def flagged_arrow(self, rows, schema):
        """``(rows, schema)`` with the flag of :meth:`flagged_spark` appended, computed in Arrow on the driver.

        Args:
            rows: a pyarrow Table holding ``time_column`` as an Arrow timestamp in microseconds, as Spark's
                ``toArrow`` gives it (any time zone: the cut-off is compared in the column's own type).
            schema: the rows' Spark StructType; the flag's field is nullable where ``time_column`` is, as Spark
                types ``flagged_spark``'s column.
        Returns:
            the Table and the StructType, each with ``flag`` (boolean) last.
        """
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql.types import BooleanType, StructField, StructType

        column = rows[self.time_column]
        cut_off = pa.scalar(int(self.up_to_us), column.type)
        flagged = rows.append_column(pa.field(self.flag, pa.bool_()), pc.less_equal(column, cut_off))
        field = StructField(self.flag, BooleanType(), schema[self.time_column].nullable)
        return flagged, StructType([*schema.fields, field])

    def delta_rs_predicate(self) -> str:
        """The condition in delta-rs's (DataFusion's) SQL, on the target alias."""
        up_to = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(microseconds=self.up_to_us)
        return (f"(NOT {TARGET_ALIAS}.{self.flag}) AND ({TARGET_ALIAS}.{self.time_column} <= "
                f"arrow_cast('{up_to.isoformat()}', 'Timestamp(Microsecond, Some(\"UTC\"))'))")

    def spark_predicate(self) -> str:
        """The condition in Spark SQL, on the target alias."""
        return (f"(NOT {TARGET_ALIAS}.`{self.flag}`) AND ({TARGET_ALIAS}.`{self.time_column}` <= "
                f"timestamp_micros({int(self.up_to_us)}))")


@dataclass(frozen=True)
class MergeResult:
    """What a merge did: ``skipped`` (a replay: the table holds the batch), ``created`` (the first batch made
    the table), and delta-rs's merge metrics (empty for Spark and for a created table)."""

    table_uri: str
    batch_id: int
    skipped: bool = False
    created: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)


class _TableCreatedConcurrently(Exception):
    """Another writer created the table between the check and this batch's creation; retried as a merge."""


def key_condition(keys: Sequence[str], *, partition_by: Sequence[str] = (), quote: str = "") -> str:
    """``t.k = s.k AND ...`` for the merge's ON clause.

    Partition columns among ``keys`` are compared with ``=`` (delta-rs then reads only the partitions
    the batch touches; a partition value is never null here); the others null-safely (``IS NOT
    DISTINCT FROM``), each term in parentheses (DataFusion would otherwise bind ``IS NOT DISTINCT FROM``
    looser than ``AND``). ``quote`` wraps column names (a backtick for Spark SQL; none for delta-rs, which
    keeps their case).
    """
    if not keys:
        raise ValueError("a merge needs at least one key column")
    terms = []
    for k in keys:
        op = "=" if k in partition_by else "IS NOT DISTINCT FROM"
        terms.append(f"({TARGET_ALIAS}.{quote}{k}{quote} {op} {SOURCE_ALIAS}.{quote}{k}{quote})")
    return " AND ".join(terms)


def merge_batch(rows, schema, path: str, app_id: str, batch_id: int, *, keys: Sequence[str],
                partition_by: Sequence[str] = (), finalize: FinalizeRows | None = None,
                delete: str | None = None) -> MergeResult:
    """Upsert ``rows`` into the Delta table at ``path`` with delta-rs, exactly once per ``(app_id, batch_id)``.

    Args:
        rows: a pyarrow Table of the batch (columns of ``schema``; cast to the table's Delta types).
        schema: the rows' Spark StructType (checked against an existing table; creates a new one).
        keys: the columns identifying a row (include the partition columns: delta-rs then prunes files).
        partition_by: partition columns of a new table (must equal an existing table's).
        finalize: also set a flag on rows the batch does not hold (:class:`FinalizeRows`).
        delete: a boolean column of ``rows`` that is not in ``schema``: a row where it is true deletes the table's
            row of its key and is not inserted (a tombstone); the other rows update or insert as without it.
            At most one row per key (the caller keeps each key's latest).
    Raises:
        DeltaSchemaMismatchError: the table's columns or partitioning differ from ``schema``.
        UnsupportedTableFeatureError, DeltaTablePathError: as the other writers (connector.delta.commit).
        deltalake.exceptions.CommitFailedError: still conflicting after MAX_MERGE_ATTEMPTS attempts.
        DeltaCommitError: the table kept appearing between the check and its creation.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import CommitProperties, Transaction

    uri = normalize_table_uri(path)
    delta_schema = delta_schema_of(schema)
    flags = None if delete is None else rows.column(delete).fill_null(False)
    rows = rows.select(list(schema.fieldNames())).cast(pa.schema(delta_schema.to_arrow()))
    if flags is not None:
        rows = rows.append_column(pa.field(delete, pa.bool_(), nullable=False), flags)
    props = CommitProperties(app_transactions=[Transaction(app_id, batch_id)],
                             custom_metadata={"hareplica.appId": app_id, "hareplica.batchId": batch_id})
    def log_conflict(attempt: int, error: BaseException) -> None:
        if isinstance(error, CommitFailedError):  # another commit won; read the table again and retry
            log.info("merge of batch %d of appId %s into %s conflicted (attempt %d): %s", batch_id, app_id, uri,
                     attempt, error)

    try:
        for attempt in retry_attempts(MAX_MERGE_ATTEMPTS, (CommitFailedError, _TableCreatedConcurrently),
                                      on_retry=log_conflict):
            with attempt:
                table = open_delta_table(uri)
                if table is not None:
                    check_writable(table, uri, "merge")
                    check_schema_matches(uri, table.schema().to_json(), table.metadata().partition_columns, schema,
                                         partition_by or None)
                    committed = table.transaction_version(app_id)
                    if batch_already_committed(committed, batch_id):
                        log.warning("batch %d of appId %s is already in Delta table %s (txn version %d): replay "
                                    "skipped", batch_id, app_id, uri, committed)
                        return MergeResult(uri, batch_id, skipped=True)
                else:
                    check_new_table_location(uri)
                fault_point("before-delta-commit", batch_id, uri)
                try:
                    if table is None:
                        created = rows if delete is None else \
                            rows.filter(pc.invert(rows.column(delete))).drop_columns([delete])
                        write_deltalake(uri, created, mode="error", partition_by=list(partition_by) or None,
                                        storage_options=store.storage_options(uri), commit_properties=props)
                        metrics: dict[str, Any] = {}
                    else:
                        merger = table.merge(rows, key_condition(keys, partition_by=partition_by),
                                             source_alias=SOURCE_ALIAS, target_alias=TARGET_ALIAS,
                                             commit_properties=props)
                        merger = _upsert_clauses(merger, schema.fieldNames(), delete)
                        if finalize is not None:
                            merger = merger.when_not_matched_by_source_update({finalize.flag: "true"},
                                                                              finalize.delta_rs_predicate())
                        before = table.version()  # execute() moves ``table`` to the version it commits
                        metrics = merger.execute()
                        if open_delta_table(uri).version() == before:  # nothing changed: delta-rs made no commit
                            table.create_write_transaction([], mode="append", schema=delta_schema,
                                                           partition_by=list(partition_by) or None,
                                                           commit_properties=props)
                except CommitFailedError:
                    raise  # retried (log_conflict)
                except Exception as e:
                    if table is None and open_delta_table(uri) is not None:
                        raise _TableCreatedConcurrently() from e  # retried: merge into it
                    raise
                log.info("merged batch %d of appId %s into %s: %s", batch_id, app_id, uri,
                         metrics or f"{rows.num_rows} rows")
                fault_point("after-delta-commit", batch_id, uri)
                return MergeResult(uri, batch_id, created=table is None, metrics=metrics)
    except _TableCreatedConcurrently as e:
        raise DeltaCommitError(f"could not merge batch {batch_id} of appId {app_id} into Delta table {uri}: it was "
                               f"created concurrently {MAX_MERGE_ATTEMPTS} times") from e.__cause__
    raise AssertionError("unreachable: the last attempt returned or raised")

def _upsert_clauses(merger, columns: Sequence[str], delete: str | None):
    """Update matched rows, insert the others; with a ``delete`` column, its true rows delete the matched row
    and are not inserted (delta-rs applies the first matching clause, in order)."""
    if delete is None:
        return merger.when_matched_update_all().when_not_matched_insert_all()
    flag = f"{SOURCE_ALIAS}.{delete}"
    values = {c: f"{SOURCE_ALIAS}.{c}" for c in columns}
    return (merger.when_matched_delete(predicate=flag)
            .when_matched_update(values, predicate=f"NOT {flag}")
            .when_not_matched_insert(values, predicate=f"NOT {flag}"))


def spark_merge_batch(df, path: str, app_id: str, batch_id: int, *, keys: Sequence[str],
                      partition_by: Sequence[str] = (), finalize: FinalizeRows | None = None) -> MergeResult:
    """Upsert ``df`` into the table at ``path`` with Spark's Delta Lake, exactly once per ``(app_id, batch_id)``.

    The first batch is an append with the ``txnAppId``/``txnVersion`` writer options; later ones run
    ``MERGE INTO`` in ``df``'s session with ``spark.databricks.delta.write.txnAppId``/``txnVersion`` set
    (Delta skips a command whose txn the table already holds), unset again afterwards. A MERGE that loses
    an optimistic-concurrency race (``io.delta.exceptions.Concurrent...``, e.g. against maintenance's
    OPTIMIZE) is run again, at most MAX_MERGE_ATTEMPTS times.

    Raises:
        pyspark.errors.PySparkException: whatever Spark's Delta raises (schema mismatch, conflicts).
    """
    uri = normalize_table_uri(path)
    df = df.persist()
    try:
        df.count()  # every partition read (and Spark's state committed), also when Delta skips the write below
        return _spark_merge(df, uri, app_id, batch_id, keys=keys, partition_by=partition_by, finalize=finalize)
    finally:
        df.unpersist()


def _spark_merge(df, uri: str, app_id: str, batch_id: int, *, keys: Sequence[str], partition_by: Sequence[str],
                 finalize: FinalizeRows | None) -> MergeResult:
    """The append (new table) or MERGE INTO of :func:`spark_merge_batch`, with the txn settings."""
    if open_delta_table(uri) is None:
        writer = df.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", batch_id)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.save(uri)
        return MergeResult(uri, batch_id, created=True)
    spark = df.sparkSession
    view = f"hareplica_merge_{uuid.uuid4().hex}"
    sql = (f"MERGE INTO delta.`{uri}` AS {TARGET_ALIAS} USING {view} AS {SOURCE_ALIAS} "
           f"ON {key_condition(keys, partition_by=partition_by, quote='`')} "
           "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    if finalize is not None:
        sql += f" WHEN NOT MATCHED BY SOURCE AND {finalize.spark_predicate()} THEN UPDATE SET `{finalize.flag}` = true"
    df.createOrReplaceTempView(view)
    spark.conf.set(SPARK_TXN_APP_ID_CONF, app_id)
    spark.conf.set(SPARK_TXN_VERSION_CONF, str(batch_id))
    try:
        def log_conflict(attempt: int, error: BaseException) -> None:
            log.info("MERGE of batch %d of appId %s into %s conflicted (attempt %d): %s", batch_id, app_id, uri,
                     attempt, str(error).splitlines()[0])

        # py4j/PySpark wrap Delta's exceptions: a lost race is recognised by the Java class name in the text
        for attempt in retry_attempts(MAX_MERGE_ATTEMPTS, lambda e: SPARK_CONFLICT_MARK in str(e),
                                      on_retry=log_conflict):
            with attempt:
                spark.sql(sql)
    finally:
        spark.conf.unset(SPARK_TXN_APP_ID_CONF)
        spark.conf.unset(SPARK_TXN_VERSION_CONF)
        spark.catalog.dropTempView(view)
    return MergeResult(uri, batch_id)
