"""The ``body`` and ``decodeError`` columns of a batch of CommitLog records (docs/source.md, "Bad records").

Bodies are copied as stored, or decompressed (ZLIB, LZ4, ZSTD by the SYSFLAG compression type, docs/source.md
"Compressed bodies"), after an optional BODYCRC check, with every decompression bounded by
``max_inflated`` (:class:`BodyPolicy`). A bad body (BODYCRC mismatch, does not decompress, unknown type, past
the bound) is kept as stored and reported with the field at fault and why; :mod:`connector.decode.columns` turns those
reports into ``decodeError`` values (PERMISSIVE) or a CommitLogFormatError (FAILFAST).

:func:`body_groups` here is the NumPy path (one library call per compressed body); the native kernel's
path (:mod:`connector.decode.native_kernels`) gives the same groups.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from connector.arrow_numpy import binary_array
from connector.decode.arrays import take_slices
from connector.errors import BodyDecodeError, BodyTooLargeError
from connector.options.declaration import MODE_FAILFAST, OPTIONS
from connector.options.settings import DecodeSettings
from connector.protocol.commitlog import (
    BODYCRC_MASK,
    COMPRESSED_FLAG,
    check_body_crc,
    inflate_body,
)

BODY_BYTES_PER_ARROW_ARRAY = 512 * 1024 * 1024  # keeps int32 binary offsets far from overflow


class BodyPolicy(NamedTuple):
    """How bodies are turned into the ``body`` column and what a bad one does (docs/source.md, "Bad records").

    decompress: decompress COMPRESSED bodies; verify_crc: check BODYCRC; max_inflated: bytes a body may
    decompress to; fail_fast: raise CommitLogFormatError at a bad body (``FAILFAST``), else (``PERMISSIVE``)
    the row keeps the stored bytes and names field and reason in ``decodeError``. :meth:`of` takes them from
    the query's :class:`connector.options.settings.DecodeSettings`.
    """

    decompress: bool
    verify_crc: bool
    max_inflated: int
    fail_fast: bool

    @classmethod
    def of(cls, settings: DecodeSettings) -> BodyPolicy:
        """The policy of ``settings`` (``mode`` compared case-insensitively)."""
        return cls(decompress=settings.decompress_body, verify_crc=settings.verify_body_crc,
                   max_inflated=settings.max_inflated_body_bytes, fail_fast=settings.mode.upper() == MODE_FAILFAST)


#: ``(first row, end row, body array, {row: (field, reason)} of the bad rows)``
BodyGroup = tuple[int, int, pa.Array, dict[int, tuple[str, str]]]


def decode_errors(bad: dict[int, tuple[str, str]], lo: int, hi: int) -> pa.Array:
    """The ``decodeError`` column of rows [lo, hi): ``FIELD: reason`` for the rows in ``bad``, else null."""
    if not bad:
        return pa.nulls(hi - lo, type=pa.string())
    values: list[str | None] = [None] * (hi - lo)
    for row, (field, reason) in bad.items():
        values[row - lo] = f"{field}: {reason}"
    return binary_array(values, pa.string())  # from buffers: no pandas shim (connector/arrow_numpy.py)


def _crc_failures(view: memoryview, loc, zlib_module) -> dict[int, tuple[str, str]]:
    """Rows whose stored body does not match its BODYCRC, with the reason (one CRC-32 call per body)."""
    crc32 = zlib_module.crc32
    pos, lens, stored = loc.body_pos.tolist(), loc.body_len.tolist(), loc.crc.tolist()
    bad = {}
    for i, (a, length, crc) in enumerate(zip(pos, lens, stored, strict=True)):
        if crc32(view[a:a + length]) & BODYCRC_MASK != crc:
            bad[i] = reason_of(check_body_crc, view[a:a + length], crc)
    return bad


def bad_body(exc: BodyDecodeError) -> tuple[str, str]:
    """``(field, reason)`` of a bad body as the ``decodeError`` column shows it: a body past the bound names the
    option that sets it."""
    if isinstance(exc, BodyTooLargeError):
        return exc.field, (f"{exc.kind} body decompresses to more than {OPTIONS.max_inflated_body_bytes.name} "
                           f"({exc.max_bytes} bytes)")
    return exc.field, exc.reason


def reason_of(check, *args, **kwargs) -> tuple[str, str]:
    """``(field, reason)`` (:func:`bad_body`) of the BodyDecodeError ``check(...)`` raises (a generic BODY one if
    it does not)."""
    try:
        check(*args, **kwargs)
    except BodyDecodeError as exc:
        return bad_body(exc)
    return "BODY", "body does not decompress"  # pragma: no cover - the kernel and the libraries agree


def body_groups(buf: pa.Buffer, loc, policy: BodyPolicy, max_body_bytes: int, zlib_module) -> Iterator[BodyGroup]:
    """``(first_row, end_row, body array, bad)`` groups covering all rows: stored bytes, or decompressed
    when ``policy.decompress`` and the record is COMPRESSED. ``bad`` maps the group's rows whose body is
    kept as stored because it is bad to ``(field, reason)``. A group ends before a row whose body would
    take the group past ``max_body_bytes`` (stored bodies are never split below
    :data:`BODY_BYTES_PER_ARROW_ARRAY`: the stored batch is already bounded).

    ``loc`` holds the rows' NumPy columns (:class:`connector.decode.locate.Located`: ``s``, ``crc``,
    ``sys_flag``, ``body_pos``, ``body_len``). Compressed bodies are decompressed one by one (bounded by
    ``policy.max_inflated``) with ``zlib_module`` for ZLIB (``zlib`` or ``zlib_ng.zlib_ng``, same API).
    """
    n = len(loc.s)
    body_pos, body_len = loc.body_pos, loc.body_len
    view = memoryview(buf)
    bad = _crc_failures(view, loc, zlib_module) if policy.verify_crc and n else {}
    compressed = np.flatnonzero((loc.sys_flag & COMPRESSED_FLAG) != 0) if policy.decompress else np.zeros(0, np.int64)
    if bad and len(compressed):  # a body whose CRC fails is kept as stored, not decompressed
        compressed = compressed[~np.isin(compressed, np.fromiter(bad, dtype=np.int64, count=len(bad)))]
    if not len(compressed):
        cum = np.cumsum(body_len)
        first = 0
        while first < n:
            done = int(cum[first - 1]) if first else 0
            last = max(int(np.searchsorted(cum, done + BODY_BYTES_PER_ARROW_ARRAY, side="right")), first + 1)
            yield first, last, take_slices(buf, body_pos[first:last], body_len[first:last]), _rows_in(bad, first, last)
            first = last
        if n == 0:
            yield 0, 0, binary_array([]), {}
        return
    cum = np.concatenate([[0], np.cumsum(body_len)]).tolist()
    flags = loc.sys_flag[compressed].tolist()
    starts = body_pos[compressed].tolist()
    ends = (body_pos[compressed] + body_len[compressed]).tolist()
    first = 0
    size = 0  # body bytes of rows [first, row) in the group being built
    inflated: list[tuple[int, bytes]] = []
    row = 0
    for c, flag, a, b in zip(compressed.tolist(), flags, starts, ends, strict=True):
        size += cum[c] - cum[row]
        try:
            value = inflate_body(view[a:b], flag, max_bytes=policy.max_inflated, zlib_module=zlib_module)
        except BodyDecodeError as exc:
            bad[c] = bad_body(exc)
            value = None  # kept as stored
        grows = len(value) if value is not None else b - a
        if c > first and size + grows > max_body_bytes:
            yield first, c, _merge_bodies(buf, body_pos, body_len, first, c, inflated), _rows_in(bad, first, c)
            first, size, inflated = c, 0, []
        if value is not None:
            inflated.append((c, value))
        size += grows
        row = c + 1
    yield first, n, _merge_bodies(buf, body_pos, body_len, first, n, inflated), _rows_in(bad, first, n)


def _rows_in(bad: dict[int, tuple[str, str]], lo: int, hi: int) -> dict[int, tuple[str, str]]:
    return {row: why for row, why in bad.items() if lo <= row < hi} if bad else {}


def _merge_bodies(buf: pa.Buffer, body_pos: np.ndarray, body_len: np.ndarray, lo: int, hi: int,
                  inflated: list[tuple[int, bytes]]) -> pa.Array:
    """Bodies of rows [lo, hi): stored bytes, replaced by ``inflated`` values at their rows.

    The stored bodies of the other rows are cut out in one ``take``; runs of them and the inflated
    values are then joined once into the final buffer (two list items per inflated row, which already
    cost a zlib call), so the bodies are held about twice at most.
    """
    if not inflated:
        return take_slices(buf, body_pos[lo:hi], body_len[lo:hi])
    rows = np.array([r - lo for r, _ in inflated], dtype=np.int64)
    stored_len = body_len[lo:hi].copy()
    stored_len[rows] = 0
    stored = take_slices(buf, body_pos[lo:hi], stored_len)
    stored_offsets = np.concatenate([[0], np.cumsum(stored_len)])
    stored_view = memoryview(stored.buffers()[2] or b"")
    lengths = stored_len
    lengths[rows] = [len(v) for _, v in inflated]
    offsets = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    cut = stored_offsets[np.concatenate([rows, rows + 1])].tolist()
    k = len(rows)
    pieces: list = []
    prev_end = 0
    for i, (_, value) in enumerate(inflated):
        pieces.append(stored_view[prev_end:cut[i]])
        pieces.append(value)
        prev_end = cut[k + i]
    pieces.append(stored_view[prev_end:int(stored_offsets[-1])])
    data = b"".join(pieces)
    return pa.BinaryArray.from_buffers(pa.binary(), hi - lo, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                               pa.py_buffer(data)])
