"""Spark InputPartitions of a micro-batch, and the exact record boundaries inside a mapped file they split at.

:func:`build_partitions` turns each broker set's checked ``[begin, end)`` into :class:`HAReplicaInputPartition`
values: one per mapped-file slice (a record never spans two files, docs/protocol.md §1.9), cut further at
ConsumeQueue-given record boundaries for ``min_partitions`` / ``max_bytes_per_partition`` (docs/source.md
"Partitions inside a mapped file"), each read from the master or, with ``read_from='slave'``, a slave holding it
(docs/source.md "Offsets, batches, partitions"). Executors read them with
:func:`connector.source.task.read.read_partition`. The same boundaries end a batch cut by ``max_bytes_per_trigger``
(:func:`budget_end`; docs/source.md "Limits").

The driver never guesses where a record starts. It asks the broker's ConsumeQueues (QUERY_CONSUME_QUEUE,
docs/protocol.md §5.5): each real entry's ``physicOffset`` is the first byte of a whole record, so a split
there is a record boundary by the broker's own account. A range with no ConsumeQueue entry near a wanted
split point (e.g. a backlog of system records only) simply gets fewer partitions. Executors check it again:
the decoder refuses a first record whose PHYSICALOFFSET is not the partition's start (docs/protocol.md §1.2),
so a wrong split could fail a task, never land a wrong row.

How split points are found (user topics' queues first, then retry/DLQ, then system topics, a stage only while a
point is open): the queues' first and last entries bracket the range; for each wanted point the
queue with the most entries around it is searched by interpolation (entry index against CommitLog offset),
each probe reading :data:`ENTRIES_PER_PROBE` entries, every probe of a round in flight at once. A point is
settled when a boundary lies within ``tolerance`` bytes of it, or after :data:`MAX_PROBE_ROUNDS` rounds
(the nearest boundary found is taken).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from connector.client.consume_queue import ConsumeQueueReader, QueueRange
from connector.errors import BrokerAdminError
from connector.options.declaration import READ_FROM_SLAVE
from connector.options.parse import SourceOptions
from connector.protocol.ha import HA_PROTOCOL_CLASSIC
from connector.protocol.mapped_files import next_file_start
from connector.protocol.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_system_topic
from connector.source.driver.brokers import BrokerSetView
from connector.source.driver.controller_mode import ControllerModeSet
from connector.source.partition import HAReplicaInputPartition

log = logging.getLogger(__name__)

MIN_PARTITION_BYTES = 1 << 20  # a smaller piece costs more (task, HA connection) than it saves
MAX_PROBED_QUEUES = 1024  # queues asked for their range per split search, in stages (see find_boundaries)
ENTRIES_PER_PROBE = 32
MAX_PROBE_ROUNDS = 6


def partition_counts(sizes: Sequence[int], min_partitions: int | None,
                     max_bytes_per_partition: int | None) -> list[int]:
    """How many pieces each slice (``sizes`` in bytes) should become.

    ``min_partitions`` (as Spark's Kafka source): the total is raised to at least ``min_partitions`` by giving
    each slice a share proportional to its size (at least 1). ``max_bytes_per_partition``: each slice gets at
    least ``ceil(size / max)`` pieces. No piece is planned below :data:`MIN_PARTITION_BYTES`.
    """
    counts = [1] * len(sizes)
    total = sum(sizes)
    if min_partitions and total and len(sizes) < min_partitions:
        counts = [max(1, round(size * min_partitions / total)) for size in sizes]
    if max_bytes_per_partition:
        counts = [max(c, -(-size // max_bytes_per_partition)) for c, size in zip(counts, sizes, strict=True)]
    return [max(1, min(c, size // MIN_PARTITION_BYTES)) for c, size in zip(counts, sizes, strict=True)]


def pick_splits(lo: int, hi: int, pieces: int, boundaries: Sequence[int]) -> list[int]:
    """Split points for ``[lo, hi)`` cut into ``pieces`` near-equal pieces, each taken from ``boundaries``
    (known record boundaries, ascending): for every ideal point the nearest boundary strictly inside, no two
    alike, none leaving a piece under :data:`MIN_PARTITION_BYTES` bytes. Returns them ascending (maybe fewer)."""
    inside = [b for b in boundaries if lo < b < hi]
    chosen: list[int] = []
    for k in range(1, pieces):
        ideal = lo + (hi - lo) * k // pieces
        at = bisect.bisect_left(inside, ideal)
        near = [inside[i] for i in (at - 1, at) if 0 <= i < len(inside)]
        if not near:
            continue
        best = min(near, key=lambda b: abs(b - ideal))
        previous = chosen[-1] if chosen else lo
        if best - previous >= MIN_PARTITION_BYTES and hi - best >= MIN_PARTITION_BYTES:
            chosen.append(best)
    return chosen


@dataclass
class _Queue:
    """A queue's known (CommitLog offset, index) points, ascending in both."""

    range: QueueRange
    points: list[tuple[int, int]] = field(default_factory=list)

    def add(self, found: Sequence[tuple[int, int]]) -> None:
        self.points = sorted(set(self.points) | set(found))

    def covers(self, offset: int) -> bool:
        return len(self.points) >= 2 and self.points[0][0] <= offset <= self.points[-1][0]

    def index_near(self, offset: int) -> int:
        """Interpolated index of the entry nearest ``offset`` between the known points around it."""
        at = bisect.bisect_left(self.points, (offset, -1))
        (p1, i1), (p2, i2) = self.points[max(0, at - 1)], self.points[min(at, len(self.points) - 1)]
        if p2 <= p1 or i2 <= i1:
            return i1
        return i1 + (offset - p1) * (i2 - i1) // (p2 - p1)


def find_boundaries(reader: ConsumeQueueReader, lo: int, hi: int, targets: Sequence[int], tolerance: int) -> list[int]:
    """Record boundaries strictly inside ``(lo, hi)`` found in the broker's ConsumeQueues while searching for one
    within ``tolerance`` bytes of each of ``targets`` (see the module doc). Ascending; may be empty.

    The queues are asked in stages, in :func:`_probe_order`: user topics, then retry/DLQ topics, then system
    topics (a broker holds over a thousand system queues, most of them empty), and a later stage only when a
    target is still open; at most :data:`MAX_PROBED_QUEUES` queues in all.

    Raises BrokerAdminError when the broker cannot answer (callers then plan without splits).
    """
    queues = sorted(reader.queues(), key=_probe_order)[:MAX_PROBED_QUEUES]
    known: set[int] = set()
    state: list[_Queue] = []
    open_targets = list(targets)
    for _, stage in itertools.groupby(queues, key=lambda queue: _probe_order(queue)[0]):
        state += _bracketed(reader, list(stage), lo, hi, known)
        open_targets = _search(reader, state, known, open_targets, tolerance)
        if not open_targets:
            break
    return sorted(b for b in known if lo < b < hi)


def _bracketed(reader: ConsumeQueueReader, queues: list[tuple[str, int]], lo: int, hi: int,
               known: set[int]) -> list[_Queue]:
    """The queues among ``queues`` with entries inside ``(lo, hi)``, each with its first and last entry (added
    to ``known``)."""
    ranges = [r for r in reader.ranges(queues) if r.entries > 0]
    state = [_Queue(r) for r in ranges]
    ends = reader.entries([(r, i, 1) for r in ranges for i in (r.min_index, r.max_index - 1)])
    for n, q in enumerate(state):
        q.add(ends[2 * n] + ends[2 * n + 1])
    state = [q for q in state if q.points and q.points[0][0] < hi and q.points[-1][0] > lo]
    for q in state:
        known.update(p for p, _ in q.points)
    return state


def _search(reader: ConsumeQueueReader, state: list[_Queue], known: set[int], targets: list[int],
            tolerance: int) -> list[int]:
    """Probe ``state``'s queues by interpolation for boundaries near ``targets`` (adding what is found to
    ``known``), up to :data:`MAX_PROBE_ROUNDS` rounds; returns the targets still without a boundary near."""
    open_targets = targets
    for _ in range(MAX_PROBE_ROUNDS):
        open_targets = [t for t in open_targets if not _near(known, t, tolerance)]
        probes, owners = [], []
        for t in open_targets:
            covering = [q for q in state if q.covers(t)]
            if not covering:
                continue
            q = max(covering, key=lambda c: c.range.entries)
            index = max(q.range.min_index, q.index_near(t) - ENTRIES_PER_PROBE // 2)
            probes.append((q.range, index, ENTRIES_PER_PROBE))
            owners.append(q)
        if not probes:
            break
        for q, found in zip(owners, reader.entries(probes), strict=True):
            q.add(found)
            known.update(p for p, _ in found)
    return [t for t in open_targets if not _near(known, t, tolerance)]


def _probe_order(queue: tuple[str, int]) -> tuple[int, int, str]:
    """User topics first, then retry/DLQ topics, then system topics (BenchmarkTest alone has 1024 queues);
    queue 0 of every topic before queue 1 of any, so that a capped probe still sees every topic."""
    topic, queue_id = queue
    if is_system_topic(topic):
        return 2, queue_id, topic
    return int(topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))), queue_id, topic


