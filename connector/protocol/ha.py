"""Classic RocketMQ 4.9.8 master/slave HA wire protocol (docs/protocol.md §2.2, §2.3): pure framing, no sockets.

Slave → master: a plain stream of 8-byte big-endian longs, each the slave's CommitLog max offset
(the next byte it needs). Master → slave: frames of a 12-byte header ``[masterPhyOffset int64]
[bodySize int32]`` followed by ``bodySize`` raw CommitLog bytes; ``bodySize == 0`` is a heartbeat.
Frames are byte ranges of at most ``haTransferBatchSize`` bytes that never cross a mapped file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from connector.errors import HAProtocolError

#: the id of this protocol, as :meth:`connector.client.admin.BrokerAdminClient.ha_protocol` names it
HA_PROTOCOL_CLASSIC = "classic"

REPORT_HEADER_SIZE_BYTES = 8
TRANSFER_HEADER_SIZE_BYTES = 12
HA_TRANSFER_BATCH_SIZE_BYTES = 32 * 1024  # haTransferBatchSize default
HA_CLIENT_READ_MAX_BUFFER_SIZE_BYTES = 4 * 1024 * 1024  # HAClient.READ_MAX_BUFFER_SIZE
HA_MASTER_READ_MAX_BUFFER_SIZE_BYTES = 1024 * 1024  # ReadSocketService.READ_MAX_BUFFER_SIZE
#: the largest frame body a 4.9.8 slave can receive: its read buffer less one header
HA_MAX_TRANSFER_BODY_BYTES = HA_CLIENT_READ_MAX_BUFFER_SIZE_BYTES - TRANSFER_HEADER_SIZE_BYTES
HA_CONNECT_TIMEOUT_MS = 5000  # RemotingUtil.connect timeout used by HAClient.connectMaster
HA_SEND_HEARTBEAT_INTERVAL_MS = 5000  # MessageStoreConfig.haSendHeartbeatInterval default
HA_HOUSEKEEPING_INTERVAL_MS = 20000  # MessageStoreConfig.haHousekeepingInterval: silence before a close

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


def _uninitialised(size: int) -> np.ndarray:
    """A buffer of ``size`` bytes whose contents are not set (no zeroing: a receive buffer is written before it is
    read, and zeroing each 1 MiB receive buffer cost 2% of a landing task's CPU)."""
    return np.empty(size, dtype=np.uint8)


class ReportReader:
    """Master side: turns the slave's byte stream into offset reports (docs/protocol.md §2.2).

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
        """True for a frame without body (``bodySize`` 0)."""
        return len(self.body) == 0

    @property
    def end_offset(self) -> int:
        """The CommitLog offset just past the body (bytes)."""
        return self.master_phy_offset + len(self.body)


class TransferFrameReader:
    """Slave side: the one parser of master→slave frames (docs/protocol.md §2.3, §2.6), sans-IO, over one rewindable
    buffer.

    Every HA client of the project reads frames with it: the source's :mod:`connector.client.ha`, the
    broker stub's ``HAClient`` and the test helpers. Bytes come in two ways:

    * copied: :meth:`feed`;
    * received straight into the buffer (no copy): a socket reads into :meth:`writable` (``recv_into``,
      ``asyncio.BufferedProtocol.get_buffer``) and the caller reports the count with :meth:`wrote`.

    :meth:`peek_header` shows the next frame's header as soon as its 12 bytes are in, before the body is
    complete (for continuity checks); :meth:`next_frame_view` consumes a complete frame and returns its body
    as a memoryview of the buffer, valid until the next :meth:`feed` / :meth:`writable` call (which may move
    a partial frame to the front), or for as long as it is referenced with ``keep_views``;
    :meth:`next_frame` returns a :class:`TransferFrame` with a copy. An incomplete frame stays buffered. A
    body size outside ``[0, max_body_bytes]`` or a negative offset raises HAProtocolError naming the stream
    byte: the stream is not RocketMQ HA, and a real slave could never complete it (its read buffer is 4 MiB).

    Args:
        max_body_bytes: largest accepted ``bodySize`` (bytes).
        buffer_bytes: initial buffer size (bytes); the buffer doubles when one frame does not fit.
        compact_below_free_bytes: :meth:`writable` moves the unparsed bytes to the front when fewer than
            this many bytes are free (default: whenever some were consumed).
        keep_views: never write over bytes once received: when fewer than ``compact_below_free_bytes`` are
            free (default with keep_views: an eighth of ``buffer_bytes``), :meth:`writable` continues in a
            new buffer of ``buffer_bytes`` and copies only the unparsed bytes (a partial frame) there, so
            the body views handed out stay valid as long as they are referenced and a consumer may keep
            them instead of copying them out (each buffer is freed when its last view is).
    """

    def __init__(self, max_body_bytes: int = HA_MAX_TRANSFER_BODY_BYTES, buffer_bytes: int = 64 * 1024,
                 compact_below_free_bytes: int | None = None, keep_views: bool = False):
        self.max_body_bytes = max_body_bytes
        self.keep_views = keep_views
        self.buffer_bytes = max(buffer_bytes, TRANSFER_HEADER_SIZE_BYTES)
        if compact_below_free_bytes is None:  # keep_views: a new buffer only once this one is mostly filled
            compact_below_free_bytes = buffer_bytes // 8 if keep_views else buffer_bytes
        self.compact_below_free_bytes = compact_below_free_bytes
        self._buf = _uninitialised(self.buffer_bytes)
        self._view = memoryview(self._buf)  # never resized: views handed out stay valid until compaction
        self._start = 0  # first unparsed byte
        self._end = 0  # end of the received bytes
        self.bytes_consumed = 0  # total stream bytes handed out as complete frames

    @property
    def buffered_bytes(self) -> int:
        """Received bytes not yet handed out as frames."""
        return self._end - self._start

    def head(self, n: int) -> bytes:
        """A copy of the first ``n`` unparsed bytes (for error messages)."""
        return bytes(self._view[self._start:min(self._start + n, self._end)])

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append a copy of ``data``."""
        n = len(data)
        if len(self._buf) - self._end < n:
            if self.keep_views:
                self._renew(max(self.buffer_bytes, 2 * (self._end - self._start + n)))
            else:
                self._compact()
            while len(self._buf) - self._end < n:
                self._grow()
        self._view[self._end:self._end + n] = data
        self._end += n

    def writable(self) -> memoryview:
        """The free end of the buffer, for a socket to receive into; report the bytes with :meth:`wrote`."""
        free = len(self._buf) - self._end
        if self.keep_views:
            if free < self.compact_below_free_bytes:
                self._renew(max(self.buffer_bytes, 2 * (self._end - self._start)))
        elif self._start and (free < self.compact_below_free_bytes or self._start == self._end):
            self._compact()
        if self._end == len(self._buf):  # one frame larger than the buffer (bodies of up to 4 MiB are legal)
            self._grow()
        return self._view[self._end:]

    def wrote(self, n: int) -> None:
        """``n`` bytes were received into the view :meth:`writable` returned."""
        if not 0 <= n <= len(self._buf) - self._end:
            raise ValueError(f"wrote {n} bytes, but only {len(self._buf) - self._end} were free")
        self._end += n

    def peek_header(self) -> tuple[int, int] | None:
        """``(masterPhyOffset, bodySize)`` of the next frame, or None before its 12 header bytes are in.

        Nothing is consumed. Raises HAProtocolError for a bad header (see the class).
        """
        if self._end - self._start < TRANSFER_HEADER_SIZE_BYTES:
            return None
        offset, size = _HEADER.unpack_from(self._buf, self._start)
        if size < 0 or size > self.max_body_bytes or offset < 0:
            raise HAProtocolError(
                f"bad HA transfer header at stream byte {self.bytes_consumed}: "
                f"masterPhyOffset={offset}, bodySize={size} (allowed 0..{self.max_body_bytes})")
        return offset, size

    def next_frame_view(self) -> tuple[int, memoryview] | None:
        """``(masterPhyOffset, body)`` of the next complete frame (consumed), the body a view into the buffer;
        None when the frame is not complete yet. Raises HAProtocolError as :meth:`peek_header`."""
        header = self.peek_header()
        if header is None:
            return None
        offset, size = header
        body_at = self._start + TRANSFER_HEADER_SIZE_BYTES
        if self._end - body_at < size:
            return None
        self._start = body_at + size
        self.bytes_consumed += TRANSFER_HEADER_SIZE_BYTES + size
        return offset, self._view[body_at:body_at + size]

    def next_frame(self) -> TransferFrame | None:
        """The next complete frame with a copy of its body, or None (see :meth:`next_frame_view`)."""
        frame = self.next_frame_view()
        if frame is None:
            return None
        offset, body = frame
        return TransferFrame(offset, body.tobytes())

    def _compact(self) -> None:
        pending = self._end - self._start
        if pending:
            self._view[:pending] = self._view[self._start:self._end].tobytes()
        self._start, self._end = 0, pending

    def _grow(self) -> None:
        self._renew(2 * len(self._buf))

    def _renew(self, size: int) -> None:
        """Continue in a new buffer of ``size`` bytes holding the unparsed bytes; the old one is left as it is."""
        fresh = _uninitialised(size)
        pending = self._end - self._start
        view = memoryview(fresh)
        view[:pending] = self._view[self._start:self._end]
        self._buf, self._view = fresh, view
        self._start, self._end = 0, pending
