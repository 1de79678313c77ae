"""Errors shared by the Delta writers: the base class and the configuration error.

Errors raised by one module only live there: :class:`connector.delta.schema.DeltaSchemaMismatchError`,
:class:`connector.delta.commit.DeltaCommitError`, :class:`connector.delta.faults.InjectedFaultError`,
:class:`connector.delta.location.DeltaTablePathError` and its subclass
:class:`connector.delta.features.UnsupportedTableFeatureError`.
"""

from __future__ import annotations

import errno

from connector.protocol.errors import HAReplicaError

#: errnos that mean the file system has no room for the write (ENOSPC; EDQUOT: the user's quota is used up)
_NO_SPACE_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_NO_SPACE_TEXTS = ("no space left on device", "disk quota exceeded")


class DeltaSinkError(HAReplicaError):
    """Base class of the Delta sink's errors; the message names the table path and, where known, the batch."""


class DeltaSinkConfigError(DeltaSinkError, ValueError):
    """A missing or invalid sink option (``path``, ``appId``, ``partitionBy``, ``targetFileSize``...)."""


def no_space_text(error: BaseException) -> str | None:
    """``"no space left on device (ENOSPC)"`` (or the quota's EDQUOT text) when ``error`` says the file system
    is full, else None. Looks at ``errno`` (OSError, also pyarrow's) and at the message, since delta-rs
    reports an I/O error as text only."""
    code = getattr(error, "errno", None)
    text = str(error).lower()
    if code in _NO_SPACE_ERRNOS or any(t in text for t in _NO_SPACE_TEXTS):
        if code == getattr(errno, "EDQUOT", None) or "quota" in text:
            return "disk quota exceeded (EDQUOT)"
        return "no space left on device (ENOSPC)"
    return None
