"""Where a micro-batch starts and ends, per broker set: plain rules over offsets (bytes), no I/O.

The stream reader (:mod:`connector.source.reader`) samples the brokers, then asks these functions where
each broker's batch starts (the checkpoint, or commitLogMinOffset once retention deleted it: ``failOnDataLoss``),
how far it may go (the master's max offset cut to what ``minInSyncSlaves`` slaves or, with ``readFrom=slave``, the
best slave hold, the AvailableNow target, a controller-mode set's confirmOffset, the SYNC_MASTER ack window), and
how a ``ReadMaxBytes`` limit cuts it (docs/source.md "Offsets, batches, partitions"). The boundary knowledge and
the ack rule are :class:`connector.planning.BrokerSetView`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from connector.controller_mode import ControllerModeSet
from connector.data_loss import on_data_loss
from connector.options import READ_FROM_SLAVE, BrokerEndpoint, SourceOptions
from connector.planning import BrokerSetView

log = logging.getLogger(__name__)


def start_of(broker: BrokerEndpoint, start: dict | None, min_offset: int) -> int:
    """The broker's offset in a Spark start offset, or ``min_offset`` (with a warning) when it has none."""
    value = start.get(broker.name) if start else None
    if value is None:
        log.warning("broker %s has no offset in the checkpoint; starting at its commitLogMinOffset %d",
                    broker.name, min_offset)
        return min_offset
    return int(value)


def check_min(broker: BrokerEndpoint, start: int, min_offset: int, fail_on_data_loss: bool) -> int:
    """The offset a batch of ``broker`` can really start at, given commitLogMinOffset: ``start``, or when
    retention deleted it DataLossError (``fail_on_data_loss``) or ``min_offset`` (logged)."""
    if start >= min_offset:
        return start
    on_data_loss(fail_on_data_loss,
                 f"broker {broker.name} ({broker.remoting_addr}) no longer holds CommitLog bytes [{start}, "
                 f"{min_offset}) that the query needs (commitLogMinOffset is {min_offset}: retention deleted them)",
                 instead="continue at the broker's first byte", logger=log)
    return min_offset


def batch_target(options: SourceOptions, view: BrokerSetView, begin: int, max_offset: int, *,
                 trigger_target: int | None = None, cset: ControllerModeSet | None = None) -> int:
    """Where a batch of this broker set may end at most (bytes, >= ``begin``): the max offset, cut to what
    ``minInSyncSlaves`` slaves hold and (``readFrom=slave``) what the best slave holds, as known boundaries;
    then to ``trigger_target`` (Trigger.AvailableNow), a controller-mode set's confirmOffset and the
    SYNC_MASTER ack window (:meth:`connector.planning.BrokerSetView.ack_safe_end`)."""
    target = max_offset
    if options.min_in_sync_slaves:
        replicated = view.replicated_offset(options.min_in_sync_slaves)
        if replicated is None:
            log.warning("broker %s: fewer than minInSyncSlaves=%d slaves answered; the batch waits", view.name,
                        options.min_in_sync_slaves)
            return begin
        target = min(target, view.floor_boundary(replicated, begin))
    if options.read_from == READ_FROM_SLAVE:
        best = view.best_slave()
        if best is not None and best.max_offset > begin and best.min_offset <= begin:
            target = min(target, view.floor_boundary(best.max_offset, begin))
    if trigger_target is not None:
        target = min(target, trigger_target)
    if target > begin and cset is not None:
        target = min(target, cset.confirmed_end(view, begin))
    target = max(begin, target)
    safe = view.ack_safe_end(begin, target, time.monotonic())
    if safe < target:
        log.info("broker %s: SYNC_MASTER bytes below %d were appended less than %d ms ago; the batch ends "
                 "there so no reader acknowledges them before they land", view.name, safe, view.ack_window_ms)
    return safe


def apply_byte_limit(brokers: Sequence[BrokerEndpoint], views: dict[str, BrokerSetView],
                     spans: dict[str, tuple[int, int]], max_bytes: int) -> dict[str, int]:
    """Batch ends under ``ReadMaxBytes(max_bytes)``: ``spans`` (set name -> (begin, end)) cut so the budget is
    shared in proportion to each set's backlog, each end the first known boundary at or past its share
    (:meth:`connector.planning.BrokerSetView.ceil_boundary`); the limit is soft (see docs/source.md)."""
    backlog = {name: end - begin for name, (begin, end) in spans.items()}
    total = sum(backlog.values())
    if total <= max_bytes:
        return {name: end for name, (_, end) in spans.items()}
    ends = {}
    for broker in brokers:
        begin, end = spans[broker.name]
        if backlog[broker.name] == 0:
            ends[broker.name] = end
            continue
        share = max(1, max_bytes * backlog[broker.name] // total)
        ends[broker.name] = views[broker.name].ceil_boundary(begin + share, end)
    return ends
