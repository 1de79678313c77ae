"""What Spark needs to keep checkpoints and read tables in an object store: hadoop-aws's ``s3a://`` file system
(the jars ``make jvm-peers`` stages from jvm/s3a.pom.xml, or the user's own), its settings from the one
:class:`connector.storage.config.StorageConfig`, and a checkpoint file manager that is safe there.
docs/object_storage.md "Spark checkpoints on S3".
"""

from __future__ import annotations

from pathlib import Path

from connector.storage.config import StorageConfig
from streaming_apps.checkpoints import ABORTABLE_CHECKPOINT_FILE_MANAGER, CHECKPOINT_FILE_MANAGER_CONF

#: Where ``make jvm-peers`` stages hadoop-aws, the AWS SDK modules it links and spark-hadoop-cloud (relative to a
#: checkout).
STAGED_S3A_JARS_DIR = Path(".jvm") / "s3a" / "lib"
#: The class that tells hadoop-aws is on Spark's classpath.
S3A_FILE_SYSTEM_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def staged_s3a_jars(roots: list[Path] | None = None) -> list[str]:
    """Absolute paths of the jars in :data:`STAGED_S3A_JARS_DIR` under the first of ``roots`` (default: the current
    directory, then this checkout) that holds any; ``[]`` when none does."""
    from streaming_apps.spark_session import staged_jars

    return staged_jars(STAGED_S3A_JARS_DIR, roots)


def s3a_jars_hint() -> str:
    """How to put hadoop-aws on Spark's classpath."""
    return (f"`make jvm-peers` stages hadoop-aws and the AWS SDK modules it needs in {STAGED_S3A_JARS_DIR}; or pass "
            "your Spark's own with --jars (docs/object_storage.md \"Spark checkpoints on S3\")")


def spark_conf(storage: StorageConfig) -> dict[str, str]:
    """Spark conf for checkpoints and reads in an object store: the ``spark.hadoop.fs.s3a.*`` settings of
    ``storage`` and :data:`ABORTABLE_CHECKPOINT_FILE_MANAGER`."""
    return {**storage.hadoop_conf(), CHECKPOINT_FILE_MANAGER_CONF: ABORTABLE_CHECKPOINT_FILE_MANAGER}


def configure_session(spark, storage: StorageConfig) -> None:
    """Give a running classic session's Hadoop configuration the ``fs.s3a.*`` settings of ``storage`` (a session
    built with :func:`spark_conf` already has them; a Hadoop file system of a bucket opened before keeps its own).
    Over Spark Connect the server's conf rules and nothing is set."""
    from streaming_apps.spark_session import is_connect_session

    if is_connect_session(spark):
        return
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001 - the one handle PySpark gives to it
    for key, value in storage.hadoop_conf().items():
        hadoop.set(key[len("spark.hadoop."):], value)


def s3a_available(spark) -> bool:
    """True when :data:`S3A_FILE_SYSTEM_CLASS` loads in the driver JVM (always True over Spark Connect, whose
    server's classpath the client cannot see)."""
    from streaming_apps.spark_session import is_connect_session, jvm_has_class

    return is_connect_session(spark) or jvm_has_class(spark, S3A_FILE_SYSTEM_CLASS)
