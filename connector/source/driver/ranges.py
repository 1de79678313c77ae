"""Where a batch read (``spark.read``) ends: ``ending_offsets`` / ``ending_timestamp`` / ``ending_offsets_by_timestamp``
resolved per broker set and checked, the check that a JSON ``starting_offsets`` of a query without a checkpoint
names record starts, the wait for a SYNC_MASTER's acknowledgement window before its range is read, and the refusal
of the ending options by a stream (docs/source.md "Batch reads", "Acknowledgements"; docs/options.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from connector.errors import HAReplicaOptionError
from connector.options.declaration import (
    EARLIEST_OFFSET_SENTINEL,
    ENDING_OFFSETS_LATEST,
    LATEST_OFFSET_SENTINEL,
    OPTIONS,
    READ_FROM_SLAVE,
)
from connector.options.parse import SourceOptions
from connector.protocol.mapped_files import is_file_start
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
    times = options.ending_times(planner.route.broker_names)
    by_time = offsets_for_times(planner, times, past_last=ENDING_OFFSETS_LATEST) if times is not None else {}
    option = OPTIONS.ending_offsets if times is None else (
        OPTIONS.ending_timestamp if options.ending_timestamp is not None else OPTIONS.ending_offsets_by_timestamp)
    given = options.ending_offsets
    out: dict[str, int] = {}
    for broker in planner.route.brokers:
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
            if not starts_record(_head(planner, view, end, max_offset), end, view.mapped_file_size):
                raise HAReplicaOptionError(option.name, _shown(options, option), f"end offset {end} of broker "
                                           f"{broker.name} is not the first byte of a record (give a record's "
                                           "commitLogOffset, or a later batch end)")
        out[broker.name] = end
    return out


def check_starting_records(planner: BatchPlanner, start: dict[str, int]) -> None:
    """Each offset a JSON ``starting_offsets`` gives (not -2 / -1), resolved to ``start`` (broker set -> bytes), is
    the first byte of a record: one small HA read per offset inside ``[commitLogMinOffset, commitLogMaxOffset)``
    that is not a mapped-file start (:func:`connector.source.driver.offsets.starts_record`: a message whose
    PHYSICALOFFSET is the offset, or an END_FILE blank). Asked when a query without a checkpoint starts (a batch
    read plans, a stream's initial offset), the only time Spark uses the option; nothing under a starting time.
    An offset below the min is left to the ``fail_on_data_loss`` rules, one past the max was refused before.

    Raises:
        HAReplicaOptionError: naming the option (``OPTIONS.starting_offsets``), the offset, the broker and the
            bytes there (:func:`not_a_record_start`).
    """
    options = planner.options
    given = options.starting_offsets
    if options.starts_at_times or not isinstance(given, Mapping):
        return
    for broker in planner.route.brokers:
        value = start.get(broker.name)
        if value is None or given.get(broker.name) in (None, EARLIEST_OFFSET_SENTINEL, LATEST_OFFSET_SENTINEL):
            continue
        view = planner.brokers.views.get(broker.name) or planner.brokers.refresh(broker)
        min_offset, max_offset = bounds(view)
        if not min_offset <= value < max_offset or is_file_start(value, view.mapped_file_size):
            continue
        head = _head(planner, view, value, max_offset)
        if not starts_record(head, value, view.mapped_file_size):
            raise HAReplicaOptionError(OPTIONS.starting_offsets.name, dict(given),
                                       not_a_record_start(value, broker.name, head))


def not_a_record_start(offset: int, broker: str, head: bytes) -> str:
    """The problem of a starting offset that is not the first byte of a record (``head``: the bytes there), as
    the source and ``hareplica run``'s check before Spark word it."""
    return (f"offset {offset} of broker {broker} is not the start of a record (the bytes there begin "
            f"{head[:16].hex()}); use a commitLogOffset of a landed row, a checkpoint's offset or one "
            "`hareplica inspect-commitlog` prints")


def _head(planner: BatchPlanner, view: BrokerSetView, offset: int, max_offset: int) -> bytes:
    """The CommitLog bytes ``[offset, offset + HEAD_BYTES)`` of ``view``'s set (cut at ``max_offset``), one HA read."""
    options = planner.options
    reads = DriverReads(options.fetch, view, planner.brokers.protocol(view.name), options.read_from == READ_FROM_SLAVE)
    return reads.read(offset, min(offset + HEAD_BYTES, max_offset))


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
    for broker in planner.route.brokers:
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


def refuse_batch_only_options(options: Mapping[str, str]) -> None:
    """Raise HAReplicaOptionError for a stream given an option only batch reads take (an ending offset or time),
    whatever its value (``latest`` too), as Spark's Kafka source refuses its ending offsets on a stream: a stream
    has no end. ``options``: Spark's option map as given (keys in any case, string values); the error names the
    declared option and the value given."""
    given = {str(key).lower(): value for key, value in options.items()}
    for option in (OPTIONS.ending_offsets, OPTIONS.ending_timestamp, OPTIONS.ending_offsets_by_timestamp):
        if option.name.lower() in given:
            raise HAReplicaOptionError(option.name, given[option.name.lower()],
                                       "is for batch reads (spark.read) only; a stream has no end")


def _shown(options: SourceOptions, option) -> object:
    """The value of ``option`` as the error shows it."""
    return getattr(options, option.attr)
