"""The ``body`` and ``decodeError`` columns of a batch of CommitLog records (docs/source.md, "Bad records").

Bodies are copied as stored, or decompressed (ZLIB, LZ4, ZSTD by the SYSFLAG compression type, docs/source.md
"Compressed bodies"), after an optional BODYCRC check, with every decompression bounded by
``maxInflatedBodyBytes``. A bad body (BODYCRC mismatch, does not decompress, unknown type, past the bound) is
kept as stored and reported with the field at fault and why; :mod:`connector.arrow_decode` turns those
reports into ``decodeError`` values (PERMISSIVE) or a CommitLogFormatError (FAILFAST).

Two paths with the same results: the native kernel (``connector/_decode_kernel.c``: ZLIB inflate and CRC in
C, straight into the Arrow body buffer) and a NumPy/Python path (one library call per compressed body); a
batch holding LZ4 or ZSTD bodies always takes the second. The callers pass the kernel module (or None).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_LZ4_TYPE,
    COMPRESSION_TYPE_COMPARATOR,
    COMPRESSION_ZSTD_TYPE,
    DEFAULT_MAX_INFLATED_BODY_BYTES,
    BodyDecodeError,
    body_too_large,
    check_body_crc,
    compression_type_name,
    file_name,
    inflate_body,
)
from connector.protocol.errors import CommitLogFormatError

BODY_BYTES_PER_ARROW_ARRAY = 512 * 1024 * 1024  # keeps int32 binary offsets far from overflow
MAX_MAX_INFLATED_BODY_BYTES = 1024 * 1024 * 1024  # keeps a group plus one body below int32 Arrow offsets
MODE_PERMISSIVE = "PERMISSIVE"
MODE_FAILFAST = "FAILFAST"
BAD_RECORD_MODES = (MODE_PERMISSIVE, MODE_FAILFAST)


class BodyPolicy(NamedTuple):
    """How bodies are turned into the ``body`` column and what a bad one does (docs/source.md, "Bad records").

    decompress: decompress COMPRESSED bodies (``decompressBody``); verify_crc: check BODYCRC
    (``verifyBodyCRC``); max_inflated: bytes a body may decompress to (``maxInflatedBodyBytes``);
    fail_fast: ``mode=FAILFAST`` raises CommitLogFormatError at a bad body, else (PERMISSIVE) the row
    keeps the stored bytes and names field and reason in ``decodeError``.
    """

    decompress: bool = True
    verify_crc: bool = True
    max_inflated: int = DEFAULT_MAX_INFLATED_BODY_BYTES
    fail_fast: bool = False

#: ``(first row, end row, body array, {row: (field, reason)} of the bad rows)``
BodyGroup = tuple[int, int, pa.Array, dict[int, tuple[str, str]]]


def slices(buf: pa.Buffer, starts: np.ndarray, lengths: np.ndarray, kernel=None) -> pa.BinaryArray:
    """BinaryArray of ``buf[starts[i]:starts[i]+lengths[i]]``; the slices must be ordered and disjoint.

    One Arrow ``take`` over a binary array whose values alternate gap / slice over ``buf`` (no copy
    to build it), so the cost is one memcpy per value in C++; with the native ``kernel`` module, its
    ``gather_bodies`` copies them instead.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], type=pa.binary())
    if kernel is not None and int(lengths.sum()) < 2 ** 31 - 1:  # one memcpy per value, no take
        end, offsets, values, _ = kernel.gather_bodies(buf, np.ascontiguousarray(starts, dtype=np.int64),
                                                        np.ascontiguousarray(lengths, dtype=np.int64),
                                                        np.zeros(n, dtype=np.int32), 0, False, 0, b"", False, 0)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])
    large = buf.size >= 2 ** 31 - 1
    offsets = np.empty(2 * n + 1, dtype=np.int64 if large else np.int32)
    offsets[0] = 0
    offsets[1::2] = starts
    offsets[2::2] = starts + lengths
    whole = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), 2 * n,
                                  [None, pa.py_buffer(offsets), buf])
    picked = whole.take(pa.array(np.arange(1, 2 * n, 2, dtype=np.int64 if large else np.int32)))
    return picked.cast(pa.binary()) if large else picked


