"""The ``properties`` map and the ``tags`` / ``keys`` / ``uniqKey`` columns of a batch (docs/protocol.md §1.5).

:func:`split_properties` applies RocketMQ's rule (MessageDecoder.string2messageProperties)
with NumPy over all records at once; :func:`properties_by_record` is the record-by-record parser used
when some name or value is not valid UTF-8. The native kernel has its own single pass
(:mod:`connector.decode.native_kernels`), with the same results.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from connector.decode.arrays import as_string, gather_be, take_slices
from connector.protocol.commitlog import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    parse_properties,
)

#: The properties that also get a column of their own (tags, keys, uniqKey), in that order.
SPECIAL_KEYS = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
#: ``(properties map, tags, keys, uniqKey)`` arrays of a batch.
PropertyColumns = tuple[pa.Array, pa.Array, pa.Array, pa.Array]


def properties_by_record(mv: memoryview, props_pos: np.ndarray, props_len: np.ndarray) -> PropertyColumns:
    """Properties map plus TAGS / KEYS / UNIQ_KEY columns, parsed record by record with
    :func:`connector.protocol.commitlog.parse_properties` (invalid UTF-8 becomes U+FFFD)."""
    n = len(props_pos)
    keys_list: list[str] = []
    values_list: list[str] = []
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    special: list[list[str | None]] = [[None] * n for _ in SPECIAL_KEYS]
    pp = props_pos.tolist()
    pl = props_len.tolist()
    count = 0
    for i in range(n):
        props = parse_properties(str(mv[pp[i]:pp[i] + pl[i]], "utf-8", "replace")) if pl[i] else {}
        if props:
            keys_list.extend(props.keys())
            values_list.extend(props.values())
            count += len(props)
            for column, key in zip(special, SPECIAL_KEYS, strict=True):
                column[i] = props.get(key)
        map_offsets[i + 1] = count
    properties = pa.MapArray.from_arrays(pa.array(map_offsets), pa.array(keys_list, type=pa.string()),
                                         pa.array(values_list, type=pa.string()))
    return (properties, *(pa.array(column, type=pa.string()) for column in special))


def split_properties(buf: pa.Buffer, u8: np.ndarray, props_pos: np.ndarray, props_len: np.ndarray
                     ) -> PropertyColumns:
    """Properties map plus the TAGS / KEYS / UNIQ_KEY columns of every record.

    Vectorised with numpy over all records at once, by RocketMQ's rule (docs/protocol.md §1.5,
    ``string2messageProperties``): split a record's properties at ``\\x02``; a segment is
    ``name\\x01value`` split at its first ``\\x01``, which must be neither its first nor its last
    character (so shorter segments drop out too); a later duplicate name wins. Both separators are
    ASCII, so byte positions give the same segments as characters. When some name or value is not
    valid UTF-8, the record-by-record parser (which replaces bad bytes with U+FFFD) is used instead.
    """
    n = len(props_pos)
    packed = take_slices(buf, props_pos, props_len)
    total = int(props_len.sum()) if n else 0
    if total == 0:
        data = np.zeros(0, dtype=np.uint8)
        data_buf = pa.py_buffer(b"")
    else:
        data_buf = packed.buffers()[2]
        data = np.frombuffer(data_buf, dtype=np.uint8, count=total)
    rec_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(props_len, out=rec_offsets[1:])
    low = np.flatnonzero(data <= 2)  # both separators in one pass, then split
    low_bytes = data[low]
    sep2 = low[low_bytes == 2]
    sep1 = low[low_bytes == 1]
    # segments never overlap and are ordered, so sorted starts pair with sorted ends
    seg_start = np.sort(np.concatenate([rec_offsets[:-1], sep2 + 1]), kind="stable")
    seg_end = np.sort(np.concatenate([rec_offsets[1:], sep2]), kind="stable")
    if len(sep1) == len(seg_start) and ((sep1 >= seg_start) & (sep1 < seg_end)).all():
        kv = sep1  # the usual shape: exactly one name/value separator in every segment
    elif len(sep1):
        k = np.searchsorted(sep1, seg_start)
        kv = np.where(k < len(sep1), sep1[np.minimum(k, len(sep1) - 1)], -1)
    else:
        kv = np.full(len(seg_start), -1, dtype=np.int64)
    valid = (kv > seg_start) & (kv < seg_end - 1)
    if not valid.all():
        seg_start, seg_end, kv = seg_start[valid], seg_end[valid], kv[valid]
    m = len(seg_start)
    counts = np.diff(np.searchsorted(seg_start, rec_offsets))  # segments per record
    rec = np.repeat(np.arange(n), counts)
    names = as_string(take_slices(data_buf, seg_start, kv - seg_start))
    values = as_string(take_slices(data_buf, kv + 1, seg_end - kv - 1))
    if names is None or values is None:
        return properties_by_record(memoryview(u8), props_pos, props_len)
    name_len = kv - seg_start
    head = _name_heads(data, seg_start, name_len)
    if m and counts.max() > 1 and _may_repeat_names(rec, name_len, head, counts):
        # a later duplicate name within one record wins: keep the last entry of every (record, name)
        table = pa.table({"rec": pa.array(rec), "name": names, "seq": pa.array(np.arange(m))})
        last = table.group_by(["rec", "name"], use_threads=False).aggregate([("seq", "max")])
        if last.num_rows != m:
            keep = np.sort(last.column("seq_max").to_numpy())
            rec, name_len, head = rec[keep], name_len[keep], head[keep]
            names = names.take(pa.array(keep))
            values = values.take(pa.array(keep))
            m = len(keep)
            counts = np.bincount(rec, minlength=n)
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=map_offsets[1:])
    properties = pa.MapArray.from_arrays(pa.array(map_offsets), names, values)
    special = []
    for key in SPECIAL_KEYS:
        hit = np.flatnonzero((name_len == len(key)) & (head == _SPECIAL_HEADS[key]))
        index = np.full(n, -1, dtype=np.int64)
        index[rec[hit]] = hit
        special.append(values.take(pa.array(index, mask=index < 0)))
    return (properties, *special)


def _name_heads(data: np.ndarray, seg_start: np.ndarray, name_len: np.ndarray) -> np.ndarray:
    """The first 8 bytes of every property name as a big-endian uint64, bytes past the name zeroed.

    Exact for names of up to 8 bytes (TAGS, KEYS, UNIQ_KEY), a fingerprint for longer ones.
    """
    if not len(seg_start):
        return np.zeros(0, dtype=np.uint64)
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    head = gather_be(padded, seg_start, 8, ">u8")
    shift = ((8 - np.minimum(name_len, 8)) * 8).astype(np.uint64)
    return head & ~((np.uint64(1) << shift) - np.uint64(1))


_SPECIAL_HEADS = {key: np.uint64(int.from_bytes(key.encode()[:8].ljust(8, b"\x00"), "big")) for key in SPECIAL_KEYS}
MAX_NAMES_COMPARED_PER_RECORD = 32


def _may_repeat_names(rec: np.ndarray, name_len: np.ndarray, head: np.ndarray, counts: np.ndarray) -> bool:
    """False when no record has the same property name twice (cheap test; True may be a false alarm).

    Names of one record are compared pairwise by (length, first 8 bytes), by shifting the segment
    array. Real properties come from a Java Map and never repeat a name, so the exact (and slower)
    de-duplication rarely runs.
    """
    most = int(counts.max())
    if most > MAX_NAMES_COMPARED_PER_RECORD:
        return True
    key = head ^ (name_len.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    for d in range(1, most):
        if ((key[d:] == key[:-d]) & (rec[d:] == rec[:-d])).any():
            return True
    return False
