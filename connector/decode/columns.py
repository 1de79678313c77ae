"""The Arrow columns of a batch of complete MESSAGE records: one RecordBatch per body group.

Fixed fields come from the active kernels' ``locate`` (:func:`connector.decode.locate.locate` or its native
twin); variable-width values (topic, body,
properties, property names and values) are cut out of the batch's bytes by the active kernels
(:mod:`connector.decode.kernels`), one memcpy per value. Topic filtering
(:class:`connector.decode.topic_filter.TopicFilter`) runs on the topic column before any other variable-width
column is built, and tag filtering on the split properties right after it. Bodies stored compressed are
decompressed, checked against BODYCRC and bounded (:mod:`connector.decode.bodies`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator

import numpy as np
import pyarrow as pa

from connector.arrow_numpy import from_numpy, repeat_string
from connector.decode.arrays import as_string
from connector.decode.bodies import BODY_BYTES_PER_ARROW_ARRAY, BodyPolicy, decode_errors
from connector.decode.exact import stored_bodies, stored_properties
from connector.decode.hosts import hosts, ipv4_hosts, msg_ids
from connector.decode.kernels import active
from connector.decode.locate import Located
from connector.decode.record_error import record_error
from connector.decode.schema import TIMESTAMP, column_schema
from connector.decode.topic_filter import TopicFilter
from connector.options.settings import DecodeSettings

_PER_GROUP = ("body", "decodeError", "storedBody", "mappedFileSizeCommitLog")  # built per body group; others sliced
_PROPERTY_COLUMNS = ("properties", "tags", "keys", "uniqKey")  # one split of the PROPERTIES field gives all four


#: one batch's walked records as the record stage hands them to the Arrow stage: ``(data, starts, base_offset)``
#: as :func:`iter_record_batches` takes them (a uint8 buffer, int64 record starts in it, CommitLog offset of data[0])
RecordGroup = tuple[np.ndarray, np.ndarray, int]


class RowCount:
    """Rows an Arrow stage has yielded so far (:attr:`rows`), read by whoever holds it."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows = 0


def arrow_batches(groups: Iterable[RecordGroup], count: RowCount | None = None,
                  **options) -> Iterator[pa.RecordBatch]:
    """The Arrow stage of a task's read (docs/architecture.md "The path of one body"): pull each group of walked
    records from the record stage, ``(data, starts, base_offset)`` as :func:`iter_record_batches` takes them
    (:meth:`connector.decode.stream.CommitLogArrowDecoder.decode_receives` makes them, one per batch), and yield
    its RecordBatches; ``options`` are :func:`iter_record_batches`'s keyword arguments, ``count`` adds up the rows
    yielded. Entered once per batch (plus once per group whose every record the topic filter drops). Raises what
    :func:`iter_record_batches` raises, and what pulling ``groups`` raises.
    """
    for group in groups:
        batches = iter_record_batches(*group, **options)
        del group  # the group's buffer lives as long as its batches, not until the next group is walked
        for batch in batches:
            if count is not None:
                count.rows += batch.num_rows
            yield batch
            del batch


