"""``spark.readStream.format("hareplica")``: a RocketMQ CommitLog as a Spark stream (docs/source.md).

The Spark classes are in :mod:`connector.source.reader`; what runs on the driver (planning) is under
:mod:`connector.source.driver`, what runs in a task (the read) under :mod:`connector.source.task`, and the
InputPartition both share is :mod:`connector.source.partition` (docs/architecture.md "The path of one offset").
"""

from connector.source.driver.brokers import ack_window_ms
from connector.source.partition import HAReplicaInputPartition
from connector.source.reader import HAReplicaDataSource, HAReplicaStreamReader, warn_without_admission_control
from connector.source.task.read import read_partition

__all__ = [
    "HAReplicaDataSource",
    "HAReplicaInputPartition",
    "HAReplicaStreamReader",
    "ack_window_ms",
    "read_partition",
    "warn_without_admission_control",
]
