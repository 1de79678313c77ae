"""The decoder's hot loops behind one interface, native or NumPy, chosen once at import.

The native kernel (``connector/decode/_decode_kernel.c``, compiled at install when a C compiler and zlib's
headers exist; :class:`~connector.decode.native_kernels.NativeKernels`) is used when it was built; else,
or when the environment sets ``HAREPLICA_PURE_PYTHON=1``, the NumPy implementation
(:class:`~connector.decode.numpy_kernels.NumpyKernels`), with the same results (the tests run every
decode test through both). Callers ask :func:`active` for the kernels and call its five operations:

- ``chain_record_starts(region) -> (starts, totals, false_candidates)``: the record walk;
- ``locate(u8, starts, base_offset, mapped_file_size) -> Located``: the fixed fields and where the others lie;
- ``slices(buf, starts, lengths) -> BinaryArray``: byte ranges of a buffer as values;
- ``properties(buf, u8, props_pos, props_len) -> (map, tags, keys, uniqKey)``;
- ``body_groups(buf, located, policy, max_body_bytes, mapped_file_size) -> iterator of body groups``.
"""

from __future__ import annotations

import logging
import os

from connector.decode.native_kernels import NativeKernels
from connector.decode.numpy_kernels import NumpyKernels

log = logging.getLogger(__name__)

#: Environment variable that, set to anything but ``""`` or ``0``, makes the NumPy kernels the default.
PURE_PYTHON_ENV = "HAREPLICA_PURE_PYTHON"

try:  # built at install (setup.py); optional
    from connector.decode import _decode_kernel
except ImportError:  # pragma: no cover - depends on the build
    _decode_kernel = None

NUMPY = NumpyKernels()
NATIVE = NativeKernels(_decode_kernel) if _decode_kernel is not None else None


def _choose() -> NumpyKernels:
    """The kernels a process starts with: NumPy when the environment asks for it or the kernel is not built."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        log.info("%s is set: decoding CommitLog bytes with the NumPy kernels", PURE_PYTHON_ENV)
        return NUMPY
    if NATIVE is None:  # pragma: no cover - depends on the build
        log.warning("connector.decode._decode_kernel is not built (no C compiler or zlib headers at install time): "
                    "decoding CommitLog bytes with the slower NumPy path")
        return NUMPY
    return NATIVE


_active = _choose()


def active() -> NumpyKernels:
    """The kernels in use: :data:`NATIVE` or :data:`NUMPY` (same interface and results)."""
    return _active


def native_kernel_available() -> bool:
    """True when the native decode kernel is in use (else the NumPy path, same results)."""
    return _active is NATIVE

