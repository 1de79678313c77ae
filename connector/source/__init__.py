"""``spark.readStream.format("hareplica")``: a RocketMQ CommitLog as a Spark stream (docs/source.md).

The Spark classes are in :mod:`connector.source.datasource` and :mod:`connector.source.reader`; what runs on the
driver (planning) is under :mod:`connector.source.driver`, what runs in a task (the read) under
:mod:`connector.source.task`, and the InputPartition both share is :mod:`connector.source.partition`
(docs/architecture.md "The path of one offset").

The names below are loaded when first asked for (``module.__getattr__``, PEP 562): a task's Python worker imports
this package as the parent of :mod:`connector.source.task`, and so imports neither the options parser nor the
driver's modules through it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HAReplicaDataSource",
    "HAReplicaInputPartition",
    "HAReplicaStreamReader",
    "ack_window_ms",
    "read_partition",
    "warn_without_admission_control",
]


def __getattr__(name: str) -> Any:
    """One of :data:`__all__`, imported from its module; AttributeError for any other name."""
    if name == "ack_window_ms":
        from connector.source.driver.brokers import ack_window_ms
        return ack_window_ms
    if name == "HAReplicaInputPartition":
        from connector.source.partition import HAReplicaInputPartition
        return HAReplicaInputPartition
    if name == "HAReplicaDataSource":
        from connector.source.datasource import HAReplicaDataSource
        return HAReplicaDataSource
    if name in ("HAReplicaStreamReader", "warn_without_admission_control"):
        from connector.source import reader
        return getattr(reader, name)
    if name == "read_partition":
        from connector.source.task.read import read_partition
        return read_partition
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
