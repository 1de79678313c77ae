"""Where a batch read (``spark.read``) ends: ``ending_offsets`` / ``ending_timestamp`` / ``ending_offsets_by_timestamp``
resolved per broker set and checked, and the refusal of those options by a stream (docs/source.md "Batch reads").
"""

from __future__ import annotations

import logging

from connector.errors import HAReplicaOptionError
from connector.options import SourceOptions
from connector.protocol.mapped_files import is_file_start
from connector.settings import ENDING_OFFSETS_LATEST, LATEST_OFFSET_SENTINEL, OPTIONS, READ_FROM_SLAVE
from connector.source.driver.batches import BatchPlanner
from connector.source.driver.brokers import DriverReads, bounds
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
