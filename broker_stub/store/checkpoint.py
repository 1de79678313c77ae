"""The store ``checkpoint`` file (RocketMQ 4.9.8 ``StoreCheckpoint``): one 4 KiB page of three store timestamps that
abnormal recovery starts from. The layout: docs/protocol.md §1.1, its use in recovery §1.11; what the stub writes
there: docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)".
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

log = logging.getLogger(__name__)

CHECKPOINT_FILE_SIZE_BYTES = 4096
_LAYOUT = struct.Struct(">qqq")


class StoreCheckpoint:
    """Read and write ``{storePathRootDir}/checkpoint``. Raises OSError on IO failures."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.message_index_safe = False  # messageIndexEnable && messageIndexSafe: recovery honours the index
        if self.path.exists():
            raw = self.path.read_bytes()[:_LAYOUT.size]
            if len(raw) == _LAYOUT.size:
                (self.physic_msg_timestamp, self.logics_msg_timestamp,
                 self.index_msg_timestamp) = _LAYOUT.unpack(raw)
                log.info("checkpoint loaded physicMsgTimestamp=%d logicsMsgTimestamp=%d indexMsgTimestamp=%d",
                         self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)

    def min_timestamp_for_recovery(self) -> int:
        """Store timestamp (ms) at or before which data is known flushed, minus 3 s as upstream pads it.

        Upstream takes ``min(physic, logics) - 3000``; the stub uses ``physic`` (its reput re-dispatches the
        ConsumeQueues from the file recovery starts at, see :mod:`broker_stub.store.reput`). With
        ``message_index_safe`` the result is at most ``indexMsgTimestamp`` (``getMinTimestampIndex``).
        """
        ts = max(self.physic_msg_timestamp - 3000, 0)
        return min(ts, self.index_msg_timestamp) if self.message_index_safe else ts

    def flush(self) -> None:
        """Write the page and fsync it."""
        page = _LAYOUT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp)
        page += b"\0" * (CHECKPOINT_FILE_SIZE_BYTES - len(page))
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, page, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
