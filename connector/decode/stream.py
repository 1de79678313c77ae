"""The record-stream state machine: CommitLog byte chunks in, RecordBatches out.

Where it sits in the whole: docs/architecture.md "The path of one body".

Bytes arrive in chunks (HA frames are 32 KiB byte ranges that split records, docs/protocol.md §2.3). The
:class:`CommitLogArrowDecoder` keeps only what it must: the records walked but not yet emitted (at most
one batch), the bytes not walked yet (at most ~1 MiB) and the partial record at the end. It walks record
starts with the active kernels (:mod:`connector.decode.kernels`), the first record of each run checked
the slow way so every start on the chain is a real record start; END_FILE blanks (docs/protocol.md §1.9) skip to the
next mapped file; a range that ends inside a record is an error. Columns are built by
:mod:`connector.decode.columns`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator

import numpy as np
import pyarrow as pa

from connector.decode.bodies import BodyPolicy
from connector.decode.columns import RecordGroup, RowCount, arrow_batches
from connector.decode.kernels import active
from connector.decode.record_error import record_error
from connector.decode.schema import column_schema
from connector.decode.topic_filter import TopicFilter
from connector.options.declaration import BAD_RECORD_MODES
from connector.options.settings import DecodeSettings
from connector.protocol.commitlog import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    SIZE_AND_MAGIC_BYTES,
    min_record_size,
    read_size_and_magic,
)
from connector.protocol.mapped_files import next_file_start

log = logging.getLogger(__name__)

_DEFAULT_SETTINGS = DecodeSettings()  # the declared defaults (connector.options.declaration.OPTIONS)
WALK_MIN_BYTES = 1024 * 1024  # unwalked bytes gathered before a walk (fewer, larger numpy passes)
_NO_BYTES = np.empty(0, dtype=np.uint8)


class CommitLogArrowDecoder:
    """Incremental decoder of the CommitLog range ``[start, end)`` of one broker into RecordBatches.

    Args:
        start: CommitLog offset (bytes) of the first record of the range; a record boundary.
        end: offset where the range ends: a record boundary, a mapped-file start or commitLogMaxOffset.
        mapped_file_size: mappedFileSizeCommitLog (bytes); a record never spans two files.
        broker: the ``broker`` column's value.
        settings: the query's :class:`connector.options.settings.DecodeSettings` (the declared defaults when not given):
            ``decompress_body`` (inflate bodies stored compressed); ``mode``, ``PERMISSIVE`` (a bad body becomes
            a row with its stored bytes and ``decodeError``) or ``FAILFAST`` (CommitLogFormatError naming
            broker, offset, file and field), case-insensitive; ``verify_body_crc`` (check every body against
            its BODYCRC); ``max_inflated_body_bytes`` (bytes a compressed body may decompress to, a larger one
            is bad); ``max_records_per_batch`` / ``max_bytes_per_batch`` (a batch is emitted when either is
            reached; bytes = stored record bytes, and inflated body bytes; soft by at most one record).
        topic_filter: drop records of other topics before their columns are built (None keeps all; a query's
            filter is ``TopicFilter.of(settings)``, :class:`connector.decode.topic_filter.TopicFilter`).
        columns: build only these columns of the source's schema (None: all;
            :func:`connector.decode.schema.column_schema`, which raises ValueError for an unknown name).

    Feed chunks with :meth:`feed` (each must start where the previous one ended; it returns the
    batches completed so far) and call :meth:`finish` once the fetcher is done, or hand it the fetcher's
    receives with :meth:`decode_receives` (a task's read: one pipeline of generators). Every record whose
    first byte lies in ``[start, end)`` and whose topic the filter keeps is emitted exactly once, in
    CommitLog order; END_FILE blanks are skipped to the next file.

    Memory: one batch of walked records, at most ``min(max_bytes_per_batch, 1 MiB)`` bytes not walked
    yet (which may include an END_FILE blank's tail, less than one record) and the partial record at
    the end, whatever the range (see :attr:`buffered_bytes`). They are held in one buffer per batch,
    allocated with room for the whole batch (``max_bytes_per_batch`` plus twice the walk's bytes, or the
    range if smaller; larger only for a record that does not fit), so a chunk is copied in once and never
    again by the buffer's growth.

    Raises CommitLogFormatError naming offset, file and field for bad MAGICCODE/TOTALSIZE, a record
    crossing its file or the range end, zeros where a record must be, or a range that ends inside a
    record; ValueError for chunks that do not continue the stream. Bad bodies raise (FAILFAST) or become
    rows (PERMISSIVE) as :func:`connector.decode.columns.iter_record_batches` says.
    """

    def __init__(self, start: int, end: int, mapped_file_size: int, *, broker: str,
                 settings: DecodeSettings = _DEFAULT_SETTINGS, topic_filter: TopicFilter | None = None,
                 columns: Collection[str] | None = None):
        if settings.mode.upper() not in BAD_RECORD_MODES:
            raise ValueError(f"mode {settings.mode!r} is not one of {', '.join(BAD_RECORD_MODES)}")
        if not 0 <= start <= end:
            raise ValueError(f"bad CommitLog range [{start}, {end})")
        if mapped_file_size <= 0:
            raise ValueError(f"mappedFileSizeCommitLog must be positive, got {mapped_file_size}")
        self.start = start
        self.end = end
        self.mapped_file_size = mapped_file_size
        self.broker = broker
        self.decompress_body = settings.decompress_body
        self.policy = BodyPolicy.of(settings)
        self.max_records = settings.max_records_per_batch
        self.max_bytes = max_bytes_per_batch = settings.max_bytes_per_batch
        self.topic_filter = None if topic_filter is None or topic_filter.keeps_everything else topic_filter
        self.schema = column_schema(columns)  # the batches' columns
        self._walk_bytes = min(WALK_MIN_BYTES, max_bytes_per_batch)
        self._capacity = min(end - start, max_bytes_per_batch + 2 * self._walk_bytes)  # bytes of a new buffer
        self._buf = _NO_BYTES  # uninitialised beyond _len; handed whole to the batch builder by _emit
        self._len = 0  # bytes of _buf that hold the stream
        self._buf_offset = start  # CommitLog offset of _buf[0]
        self._pos = 0  # next record start in _buf
        self._wait_for = 0  # no walk can progress before _buf holds this many bytes
        self._runs: list[np.ndarray] = []  # walked, not yet emitted records (CommitLog offsets)
        self._pending_records = 0
        self._pending_bytes = 0
        self._stream_offset = start  # next byte the stream must deliver
        self._skip_to = start  # bytes below this offset are blank tails (or already handled)
        self._done = start == end
        self.records_walked = 0
        self._emitted = RowCount()  # rows the Arrow stage yielded
        self.blanks_skipped = 0
        self.false_magic_candidates = 0

    @property
    def stream_offset(self) -> int:
        """The CommitLog offset the next chunk must start at."""
        return self._stream_offset

    @property
    def buffered_bytes(self) -> int:
        """Bytes held right now: walked records not yet emitted plus bytes not walked yet (memory bound)."""
        return self._len

    @property
    def records_emitted(self) -> int:
        """Rows yielded in RecordBatches so far."""
        return self._emitted.rows

    @property
    def records_filtered(self) -> int:
        """Records walked and emitted-or-dropped whose topic the filter dropped."""
        return self.records_walked - self._pending_records - self.records_emitted

    @property
    def done(self) -> bool:
        """True once every record of the range was walked (batches may still be pending)."""
        return self._done

    def feed(self, offset: int, data: bytes | bytearray | memoryview) -> list[pa.RecordBatch]:
        """Add the chunk of CommitLog bytes starting at ``offset``; return every batch now complete."""
        return list(self._arrow(self._walk())) if self._add(offset, data) else []

    def decode_receives(self, receives: Iterable[Iterable[tuple[int, bytes | memoryview]]],
                        gap_reason: str = "lost on the broker") -> Iterator[pa.RecordBatch]:
        """A task's read from its HA stage on (docs/architecture.md "The path of one body"): the record stage
        pulls the HA stage's receives (each a list of ``(CommitLog offset, chunk)``, e.g.
        :func:`connector.client.ha.fetch_receives`) and walks their records, yielding each batch's records as a
        group; the Arrow stage (:func:`connector.decode.columns.arrow_batches`) pulls the groups and yields the
        RecordBatches, then the last one(s) (as :meth:`finish`). A chunk starting past the stream offset continues
        the range there (as :meth:`_jump`, logging ``gap_reason``): a fetcher that skipped lost bytes
        (``fail_on_data_loss`` false). Each stage is entered once per batch, the HA stage once per receive.

        Holds what :meth:`feed` holds (see the class). Raises what :meth:`feed`, :meth:`_jump` and :meth:`finish`
        raise.
        """
        return self._arrow(self._record_groups(receives, gap_reason))

    def finish(self) -> list[pa.RecordBatch]:
        """Return the last batch(es). Raises CommitLogFormatError if the range was not covered to its end."""
        return list(self._arrow(self._finish()))

    def decode_all(self, chunks: Iterable[tuple[int, bytes]]) -> Iterator[pa.RecordBatch]:
        """Feed every ``(offset, bytes)`` chunk, then :meth:`finish`."""
        for offset, data in chunks:
            yield from self.feed(offset, data)
        yield from self.finish()

    # --- the record stage: groups of walked records, one per batch ---------------------------------------
    def _record_groups(self, receives: Iterable[Iterable[tuple[int, bytes | memoryview]]],
                       gap_reason: str) -> Iterator[RecordGroup]:
        """The groups of :meth:`decode_receives`'s record stage, ``(data, starts, base_offset)`` each."""
        for spans in receives:
            for offset, data in spans:
                if offset != self._stream_offset:
                    yield from self._jump(offset, gap_reason)
                if data and self._add(offset, data):
                    yield from self._walk()
        yield from self._finish()

    def _jump(self, offset: int, reason: str) -> Iterator[RecordGroup]:
        """Continue the range at record boundary ``offset`` >= the stream offset (the bytes between are gone: the
        broker no longer holds them and ``fail_on_data_loss`` is false): the complete records already received are
        yielded as groups, each as soon as it is walked, a partial record is dropped, and ``reason`` is logged with
        the skipped range. Raises ValueError for an ``offset`` behind the stream offset."""
        if offset < self._stream_offset:
            raise ValueError(f"cannot jump back from CommitLog offset {self._stream_offset} to {offset}")
        if not self._done:
            yield from self._walk()
        if self._runs:
            yield self._emit()
        log.warning("broker %s: skipping CommitLog bytes [%d, %d) (%s); %d bytes of a partial record dropped",
                    self.broker, self._stream_offset, offset, reason, self._len - self._pos)
        self._len = 0
        self._pos = 0
        self._wait_for = 0
        self._stream_offset = offset
        self._buf_offset = offset
        self._skip_to = max(self._skip_to, offset)
        if offset >= self.end:
            self._done = True

    def _finish(self) -> Iterator[RecordGroup]:
        """:meth:`finish`'s groups, each yielded as soon as it is walked; CommitLogFormatError after them if the
        range was not covered to its end."""
        if not self._done:
            yield from self._walk()
        if self._runs:
            yield self._emit()
        if not self._done:
            at = self._buf_offset + self._pos
            raise record_error(f"CommitLog range [{self.start}, {self.end}) ended after {self._stream_offset - at} "
                               f"bytes of an incomplete record (stream stopped at {self._stream_offset})", at,
                               "TOTALSIZE", self.mapped_file_size)

    def _arrow(self, groups: Iterable[RecordGroup]) -> Iterator[pa.RecordBatch]:
        """The Arrow stage over ``groups``, with this decoder's columns and body rules."""
        return arrow_batches(groups, self._emitted, broker=self.broker, mapped_file_size=self.mapped_file_size,
                             topic_filter=self.topic_filter, max_body_bytes=self.max_bytes, policy=self.policy,
                             columns=self.schema)

    # --- internals ---------------------------------------------------------------------------------
    def _add(self, offset: int, data: bytes | bytearray | memoryview) -> bool:
        """Copy the chunk at ``offset`` into the buffer (the part in the range and past blank tails); True when
        the buffer holds enough unwalked bytes for a walk (or reaches the range end)."""
        if offset != self._stream_offset:
            raise ValueError(f"chunk at CommitLog offset {offset} does not continue the stream at "
                             f"{self._stream_offset}")
        size = len(data)
        self._stream_offset += size
        if self._done:
            return False
        lo = max(offset, self._skip_to)
        hi = min(offset + size, self.end)
        if hi <= lo:
            return False
        if not self._len:
            self._buf_offset = lo
            self._pos = 0
        held = self._len + hi - lo
        if held > len(self._buf):  # a record larger than the batch's room: double, so a chunk is copied O(1) times
            self._renew(self._buf[:self._len], max(held, 2 * len(self._buf)))
        with memoryview(self._buf) as into:
            into[self._len:held] = memoryview(data)[lo - offset:hi - offset]
        self._len = held
        buf_end = self._buf_offset + held
        if held < self._wait_for and buf_end < self.end:
            return False
        return held - self._pos >= self._walk_bytes or buf_end >= self.end

    def _renew(self, keep: np.ndarray, need: int) -> None:
        """Hold the stream in a new buffer of the batch's capacity (or of ``need`` bytes or ``keep``'s, if more)
        that starts with ``keep``; the old buffer is left as it is (a batch may hold it)."""
        self._buf = np.empty(max(self._capacity, need, len(keep)), dtype=np.uint8)
        self._buf[:len(keep)] = keep
        self._len = len(keep)

    def _walk(self) -> Iterator[RecordGroup]:
        """Walk every record start the buffer holds (slow path per record only for the irregular ones); yield a
        group of records whenever a batch is complete."""
        fsize = self.mapped_file_size
        while True:  # no local names the buffer: a group yielded below hands it over (its batch outlives the walk)
            at = self._buf_offset + self._pos
            if at >= self.end:
                self._done = True
                if self._runs:
                    yield self._emit()
                self._len = 0
                self._buf_offset, self._pos = self.end, 0
                return
            avail = self._len - self._pos
            if avail < SIZE_AND_MAGIC_BYTES:
                self._wait_for = self._pos + SIZE_AND_MAGIC_BYTES
                return
            total, magic = read_size_and_magic(self._buf, self._pos)
            file_end = next_file_start(at, fsize)
            if magic == MESSAGE_MAGIC_CODE or magic == MESSAGE_MAGIC_CODE_V2:
                if total < min_record_size(magic):
                    raise record_error(f"TOTALSIZE {total} is below the minimum {min_record_size(magic)}", at,
                                       "TOTALSIZE", fsize)
                if at + total > file_end:
                    raise record_error(f"TOTALSIZE {total} reaches past the end of its mapped file at {file_end}", at,
                                       "TOTALSIZE", fsize)
                if at + total > self.end:
                    raise record_error(f"record of TOTALSIZE {total} crosses the range end {self.end}, which is "
                                       "therefore not a record boundary", at, "TOTALSIZE", fsize)
                if avail < total:
                    self._wait_for = self._pos + total
                    return
                if magic == MESSAGE_MAGIC_CODE:
                    yield from self._walk_run(min(file_end, self.end))
                else:  # a V2 record (5.x, topic over 127 bytes): the kernels' walks stop at it, so one by one
                    yield from self._take(np.array([at], dtype=np.int64), np.array([total], dtype=np.int64))
            elif magic == BLANK_MAGIC_CODE:
                if total != file_end - at:
                    raise record_error(f"END_FILE blank TOTALSIZE {total} does not reach the end of its mapped file "
                                       f"({file_end - at} bytes left)", at, "TOTALSIZE", fsize)
                self.blanks_skipped += 1
                if self._runs:
                    yield self._emit()
                # drop the blank and its tail; continue at the next file
                self._skip_to = file_end
                if file_end >= self.end:
                    self._done = True
                    self._len = 0
                    self._buf_offset, self._pos = self.end, 0
                    return
                if self._buf_offset + self._len > file_end:
                    self._renew(self._buf[file_end - self._buf_offset:self._len], 0)
                else:
                    self._len = 0
                self._buf_offset, self._pos = file_end, 0
            elif total == 0 and magic == 0:
                raise record_error(f"no record at this offset (TOTALSIZE 0, MAGICCODE 0: unwritten bytes) although "
                                   f"the range ends at {self.end}", at, "MAGICCODE", fsize)
            else:
                raise record_error(f"bad MAGICCODE 0x{magic & 0xFFFFFFFF:08X}", at, "MAGICCODE", fsize)

    def _walk_run(self, limit_offset: int) -> Iterator[RecordGroup]:
        """Walk the chain of complete MESSAGE records from ``_pos`` (a checked, complete record) up to
        ``limit_offset`` (the file end or range end) with numpy; yield a group as batch limits are reached."""
        region_offset = self._buf_offset + self._pos
        limit = min(self._len, limit_offset - self._buf_offset)
        with memoryview(self._buf) as view:  # no copy; every array returned is fresh, so the view is released
            starts, totals, false_hits = active().chain_record_starts(view[self._pos:limit])
        self.false_magic_candidates += false_hits
        yield from self._take(starts + region_offset, totals)

    def _take(self, starts: np.ndarray, totals: np.ndarray) -> Iterator[RecordGroup]:
        """Add walked records (CommitLog offsets ``starts``, sizes ``totals``) to the pending runs, moving
        ``_pos`` past them; yield a group as the record and byte limits are reached."""
        while len(starts):
            room = self.max_records - self._pending_records
            cum = np.cumsum(totals)
            take = min(room, int(np.searchsorted(cum, self.max_bytes - self._pending_bytes, side="left")) + 1,
                       len(starts))
            self._runs.append(starts[:take])
            self._pending_records += take
            self._pending_bytes += int(cum[take - 1])
            self.records_walked += take
            self._pos = int(starts[take - 1] + totals[take - 1]) - self._buf_offset
            starts, totals = starts[take:], totals[take:]
            if self._pending_records >= self.max_records or self._pending_bytes >= self.max_bytes:
                yield self._emit()

    def _emit(self) -> RecordGroup:
        """The pending records as one group for the Arrow stage, ``(data, starts in data, CommitLog offset of
        data[0])``: the buffer is handed over whole and what follows the walked records is copied to a new one."""
        offsets = np.concatenate(self._runs) if len(self._runs) > 1 else self._runs[0]
        data, base = self._buf, self._buf_offset
        self._renew(data[self._pos:self._len], 0)
        self._buf_offset += self._pos
        self._pos = 0
        self._wait_for = 0
        self._runs = []
        self._pending_records = 0
        self._pending_bytes = 0
        return data, offsets - base, base
