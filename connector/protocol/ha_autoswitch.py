"""RocketMQ 5.x AutoSwitch HA wire protocol (controller mode, docs/protocol.md §10): pure framing, no sockets.

Slave → master: a 16-byte handshake ``[state=1][isSyncFromLastFile int16][isAsyncLearner int16][slaveBrokerId
int64]`` and 12-byte reports ``[state=2][offset int64]`` (§10.2). Master → slave: a handshake reply (20-byte
header ``[state=1][bodySize][maxPhyOffset int64][lastEpoch]`` and 12-byte epoch entries, §10.3) and transfer
frames (36-byte header ``[state=2][bodySize][offset int64][epoch][epochStartOffset int64][confirmOffset int64]``
plus ``bodySize`` CommitLog bytes, §10.5). Every integer big-endian; ``state`` is the ordinal of RocketMQ's
``HAConnectionState``.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from connector.errors import HAProtocolError
from connector.protocol.ha import HA_MAX_TRANSFER_BODY_BYTES, TransferFrameReader

#: the id of this protocol, as :meth:`connector.client.admin.BrokerAdminClient.ha_protocol` names it (a 5.x broker
#: with ``enableControllerMode``)
HA_PROTOCOL_AUTOSWITCH = "autoswitch"

#: HAConnectionState ordinals that travel on the wire (docs/protocol.md §10.1)
STATE_HANDSHAKE = 1
STATE_TRANSFER = 2
_STATE_NAMES = {0: "READY", 1: "HANDSHAKE", 2: "TRANSFER", 3: "SUSPEND", 4: "SHUTDOWN"}

SLAVE_HANDSHAKE_SIZE_BYTES = 16  # AutoSwitchHAClient.HANDSHAKE_HEADER_SIZE
SLAVE_REPORT_SIZE_BYTES = 12  # AutoSwitchHAClient.TRANSFER_HEADER_SIZE
HANDSHAKE_HEADER_SIZE_BYTES = 20  # AutoSwitchHAConnection.HANDSHAKE_HEADER_SIZE
TRANSFER_HEADER_SIZE_BYTES = 36  # AutoSwitchHAConnection.TRANSFER_HEADER_SIZE
EPOCH_ENTRY_SIZE_BYTES = 12  # AutoSwitchHAConnection.EPOCH_ENTRY_SIZE
MAX_EPOCH_ENTRIES = 1000  # the master's handshake buffer holds EPOCH_ENTRY_SIZE * 1000 bytes
#: the slaveBrokerId of a connection that never named one; hareplica sends it (docs/protocol.md §10.7)
NO_BROKER_ID = -1

_SLAVE_HANDSHAKE = struct.Struct(">ihhq")
_SLAVE_REPORT = struct.Struct(">iq")
_HANDSHAKE_HEADER = struct.Struct(">iiqi")
_TRANSFER_HEADER = struct.Struct(">iiqiqq")
_EPOCH_ENTRY = struct.Struct(">iq")
_STATE = struct.Struct(">i")


def state_name(state: int) -> str:
    """``HANDSHAKE`` for 1 and so on; ``state <n>`` for a value that is no HAConnectionState."""
    return _STATE_NAMES.get(state, f"state {state}")


# --- slave → master ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SlaveHandshake:
    """The slave's handshake (§10.2): its flags and the broker id the controller gave it."""

    slave_broker_id: int = NO_BROKER_ID
    sync_from_last_file: bool = False
    async_learner: bool = True

    def encode(self) -> bytes:
        """The 16 bytes on the wire."""
        return _SLAVE_HANDSHAKE.pack(STATE_HANDSHAKE, int(self.sync_from_last_file), int(self.async_learner),
                                     self.slave_broker_id)


def encode_slave_report(offset: int) -> bytes:
    """The 12-byte TRANSFER report of a slave's CommitLog max offset (bytes, >= 0; §10.2)."""
    if offset < 0:
        raise ValueError(f"AutoSwitch HA report offset must be >= 0, got {offset}")
    return _SLAVE_REPORT.pack(STATE_TRANSFER, offset)


