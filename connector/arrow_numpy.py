"""NumPy arrays and Python lists to Arrow arrays (and back) without pyarrow's pandas shim.

Why: ``pa.array``, ``pa.scalar``, ``pa.table`` of a dict and ``Array.to_numpy(zero_copy_only=False)`` first ask
pyarrow's pandas shim whether their input is a pandas object, and the shim imports pandas to answer, whatever the
input is. In a Spark Python worker that has imported pyspark's worker, pyarrow and the read path, that import took
0.15 CPU-s and 40 MiB of resident memory, paid by every worker that reads the connector (docs/source.md, "Speed and
memory"). The functions here build the same arrays from buffers (``pa.Array.from_buffers``), which never consult the
shim; the executors' read path and the landing use them, and a test runs that path with pandas made unimportable.

Arrays built here are zero-copy over the NumPy data where the dtype already matches: the Arrow array holds a
reference to the NumPy buffer, so a later write into the NumPy array shows through it; do not write to it after.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa


def numpy_dtype(arrow_type: pa.DataType) -> np.dtype:
    """The little-endian NumPy dtype of a fixed-width Arrow ``arrow_type``'s values: integers, floats, and
    temporal types (their integer storage, e.g. int64 microseconds of ``timestamp("us")``).

    Raises:
        TypeError: ``arrow_type`` is not one of those (booleans are bit-packed; strings are not fixed-width).
    """
    if pa.types.is_integer(arrow_type):
        kind = "i" if pa.types.is_signed_integer(arrow_type) else "u"
        return np.dtype(f"<{kind}{arrow_type.bit_width // 8}")
    if pa.types.is_floating(arrow_type):
        return np.dtype(f"<f{arrow_type.bit_width // 8}")
    if pa.types.is_temporal(arrow_type) and arrow_type.bit_width in (32, 64):
        return np.dtype(f"<i{arrow_type.bit_width // 8}")
    raise TypeError(f"no fixed-width NumPy dtype for the Arrow type {arrow_type}")


def from_numpy(values: np.ndarray, arrow_type: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """A fixed-width Arrow array of ``arrow_type`` holding the 1-D ``values`` (converted with NumPy's cast, no
    range check, when their dtype is not :func:`numpy_dtype` of the type); null where the boolean ``valid``
    (same length) is False, no nulls without it. Shares the memory of ``values`` when no conversion is needed.

    Raises:
        TypeError: ``arrow_type`` is not fixed-width (:func:`numpy_dtype`).
        ValueError: ``values`` is not 1-D, or ``valid`` has another length.
    """
    values = np.ascontiguousarray(values, dtype=numpy_dtype(arrow_type))
    if values.ndim != 1:
        raise ValueError(f"from_numpy takes a 1-D array, got shape {values.shape}")
    if valid is None:
        return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)], null_count=0)
    if len(valid) != len(values):
        raise ValueError(f"valid has {len(valid)} entries for {len(values)} values")
    bitmap = np.packbits(np.asarray(valid, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(arrow_type, len(values), [pa.py_buffer(bitmap), pa.py_buffer(values)])


def bool_array(values: np.ndarray) -> pa.BooleanArray:
    """A boolean Arrow array of the 1-D ``values`` (each one's truth), bit-packed, no nulls: what
    ``pa.array(values)`` gives for a NumPy bool array, without the pandas shim (a mask for ``filter`` or
    ``if_else``).

    Raises:
        ValueError: ``values`` is not 1-D.
    """
    values = np.asarray(values, dtype=bool)
    if values.ndim != 1:
        raise ValueError(f"bool_array takes a 1-D array, got shape {values.shape}")
    bits = np.packbits(values, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)], null_count=0)


def bool_to_numpy(array: pa.BooleanArray) -> np.ndarray:
    """The values of a boolean ``array`` as a NumPy bool array (a copy: Arrow packs booleans in bits), without the
    pandas shim that ``to_numpy(zero_copy_only=False)`` and ``np.asarray`` consult. Slots under nulls hold
    whatever the bits hold: fill the nulls first (``pc.fill_null``) where they matter."""
    n = len(array)
    data = array.buffers()[1]
    if data is None or n == 0:
        return np.zeros(n, dtype=bool)
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=array.offset + n, bitorder="little")
    return bits[array.offset:].astype(bool)


def indices_or_null(index: np.ndarray) -> pa.Array:
    """An int64 index array for ``Array.take`` from ``index``, null where ``index`` is negative (the take then
    gives null there)."""
    return from_numpy(index, pa.int64(), valid=index >= 0)


def to_numpy(array: pa.Array) -> np.ndarray:
    """The values of a fixed-width ``array`` (:func:`numpy_dtype`) as a read-only NumPy view, no copy. Slots under
    nulls hold whatever the buffer holds: use it for arrays without nulls, or mask them yourself.

    Raises:
        TypeError: ``array``'s type is not fixed-width.
    """
    dtype = numpy_dtype(array.type)
    data = array.buffers()[1]
    if data is None:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def binary_array(values: Sequence[bytes | str | None], arrow_type: pa.DataType = pa.binary()) -> pa.Array:
    """A ``binary`` or ``string`` Arrow array (``arrow_type``) of the Python ``values`` (``str`` is encoded as
    UTF-8, a None is null); one copy of the bytes.

    Raises:
        TypeError: ``arrow_type`` is neither ``binary`` nor ``string``, or a value is neither bytes nor str.
        ValueError: the values hold 2 GiB or more (beyond the int32 offsets of ``binary``/``string``).
    """
    if arrow_type not in (pa.binary(), pa.string()):
        raise TypeError(f"binary_array builds binary or string arrays, not {arrow_type}")
    nulls = values.count(None)
    validity = None
    if nulls:
        validity = pa.py_buffer(np.packbits(np.fromiter((v is not None for v in values), bool, len(values)),
                                            bitorder="little"))
        empty = "" if arrow_type == pa.string() else b""
        values = [empty if v is None else v for v in values]
    data = _ascii_joined(values)
    if data is not None:  # each value's byte length is its length in characters
        lengths = np.fromiter(map(len, values), np.int64, len(values))
    else:
        encoded = [v.encode() if isinstance(v, str) else bytes(v) for v in values]
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        data = b"".join(encoded)
    ends = np.cumsum(lengths, dtype=np.int64)
    if len(ends) and ends[-1] >= 2 ** 31:
        raise ValueError(f"binary_array: {int(ends[-1])} bytes of values exceed int32 offsets")
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    offsets[1:] = ends
    return pa.Array.from_buffers(arrow_type, len(lengths), [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _ascii_joined(values: Sequence[bytes | str]) -> bytes | None:
    """The UTF-8 bytes of ``values`` joined, when every value is a ``str`` of ASCII characters only (then a
    value's byte length is its ``len``); None otherwise. One join and one encode instead of one per value."""
    try:
        joined = "".join(values)  # type: ignore[arg-type]  # TypeError: a value is not a str
        data = joined.encode()
    except (TypeError, UnicodeEncodeError):  # UnicodeEncodeError: a lone surrogate, left to the per-value path
        return None
    return data if len(data) == len(joined) else None


def repeat_string(value: str, count: int) -> pa.Array:
    """A ``string`` array of ``count`` copies of ``value`` (``pa.repeat`` of a scalar taken from a one-value
    array, so no ``pa.scalar``)."""
    return pa.repeat(binary_array([value], pa.string())[0], count)
