"""The CommitLog offset of a time, on the driver: the first record, in CommitLog order, whose storeTimestamp is >= T,
found without scanning the log — a bisection over mapped-file first headers, then over ConsumeQueue-named record
starts, then one read of the last gap (docs/source.md "Starting at a time", which states the requests per broker set).

The rules (:func:`lower_bound`, :func:`first_at_or_after`, :func:`file_starts`) are pure; :class:`TimeSearch` does
the I/O through the driver's existing clients and counts its requests (:class:`SearchCounts`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from connector.client.consume_queue import ConsumeQueueReader
from connector.errors import BrokerAdminError, CommitLogFormatError, HAReplicaOptionError
from connector.options.declaration import OPTIONS, READ_FROM_SLAVE, TIMESTAMP_STRATEGY_ERROR
from connector.protocol.commitlog import BLANK_MAGIC_CODE, read_record_head
from connector.protocol.mapped_files import next_file_start
from connector.source.driver.brokers import BrokerSetView, DriverReads, bounds
from connector.source.driver.offsets import starts_record
from connector.source.driver.partitions import MAX_PROBE_ROUNDS, MAX_PROBED_QUEUES, find_boundaries

log = logging.getLogger(__name__)

#: bytes read at a record start to get its storeTimestamp (at byte 56, or 68 after an IPv6 born host)
HEADER_BYTES = 80
#: the last gap is read whole once it is at most this many bytes (or no ConsumeQueue names a record inside it)
WINDOW_BYTES = 1 << 20
#: ConsumeQueue narrowing rounds inside one mapped file, each cutting the gap into :data:`NARROW_PIECES`
NARROW_ROUNDS = 3
NARROW_PIECES = 32
#: the most known record starts one narrowing round bisects (evenly picked): at most 8 header reads a round
MAX_BISECTED_STARTS = 255
#: the most ConsumeQueue requests of one narrowing round: the queue list, each probed queue's min and max index
#: and first and last entry, and the split search's probe rounds in each of its 3 stages of queues (user topics,
#: retry/DLQ, system; :mod:`connector.source.driver.partitions`), one probe per open cut
MAX_QUEUE_REQUESTS_PER_ROUND = 1 + 4 * MAX_PROBED_QUEUES + 3 * MAX_PROBE_ROUNDS * (NARROW_PIECES - 1)


def max_header_reads(files: int) -> int:
    """The most header reads (HA reads of :data:`HEADER_BYTES`) one search makes in a log of ``files`` mapped
    files: the bisection over the files, then :data:`NARROW_ROUNDS` bisections of at most
    :data:`MAX_BISECTED_STARTS` record starts."""
    return math.ceil(math.log2(files + 1)) + NARROW_ROUNDS * math.ceil(math.log2(MAX_BISECTED_STARTS + 1))


def lower_bound(count: int, key: Callable[[int], int], target: int) -> int:
    """The smallest ``i`` in ``[0, count]`` with ``key(i) >= target``, assuming ``key`` non-decreasing; asks
    ``key`` at most ``ceil(log2(count + 1))`` times."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) // 2
        if key(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def file_starts(min_offset: int, max_offset: int, mapped_file_size: int) -> list[int]:
    """The first record start of every mapped file holding bytes of ``[min_offset, max_offset)``:
    ``min_offset`` (commitLogMinOffset, a record start) then each later file's start."""
    if max_offset <= min_offset:
        return []
    out = [min_offset]
    at = next_file_start(min_offset, mapped_file_size)
    while at < max_offset:
        out.append(at)
        at += mapped_file_size
    return out


def first_at_or_after(buf: bytes, base: int, target_ms: int, mapped_file_size: int) -> int | None:
    """Walk the records of ``buf`` (CommitLog bytes from the record start ``base``, inside one mapped file) and
    return the offset of the first message whose storeTimestamp is >= ``target_ms``; None when none is (the
    walk stops at an END_FILE blank or the end of ``buf``). Raises CommitLogFormatError naming the offset where
    the bytes are not a record."""
    pos = 0
    while pos + 8 <= len(buf):
        head = read_record_head(buf, pos)
        if head is None or head.magic == BLANK_MAGIC_CODE or (head.total_size == 0 and head.magic == 0):
            return None
        if not starts_record(buf[pos:pos + HEADER_BYTES], base + pos, mapped_file_size):
            raise CommitLogFormatError(f"no record starts here (searching the first storeTimestamp >= {target_ms})",
                                       offset=base + pos, field="TOTALSIZE")
        if head.store_timestamp is not None and head.store_timestamp >= target_ms:
            return base + pos
        pos += head.total_size
    return None


@dataclass
class SearchCounts:
    """The requests one search made: HA reads (``header_reads`` of :data:`HEADER_BYTES` each, ``window_reads``
    and their ``window_bytes``) and remoting requests to the ConsumeQueues (``queue_requests``)."""

    header_reads: int = 0
    window_reads: int = 0
    window_bytes: int = 0
    queue_requests: int = 0


class _CountedQueues:
    """A :class:`ConsumeQueueReader`, counting the remoting requests it sends into ``counts``."""

    def __init__(self, reader: ConsumeQueueReader, counts: SearchCounts):
        self.reader, self.counts = reader, counts

    def queues(self):
        self.counts.queue_requests += 1
        return self.reader.queues()

    def ranges(self, queues):
        queues = list(queues)
        self.counts.queue_requests += 2 * len(queues)
        return self.reader.ranges(queues)

    def entries(self, probes: Sequence):
        self.counts.queue_requests += len(probes)
        return self.reader.entries(probes)


class TimeSearch:
    """The offset of a time in one broker set's CommitLog ``[min_offset, max_offset)`` (see the module doc).

    ``reads``: the driver's HA reads of the set; ``queues_addr``: the remoting address whose ConsumeQueues
    narrow a file (None: no narrowing); ``counts``: the requests made so far. Raises what the HA reads raise;
    a broker whose ConsumeQueues cannot answer only leaves a larger last gap (logged).
    """

    def __init__(self, reads: DriverReads, view: BrokerSetView, min_offset: int, max_offset: int, *,
                 queues_addr: str | None, window_bytes: int = WINDOW_BYTES):
        self.reads, self.view = reads, view
        self.min_offset, self.max_offset = min_offset, max_offset
        self.queues_addr, self.window_bytes = queues_addr, window_bytes
        self.counts = SearchCounts()

    def store_timestamp(self, offset: int) -> int:
        """storeTimestamp (ms) of the record starting at ``offset`` (one HA read of :data:`HEADER_BYTES`)."""
        self.counts.header_reads += 1
        head_bytes = self.reads.read(offset, min(offset + HEADER_BYTES, self.max_offset))
        head = read_record_head(head_bytes)
        if (head is None or head.store_timestamp is None
                or not starts_record(head_bytes, offset, self.view.mapped_file_size)):
            raise CommitLogFormatError(f"broker {self.view.name}: no record starts here (reading its storeTimestamp)",
                                       offset=offset, field="TOTALSIZE")
        return head.store_timestamp

    def offset_of(self, target_ms: int) -> int | None:
        """The offset of the first record stored at or after ``target_ms``; None when every record is older."""
        starts = file_starts(self.min_offset, self.max_offset, self.view.mapped_file_size)
        i = lower_bound(len(starts), lambda k: self.store_timestamp(starts[k]), target_ms)
        if i == 0:
            return starts[0] if starts else None
        lo = starts[i - 1]  # stored before target_ms
        hi = starts[i] if i < len(starts) else self.max_offset
        return self._inside(lo, hi, target_ms)

    def _inside(self, lo: int, hi: int, target_ms: int) -> int | None:
        """The answer in ``(lo, hi]``: ``lo`` a record stored before ``target_ms``, ``hi`` a record start stored at
        or after it, or ``max_offset``."""
        for _ in range(NARROW_ROUNDS if self.queues_addr else 0):
            if hi - lo <= self.window_bytes:
                break
            inside = self._known_starts(lo, min(hi, next_file_start(lo, self.view.mapped_file_size)))
            if not inside:
                break
            if len(inside) > MAX_BISECTED_STARTS:
                step = -(-len(inside) // MAX_BISECTED_STARTS)
                inside = inside[step - 1::step]
            k = lower_bound(len(inside), lambda j, starts=inside: self.store_timestamp(starts[j]), target_ms)
            lo = inside[k - 1] if k > 0 else lo
            hi = inside[k] if k < len(inside) else hi
        self.counts.window_reads += 1
        self.counts.window_bytes += hi - lo
        found = first_at_or_after(self.reads.read(lo, hi), lo, target_ms, self.view.mapped_file_size)
        if found is not None:
            return found
        return None if hi >= self.max_offset else hi

    def _known_starts(self, lo: int, hi: int) -> list[int]:
        """Record starts strictly inside ``(lo, hi)`` the ConsumeQueues name near :data:`NARROW_PIECES` equal cuts."""
        targets = [lo + (hi - lo) * k // NARROW_PIECES for k in range(1, NARROW_PIECES)]
        try:
            with ConsumeQueueReader(self.queues_addr, self.reads.fetch.read_timeout_ms, self.reads.fetch.credentials,
                                    connect_timeout_ms=self.reads.fetch.connect_timeout_ms) as reader:
                return find_boundaries(_CountedQueues(reader, self.counts), lo, hi, targets,
                                       max(1, (hi - lo) // (4 * NARROW_PIECES)))
        except BrokerAdminError as exc:
            log.warning("broker %s: no ConsumeQueue record starts in [%d, %d) (%s); reading the gap whole",
                        self.view.name, lo, hi, exc)
            return []


def offsets_for_times(planner, times: Mapping[str, int], *, past_last: str) -> dict[str, int]:
    """Per broker set of ``times`` (name -> ms) the offset of its first record stored at or after the time.

    ``planner``: the :class:`connector.source.driver.batches.BatchPlanner` whose broker views and HA reads serve
    the search. A time past a set's last record gives its commitLogMaxOffset when ``past_last`` is ``"latest"``;
    with ``"error"`` it raises HAReplicaOptionError naming the option, the broker, the time and the max offset.
    """
    options = planner.options
    out = {}
    for broker in planner.route.brokers:
        if broker.name not in times:
            continue
        view = planner.brokers.views.get(broker.name) or planner.brokers.refresh(broker)
        min_offset, max_offset = bounds(view)
        prefer_slave = options.read_from == READ_FROM_SLAVE
        reads = DriverReads(options.fetch, view, planner.brokers.protocol(view.name), prefer_slave)
        server = view.server_for(min_offset, max_offset, prefer_slave)
        search = TimeSearch(reads, view, min_offset, max_offset, queues_addr=server.endpoint.remoting_addr)
        offset = search.offset_of(times[broker.name])
        log.info("broker %s: first record stored at or after %d ms is at %s (%s)", broker.name, times[broker.name],
                 offset, search.counts)
        if offset is None:
            if past_last == TIMESTAMP_STRATEGY_ERROR:
                option = (OPTIONS.starting_timestamp if options.starting_timestamp is not None
                          else OPTIONS.starting_offsets_by_timestamp)
                raise HAReplicaOptionError(option.name, times[broker.name], f"broker {broker.name} holds no record "
                                           f"stored at or after {times[broker.name]} ms (commitLogMaxOffset "
                                           f"{max_offset}); set {OPTIONS.starting_offsets_by_timestamp_strategy.name}"
                                           "=latest to start at the end")
            offset = max_offset
        out[broker.name] = offset
    return out
