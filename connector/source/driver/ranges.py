"""Where a batch read (``spark.read``) ends: ``ending_offsets`` / ``ending_timestamp`` / ``ending_offsets_by_timestamp``
resolved per broker set and checked, the wait for a SYNC_MASTER's acknowledgement window before its range is read,
and the refusal of those options by a stream (docs/source.md "Batch reads", "Acknowledgements").
"""

from __future__ import annotations

import logging
import time

from connector.errors import HAReplicaOptionError
from connector.options import SourceOptions
from connector.protocol.mapped_files import is_file_start
from connector.settings import ENDING_OFFSETS_LATEST, LATEST_OFFSET_SENTINEL, OPTIONS, READ_FROM_SLAVE
from connector.source.driver.batches import BatchPlanner
from connector.source.driver.brokers import BrokerSetView, DriverReads, bounds
from connector.source.driver.offsets import HEAD_BYTES, starts_record
from connector.source.driver.timestamps import offsets_for_times

log = logging.getLogger(__name__)


def ending_offsets(planner: BatchPlanner, start: dict[str, int]) -> dict[str, int]:
    """Per broker set the end (exclusive, bytes) of a batch read starting at ``start``.

    ``ending_timestamp`` / ``ending_offsets_by_timestamp``: the first record stored at or after the time, or
    commitLogMaxOffset when there is none (Kafka's rule for an ending time); else ``ending_offsets``: latest
    (-1) is the commitLogMaxOffset sampled now, a number is taken as given. Raises HAReplicaOptionError naming
    the option, the broker and both offsets when an end is below its start or past commitLogMaxOffset, or is
    not the first byte of a record (one small HA read checks it: docs/source.md "Batch reads")."""
    options = planner.options
    if planner.discovery is not None:  # with brokers the option parser checked the names
        planner.discovery.check_names(OPTIONS.ending_offsets, options.ending_offsets)
        planner.discovery.check_names(OPTIONS.ending_offsets_by_timestamp, options.ending_offsets_by_timestamp)
    times = options.ending_times
    by_time = offsets_for_times(planner, times, past_last=ENDING_OFFSETS_LATEST) if times is not None else {}
    option = OPTIONS.ending_offsets if times is None else (
        OPTIONS.ending_timestamp if options.ending_timestamp is not None else OPTIONS.ending_offsets_by_timestamp)
    given = options.ending_offsets
    out: dict[str, int] = {}
    for broker in options.brokers:
        view = planner.brokers.views.get(broker.name) or planner.brokers.refresh(broker)
        min_offset, max_offset = bounds(view)
        if broker.name in by_time:
            end = by_time[broker.name]
        elif given == ENDING_OFFSETS_LATEST or given.get(broker.name, LATEST_OFFSET_SENTINEL) == LATEST_OFFSET_SENTINEL:
            end = max_offset
        else:
            end = given[broker.name]
        begin = start.get(broker.name, min_offset)
        if end > max_offset:
            raise HAReplicaOptionError(option.name, _shown(options, option), f"end offset {end} of broker "
                                       f"{broker.name} is past its commitLogMaxOffset {max_offset}")
        if end < begin:
            raise HAReplicaOptionError(option.name, _shown(options, option), f"end offset {end} of broker "
                                       f"{broker.name} is below its start offset {begin}")
        if min_offset <= end < max_offset and not is_file_start(end, view.mapped_file_size):
            reads = DriverReads(options.fetch, view, planner.brokers.protocol(view.name),
                                options.read_from == READ_FROM_SLAVE)
            if not starts_record(reads.read(end, min(end + HEAD_BYTES, max_offset)), end, view.mapped_file_size):
                raise HAReplicaOptionError(option.name, _shown(options, option), f"end offset {end} of broker "
                                           f"{broker.name} is not the first byte of a record (give a record's "
                                           "commitLogOffset, or a later batch end)")
        out[broker.name] = end
    return out


#: how often (s) a batch read waiting on a SYNC_MASTER's acknowledgement window samples the master again
SETTLE_POLL_S = 0.25


def unsettled(view: BrokerSetView, begin: int, end: int, min_offset: int, now_s: float) -> bool:
    """True while a partition of the batch read ``[begin, end)`` (bytes) would first report an offset whose bytes
    below a SYNC_MASTER producer may still be waiting on: a mapped-file start inside the range past the settled
    offset (:meth:`connector.source.driver.brokers.BrokerSetView.ack_safe_end`, the micro-batches' rule), or
    ``begin`` itself, unless it is the log's first byte (``min_offset``), whose report releases no producer."""
    if end <= begin:
        return False
    return view.ack_safe_end(begin, end, now_s) < end or min_offset < begin and view.settled_offset(now_s) < begin


def await_settled(planner: BatchPlanner, start: dict[str, int], end: dict[str, int]) -> None:
    """Return once no partition of the batch read ``[start, end)`` would acknowledge bytes a SYNC_MASTER producer
    may still be waiting for (:func:`unsettled`): at most the set's ack window, in ms, after the master's first
    sample that held those bytes. A batch read cannot end earlier, as a micro-batch does, so it waits (logged
    once per set); nothing waits on any other role. Raises what sampling the master raises."""
    for broker in planner.options.brokers:
        view = planner.brokers.views.get(broker.name)
        if view is None or not view.ack_window_ms or broker.name not in end:
            continue
        min_offset = bounds(view)[0]
        begin, stop = start.get(broker.name, min_offset), end[broker.name]
        if not unsettled(view, begin, stop, min_offset, time.monotonic()):
            continue
        log.info("broker %s: SYNC_MASTER bytes of [%d, %d) may still have a producer waiting for their ack; the "
                 "batch read waits up to %d ms before reading them", broker.name, begin, stop, view.ack_window_ms)
        while unsettled(view, begin, stop, min_offset, time.monotonic()):
            time.sleep(SETTLE_POLL_S)
            view = planner.brokers.refresh(broker, slaves=False)


def refuse_batch_only_options(options: SourceOptions) -> None:
    """Raise HAReplicaOptionError for a stream given an option only batch reads take (an ending offset or time):
    a stream has no end."""
    for option in (OPTIONS.ending_offsets, OPTIONS.ending_timestamp, OPTIONS.ending_offsets_by_timestamp):
        value = getattr(options, option.attr)
        if value != option.default:
            raise HAReplicaOptionError(option.name, value, "is for batch reads (spark.read) only; a stream has no end")


def _shown(options: SourceOptions, option) -> object:
    """The value of ``option`` as the error shows it."""
    return getattr(options, option.attr)
