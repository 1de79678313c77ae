"""Classic RocketMQ 4.9.8 master/slave HA wire protocol (spec §2.2, §2.3): pure framing, no sockets.

Slave → master: a plain stream of 8-byte big-endian longs, each the slave's CommitLog max offset
(the next byte it needs). Master → slave: frames of a 12-byte header ``[masterPhyOffset int64]
[bodySize int32]`` followed by ``bodySize`` raw CommitLog bytes; ``bodySize == 0`` is a heartbeat.
Frames are byte ranges of at most ``haTransferBatchSize`` bytes that never cross a mapped file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from connector.protocol.errors import HAProtocolError

REPORT_HEADER_SIZE_BYTES = 8
TRANSFER_HEADER_SIZE_BYTES = 12
HA_TRANSFER_BATCH_SIZE_BYTES = 32 * 1024  # haTransferBatchSize default
HA_CLIENT_READ_MAX_BUFFER_SIZE_BYTES = 4 * 1024 * 1024  # HAClient.READ_MAX_BUFFER_SIZE
HA_MASTER_READ_MAX_BUFFER_SIZE_BYTES = 1024 * 1024  # ReadSocketService.READ_MAX_BUFFER_SIZE

_REPORT = struct.Struct(">q")
_HEADER = struct.Struct(">qi")


def encode_report(offset: int) -> bytes:
    """The 8-byte report a slave sends: its CommitLog max offset (bytes), big-endian int64."""
    if offset < 0:
        raise ValueError(f"HA report offset must be >= 0, got {offset}")
    return _REPORT.pack(offset)


def encode_transfer_header(master_phy_offset: int, body_size: int) -> bytes:
    """The 12-byte header of a master→slave frame (``body_size`` 0 = heartbeat)."""
    return _HEADER.pack(master_phy_offset, body_size)


class ReportReader:
    """Master side: turns the slave's byte stream into offset reports (spec §2.2).

    Like ReadSocketService, only the last complete 8-byte value of each chunk is used; earlier ones in
    the same chunk are superseded. A partial value stays buffered until its remaining bytes arrive.
    """

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, data: bytes) -> int | None:
        """Add received bytes; return the newest complete report, or None if none completed."""
        self._pending += data
        whole = len(self._pending) - len(self._pending) % REPORT_HEADER_SIZE_BYTES
        if whole == 0:
            return None
        value = _REPORT.unpack_from(self._pending, whole - REPORT_HEADER_SIZE_BYTES)[0]
        del self._pending[:whole]
        return value


@dataclass(frozen=True, slots=True)
class TransferFrame:
    """One master→slave frame: body bytes start at CommitLog offset ``master_phy_offset``."""

    master_phy_offset: int
    body: bytes

    @property
    def is_heartbeat(self) -> bool:
        return len(self.body) == 0

    @property
    def end_offset(self) -> int:
        return self.master_phy_offset + len(self.body)


class TransferFrameReader:
    """Slave side: reassembles frames from the master's byte stream (spec §2.3, §2.6).

    ``feed`` appends received bytes; ``next_frame`` returns a complete frame or None, leaving an
    incomplete frame buffered (a rewindable buffer). A body size outside ``[0, max_body_bytes]``
    raises HAProtocolError: the stream is not RocketMQ HA, and a real slave could never complete it
    (its read buffer is 4 MiB).

    Bodies are returned as ``bytes`` copies (at most ``haTransferBatchSize`` each), so the buffer can
    be compacted freely.
    """

    def __init__(self, max_body_bytes: int = HA_CLIENT_READ_MAX_BUFFER_SIZE_BYTES - TRANSFER_HEADER_SIZE_BYTES):
        self._buf = bytearray()
        self._pos = 0
        self.max_body_bytes = max_body_bytes
        self.bytes_consumed = 0  # total stream bytes handed out as complete frames

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf) - self._pos

    def next_frame(self) -> TransferFrame | None:
        avail = len(self._buf) - self._pos
        if avail < TRANSFER_HEADER_SIZE_BYTES:
            return None
        offset, size = _HEADER.unpack_from(self._buf, self._pos)
        if size < 0 or size > self.max_body_bytes or offset < 0:
            raise HAProtocolError(
                f"bad HA transfer header at stream byte {self.bytes_consumed}: "
                f"masterPhyOffset={offset}, bodySize={size} (allowed 0..{self.max_body_bytes})")
        if avail < TRANSFER_HEADER_SIZE_BYTES + size:
            return None
        start = self._pos + TRANSFER_HEADER_SIZE_BYTES
        self._pos = start + size
        self.bytes_consumed += TRANSFER_HEADER_SIZE_BYTES + size
        return TransferFrame(offset, bytes(self._buf[start:start + size]))


def parse_transfer_header(buf: bytes | bytearray | memoryview, pos: int = 0,
                          max_body_bytes: int = HA_CLIENT_READ_MAX_BUFFER_SIZE_BYTES - TRANSFER_HEADER_SIZE_BYTES
                          ) -> tuple[int, int] | None:
    """Parse the 12-byte frame header at ``buf[pos:]`` in place: ``(masterPhyOffset, bodySize)``.

    Returns None when fewer than 12 bytes are available (nothing is consumed). Raises HAProtocolError
    for a negative offset or a body size outside ``[0, max_body_bytes]`` (spec §2.3, §2.6). For callers
    that keep their own receive buffer (no copy); :class:`TransferFrameReader` is the buffering variant.
    """
    if len(buf) - pos < TRANSFER_HEADER_SIZE_BYTES:
        return None
    offset, size = _HEADER.unpack_from(buf, pos)
    if size < 0 or size > max_body_bytes or offset < 0:
        raise HAProtocolError(f"bad HA transfer header: masterPhyOffset={offset}, bodySize={size} "
                              f"(allowed 0..{max_body_bytes})")
    return offset, size
