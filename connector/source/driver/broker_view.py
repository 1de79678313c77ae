"""Driver-side knowledge of one broker set (:class:`BrokerSetView`) and the pure rules that turn it into batch ends
and the server of each slice: the record boundaries known without reading data, slave samples and reput offsets,
and the SYNC_MASTER acknowledgement window. Plain Python over offsets (bytes), no I/O.

The rules are docs/source.md "Offsets, batches, partitions", "Full history, reading from slaves" and
"Acknowledgements (safe on a SYNC_MASTER)"; the RocketMQ facts behind them docs/protocol.md §1.9, §2.3, §2.8.
"""

from __future__ import annotations

import bisect
import logging
from collections import deque
from dataclasses import dataclass, field

from connector.options import BrokerEndpoint
from connector.protocol.mapped_files import ceil_file_start, file_start, next_file_start

log = logging.getLogger(__name__)

MAX_KNOWN_BOUNDARIES_PER_BROKER = 4096
ACK_WINDOW_MARGIN_MS = 1000  # clock and scheduling slack on top of the master's replica wait


@dataclass
class ServerOffsets:
    """One server's (commitLogMinOffset, commitLogMaxOffset) in bytes, or why it could not be asked."""

    endpoint: BrokerEndpoint
    role: str  # "master" or "slave"
    min_offset: int | None = None
    max_offset: int | None = None
    error: str | None = None
    dispatch_behind: int | None = None  # dispatchBehindBytes, when the broker reports it
    down: bool = False  # the error is an outage (refused, reset, timed out) that may end, not a wrong peer

    @property
    def reachable(self) -> bool:
        return self.max_offset is not None

    def holds(self, lo: int, hi: int) -> bool:
        """True when the server answered and holds every byte of ``[lo, hi)``."""
        return self.reachable and self.min_offset <= lo and hi <= self.max_offset


