"""The driver's commit of a landed micro-batch: the ``foreachBatch`` that collects the tasks' commit messages and
commits each table with the Delta sink's committer (docs/delta.md "The replay rule").
"""

from __future__ import annotations

from collections.abc import Sequence

from connector.delta.messages import MESSAGE_COLUMN, messages_of_rows
from connector.delta.sink import DeltaLakeStreamWriter


def commit_landed_batch(writers: Sequence[DeltaLakeStreamWriter], batch_df, batch_id: int) -> list[int]:
    """The ``foreachBatch`` body: run the batch's tasks (they write the files), commit each table's messages,
    in ``writers`` order (:meth:`connector.delta.commit.DeltaBatchCommitter.commit`).

    Returns the rows the batch's tasks wrote per table (on a replay of a committed batch they are removed,
    not committed). A failed job aborts the batch in every table (its files are removed unless the table
    already holds it). Raises what the tasks or the commits raise.
    """
    try:
        rows = batch_df.where(batch_df[MESSAGE_COLUMN].isNotNull()).collect()
    except BaseException:
        for writer in writers:
            writer.committer.abort([], batch_id)
        raise
    per_task = messages_of_rows(rows)
    landed = []
    for index, writer in enumerate(writers):
        messages = [task_messages[index] for task_messages in per_task]
        writer.committer.commit(messages, batch_id)
        landed.append(sum(f.num_records for m in messages for f in m.files))
    return landed
