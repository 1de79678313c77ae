"""Spark InputPartitions of a micro-batch: one per (broker, mapped-file slice), split further on request.

:func:`build_partitions` turns each broker set's checked ``[begin, end)`` into :class:`HAReplicaInputPartition`
values: one per mapped-file slice (a record never spans two files, docs/protocol.md §1.9), cut further at
ConsumeQueue-given record boundaries for ``min_partitions`` / ``max_bytes_per_partition``
(:mod:`connector.source.driver.splits`), each read from the master or, with ``read_from='slave'``, a slave holding it
(docs/source.md "Offsets, batches, partitions"). Executors read them with
:func:`connector.source.task.read.read_partition`.
"""

from __future__ import annotations

import logging
import time

from connector.client.consume_queue import ConsumeQueueReader
from connector.errors import BrokerAdminError
from connector.options import SourceOptions
from connector.protocol.ha import HA_PROTOCOL_CLASSIC
from connector.protocol.mapped_files import next_file_start
from connector.settings import READ_FROM_SLAVE
from connector.source.driver.broker_view import BrokerSetView
from connector.source.driver.controller_mode import ControllerModeSet
from connector.source.driver.splits import find_boundaries, partition_counts, pick_splits
from connector.source.partition import HAReplicaInputPartition

log = logging.getLogger(__name__)


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
    (:mod:`connector.source.driver.splits`); on a SYNC_MASTER only boundaries whose bytes below can no longer have a
    producer waiting for an ack (a partition's first HA report acknowledges them,
    :mod:`connector.source.driver.broker_view`). Planning goes on without splits when the broker cannot say."""
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