@dataclass
class BrokerSetView:
    """What the driver knows about one broker set: its mapped-file size, the master's and slaves'
    offsets from the latest samples, and the record boundaries it has seen (master max offsets)."""

    name: str
    mapped_file_size: int
    master: ServerOffsets | None = None
    slaves: list[ServerOffsets] = field(default_factory=list)
    #: how long (ms) a SYNC_MASTER producer may still wait for a replica ack; 0 when acks have no effect
    ack_window_ms: int = 0
    _boundaries: list[int] = field(default_factory=list)  # sorted master commitLogMaxOffset samples
    _recent: deque = field(default_factory=deque)  # (commitLogMaxOffset, monotonic s) within the ack window
    _settled: int = -1  # every byte below this was in a master sample at least ack_window_ms ago

    # --- boundaries --------------------------------------------------------------------------------
    def add_boundary(self, offset: int) -> None:
        """Remember a record boundary (a master's commitLogMaxOffset); keeps the newest
        :data:`MAX_KNOWN_BOUNDARIES_PER_BROKER` (the smallest are dropped first)."""
        at = bisect.bisect_left(self._boundaries, offset)
        if at < len(self._boundaries) and self._boundaries[at] == offset:
            return
        self._boundaries.insert(at, offset)
        if len(self._boundaries) > MAX_KNOWN_BOUNDARIES_PER_BROKER:
            del self._boundaries[0]

    def forget_boundaries(self, below: int | None = None) -> None:
        """Drop every boundary (``below`` None: the log went backwards) or those below an offset."""
        if below is None:
            self._boundaries.clear()
        else:
            del self._boundaries[:bisect.bisect_left(self._boundaries, below)]

    @property
    def boundaries(self) -> list[int]:
        """The sampled boundaries, ascending."""
        return list(self._boundaries)

    def file_start(self, offset: int) -> int:
        """Start of the mapped file holding ``offset``."""
        return file_start(offset, self.mapped_file_size)

    def floor_boundary(self, offset: int, at_least: int) -> int:
        """The largest known record boundary <= ``offset``, but not below ``at_least`` (a boundary itself,
        e.g. the batch start)."""
        best = max(at_least, self.file_start(offset))
        at = bisect.bisect_right(self._boundaries, offset)
        if at:
            best = max(best, self._boundaries[at - 1])
        return min(best, max(offset, at_least))

    def ceil_boundary(self, wanted: int, end: int) -> int:
        """The smallest known boundary >= ``wanted`` (next file start or a sample), capped at ``end``."""
        if wanted >= end:
            return end
        best = min(end, ceil_file_start(wanted, self.mapped_file_size))
        at = bisect.bisect_left(self._boundaries, wanted)
        if at < len(self._boundaries):
            best = min(best, self._boundaries[at])
        return best

    def note_slave_sample(self, previous: ServerOffsets | None, current: ServerOffsets) -> None:
        """Learn the slave's reput offset as a boundary when two consecutive samples agree."""
        if (previous is None or not previous.reachable or not current.reachable or current.dispatch_behind is None
                or (previous.max_offset, previous.dispatch_behind) != (current.max_offset, current.dispatch_behind)):
            return
        reput = current.max_offset - current.dispatch_behind
        if current.min_offset <= reput <= current.max_offset:
            self.add_boundary(reput)

    # --- acknowledgements on a SYNC_MASTER -----------------------------------------------------------
    def note_master_max(self, max_offset: int, now_s: float) -> None:
        """Record a master commitLogMaxOffset sample taken at monotonic time ``now_s``."""
        if self._recent and max_offset < self._recent[-1][0]:
            self._recent.clear()  # the log went backwards: nothing recent is trustworthy
            self._settled = min(self._settled, max_offset)
        self._recent.append((max_offset, now_s))

    def settled_offset(self, now_s: float) -> int:
        """Every byte below the returned offset was appended at least ``ack_window_ms`` ago, so no
        SYNC_MASTER producer can still be waiting for its ack (-1 when nothing is known yet)."""
        if not self.ack_window_ms:
            return 1 << 62
        horizon = now_s - self.ack_window_ms / 1000
        while self._recent and self._recent[0][1] <= horizon:
            self._settled = max(self._settled, self._recent.popleft()[0])
        return self._settled

    def ack_safe_end(self, begin: int, end: int, now_s: float) -> int:
        """``end``, or the first mapped-file start inside ``(begin, end)`` whose partition's first report
        would acknowledge bytes that may still have a producer waiting (see the module doc)."""
        size = self.mapped_file_size
        settled = self.settled_offset(now_s)
        first_inner = next_file_start(begin, size)
        first_unsettled = next_file_start(settled, size) if settled >= 0 else 0
        unsafe = max(first_inner, first_unsettled)
        return unsafe if unsafe < end else end

    # --- replicas and servers ----------------------------------------------------------------------
    def replicated_offset(self, slaves: int) -> int | None:
        """The commitLogMaxOffset that at least ``slaves`` reachable slaves hold (the N-th highest), or None
        when fewer slaves answered (``slaves``: the query's ``min_in_sync_slaves``)."""
        held = sorted((s.max_offset for s in self.slaves if s.reachable), reverse=True)
        if len(held) < slaves:
            return None
        return held[slaves - 1]

    def best_slave(self) -> ServerOffsets | None:
        """The reachable slave holding the most bytes (None when no slave answered)."""
        live = [s for s in self.slaves if s.reachable]
        return max(live, key=lambda s: s.max_offset) if live else None

    def server_for(self, lo: int, hi: int, prefer_slave: bool) -> ServerOffsets:
        """The server an executor reads ``[lo, hi)`` from: with ``prefer_slave`` the slave holding the
        most among those holding the whole range, else (or when none does) the master."""
        if prefer_slave:
            for slave in sorted((s for s in self.slaves if s.reachable), key=lambda s: -s.max_offset):
                if slave.holds(lo, hi):
                    return slave
        if self.master is None:
            raise ValueError(f"broker {self.name}: no master known")
        return self.master