def decode_errors(bad: dict[int, tuple[str, str]], lo: int, hi: int) -> pa.Array:
    """The ``decodeError`` column of rows [lo, hi): ``FIELD: reason`` for the rows in ``bad``, else null."""
    if not bad:
        return pa.nulls(hi - lo, type=pa.string())
    values: list[str | None] = [None] * (hi - lo)
    for row, (field, reason) in bad.items():
        values[row - lo] = f"{field}: {reason}"
    return pa.array(values, type=pa.string())


_PYTHON_ONLY_TYPES = (COMPRESSION_LZ4_TYPE, COMPRESSION_ZSTD_TYPE)  # the native kernel inflates ZLIB only


def body_groups(buf: pa.Buffer, loc, policy: BodyPolicy, max_body_bytes: int, mapped_file_size: int, *, kernel,
                zlib_module) -> Iterator[BodyGroup]:
    """``(first_row, end_row, body array, bad)`` groups covering all rows: stored bytes, or decompressed
    when ``policy.decompress`` and the record is COMPRESSED. ``bad`` maps the group's rows whose body is
    kept as stored because it is bad to ``(field, reason)``. A group ends before a row whose body would
    take the group past ``max_body_bytes`` (stored bodies are never split below
    :data:`BODY_BYTES_PER_ARROW_ARRAY`: the stored batch is already bounded).

    ``loc`` holds the rows' numpy columns (``s``, ``offsets``, ``crc``, ``sys_flag``, ``body_pos``,
    ``body_len``); ``kernel`` is the native decode kernel module or None (NumPy path); ``zlib_module`` the
    zlib implementation of the NumPy path (``zlib`` or ``zlib_ng.zlib_ng``). Raises CommitLogFormatError
    for a single body larger than an Arrow array can hold.
    """
    if kernel is not None:
        kinds = loc.sys_flag[(loc.sys_flag & COMPRESSED_FLAG) != 0] & COMPRESSION_TYPE_COMPARATOR
        if not policy.decompress or not np.isin(kinds, _PYTHON_ONLY_TYPES).any():
            yield from _bodies_native(buf, loc, policy, max_body_bytes, mapped_file_size, kernel)
            return
    yield from _bodies_python(buf, loc, policy, max_body_bytes, zlib_module)


def _crc_failures(view: memoryview, loc, zlib_module) -> dict[int, tuple[str, str]]:
    """Rows whose stored body does not match its BODYCRC, with the reason (one CRC-32 call per body)."""
    crc32 = zlib_module.crc32
    pos, lens, stored = loc.body_pos.tolist(), loc.body_len.tolist(), loc.crc.tolist()
    bad = {}
    for i, (a, length, crc) in enumerate(zip(pos, lens, stored, strict=True)):
        if crc32(view[a:a + length]) & 0x7FFFFFFF != crc:
            bad[i] = _reason(check_body_crc, view[a:a + length], crc)
    return bad


def _reason(check, *args, **kwargs) -> tuple[str, str]:
    """``(field, reason)`` of the BodyDecodeError ``check(...)`` raises (a generic BODY one if it does not)."""
    try:
        check(*args, **kwargs)
    except BodyDecodeError as exc:
        return exc.field, exc.reason
    return "BODY", "body does not decompress"  # pragma: no cover - the kernel and the libraries agree


