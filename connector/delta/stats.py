"""Delta per-file statistics (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) from a Parquet footer.

Delta protocol "Per-file Statistics". The writers read them from the column statistics pyarrow put in
the footer of each file they closed, so no data is read twice. Bounds are kept true bounds for data
skipping: a value that must be rounded (timestamps to ms, decimals to doubles) is widened outward, and
a statistic that cannot be given is left out, which only disables data skipping on that column.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import logging
import math
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

#: Delta's ``delta.dataSkippingStringPrefixLength``: string stats keep at most this many characters.
STATS_STRING_PREFIX_LENGTH = 32


def is_container_type(t: pa.DataType) -> bool:
    """List-like and map types: their Parquet leaves get no Delta statistics."""
    return (pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t))


def _leaf_count(t: pa.DataType) -> int:
    """Parquet leaf columns an Arrow type becomes."""
    if pa.types.is_dictionary(t):
        return _leaf_count(t.value_type)
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if is_container_type(t):
        return _leaf_count(t.value_type)
    return 1


def _stat_leaves(fields: Iterable[pa.Field],
                 prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], pa.DataType] | None]:
    """Parquet leaf columns in order: (path, type) for leaves reached through structs only, else None."""
    for f in fields:
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if pa.types.is_struct(t):
            yield from _stat_leaves([t.field(i) for i in range(t.num_fields)], prefix + (f.name,))
        elif is_container_type(t):
            yield from (None for _ in range(_leaf_count(t)))
        else:
            yield prefix + (f.name,), t


def _ms_floor(ts: _dt.datetime) -> _dt.datetime:
    return ts - _dt.timedelta(microseconds=ts.microsecond % 1000)


def _ms_ceil(ts: _dt.datetime) -> _dt.datetime:
    rest = ts.microsecond % 1000
    return ts + _dt.timedelta(microseconds=1000 - rest) if rest else ts


#: A Parquet timestamp's ``timeUnit`` (its logical type) -> how many of that unit make a microsecond, as the
#: fraction (numerator, denominator): raw * denominator / numerator is microseconds.
_UNITS_PER_US = {"milliseconds": (1, 1000), "microseconds": (1, 1), "nanoseconds": (1000, 1)}
_EPOCH = _dt.datetime(1970, 1, 1)


def _min_max(st: pq.Statistics, t: pa.DataType) -> tuple:
    """``(min, max)`` of a column chunk's statistics. A timestamp's come from its raw int64 and its Parquet
    ``timeUnit`` as naive UTC datetimes, rounded outward to whole microseconds, ``(None, None)`` beyond the years
    Python's datetime holds (1 to 9999): pyarrow's own ``min`` / ``max``
    of a timestamp go through its pandas shim, which imports pandas into the worker (connector.arrow_numpy)."""
    if pa.types.is_timestamp(t) and st.physical_type == "INT64":
        unit = json.loads(st.logical_type.to_json()).get("timeUnit")
        if unit in _UNITS_PER_US:
            num, den = _UNITS_PER_US[unit]
            lo_us = st.min_raw * den // num  # floor
            hi_us = -(-st.max_raw * den // num)  # ceiling
            try:
                return _EPOCH + _dt.timedelta(microseconds=lo_us), _EPOCH + _dt.timedelta(microseconds=hi_us)
            except OverflowError:  # outside Python's years 1 to 9999 (valid in Arrow and Parquet): no statistic
                return None, None
    return st.min, st.max


def _stat_json_value(value, t: pa.DataType, is_max: bool):
    """A min (``is_max`` False) or max statistic as Delta's stats JSON value, or None to omit it.

    Values are widened outward when they must be rounded (timestamps to ms, decimals to doubles),
    so the bounds stay true bounds for data skipping.
    """
    if value is None or pa.types.is_boolean(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t) \
            or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return None
    if pa.types.is_integer(t):
        return int(value)
    if pa.types.is_floating(t):
        v = float(value)
        return v if math.isfinite(v) else None
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        if len(value) <= STATS_STRING_PREFIX_LENGTH:
            return value
        return None if is_max else value[:STATS_STRING_PREFIX_LENGTH]
    if pa.types.is_decimal(t):
        v = float(value)
        if not math.isfinite(v):
            return None
        if is_max and decimal.Decimal(v) < value:
            v = math.nextafter(v, math.inf)
        elif not is_max and decimal.Decimal(v) > value:
            v = math.nextafter(v, -math.inf)
        return v
    if pa.types.is_date(t) and isinstance(value, _dt.date):
        return value.isoformat()
    if pa.types.is_timestamp(t) and isinstance(value, _dt.datetime):
        try:
            v = _ms_ceil(value) if is_max else _ms_floor(value)
        except OverflowError:  # a bound within a millisecond of 9999-12-31T23:59:59.999999 has no millisecond ceiling
            return None
        if t.tz is not None:
            if v.tzinfo is None:
                v = v.replace(tzinfo=_dt.UTC)
            return v.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    return None


def _set_nested(target: dict, path: tuple[str, ...], value) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def file_stats_json(metadata: pq.FileMetaData, data_schema: pa.Schema) -> str:
    """Delta per-file statistics JSON from a Parquet footer.

    ``{"numRecords": n, "minValues": {...}, "maxValues": {...}, "nullCount": {...}}`` with nested
    objects for struct fields. Min/max are omitted for booleans, binary, list and map columns, non-finite
    floats and strings' maxima longer than 32 characters (minima are cut to 32), as Delta allows: a
    missing statistic only disables data skipping on that column.
    """
    num_records = metadata.num_rows
    leaves = list(_stat_leaves(data_schema))
    stats: dict = {"numRecords": num_records}
    if len(leaves) != metadata.num_columns:
        log.debug("Parquet has %d leaf columns, Arrow schema %d: statistics limited to numRecords",
                  metadata.num_columns, len(leaves))
        return json.dumps(stats, separators=(",", ":"))
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}
    for j, leaf in enumerate(leaves):
        if leaf is None:
            continue
        path, t = leaf
        lo = hi = None
        null_count: int | None = 0
        minmax_known = True
        for r in range(metadata.num_row_groups):
            rg = metadata.row_group(r)
            st = rg.column(j).statistics
            if st is None or not st.has_null_count:
                null_count = None
            elif null_count is not None:
                null_count += st.null_count
            if st is not None and st.has_min_max:
                st_min, st_max = _min_max(st, t)
                if st_min is None or st_max is None:
                    minmax_known = False
                    continue
                lo = st_min if lo is None or st_min < lo else lo
                hi = st_max if hi is None or st_max > hi else hi
            elif not (st is not None and st.has_null_count and st.null_count == rg.num_rows):
                minmax_known = False
        if null_count is not None:
            _set_nested(nulls, path, null_count)
        if minmax_known and lo is not None:
            v = _stat_json_value(lo, t, is_max=False)
            if v is not None:
                _set_nested(mins, path, v)
            v = _stat_json_value(hi, t, is_max=True)
            if v is not None:
                _set_nested(maxs, path, v)
    stats["minValues"] = mins
    stats["maxValues"] = maxs
    stats["nullCount"] = nulls
    return json.dumps(stats, separators=(",", ":"))