def iter_record_batches(data: bytes, starts: np.ndarray, base_offset: int, *, broker: str, mapped_file_size: int,
                        decompress: bool = True, topic_filter: TopicFilter | None = None,
                        max_body_bytes: int = BODY_BYTES_PER_ARROW_ARRAY,
                        policy: BodyPolicy | None = None,
                        columns: Collection[str] | pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
    """Columns of the complete MESSAGE records that begin at ``starts`` (positions in ``data``).

    Args:
        data: bytes holding the records; ``data[0]`` is at CommitLog offset ``base_offset``.
        starts: int64 positions of record starts, ascending; each record's TOTALSIZE and MAGICCODE
            were already checked and the whole record lies inside ``data``.
        broker: value of the ``broker`` column.
        mapped_file_size: mappedFileSizeCommitLog (bytes), to name files in errors.
        decompress: inflate COMPRESSED bodies; ignored when ``policy`` is given.
        topic_filter: records whose topic (or, for a topic with a tag list, TAGS property) it does not keep
            are dropped before their other columns are built (None keeps all).
        max_body_bytes: a RecordBatch is cut before a row whose *inflated* body would take its bodies
            past this many bytes, so compressed bodies cannot blow memory up (soft: one row; the native
            kernel applies the same cut to stored bodies too).
        policy: BODYCRC check, decompression bound and bad-record mode (default: the declared defaults of
            :class:`connector.options.settings.DecodeSettings` with ``decompress``). In PERMISSIVE mode a bad body
            (BODYCRC mismatch, does not decompress, unknown compression type, past ``max_inflated``) is kept as
            stored with ``decodeError`` set.
        columns: build only these columns (None: all), or the schema :func:`connector.decode.schema.column_schema`
            gives for them. Bodies are still checked and decompressed, so the batches and the errors stay those
            of the whole schema; the other columns are never built.

    Yields RecordBatches of :data:`~connector.decode.schema.ARROW_SCHEMA` (of ``columns`` only) lazily (one is built
    while the previous one is in use), nothing when every record is filtered out.

    Raises CommitLogFormatError naming offset and field when a length field disagrees with TOTALSIZE,
    PHYSICALOFFSET is not the record's offset or the topic is not UTF-8; in FAILFAST mode also for the
    first bad body (broker, offset, file and field BODY or BODYCRC named).
    """
    if policy is None:
        policy = BodyPolicy.of(DecodeSettings(decompress_body=decompress))
    schema = columns if isinstance(columns, pa.Schema) else column_schema(columns)
    kernels = active()
    u8 = np.frombuffer(data, dtype=np.uint8)
    loc = kernels.locate(u8, np.asarray(starts), base_offset, mapped_file_size)
    buf = pa.py_buffer(data)
    topics = _topics(kernels, buf, u8, loc, mapped_file_size)
    if topic_filter is not None:
        keep = topic_filter.mask(topics)
        if keep is not None:
            index = np.flatnonzero(keep)
            if not len(index):
                return
            loc.take(index)
            topics = topics.take(from_numpy(index, pa.int64()))
    split: list[tuple[pa.Array, ...]] = []
    if topic_filter is not None and topic_filter.filters_tags(topics):
        split.append(kernels.properties(buf, u8, loc.props_pos, loc.props_len))  # (map, tags, keys, uniqKey)
        keep = topic_filter.tag_mask(topics, split[0][1])
        if keep is not None:
            index = np.flatnonzero(keep)
            if not len(index):
                return
            loc.take(index)
            picked = from_numpy(index, pa.int64())
            topics = topics.take(picked)
            split[0] = tuple(column.take(picked) for column in split[0])
    fixed = _fixed_columns(kernels, buf, u8, loc, topics, broker, schema.names, split)
    groups = kernels.body_groups(buf, loc, policy, min(max_body_bytes, BODY_BYTES_PER_ARROW_ARRAY), mapped_file_size)
    for lo, hi, body_array, bad in groups:
        if bad and policy.fail_fast:
            row = min(bad)
            field, reason = bad[row]
            raise record_error(f"broker {broker}: {reason} (mode=FAILFAST; the default mode=PERMISSIVE keeps such a "
                               "record with its stored body and a decodeError)", int(loc.offsets[row]), field,
                               mapped_file_size)
        fixed["body"] = body_array
        fixed["decodeError"] = decode_errors(bad, lo, hi)
        if "storedBody" in schema.names:
            fixed["storedBody"] = stored_bodies(kernels, buf, loc, lo, hi, body_array)
        if "mappedFileSizeCommitLog" in schema.names:
            fixed["mappedFileSizeCommitLog"] = from_numpy(np.full(hi - lo, mapped_file_size, np.int32), pa.int32())
        cols = [fixed[name] if name in _PER_GROUP else fixed[name].slice(lo, hi - lo) for name in schema.names]
        yield pa.RecordBatch.from_arrays(cols, schema=schema)


def _topics(kernels, buf: pa.Buffer, u8: np.ndarray, loc: Located, mapped_file_size: int) -> pa.StringArray:
    """The topic column; raises CommitLogFormatError (field TOPIC) at the first topic that is not UTF-8."""
    topics = as_string(kernels.slices(buf, loc.topic_pos, loc.topic_len))
    if topics is not None:
        return topics
    for i in range(len(loc.s)):
        raw = u8[loc.topic_pos[i]:loc.topic_pos[i] + loc.topic_len[i]].tobytes()
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise record_error(f"TOPIC is not UTF-8 ({exc})", int(loc.offsets[i]), "TOPIC", mapped_file_size) from exc
    raise AssertionError("topic validation failed without an invalid topic")  # pragma: no cover


def _fixed_columns(kernels, buf: pa.Buffer, u8: np.ndarray, loc: Located, topics: pa.StringArray,
                   broker: str, names: Collection[str], split: list[tuple[pa.Array, ...]]) -> dict[str, pa.Array]:
    """The ``names`` columns but body and decodeError, by name, for all rows of ``loc``; only those are built.

    ``split``: empty, or the rows' property columns ``(map, tags, keys, uniqKey)`` already split (tag filter).
    """

    def properties(i: int) -> pa.Array:
        if not split:
            split.append(kernels.properties(buf, u8, loc.props_pos, loc.props_len))  # (map, tags, keys, uniqKey)
        return split[0][i]

    def host(packed: np.ndarray | None, pos: np.ndarray, v6: np.ndarray) -> pa.Array:
        return ipv4_hosts(packed) if packed is not None else hosts(u8, pos, v6)

    exact: list[tuple[pa.Array, pa.Array]] = []

    def restore(i: int) -> pa.Array:
        if not exact:
            exact.append(stored_properties(kernels, buf, u8, loc, properties(0)))  # (storedProperties, recordFormat)
        return exact[0][i]

    builders: dict[str, Callable[[], pa.Array]] = {
        "topic": lambda: topics,
        "queueId": lambda: from_numpy(loc.queue_id, pa.int32()),
        "queueOffset": lambda: from_numpy(loc.queue_offset, pa.int64()),
        "commitLogOffset": lambda: from_numpy(loc.offsets, pa.int64()),
        "storeSize": lambda: from_numpy(loc.total.astype(np.int32), pa.int32()),
        "bodyCRC": lambda: from_numpy(loc.crc, pa.int32()),
        "flag": lambda: from_numpy(loc.flag, pa.int32()),
        "sysFlag": lambda: from_numpy(loc.sys_flag, pa.int32()),
        "bornTimestamp": lambda: from_numpy(loc.born_ts * 1000, TIMESTAMP),
        "bornHost": lambda: host(loc.born_packed, loc.born_host_pos, loc.born_v6),
        "storeTimestamp": lambda: from_numpy(loc.store_ts * 1000, TIMESTAMP),
        "storeHost": lambda: host(loc.store_packed, loc.store_host_pos, loc.store_v6),
        "reconsumeTimes": lambda: from_numpy(loc.recon, pa.int32()),
        "preparedTransactionOffset": lambda: from_numpy(loc.prepared, pa.int64()),
        "msgId": lambda: msg_ids(u8, loc.store_host_pos, loc.store_v6, loc.offsets, loc.store_packed),
        **{name: (lambda i=i: properties(i)) for i, name in enumerate(_PROPERTY_COLUMNS)},
        "broker": lambda: repeat_string(broker, len(loc.s)),
        "storedProperties": lambda: restore(0),
        "recordFormat": lambda: restore(1),
    }
    return {name: builders[name]() for name in names if name not in _PER_GROUP}