# --- epochs ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One entry of a broker's epoch file (RocketMQ's ``EpochEntry``, §10.4): ``epoch`` starts at CommitLog
    offset ``start_offset`` (bytes)."""

    epoch: int
    start_offset: int


class EpochHistory:
    """A broker's epoch entries plus its CommitLog max offset (RocketMQ's ``EpochFileCache``, §10.4).

    Entry *i* covers ``[entries[i].start_offset, entries[i+1].start_offset)``; the last one ends at
    ``max_offset``. Raises ValueError when epochs or start offsets go down.
    """

    def __init__(self, entries: Sequence[EpochEntry], max_offset: int):
        for a, b in zip(entries, entries[1:], strict=False):
            if b.epoch <= a.epoch or b.start_offset < a.start_offset:
                raise ValueError(f"epoch entries out of order: {a} then {b}")
        self.entries = tuple(entries)
        self.max_offset = max_offset
        self._starts = [e.start_offset for e in self.entries]

    def __repr__(self) -> str:
        return f"EpochHistory({list(self.entries)!r}, max_offset={self.max_offset})"

    def end_of(self, index: int) -> int:
        """End offset (exclusive, bytes) of entry ``index``."""
        return self.entries[index + 1].start_offset if index + 1 < len(self.entries) else self.max_offset

    def covering(self, offset: int) -> tuple[EpochEntry, int | None] | None:
        """``(entry, end)`` of the entry holding ``offset`` (``end`` None for the last entry: it grows with the
        CommitLog), or None when ``offset`` lies before the first entry."""
        at = bisect.bisect_right(self._starts, offset) - 1  # of entries with equal starts, the later (non-empty)
        if at < 0:
            return None
        last = at == len(self.entries) - 1
        return self.entries[at], None if last else self.entries[at + 1].start_offset

    def common_point(self, other: EpochHistory) -> int:
        """Where this history and ``other`` agree up to (RocketMQ's ``findConsistentPoint``, §10.4): the newest
        epoch of ours that ``other`` lists with the same start offset, the smaller of its two ends; -1 when
        there is none."""
        theirs = {e.epoch: (i, e) for i, e in enumerate(other.entries)}
        for i in range(len(self.entries) - 1, -1, -1):
            entry = self.entries[i]
            match = theirs.get(entry.epoch)
            if match is not None and match[1].start_offset == entry.start_offset:
                return min(self.end_of(i), other.end_of(match[0]))
        return -1


@dataclass(frozen=True, slots=True)
class HandshakeReply:
    """The master's handshake reply (§10.3): its CommitLog max offset (bytes), last epoch and epoch entries."""

    master_max_offset: int
    last_epoch: int
    entries: tuple[EpochEntry, ...]

    def history(self) -> EpochHistory:
        """The entries as an :class:`EpochHistory` ending at the master's max offset."""
        return EpochHistory(self.entries, self.master_max_offset)

    def encode(self) -> bytes:
        """The reply's bytes: 20-byte header, then 12 bytes per entry."""
        body = b"".join(_EPOCH_ENTRY.pack(e.epoch, e.start_offset) for e in self.entries)
        return _HANDSHAKE_HEADER.pack(STATE_HANDSHAKE, len(body), self.master_max_offset, self.last_epoch) + body


@dataclass(frozen=True, slots=True)
class TransferHeader:
    """A transfer frame's header (§10.5); offsets in bytes, ``body_size`` 0 for a heartbeat."""

    offset: int
    body_size: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int

    def encode(self) -> bytes:
        """The 36 header bytes (the body follows on the wire)."""
        return _TRANSFER_HEADER.pack(STATE_TRANSFER, self.body_size, self.offset, self.epoch,
                                     self.epoch_start_offset, self.confirm_offset)


# --- master → slave ----------------------------------------------------------------------------------
class AutoSwitchFrameReader(TransferFrameReader):
    """Slave side: sans-IO parser of the master's AutoSwitch stream (§10.3, §10.5) over the rewindable buffer
    of :class:`connector.protocol.ha.TransferFrameReader` (same :meth:`feed` / :meth:`writable` /
    :meth:`wrote`; its classic ``peek_header`` / ``next_frame_view`` do not apply here and raise).

    :meth:`next_handshake` returns the handshake reply once complete; :meth:`peek_transfer` /
    :meth:`next_transfer_view` the transfer frames. A frame of the other state than asked for, a state
    that is neither, a negative or oversized ``bodySize`` (a handshake body over 1,000 entries or not a
    multiple of 12; a transfer body over ``max_body_bytes``) or a negative offset raises HAProtocolError
    naming the field and the stream byte, before any body byte is buffered for it: memory stays bounded by
    one legal frame.
    """

    def _header(self, size: int, fmt: struct.Struct) -> tuple | None:
        if self._end - self._start < size:
            return None
        return fmt.unpack_from(self._buf, self._start)

    def _bad(self, what: str) -> HAProtocolError:
        return HAProtocolError(f"bad AutoSwitch HA frame at stream byte {self.bytes_consumed}: {what}")

    def _check_state(self, want: int) -> bool:
        if self._end - self._start < _STATE.size:
            return False
        state = _STATE.unpack_from(self._buf, self._start)[0]
        if state != want:
            raise self._bad(f"field state is {state_name(state)}, expected {state_name(want)} ({want})")
        return True

    def next_handshake(self) -> HandshakeReply | None:
        """The handshake reply (consumed), or None before all its bytes are in."""
        if not self._check_state(STATE_HANDSHAKE):
            return None
        header = self._header(HANDSHAKE_HEADER_SIZE_BYTES, _HANDSHAKE_HEADER)
        if header is None:
            return None
        _, size, max_offset, last_epoch = header
        if size < 0 or size % EPOCH_ENTRY_SIZE_BYTES or size > MAX_EPOCH_ENTRIES * EPOCH_ENTRY_SIZE_BYTES:
            raise self._bad(f"field bodySize is {size}, expected a multiple of {EPOCH_ENTRY_SIZE_BYTES} up to "
                            f"{MAX_EPOCH_ENTRIES * EPOCH_ENTRY_SIZE_BYTES}")
        if max_offset < 0:
            raise self._bad(f"field offset (the master's max offset) is {max_offset}")
        body_at = self._start + HANDSHAKE_HEADER_SIZE_BYTES
        if self._end - body_at < size:
            return None
        entries = tuple(EpochEntry(*_EPOCH_ENTRY.unpack_from(self._buf, body_at + i))
                        for i in range(0, size, EPOCH_ENTRY_SIZE_BYTES))
        self._start = body_at + size
        self.bytes_consumed += HANDSHAKE_HEADER_SIZE_BYTES + size
        return HandshakeReply(max_offset, last_epoch, entries)

    def peek_transfer(self) -> TransferHeader | None:
        """The next transfer frame's header (nothing consumed), or None before its 36 bytes are in.

        A heartbeat may carry offset -1 (a master that has not chosen where to start, §10.5)."""
        if not self._check_state(STATE_TRANSFER):
            return None
        header = self._header(TRANSFER_HEADER_SIZE_BYTES, _TRANSFER_HEADER)
        if header is None:
            return None
        _, size, offset, epoch, epoch_start, confirm = header
        if size < 0 or size > self.max_body_bytes:
            raise self._bad(f"field bodySize is {size} (allowed 0..{self.max_body_bytes}) at offset {offset}")
        if offset < (0 if size else -1):
            raise self._bad(f"field offset is {offset} (bodySize {size})")
        return TransferHeader(offset, size, epoch, epoch_start, confirm)

    def next_transfer_view(self) -> tuple[TransferHeader, memoryview] | None:
        """The next complete transfer frame (consumed): its header and body, a view valid until the next
        :meth:`feed` / :meth:`writable`; None while incomplete."""
        header = self.peek_transfer()
        if header is None:
            return None
        body_at = self._start + TRANSFER_HEADER_SIZE_BYTES
        if self._end - body_at < header.body_size:
            return None
        self._start = body_at + header.body_size
        self.bytes_consumed += TRANSFER_HEADER_SIZE_BYTES + header.body_size
        return header, self._view[body_at:body_at + header.body_size]

    def peek_header(self):  # noqa: D102 - the classic 12-byte header does not exist in this protocol
        raise TypeError("AutoSwitchFrameReader has no classic frame header; use peek_transfer")

    def next_frame_view(self):  # noqa: D102
        raise TypeError("AutoSwitchFrameReader has no classic frames; use next_transfer_view")


__all__ = [
    "HA_MAX_TRANSFER_BODY_BYTES", "HA_PROTOCOL_AUTOSWITCH", "AutoSwitchFrameReader", "EpochEntry", "EpochHistory",
    "HandshakeReply",
    "SlaveHandshake", "TransferHeader", "encode_slave_report", "state_name",
]
