"""The Spark job form of a restore: one task per mapped file, for tables too big for one process (docs/restore.md
"The Spark job form").
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from connector.arrow_pool import use_jemalloc
from connector.restore.config import write_delay_offsets
from connector.restore.metadata import write_metadata
from connector.restore.plan import plan_restore
from connector.restore.store import check_empty_store, make_store_folder, write_file


def restore_commitlog_spark(spark, table_uri: str, broker: str, store_dir: str | os.PathLike, *,
                            from_offset: int | None = None, from_timestamp: int | None = None,
                            to_offset: int | None = None, to_timestamp: int | None = None, metadata: bool = True):
    """:func:`connector.restore.restore_commitlog` with the files written by Spark tasks, one per mapped file.

    The driver plans the range (:func:`connector.restore.plan.plan_restore`) and checks the store folder; each
    task reads its file's rows from the table and writes the file, so ``table_uri`` and ``store_dir`` must be
    reachable under the same names from every executor (a shared file system, or ``local[N]``). Needs a classic
    SparkSession (``spark.sparkContext``; not Spark Connect). Returns the plan written.

    Raises:
        RestoreError: as :func:`connector.restore.restore_commitlog` (on the driver before any task runs, or from
            the task whose file a row does not re-encode).
    """
    check_empty_store(store_dir)
    plan = plan_restore(table_uri, broker, from_offset=from_offset, from_timestamp=from_timestamp,
                        to_offset=to_offset, to_timestamp=to_timestamp)
    folder = str(make_store_folder(store_dir))

    def write(file) -> str:
        use_jemalloc()  # the executor's Python worker, as a restore process
        return write_file(table_uri, broker, plan, file, Path(folder)).name

    files = list(plan.files)
    written = spark.sparkContext.parallelize(files, len(files)).map(write).collect()
    assert written == [f.name for f in files]
    write_delay_offsets(table_uri, plan, store_dir)
    if metadata:  # on the driver, as the plan
        plan = dataclasses.replace(plan, metadata=write_metadata(table_uri, plan, store_dir))
    return plan
