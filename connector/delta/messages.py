"""What a write task hands to the driver: the files it wrote, as the Delta ``add`` actions need them.

A task of the sink (Spark's ``DataSourceStreamArrowWriter.write``), of ``write_batch`` (``mapInArrow``)
or of the direct landing returns one :class:`DeltaLakeCommitMessage`; the driver commits the files of
every message of a batch in one Delta transaction (connector.delta.commit). ``write_batch`` and the
direct landing carry the message through Spark as a pickled ``message binary`` row.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyspark.sql.datasource import WriterCommitMessage

#: The binary column of the rows that carry a task's pickled commit message.
MESSAGE_COLUMN = "message"


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


def files_of(messages: Iterable[WriterCommitMessage | None]) -> list[DataFileInfo]:
    """Every file of the batch's messages, in order (None messages of failed tasks and foreign messages skipped)."""
    out: list[DataFileInfo] = []
    for m in messages:
        if isinstance(m, DeltaLakeCommitMessage):
            out.extend(m.files)
    return out


def message_bytes(message: DeltaLakeCommitMessage | tuple[DeltaLakeCommitMessage, ...]) -> bytes:
    """A task's commit message (or, in the direct landing, its tuple of messages, one per table) as a
    :data:`MESSAGE_COLUMN` value (pickled; :func:`messages_of_rows` reads it)."""
    return pickle.dumps(message)


def messages_of_rows(rows: Iterable) -> list:
    """The commit messages (or tuples of them) of collected Spark rows holding :func:`message_bytes` in
    :data:`MESSAGE_COLUMN`."""
    return [pickle.loads(r[MESSAGE_COLUMN]) for r in rows]
