"""``foreachBatch``: the sink's exactly-once write for a static DataFrame, one Delta commit per table.

``foreachBatch`` jobs that write a table per micro-batch (``hareplica read``, the apps' ``DeltaSink.write_batch``)
use :func:`write_batch`: the files are written by executors through ``mapInArrow`` with the sink's own
task writer (same files, names and statistics), the driver commits them with the sink's committer (one
Delta commit per table carrying ``txn(appId, batchId)``), and a batch already committed for that appId
is skipped without writing anything.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from connector.arrow_numpy import binary_array
from connector.delta.commit import (
    batch_already_committed,
    commit_task_messages,
    open_target_table,
    target_partition_by,
)
from connector.delta.location import CREATE_IN_NON_EMPTY_OPTION
from connector.delta.messages import MESSAGE_COLUMN, files_of, message_bytes
from connector.delta.options import DeltaSinkOptions
from connector.delta.sink import DeltaLakeStreamWriter
from connector.errors import DeltaSinkConfigError

log = logging.getLogger(__name__)


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
        yield pa.record_batch([binary_array([message_bytes(message)])], names=[MESSAGE_COLUMN])

    return run


def write_batch(df, path: str, app_id: str, batch_id: int, *, partition_by: Sequence[str] | None = None,
                target_file_size: int | None = None, compression: str | None = None,
                create_in_non_empty_path: bool = False) -> BatchWriteResult:
    """Append a static DataFrame to a Delta table exactly once per ``(app_id, batch_id)``.

    For ``foreachBatch`` functions that write more than one table per micro-batch. Executors write the
    Parquet files (``df.mapInArrow``, same files and statistics as the streaming sink), the driver
    commits them in one transaction carrying ``txn(app_id, batch_id)``. When the table already holds the
    batch (a micro-batch replayed after a crash; docs/delta.md "The replay rule") nothing is written.
    A failed job removes what its tasks wrote (the abort path of the sink).

    Args:
        df: the rows to append (a batch DataFrame, e.g. the one foreachBatch receives).
        path: table location; created by the first commit.
        app_id: stable id of the writing query and table, e.g. from
            :func:`connector.delta.options.app_id_from_checkpoint`.
        batch_id: the micro-batch id (>= 0).
        partition_by: partition columns for a new table (must equal an existing table's when given).
        target_file_size: bytes per Parquet file (default 100 MiB), ``compression``: Parquet codec.
        create_in_non_empty_path: create a new table in a folder holding other files (default: refused).
    Raises:
        DeltaSinkConfigError, DeltaSchemaMismatchError, DeltaCommitError: as the streaming sink.
        connector.delta.location.DeltaTablePathError: an unreadable ``_delta_log``, or a non-empty plain folder.
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
    table = open_target_table(opts, schema)
    if table is not None:
        committed = table.transaction_version(app_id)
        if batch_already_committed(committed, batch_id):
            log.warning("batch %d of appId %s is already in Delta table %s (txn version %d): skipped", batch_id,
                        app_id, opts.table_uri, committed)
            return BatchWriteResult(opts.table_uri, batch_id, skipped=True)
    writer = DeltaLakeStreamWriter(opts, schema, target_partition_by(opts, schema, table), batch_id=batch_id)
    messages = commit_task_messages(
        writer.committer, lambda: df.mapInArrow(_task_message_rows(writer), f"{MESSAGE_COLUMN} binary").collect(),
        batch_id)
    files = files_of(messages)
    return BatchWriteResult(opts.table_uri, batch_id, skipped=False, files=len(files),
                            rows=sum(f.num_records for f in files))
