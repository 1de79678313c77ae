"""The decoder's hot loops in NumPy: the reference implementation of the kernel interface.

:class:`NumpyKernels` is what :mod:`connector.decode.kernels` uses when the native kernel is not built or
``HAREPLICA_PURE_PYTHON=1``; :class:`connector.decode.native_kernels.NativeKernels` gives the same results
faster. Five operations: walk the chain of record starts, read the records' fixed fields and find their
variable-length ones, cut byte ranges out of a buffer, split the properties, build the body groups.

**Walking record starts without a Python step per record.** Record sizes chain (each TOTALSIZE gives
the next start), so a pure NumPy scan cannot find the starts in general. The walk instead finds every
*candidate* start at once: every position followed by the 4 MAGICCODE bytes of a message (``DA A3 20
A7`` at +4, one vectorised byte comparison over the buffer). From the known first record it follows
the chain: candidate ``i`` continues to candidate ``i+1`` whenever ``start + TOTALSIZE`` equals the
next candidate, which holds for every record unless a body happens to contain the magic bytes; only
those rare false candidates (and END_FILE blanks, errors, the range end) cost a Python step.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from connector.decode.arrays import gather_be, take_slices
from connector.decode.bodies import BodyGroup, BodyPolicy, body_groups
from connector.decode.locate import Located, locate
from connector.decode.properties import PropertyColumns, split_properties
from connector.protocol.commitlog import (
    MAGICCODE_POSITION,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE_BYTES,
    TOTALSIZE_POSITION,
)

try:  # optional accelerator of the NumPy path: inflates zlib bodies 3-6x faster than the standard library
    from zlib_ng import zlib_ng as _fast_zlib
except ImportError:  # pragma: no cover - depends on the environment
    _fast_zlib = None

_MAGIC_BYTES = np.frombuffer(struct.pack(">i", MESSAGE_MAGIC_CODE), dtype=np.uint8)


class NumpyKernels:
    """The decoder's five hot loops with NumPy and Arrow compute (see :mod:`connector.decode.kernels`).

    ``zlib_module``: the zlib implementation that inflates ZLIB bodies here (``zlib_ng.zlib_ng`` when it
    is installed, else the standard library's ``zlib``; same API, same results).
    """

    name = "numpy"

    def __init__(self):
        self.zlib_module = _fast_zlib if _fast_zlib is not None else zlib

    def chain_record_starts(self, region: bytes | bytearray | memoryview) -> tuple[np.ndarray, np.ndarray, int]:
        """Starts and TOTALSIZEs of the chain of complete MESSAGE records at the start of ``region``.

        ``region[0:]`` must begin with a complete, checked MESSAGE record (else ValueError). Follows
        TOTALSIZE from record to record; stops before the first record that is incomplete, not a message
        (blank, bad magic, zeros) or smaller than 91 bytes (the caller's per-record path reports those).
        Returns ``(starts, totals, false_candidates)``: int64 positions in ``region``, their TOTALSIZE
        (bytes), and how many candidates were bytes inside bodies that happen to equal the magic (0 when
        the walk needs no candidates).
        """
        return _chain(region)

    def locate(self, u8: np.ndarray, starts: np.ndarray, base_offset: int, mapped_file_size: int) -> Located:
        """Every fixed field of the records at ``starts`` and where their variable-length fields lie
        (:func:`connector.decode.locate.locate`: ``u8[0]`` at CommitLog ``base_offset``; each record whole in
        ``u8``). Raises CommitLogFormatError (offset and field named) for the first of
        :data:`connector.decode.locate.CHECKS` a record fails."""
        return locate(u8, starts, base_offset, mapped_file_size)

    def slices(self, buf: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
        """BinaryArray of ``buf[starts[i]:starts[i]+lengths[i]]`` (ordered, disjoint slices)."""
        return take_slices(buf, starts, lengths)

    def properties(self, buf: pa.Buffer, u8: np.ndarray, props_pos: np.ndarray, props_len: np.ndarray
                   ) -> PropertyColumns:
        """Properties map plus the TAGS / KEYS / UNIQ_KEY columns of the records whose PROPERTIES lie at
        ``props_pos`` (positions in ``buf``, whose bytes ``u8`` views) with ``props_len`` bytes."""
        return split_properties(buf, u8, props_pos, props_len)

    def body_groups(self, buf: pa.Buffer, loc, policy: BodyPolicy, max_body_bytes: int, mapped_file_size: int
                    ) -> Iterator[BodyGroup]:
        """The body column in groups of at most ``max_body_bytes`` (:func:`connector.decode.bodies.body_groups`;
        ``mapped_file_size`` names the file in errors)."""
        return body_groups(buf, loc, policy, max_body_bytes, self.zlib_module)


def _chain(region: bytes | bytearray | memoryview) -> tuple[np.ndarray, np.ndarray, int]:
    """:meth:`NumpyKernels.chain_record_starts` over the magic candidates."""
    u8 = np.frombuffer(region, dtype=np.uint8)
    size = len(u8)
    at = MAGICCODE_POSITION  # candidate i has the magic's bytes at i + at .. i + at + 3
    hits = np.flatnonzero(u8[at:size - 3] == _MAGIC_BYTES[0]) if size >= 8 else np.zeros(0, dtype=np.int64)
    if len(hits):
        hits = hits[(u8[hits + at + 1] == _MAGIC_BYTES[1]) & (u8[hits + at + 2] == _MAGIC_BYTES[2])
                    & (u8[hits + at + 3] == _MAGIC_BYTES[3])]
    if not len(hits) or hits[0] != 0:
        raise ValueError("region does not start with a MESSAGE record")
    totals = gather_be(u8, hits + TOTALSIZE_POSITION, 4, ">i4").astype(np.int64)
    following = hits + totals
    breaks = np.flatnonzero(following[:-1] != hits[1:])
    runs = []
    i = 0
    false_hits = 0
    while True:
        k = int(np.searchsorted(breaks, i))
        last = int(breaks[k]) if k < len(breaks) else len(hits) - 1
        runs.append((i, last + 1))
        target = int(following[last])
        if totals[last] < MIN_RECORD_SIZE_BYTES or target >= size:
            break
        j = int(np.searchsorted(hits, target))
        if j >= len(hits) or hits[j] != target:
            break
        false_hits += j - last - 1
        i = j
    index = np.concatenate([np.arange(a, b) for a, b in runs]) if len(runs) > 1 else np.arange(*runs[0])
    starts, totals = hits[index], totals[index]
    ok = (totals >= MIN_RECORD_SIZE_BYTES) & (starts + totals <= size)
    if not ok.all():
        cut = int(np.argmin(ok))
        starts, totals = starts[:cut], totals[:cut]
    return starts, totals, false_hits
