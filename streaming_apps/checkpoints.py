"""Reading a Spark streaming checkpoint the apps own, local or in an object store: whether the query ran before, and
one file of it (Spark's offset log entries; docs/delta.md "4. The apps"), and the class Spark writes it with."""

from __future__ import annotations

import os

from connector.storage import store


def checkpoint_has_offsets(checkpoint: str | os.PathLike) -> bool:
    """True when the Spark checkpoint at ``checkpoint`` holds an offset log entry (the query ran before)."""
    from pyarrow import fs as pafs

    fs, root = store.filesystem(str(checkpoint))
    return any(i.type == pafs.FileType.File
               for i in fs.get_file_info(pafs.FileSelector(root + "/offsets", allow_not_found=True)))


def read_checkpoint_file(checkpoint: str | os.PathLike, *names: str) -> str:
    """The text of a file inside a Spark checkpoint (``checkpoint/names…``), local or in an object store.

    Raises:
        OSError: missing or unreadable (FileNotFoundError when missing).
    """
    fs, root = store.filesystem(str(checkpoint))
    with fs.open_input_stream("/".join([root, *names])) as f:
        return f.read().decode("utf-8")


#: Spark's conf naming the class that writes checkpoint files (offsets, commits, state store files)
CHECKPOINT_FILE_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
#: spark-hadoop-cloud's checkpoint file manager for object stores: each file is written straight to its final name
#: and the upload aborted on failure, so a half-written file never becomes visible (no rename, which S3 cannot do
#: atomically)
ABORTABLE_CHECKPOINT_FILE_MANAGER = "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"
#: writes through Hadoop's FileSystem API; Spark's default, FileContext, forks ``readlink`` per rename on a local disk
#: (the class's package since Spark 4.1; 4.0's is in :func:`file_system_checkpoint_file_manager`)
FILE_SYSTEM_CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager")


def file_system_checkpoint_file_manager(spark_version: str) -> str:
    """:data:`FILE_SYSTEM_CHECKPOINT_FILE_MANAGER` as Spark ``spark_version`` ("4.0.5") names it: Spark 4.0 keeps
    the class in ``org.apache.spark.sql.execution.streaming``, 4.1 moved it to ``…streaming.checkpointing``."""
    if tuple(int(x) for x in spark_version.split(".")[:2]) < (4, 1):
        return FILE_SYSTEM_CHECKPOINT_FILE_MANAGER.replace(".checkpointing.", ".")
    return FILE_SYSTEM_CHECKPOINT_FILE_MANAGER


def use_checkpoint_file_manager(spark, *, remote: bool = False) -> None:
    """Choose the class that writes the apps' checkpoints, unless the session names one of its own
    (docs/deployment.md, "Checkpoint files"; docs/object_storage.md "Spark checkpoints on S3").

    On a local or mounted disk (``remote`` False): :data:`FILE_SYSTEM_CHECKPOINT_FILE_MANAGER`. Spark's default
    goes through Hadoop's FileContext, whose rename on the local file system starts a ``readlink`` process per
    file: about 30 forks of the driver JVM per gold micro-batch, and 40-90 ms of every batch's offset and commit
    log writes. Both do the same check-then-rename on a local disk. In an object store (``remote``):
    :data:`ABORTABLE_CHECKPOINT_FILE_MANAGER`, which needs no rename."""
    ours = {FILE_SYSTEM_CHECKPOINT_FILE_MANAGER, file_system_checkpoint_file_manager(spark.version),
            ABORTABLE_CHECKPOINT_FILE_MANAGER}
    named = spark.conf.get(CHECKPOINT_FILE_MANAGER_CONF, None)
    if not named or named in ours:
        spark.conf.set(CHECKPOINT_FILE_MANAGER_CONF, ABORTABLE_CHECKPOINT_FILE_MANAGER if remote
                       else file_system_checkpoint_file_manager(spark.version))