def _bodies_python(buf: pa.Buffer, loc, policy: BodyPolicy, max_body_bytes: int, zlib_module
                   ) -> Iterator[BodyGroup]:
    """:func:`body_groups` on the NumPy path: compressed bodies are decompressed one by one in Python (bounded
    by ``policy.max_inflated``); ZLIB through zlib-ng when it is installed, LZ4 and ZSTD always here."""
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
            yield first, last, slices(buf, body_pos[first:last], body_len[first:last], None), _rows_in(bad, first, last)
            first = last
        if n == 0:
            yield 0, 0, pa.array([], type=pa.binary()), {}
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
            bad[c] = (exc.field, exc.reason)
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


def _bodies_native(buf: pa.Buffer, loc, policy: BodyPolicy, max_body_bytes: int, mapped_file_size: int, kernel
                   ) -> Iterator[BodyGroup]:
    """:func:`body_groups` through the native kernel: each group's bodies are checked and copied, or
    inflated (ZLIB only), straight into the group's one values buffer (no per-body Python object); the
    group cut is the same rule applied to every row, stored or inflated. The reasons of the (rare) bad
    rows the kernel reports are worked out here."""
    n = len(loc.s)
    if n == 0:
        yield 0, 0, pa.array([], type=pa.binary()), {}
        return
    pos = np.ascontiguousarray(loc.body_pos, dtype=np.int64)
    length = np.ascontiguousarray(loc.body_len, dtype=np.int64)
    flags = np.ascontiguousarray(loc.sys_flag, dtype=np.int32)
    crcs = np.ascontiguousarray(loc.crc, dtype=np.int32)
    view = memoryview(buf)
    first = 0
    while first < n:
        try:
            end, offsets, values, bad_rows = kernel.gather_bodies(
                buf, pos, length, flags, first, policy.decompress, max_body_bytes, crcs, policy.verify_crc,
                policy.max_inflated)
        except ValueError as exc:  # only the group's first body can be too large for one Arrow array
            off = int(loc.offsets[first])
            raise CommitLogFormatError(f"body cannot be held in one Arrow array ({exc})", offset=off, field="BODY",
                                       file=file_name(off - off % mapped_file_size)) from exc
        bad = {}
        for row, code in np.frombuffer(bad_rows, dtype=np.int32).reshape(-1, 2).tolist():
            stored = view[int(pos[row]):int(pos[row] + length[row])]
            if code == _BAD_BODYCRC:
                bad[row] = _reason(check_body_crc, stored, int(crcs[row]))
            elif code == _BAD_TOO_LARGE:
                too_large = body_too_large(compression_type_name(int(flags[row])), policy.max_inflated)
                bad[row] = (too_large.field, too_large.reason)
            else:  # does not inflate, or a compression type the kernel leaves alone: the library names why
                bad[row] = _reason(inflate_body, stored, int(flags[row]), max_bytes=policy.max_inflated)
        yield first, end, pa.Array.from_buffers(pa.binary(), end - first,
                                                [None, pa.py_buffer(offsets), pa.py_buffer(values)]), bad
        first = end


_BAD_BODYCRC = 1  # the kernel's codes of bodies kept as stored (connector/_decode_kernel.c, enum bad_body)
_BAD_TOO_LARGE = 4


def _merge_bodies(buf: pa.Buffer, body_pos: np.ndarray, body_len: np.ndarray, lo: int, hi: int,
                  inflated: list[tuple[int, bytes]]) -> pa.Array:
    """Bodies of rows [lo, hi): stored bytes, replaced by ``inflated`` values at their rows.

    The stored bodies of the other rows are cut out in one ``take``; runs of them and the inflated
    values are then joined once into the final buffer (two list items per inflated row, which already
    cost a zlib call), so the bodies are held about twice at most.
    """
    if not inflated:
        return slices(buf, body_pos[lo:hi], body_len[lo:hi], None)
    rows = np.array([r - lo for r, _ in inflated], dtype=np.int64)
    stored_len = body_len[lo:hi].copy()
    stored_len[rows] = 0
    stored = slices(buf, body_pos[lo:hi], stored_len, None)
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
