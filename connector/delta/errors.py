"""Errors shared by the Delta writers: the base class and the configuration error.

Errors raised by one module only live there: :class:`connector.delta.schema.DeltaSchemaMismatchError`,
:class:`connector.delta.commit.DeltaCommitError`, :class:`connector.delta.faults.InjectedFaultError`,
:class:`connector.delta.location.DeltaTablePathError` and its subclass
:class:`connector.delta.features.UnsupportedTableFeatureError`.
"""

from __future__ import annotations

from connector.protocol.errors import HAReplicaError


class DeltaSinkError(HAReplicaError):
    """Base class of the Delta sink's errors; the message names the table path and, where known, the batch."""


class DeltaSinkConfigError(DeltaSinkError, ValueError):
    """A missing or invalid sink option (``path``, ``appId``, ``partitionBy``, ``targetFileSize``...)."""