def _near(known: set[int], target: int, tolerance: int) -> bool:
    return any(abs(b - target) <= tolerance for b in known)


def budget_end(reader: ConsumeQueueReader, begin: int, wanted: int, end: int, slack: int) -> int | None:
    """Where a batch of ``[begin, end)`` cut to ``wanted`` bytes (CommitLog offsets, ``begin < wanted < end``)
    ends, from the record boundaries the ConsumeQueues name (:func:`find_boundaries`, searched to within
    ``slack // 2`` bytes of ``wanted``): the largest in ``(begin, wanted]`` when it lies within ``slack`` below
    ``wanted``, else the smallest in ``(wanted, wanted + slack]``, else the largest in ``(begin, wanted]``;
    None when none of these is found (e.g. only records of topics without queues there).

    Raises BrokerAdminError when the broker cannot answer.
    """
    found = find_boundaries(reader, begin, end, [wanted], max(1, slack // 2))
    at = bisect.bisect_right(found, wanted)
    below = found[at - 1] if at else None
    above = found[at] if at < len(found) else None
    if below is not None and wanted - below <= slack:
        return below
    if above is not None and above - wanted <= slack:
        return above
    return below


def file_slices(view: BrokerSetView, begin: int, stop: int) -> list[tuple[BrokerSetView, int, int]]:
    """``[begin, stop)`` cut at mapped-file starts: ``(view, lo, hi)`` per slice, in offset order."""
    slices = []
    while begin < stop:
        slice_end = min(stop, next_file_start(begin, view.mapped_file_size))
        slices.append((view, begin, slice_end))
        begin = slice_end
    return slices


def build_partitions(slices: list[tuple[BrokerSetView, int, int]], options: SourceOptions, *,
                     columns: tuple[str, ...] | None, protocols: dict[str, str],
                     sets: dict[str, ControllerModeSet]) -> list[HAReplicaInputPartition]:
    """The partitions of the mapped-file ``slices`` of a batch (:func:`file_slices`), split as
    ``options.min_partitions`` / ``options.max_bytes_per_partition`` ask; ``protocols`` / ``sets`` are the HA
    protocol and controller-mode set of each broker set by name
    (:class:`connector.source.driver.brokers.BrokerSets`)."""
    prefer_slave = options.read_from == READ_FROM_SLAVE
    counts = partition_counts([hi - lo for _, lo, hi in slices], options.min_partitions,
                              options.max_bytes_per_partition)
    parts: list[HAReplicaInputPartition] = []
    for (view, lo, hi), pieces in zip(slices, counts, strict=True):
        edges = [lo, *split_points(view, lo, hi, pieces, options), hi]
        for begin, slice_end in zip(edges, edges[1:], strict=False):
            server = view.server_for(begin, slice_end, prefer_slave)
            parts.append(HAReplicaInputPartition(
                broker=view.name, ha_addr=server.endpoint.ha_addr, remoting_addr=server.endpoint.remoting_addr,
                start=begin, end=slice_end, mapped_file_size=view.mapped_file_size, fetch=options.fetch,
                decode=options.decode,
                server_role=server.role, columns=columns, transform=options.batch_transform,
                ha_protocol=protocols.get(view.name, HA_PROTOCOL_CLASSIC),
                **(sets[view.name].partition_fields() if view.name in sets else {})))
    return parts


def split_points(view: BrokerSetView, lo: int, hi: int, pieces: int, options: SourceOptions) -> list[int]:
    """Record boundaries cutting ``[lo, hi)`` into about ``pieces`` InputPartitions
    (:mod:`connector.source.driver.partitions`); on a SYNC_MASTER only boundaries whose bytes below can no longer have a
    producer waiting for an ack (a partition's first HA report acknowledges them,
    :mod:`connector.source.driver.brokers`). Planning goes on without splits when the broker cannot say."""
    if pieces <= 1:
        return []
    server = view.server_for(lo, hi, options.read_from == READ_FROM_SLAVE)
    fetch = options.fetch
    targets = [lo + (hi - lo) * k // pieces for k in range(1, pieces)]
    try:
        with ConsumeQueueReader(server.endpoint.remoting_addr, fetch.read_timeout_ms, fetch.credentials,
                                connect_timeout_ms=fetch.connect_timeout_ms) as reader:
            found = find_boundaries(reader, lo, hi, targets, max((hi - lo) // (8 * pieces), 64 * 1024))
    except BrokerAdminError as exc:
        log.warning("broker %s: no split of [%d, %d) into %d partitions: %s", view.name, lo, hi, pieces, exc)
        return []
    settled = view.settled_offset(time.monotonic())
    cuts = [c for c in pick_splits(lo, hi, pieces, found) if c <= settled]
    log.info("broker %s: [%d, %d) split at %s (%d wanted, %d ConsumeQueue boundaries seen)", view.name, lo, hi,
             cuts, pieces, len(found))
    return cuts
