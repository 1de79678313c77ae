"""What differs between the HA protocols, as the one frame loop of :class:`connector.client.ha.HARangeFetcher`
calls it: :class:`HAWire`, and the classic RocketMQ 4.9.8 protocol's :class:`ClassicWire` (docs/protocol.md §2).

The fetcher owns everything the protocols share (the connection, reconnects and outages, heartbeat stalls
and the data-loss probe, the chunks of the range); a wire object owns what one protocol puts on the wire and
checks in it: the first report's offset, what is sent after connecting (the classic protocol: the report; the
AutoSwitch one, :class:`connector.client.ha_autoswitch.AutoSwitchWire`: a handshake first), the frame reader
and the checks of each frame. The frame codecs are :mod:`connector.protocol.ha` and
:mod:`connector.protocol.ha_autoswitch`; the protocol ids are theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from connector.client.ha_connection import HATransferConnection
from connector.errors import HAProtocolError
from connector.protocol.ha import HA_PROTOCOL_CLASSIC, TransferFrameReader, encode_report

#: returns the broker's ``(commitLogMinOffset, commitLogMaxOffset)`` in bytes
OffsetsProbe = Callable[[], tuple[int, int]]


class StreamState:
    """Where one connection's stream stands (the frame loop's and the wire's shared state)."""

    __slots__ = ("offset", "stalls", "frames", "partial_wait_s")

    def __init__(self, offset: int):
        self.offset = offset  # CommitLog offset (bytes) where the next frame must start
        self.stalls = 0  # heartbeats in a row while bytes are expected
        self.frames = 0  # frames parsed (0: the peer has not yet shown it speaks HA)
        self.partial_wait_s = 0.0  # seconds spent waiting for the rest of the frame begun in the buffer


class RangeFetch(Protocol):
    """What a wire uses of the fetcher it serves (:class:`connector.client.ha.HARangeFetcher`); offsets in bytes."""

    ha_addr: str
    broker: str
    start: int
    end: int
    delivered: int  # every byte of the range below this was yielded (or skipped as lost)
    report_offset: int  # the offset every report carries
    read_timeout_ms: int
    frames_received: int
    conn: HATransferConnection
    offsets_probe: OffsetsProbe | None
    handshake: object | None  # the master's handshake reply (AutoSwitch)
    confirm_offset: int | None  # the confirmOffset of the newest frame (AutoSwitch)
    switches: list[tuple[str, str]]  # (old, new) HA addresses of each master switch followed

    def describe(self) -> str:
        """``broker <name> HA <addr>, range [start, end)``, for messages."""

    def not_an_ha_port(self, first: bytes, what: str) -> HAProtocolError:
        """The NotAnHAPortError naming the address, the first bytes the peer sent and ``what`` else it did."""

    def lose(self, lo: int, hi: int, why: str) -> None:
        """Bytes ``[lo, hi)`` of the range are gone: raise DataLossError, or log and skip them."""


