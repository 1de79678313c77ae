"""Small NumPy / Arrow helpers of the decoder: big-endian gathers, byte-range slices, UTF-8 views."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from connector.arrow_numpy import binary_array, from_numpy


def be_view(u8: np.ndarray, dtype: str | np.dtype) -> np.ndarray:
    """A view of ``u8`` as overlapping big-endian values of ``dtype``, one starting at every byte (no copy)."""
    width = np.dtype(dtype).itemsize
    return np.ndarray((max(len(u8) - width + 1, 0),), dtype=dtype, buffer=u8, strides=(1,))


def gather_be(u8: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian integers of ``width`` bytes at every position of ``pos`` (one vectorised gather)."""
    native = np.dtype(dtype).newbyteorder("=")
    if len(pos) == 0:
        return np.zeros(0, dtype=native)
    return be_view(u8, dtype)[pos].astype(native)


def take_slices(buf: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
    """BinaryArray of ``buf[starts[i]:starts[i]+lengths[i]]``; the slices must be ordered and disjoint.

    One Arrow ``take`` over a binary array whose values alternate gap / slice over ``buf`` (no copy
    to build it), so the cost is one memcpy per value in C++.
    """
    n = len(starts)
    if n == 0:
        return binary_array([])
    large = buf.size >= 2 ** 31 - 1
    offsets = np.empty(2 * n + 1, dtype=np.int64 if large else np.int32)
    offsets[0] = 0
    offsets[1::2] = starts
    offsets[2::2] = starts + lengths
    whole = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), 2 * n,
                                  [None, pa.py_buffer(offsets), buf])
    picked = whole.take(from_numpy(np.arange(1, 2 * n, 2), pa.int64() if large else pa.int32()))
    return picked.cast(pa.binary()) if large else picked


def as_string(values: pa.BinaryArray) -> pa.StringArray | None:
    """The same values typed as UTF-8 strings, or None when some value is not valid UTF-8."""
    strings = values.view(pa.string())
    try:
        strings.validate(full=True)
    except pa.ArrowInvalid:
        return None
    return strings
