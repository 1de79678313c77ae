"""A source offset as Spark checkpoints it (:class:`SourceOffset`), and the checks that it still names the records the
broker holds: record fingerprints, and finding record boundaries in bytes.

**The offset.** The JSON object Spark writes to a checkpoint's offset log is ``{"broker-a": 12345, ...}`` (per
broker set the *next* CommitLog byte to read, Spark's Kafka convention) plus entries under keys that start with
``@`` (a broker name cannot): ``"@lastRecord"`` (:data:`FINGERPRINT_KEY`, the record before each offset),
``"@masterSwitches"`` (:data:`connector.source.driver.controller_mode.SWITCH_KEY`, docs/source.md "RocketMQ 5.x
controller mode"), ``"@maxOffset"`` (:data:`connector.source.driver.batches.MAX_OFFSET_KEY`, each broker set's
commitLogMaxOffset when the batch was planned: the lag) and ``"@newSetStarts"``
(:data:`connector.source.driver.discovery.NEW_SET_STARTS_KEY`, where a set new to the query starts).
:class:`SourceOffset` keeps the two apart, so code that walks broker offsets never meets a ``@`` entry, and writes
back exactly the JSON it read (old checkpoints load unchanged).

**Rewritten history** (docs/source.md "Rewritten history"). A broker that loses its tail (a crash before flushing, a
restored disk) and then accepts new messages writes *other* records at offsets a query has already landed. An offset
alone cannot tell, so each end offset also carries a :class:`RecordFingerprint` of the last record before it: its
start offset, TOTALSIZE, storeTimestamp and BODYCRC. Every record stores its own CommitLog offset (PHYSICALOFFSET)
and a record never spans two mapped files, which makes a record start recognisable in a window of bytes without
knowing where the previous record began (:func:`last_record_before`, :func:`first_boundary_at_or_after`).

Pure functions over bytes. The checks that need bytes beyond one window take a ``source`` of CommitLog bytes
(:class:`CommitLogBytes`, ``source.read(lo, hi)``): on the driver
:class:`connector.source.driver.brokers.DriverReads` (a small HA read per call), in tests bytes held in memory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from connector.errors import CommitLogFormatError
from connector.protocol.commitlog import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MIN_RECORD_SIZE_BYTES,
    BlankRecord,
    MessageRecord,
    decode_record,
    read_record_head,
)
from connector.protocol.mapped_files import is_file_start, next_file_start
from connector.source.driver.controller_mode import SWITCH_KEY

log = logging.getLogger(__name__)

#: the key of the fingerprints in a source offset: ``{"broker-a": 123, "@lastRecord": {"broker-a": [...]}}``
#: (``@`` cannot start a broker name, so it never collides with one)
FINGERPRINT_KEY = "@lastRecord"
#: bytes the driver reads to find the last record before a batch end (larger records: no fingerprint)
TAIL_WINDOW_BYTES = 256 * 1024
#: bytes the driver scans after a rewritten checkpoint for the next record boundary
RESYNC_WINDOW_BYTES = 4 * 1024 * 1024 + 64 * 1024
#: the most bytes the driver reads back from a rewritten checkpoint to find where the rewrite began
REWRITE_SEARCH_MAX_BYTES = 64 * 1024 * 1024
#: the first character of every key of a source offset that is not a broker set's name
EXTRA_KEY_PREFIX = "@"


@dataclass(frozen=True)
class SourceOffset:
    """``positions``: broker set name -> next CommitLog offset (bytes); ``extras``: the ``@`` entries as
    they are stored (JSON values), in their order.

    One object per offset from the reader's call to the checkpoint's JSON: the reader
    (:class:`connector.source.reader.HAReplicaStreamReader`) builds it from Spark's dict once per call
    (:meth:`from_json`) and :class:`connector.source.driver.batches.BatchPlanner` takes and returns it;
    :meth:`to_json` gives Spark the dict it checkpoints (``json.dumps`` of it is the offset log's text)."""

    positions: dict[str, int]
    extras: dict[str, object] = field(default_factory=dict)

    def __str__(self) -> str:
        """The JSON object's dict form, as Spark shows the offset (for log lines)."""
        return str({**self.positions, **self.extras})

    @classmethod
    def from_json(cls, value: Mapping | None) -> SourceOffset:
        """The offset Spark hands back (a JSON object as a dict; None or empty: no offset). Raises ValueError
        naming the broker when a broker's offset is not an integer."""
        positions: dict[str, int] = {}
        extras: dict[str, object] = {}
        for key, item in (value or {}).items():
            if str(key).startswith(EXTRA_KEY_PREFIX):
                extras[key] = item
                continue
            if isinstance(item, bool) or not isinstance(item, int | str):
                raise ValueError(f"source offset: broker {key!r} has offset {item!r}, not an integer")
            try:
                positions[key] = int(item)
            except ValueError:
                raise ValueError(f"source offset: broker {key!r} has offset {item!r}, not an integer") from None
        return cls(positions, extras)

    def to_json(self) -> dict:
        """The JSON object: the positions, then the ``@`` entries (the form Spark checkpoints)."""
        return {**self.positions, **self.extras}

    @property
    def fingerprints(self) -> dict[str, RecordFingerprint]:
        """The ``"@lastRecord"`` fingerprints by broker set name (empty when the offset carries none)."""
        return fingerprints_of({FINGERPRINT_KEY: self.extras.get(FINGERPRINT_KEY)})

    def carry(self, name: str, other: SourceOffset) -> None:
        """Take broker set ``name``'s position and ``"@lastRecord"`` fingerprint (when it has one) from ``other``:
        a set no batch reads now keeps where it was in every end offset."""
        self.positions[name] = other.positions[name]
        prints = other.extras.get(FINGERPRINT_KEY)
        if isinstance(prints, dict) and name in prints:
            self.extras.setdefault(FINGERPRINT_KEY, {})[name] = prints[name]

    @property
    def has_switches(self) -> bool:
        """True when the offset records controller-mode master switches (``"@masterSwitches"``)."""
        return SWITCH_KEY in self.extras


class CommitLogBytes(Protocol):
    """Where the history checks get CommitLog bytes from."""

    def read(self, lo: int, hi: int) -> bytes:
        """CommitLog bytes ``[lo, hi)`` (offsets in bytes); raises HAReplicaError when they cannot be read."""


@dataclass(frozen=True, slots=True)
class RecordFingerprint:
    """Identity of one stored record: offset and size in bytes, storeTimestamp in ms, BODYCRC."""

    offset: int
    store_size: int
    store_timestamp: int
    body_crc: int

    @property
    def end(self) -> int:
        """The offset right after the record (bytes)."""
        return self.offset + self.store_size

    def to_json(self) -> list[int]:
        """``[offset, storeSize, storeTimestamp, bodyCRC]``, as stored in a checkpointed offset."""
        return [self.offset, self.store_size, self.store_timestamp, self.body_crc]

    @classmethod
    def from_json(cls, value: object) -> RecordFingerprint | None:
        """Inverse of :meth:`to_json`; None for anything else (an old or foreign checkpoint)."""
        if (isinstance(value, list) and len(value) == 4
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            return cls(*value)
        return None

    @classmethod
    def of(cls, record: MessageRecord) -> RecordFingerprint:
        """The fingerprint of a decoded record."""
        return cls(record.commit_log_offset, record.store_size, record.store_timestamp, record.body_crc)

    def matches(self, record: object) -> bool:
        """True when ``record`` is a message with this offset, size, storeTimestamp and BODYCRC."""
        return isinstance(record, MessageRecord) and RecordFingerprint.of(record) == self


def fingerprints_of(offset: dict) -> dict[str, RecordFingerprint]:
    """The fingerprints a source offset carries, by broker name (empty for the old ``{broker: int}`` form)."""
    raw = offset.get(FINGERPRINT_KEY) if isinstance(offset, dict) else None
    if not isinstance(raw, dict):
        return {}
    out = {}
    for name, value in raw.items():
        fp = RecordFingerprint.from_json(value)
        if fp is not None:
            out[str(name)] = fp
    return out


def _record_at(buf: bytes, pos: int, base: int, file_end: int | None = None):
    """The record at ``buf[pos]`` if it is a self-consistent one (a message whose PHYSICALOFFSET is its
    own offset, or an END_FILE blank), else None."""
    try:
        rec = decode_record(buf, pos, base_offset=base, file_end=file_end)
    except (CommitLogFormatError, ValueError, IndexError):
        return None
    if isinstance(rec, MessageRecord):
        return rec if rec.physical_offset in (None, rec.commit_log_offset) else None
    return rec if isinstance(rec, BlankRecord) else None


def _int32_at_every_position(buf: bytes) -> np.ndarray:
    """Big-endian int32 starting at each byte position (length ``len(buf) - 3``)."""
    a = np.frombuffer(buf, dtype=np.uint8).astype(np.int64)
    if len(a) < 4:
        return np.zeros(0, dtype=np.int64)
    v = (a[:-3] << 24) | (a[1:-2] << 16) | (a[2:-1] << 8) | a[3:]
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def last_record_before(buf: bytes, base: int, mapped_file_size: int) -> MessageRecord | None:
    """The last message that ends exactly at ``base + len(buf)`` (or right before the END_FILE blank
    that does), found in ``buf`` (CommitLog bytes from offset ``base``); None when it does not start
    inside ``buf``."""
    end = base + len(buf)
    totals = _int32_at_every_position(buf)
    target = end
    positions = np.arange(len(totals), dtype=np.int64) + base
    for _ in range(2):  # at most: a blank, then the message before it
        hits = np.nonzero(totals == target - positions)[0]
        found = None
        for pos in hits:
            rec = _record_at(buf, int(pos), base, file_end=int(target - base))
            if isinstance(rec, MessageRecord):
                return rec
            if isinstance(rec, BlankRecord) and target == end and is_file_start(end, mapped_file_size):
                found = rec
                break
        if found is None:
            return None
        target = found.commit_log_offset
    return None


def first_boundary_at_or_after(buf: bytes, base: int, start: int, mapped_file_size: int) -> int | None:
    """The first record boundary at or after ``start`` in ``buf`` (bytes from ``base``): a message (V1 or V2)
    whose PHYSICALOFFSET is its offset and whose successor (when inside ``buf``) is a valid record too, or an
    END_FILE blank (then the next mapped file's start). None when there is none in ``buf``."""
    magics = _int32_at_every_position(buf[4:]) if len(buf) > 8 else np.zeros(0, dtype=np.int64)
    lo = start - base
    found = (magics == MESSAGE_MAGIC_CODE) | (magics == MESSAGE_MAGIC_CODE_V2) | (magics == BLANK_MAGIC_CODE)
    for pos in np.nonzero(found)[0]:
        pos = int(pos)
        if pos < lo:
            continue
        offset = base + pos
        file_end = next_file_start(offset, mapped_file_size)
        rec = _record_at(buf, pos, base, file_end=file_end - base)
        if isinstance(rec, BlankRecord):
            if offset + rec.size == file_end:
                return file_end
            continue
        if rec is None or rec.store_size < MIN_RECORD_SIZE_BYTES:
            continue
        nxt = pos + rec.store_size
        if nxt + 8 <= len(buf) and base + nxt < file_end and _record_at(buf, nxt, base, file_end - base) is None:
            if any(buf[nxt:nxt + 8]):  # zeros: nothing written after it yet
                continue
        return offset
    return None


def starts_record(head: bytes, offset: int, mapped_file_size: int) -> bool:
    """True when ``head`` (the first bytes at CommitLog ``offset``, at least 36 unless a blank) is the start of
    a record: a message (MessageVersion V1 or V2, docs/protocol.md §8) whose PHYSICALOFFSET is ``offset`` and
    that fits in its mapped file, or an END_FILE blank reaching exactly to the file's end."""
    peek = read_record_head(head)
    if peek is None:
        return False
    file_end = next_file_start(offset, mapped_file_size)
    if peek.magic == BLANK_MAGIC_CODE:
        return offset + peek.total_size == file_end
    if (not peek.is_message or peek.physical_offset is None or peek.total_size < MIN_RECORD_SIZE_BYTES
            or offset + peek.total_size > file_end):
        return False
    return peek.physical_offset == offset


@dataclass(frozen=True, slots=True)
class Rewrite:
    """What :func:`check_start` found: the broker's bytes before ``start`` are not what the query landed."""

    start: int  # the checkpointed offset (bytes)
    lost_from: int  # the first offset affected: where the rewrite began (see :func:`rewritten_from`)
    resume: int  # the next real record boundary at or after ``start``
    problems: tuple[str, ...]
    exact: bool = True  # False: the rewrite may begin below ``lost_from`` (the search was cut short)
    #: ``start`` falls inside this intact record ``(offset, end, storeTimestamp)`` and the checkpoint's
    #: fingerprint is absent or does not end at ``start``: the broker shows no rewrite, the checkpoint is suspect
    inside: tuple[int, int, int] | None = None

    def describe(self, broker: str) -> str:
        """One sentence naming the broker, the rewritten range [lost_from, start) and what was found; the
        rows landed there are those with ``lost_from <= commitLogOffset < start`` (docs/source.md
        "Rewritten history"). When :attr:`inside` is set, it names the checkpoint's offset file as the
        suspect instead."""
        if self.inside is not None:
            lo, hi, stored = self.inside
            return (f"broker {broker}: the query's offset {self.start} is not a record boundary: it falls inside "
                    f"the record [{lo}, {hi}) (storeTimestamp {stored}), which the broker holds intact, so its "
                    "CommitLog shows no rewrite there; suspect the checkpoint's latest offsets/<batchId> file "
                    "(corrupted, edited or copied from another query) rather than the broker")
        at_least = "" if self.exact else " (at least)"
        return (f"broker {broker}: the CommitLog was rewritten below the query's offset {self.start}: "
                f"{'; '.join(self.problems)}. Rows already landed for [{self.lost_from}, {self.start}){at_least} "
                f"describe messages the broker no longer holds (broker = '{broker}' AND commitLogOffset >= "
                f"{self.lost_from} AND commitLogOffset < {self.start}), and messages written there since are not read")


def _messages_from(buf: bytes, base: int, first: int, end: int, mapped_file_size: int) -> list[MessageRecord]:
    """The messages walked from the boundary ``first`` in ``buf`` (bytes from ``base``) up to ``end``, one mapped
    file at most; a record cut off by ``end`` or an END_FILE blank ends the walk."""
    out: list[MessageRecord] = []
    pos, file_end = first - base, next_file_start(first, mapped_file_size) - base
    while base + pos < end:
        rec = _record_at(buf, pos, base, file_end=min(file_end, len(buf)))
        if not isinstance(rec, MessageRecord) or base + pos + rec.store_size > end:
            break
        out.append(rec)
        pos += rec.store_size
    return out


def rewritten_from(source: CommitLogBytes, start: int, landed_until_ms: int, lowest_known: int, min_offset: int,
                   mapped_file_size: int) -> tuple[int, bool]:
    """Where a rewrite below ``start`` began: the first record below ``start`` stored *after* the newest
    landed record (storeTimestamp > ``landed_until_ms``), found by reading back from ``start``.

    A broker stores records in storeTimestamp order, and everything it wrote after losing its tail is newer
    than every record a query landed before (the query landed them before the crash). So the records below
    ``start`` that are newer than the fingerprinted record are exactly the rewritten ones, and the first of
    them starts the range whose landed rows the broker no longer holds. Windows grow backwards from
    ``start`` (:data:`TAIL_WINDOW_BYTES`, ×4 each time, across mapped files) until an older record is found,
    the broker's ``min_offset`` is reached, or :data:`REWRITE_SEARCH_MAX_BYTES` were read.

    Returns ``(offset, exact)``: ``offset`` is at most ``lowest_known`` (what the caller already knows is
    rewritten); ``exact`` is False when the search stopped at its byte bound with no older record found.
    ``source.read(lo, hi)`` returns CommitLog bytes ``[lo, hi)``.
    """
    lowest, hi, window, searched = lowest_known, start, TAIL_WINDOW_BYTES, 0
    while hi > min_offset:
        if searched >= REWRITE_SEARCH_MAX_BYTES:
            return lowest, False
        file_start = (hi - 1) - (hi - 1) % mapped_file_size
        lo = max(file_start, min_offset, hi - window)
        buf = source.read(lo, hi)
        searched += hi - lo
        first = lo if lo == file_start else first_boundary_at_or_after(buf, lo, lo, mapped_file_size)
        records = _messages_from(buf, lo, first, hi, mapped_file_size) if first is not None and first < hi else []
        if records and records[0].store_timestamp <= landed_until_ms:
            newer = next((r for r in records if r.store_timestamp > landed_until_ms), None)
            return (min(lowest, newer.commit_log_offset) if newer else lowest), True
        if records:
            lowest = min(lowest, records[0].commit_log_offset)
            hi = records[0].commit_log_offset
        elif lo == file_start:
            hi = lo  # nothing in this file's part below `hi`: the previous file
        window = TAIL_WINDOW_BYTES if hi == file_start else window * 4
    return lowest, True


HEAD_BYTES = 64


def check_start(source: CommitLogBytes, start: int, fingerprint: RecordFingerprint | None, min_offset: int,
                max_offset: int, mapped_file_size: int) -> Rewrite | None:
    """Check that the broker still holds the history a query offset ``start`` was taken from.

    ``source.read(lo, hi)`` returns CommitLog bytes ``[lo, hi)`` (a small HA read). Checked: the
    fingerprinted record still ends at ``start`` with the same size, storeTimestamp and BODYCRC (when
    the broker still holds it), and ``start`` is still a record start (when the broker holds bytes at
    it). Returns None when all is well, else a :class:`Rewrite` with the next real record boundary
    (``start`` itself when only the bytes before it changed; else the first self-consistent record
    found in the next :data:`RESYNC_WINDOW_BYTES`, else the next mapped-file start or ``max_offset``).
    """
    if start > max_offset or start < min_offset:
        return None  # a lost tail or deleted files: the fail_on_data_loss rules of connector.source apply
    problems = []
    if fingerprint is not None and fingerprint.end == start and fingerprint.offset >= min_offset:
        data = source.read(fingerprint.offset, start)
        try:
            record = decode_record(data, 0, base_offset=fingerprint.offset)
        except (CommitLogFormatError, ValueError, IndexError):
            record = None
        if not fingerprint.matches(record):
            now = (f"storeTimestamp {record.store_timestamp}, bodyCRC {record.body_crc}"
                   if isinstance(record, MessageRecord) else "no record starts there now")
            problems.append(f"the record [{fingerprint.offset}, {start}) it was taken after (storeTimestamp "
                            f"{fingerprint.store_timestamp}, bodyCRC {fingerprint.body_crc}) is gone ({now})")
    aligned = True
    if start < max_offset:
        if not starts_record(source.read(start, min(start + HEAD_BYTES, max_offset)), start, mapped_file_size):
            aligned = False
            problems.append(f"offset {start} is no longer the start of a record")
    if not problems:
        return None
    resume, inside = start, None
    if not aligned:
        window = source.read(start, min(start + RESYNC_WINDOW_BYTES, max_offset))
        found = first_boundary_at_or_after(window, start, start, mapped_file_size)
        resume = found if found is not None else min(next_file_start(start, mapped_file_size), max_offset)
        if len(problems) == 1:  # the fingerprint (if any) names no other record: is the broker's history intact?
            inside = _record_around(source, start, window, min_offset, mapped_file_size)
            if inside is not None and resume != inside[1]:
                inside = None
    if inside is not None:
        return Rewrite(start, start, resume, tuple(problems), True, inside)
    lost_from = fingerprint.offset if fingerprint is not None and fingerprint.end == start else start
    exact = fingerprint is not None
    if fingerprint is not None:
        lost_from, exact = rewritten_from(source, start, fingerprint.store_timestamp, lost_from, min_offset,
                                          mapped_file_size)
    return Rewrite(start, lost_from, resume, tuple(problems), exact)


def _record_around(source: CommitLogBytes, start: int, after: bytes, min_offset: int,
                   mapped_file_size: int) -> tuple[int, int, int] | None:
    """``(offset, end, storeTimestamp)`` of the self-consistent record that starts below ``start`` and ends
    past it, walked from a record boundary at most :data:`TAIL_WINDOW_BYTES` below ``start`` in its mapped
    file (``after``: the bytes from ``start`` on); None when no such walk reaches it."""
    file_start = start - start % mapped_file_size
    lo = max(file_start, min_offset, start - TAIL_WINDOW_BYTES)
    buf = source.read(lo, start) + after
    first = lo if lo == file_start else first_boundary_at_or_after(buf, lo, lo, mapped_file_size)
    if first is None or first >= start:
        return None
    for rec in _messages_from(buf, lo, first, lo + len(buf), mapped_file_size):
        if rec.commit_log_offset < start < rec.commit_log_offset + rec.store_size:
            return rec.commit_log_offset, rec.commit_log_offset + rec.store_size, rec.store_timestamp
    return None


def end_fingerprint(source: CommitLogBytes, begin: int, end: int, mapped_file_size: int,
                    lowest_report: int) -> RecordFingerprint | None:
    """The fingerprint of the last record before a batch end ``end`` (batch start ``begin``), from one read.

    The read's report acknowledges the bytes below its start (docs/source.md "Acknowledgements"), so it
    starts at ``max(begin, min(end - TAIL_WINDOW_BYTES, lowest_report))``: never above ``lowest_report``
    (the settled offset on a SYNC_MASTER) unless that is ``begin``, which is landed. None when that read
    would exceed :data:`RESYNC_WINDOW_BYTES` or the last record does not start inside it."""
    if end <= begin:
        return None
    lo = max(begin, min(end - TAIL_WINDOW_BYTES, lowest_report))
    if end - lo > RESYNC_WINDOW_BYTES:
        return None  # a tail read this large is not worth it; the next batch end gets a fingerprint
    record = last_record_before(source.read(lo, end), lo, mapped_file_size)
    return RecordFingerprint.of(record) if record is not None else None