class HAWire:
    """One HA protocol as the frame loop sees it. Subclasses set :attr:`name` (the protocol id),
    :attr:`peer` and :attr:`first_message` (for the NotAnHAPortError message) and implement the methods."""

    name: str
    peer: str  # what the peer must be, e.g. "RocketMQ HA port"
    first_message: str  # what hareplica sends first, e.g. "8-byte offset report"

    def encode_report(self, offset: int) -> bytes:
        """A report of ``offset`` (bytes) as wire bytes."""
        raise NotImplementedError

    def first_report_offset(self, start: int) -> int:
        """The offset the reports of a range starting at ``start`` carry."""
        return start

    def new_reader(self, buffer_bytes: int, keep_views: bool) -> TransferFrameReader:
        """A frame reader for one connection (see :class:`connector.protocol.ha.TransferFrameReader`)."""
        raise NotImplementedError

    def before_connect(self, fetch: RangeFetch) -> None:
        """Called before each connection is opened (may change ``fetch.ha_addr``); raises OSError to count the
        attempt as a failed one."""

    def begin(self, fetch: RangeFetch, reader: TransferFrameReader) -> tuple[int, str]:
        """After connecting: send what opens the stream (the first report, a handshake...) and start the keep-alive
        reports. Returns ``(cap, why)``: this connection's bytes are the planned ones up to ``cap`` only (``end``
        when all are), ``why`` saying why not (for the data-loss message)."""
        raise NotImplementedError

    def next_frame(self, fetch: RangeFetch, reader: TransferFrameReader,
                   stream: StreamState) -> tuple[int, memoryview] | None:
        """The next complete frame, checked and consumed, as ``(offset, body)`` (an empty body: a heartbeat), with
        ``stream.frames`` counted; None while incomplete. Raises HAProtocolError / NotAnHAPortError."""
        raise NotImplementedError

    def unproven(self, fetch: RangeFetch, reader: TransferFrameReader, stream: StreamState) -> bool:
        """True while the peer has not shown it speaks this protocol (a frame begun and not whole after
        ``read_timeout_ms`` then means it is not an HA port, rather than a stall)."""
        return False

    def close(self) -> None:
        """Release what the wire holds besides the connection (idempotent)."""


def discontinuity(fetch: RangeFetch, offset: int, expected: int) -> HAProtocolError:
    """The error of a frame at ``offset`` that does not start where the previous one ended (``expected``)."""
    return HAProtocolError(f"{fetch.describe()}: master pushed a frame at offset {offset}, expected {expected} "
                           "(the end of the previous frame)")


class ClassicWire(HAWire):
    """The classic protocol (docs/protocol.md §2.2, §2.3): 8-byte reports, 12-byte frame headers.

    A range starting at 0 reports 1 (a report of 0 makes the master start at its last file, §2.5); the fetcher
    supplies byte 0 itself. The first frame must start at the reported offset, else the peer is no HA port.
    """

    name = HA_PROTOCOL_CLASSIC
    peer = "RocketMQ HA port"
    first_message = "8-byte offset report"

    def encode_report(self, offset: int) -> bytes:
        """The classic 8-byte report (docs/protocol.md §2.2)."""
        return encode_report(offset)

    def first_report_offset(self, start: int) -> int:
        """``start``, or 1 for a range starting at 0."""
        return start if start > 0 else 1

    def new_reader(self, buffer_bytes: int, keep_views: bool) -> TransferFrameReader:
        """A :class:`connector.protocol.ha.TransferFrameReader`."""
        return TransferFrameReader(buffer_bytes=buffer_bytes, keep_views=keep_views)

    def begin(self, fetch: RangeFetch, reader: TransferFrameReader) -> tuple[int, str]:
        """Send the first report and start the keep-alive ones; every byte up to ``end`` is the planned one."""
        fetch.conn.report(fetch.report_offset)
        fetch.conn.keep_reporting(lambda: fetch.report_offset)
        return fetch.end, ""

    def next_frame(self, fetch: RangeFetch, reader: TransferFrameReader,
                   stream: StreamState) -> tuple[int, memoryview] | None:
        """The next frame; a bad first header or a first frame not at the reported offset: NotAnHAPortError."""
        try:
            header = reader.peek_header()
        except HAProtocolError as exc:
            if not stream.frames:
                raise fetch.not_an_ha_port(reader.head(64), f"not a frame header ({exc})") from None
            raise HAProtocolError(f"{fetch.describe()}: {exc}") from None
        if not stream.frames and header is not None and header[0] != stream.offset:
            raise fetch.not_an_ha_port(reader.head(64), f"a first frame at offset {header[0]}, not at the "
                                       f"reported offset {stream.offset}")
        frame = reader.next_frame_view()
        if frame is None:
            return None
        stream.frames += 1
        if frame[0] != stream.offset:
            raise discontinuity(fetch, frame[0], stream.offset)
        return frame

    def unproven(self, fetch: RangeFetch, reader: TransferFrameReader, stream: StreamState) -> bool:
        """True until a whole frame header came on any connection of the fetch."""
        return not fetch.frames_received and not stream.frames and reader.peek_header() is None
