"""The project's small exception hierarchy.

Every error names *where* the problem is (CommitLog offset, file, field or frame) so that a user can
find the bad bytes; see docs/architecture.md "Conventions".
"""

from __future__ import annotations


class HAReplicaError(Exception):
    """Base class of every error raised by hareplica code."""


class CommitLogFormatError(HAReplicaError):
    """Bytes that are not a valid RocketMQ 4.9.8 CommitLog record (docs/protocol.md §1.2, §1.9).

    Attributes:
        offset: absolute CommitLog offset of the record's first byte (bytes).
        field: the record field that was wrong (RocketMQ's name, e.g. ``MAGICCODE``, ``TOTALSIZE``).
        file: the CommitLog file name, when the bytes came from a file.
    """

    def __init__(self, message: str, *, offset: int, field: str, file: str | None = None):
        where = f"CommitLog offset {offset}"
        if file:
            where += f" (file {file})"
        super().__init__(f"{message} at {where}, field {field}")
        self.offset = offset
        self.field = field
        self.file = file


class HAProtocolError(HAReplicaError):
    """A violation of the classic HA wire protocol (docs/protocol.md §2.2, §2.3)."""


class RemotingProtocolError(HAReplicaError):
    """A malformed RocketMQ remoting frame or header (docs/protocol.md §4.1, §4.2)."""
