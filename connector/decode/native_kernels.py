"""The decoder's hot loops in C: the native kernel (``connector/decode/_decode_kernel.c``, built at install).

:class:`NativeKernels` has :class:`connector.decode.numpy_kernels.NumpyKernels`' interface and results; it
runs four loops in C, over Python buffers: the record walk follows TOTALSIZE directly (no candidates),
every fixed field is read and every length prefix checked in one pass (``locate_records``,
``connector/decode/_decode_locate.c``), properties are split in one pass, and bodies are checked against BODYCRC and
copied or inflated (libdeflate when the system has it, else zlib; ZLIB only) straight into each group's body
buffer. What the C code does not cover (LZ4 / ZSTD bodies, more than 2^31-1 bytes in one call) goes to the
NumPy methods.

The C files keep their own copy of the layout constants they need (``connector/decode/_decode_kernel.h``; C cannot
import Python); the extension exports them and a test checks them against :mod:`connector.protocol.commitlog.layout`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from connector.arrow_numpy import binary_array, indices_or_null
from connector.decode.arrays import as_string
from connector.decode.bodies import BodyGroup, BodyPolicy, bad_body, reason_of
from connector.decode.locate import Located, check_failed
from connector.decode.numpy_kernels import NumpyKernels
from connector.decode.properties import SPECIAL_KEYS, PropertyColumns, properties_by_record
from connector.decode.record_error import record_error
from connector.protocol.commitlog import (
    COMPRESSED_FLAG,
    COMPRESSION_LZ4_TYPE,
    COMPRESSION_TYPE_COMPARATOR,
    COMPRESSION_ZSTD_TYPE,
    MAGICCODE_POSITION,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE_BYTES,
    body_too_large,
    check_body_crc,
    compression_type_name,
    inflate_body,
)

_ARROW_INT32_MAX = 2 ** 31 - 1  # values of one call stay below int32 Arrow offsets
_PYTHON_ONLY_TYPES = (COMPRESSION_LZ4_TYPE, COMPRESSION_ZSTD_TYPE)  # the native kernel inflates ZLIB only
_SPECIAL_NAMES = tuple(key.encode() for key in SPECIAL_KEYS)
_MAGIC = struct.Struct(">i")
#: The kernel's codes of bodies kept as stored (``enum bad_body`` in connector/decode/_decode_kernel.c).
BAD_BODYCRC, BAD_INFLATE, BAD_COMPRESSION_TYPE, BAD_TOO_LARGE = 1, 2, 3, 4


class NativeKernels(NumpyKernels):
    """:class:`NumpyKernels`' operations through the extension module ``ext`` (``connector.decode._decode_kernel``)."""

    name = "native"

    def __init__(self, ext):
        super().__init__()
        self.ext = ext

    def chain_record_starts(self, region: bytes | bytearray | memoryview) -> tuple[np.ndarray, np.ndarray, int]:
        """:meth:`NumpyKernels.chain_record_starts` as a C loop over TOTALSIZE (no candidates, so 0 false ones)."""
        size = len(region)
        if size < 8 or _MAGIC.unpack_from(region, MAGICCODE_POSITION)[0] != MESSAGE_MAGIC_CODE:
            raise ValueError("region does not start with a MESSAGE record")
        capacity = size // MIN_RECORD_SIZE_BYTES + 1
        starts = np.empty(capacity, dtype=np.int64)
        totals = np.empty(capacity, dtype=np.int64)
        count, _ = self.ext.walk_records(region, starts, totals)
        return starts[:count], totals[:count], 0

    def locate(self, u8: np.ndarray, starts: np.ndarray, base_offset: int, mapped_file_size: int) -> Located:
        """:meth:`NumpyKernels.locate` in one C pass over the records (same fields, same checks, same errors)."""
        s = np.ascontiguousarray(starts, dtype=np.int64)
        rows = np.empty((len(self.ext.LOCATED_ROWS), len(s)), dtype=np.int64)
        field, index = self.ext.locate_records(u8, s, base_offset, rows)
        if field is not None:
            raise check_failed(field, base_offset + int(s[index]), mapped_file_size)
        return Located.from_rows(dict(zip(self.ext.LOCATED_ROWS, rows, strict=True)), s, base_offset)

    def slices(self, buf: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
        """:meth:`NumpyKernels.slices` with one memcpy per value (no take)."""
        n = len(starts)
        if n == 0 or int(lengths.sum()) >= _ARROW_INT32_MAX:
            return super().slices(buf, starts, lengths)
        end, offsets, values, _ = self.ext.gather_bodies(buf, np.ascontiguousarray(starts, dtype=np.int64),
                                                         np.ascontiguousarray(lengths, dtype=np.int64),
                                                         np.zeros(n, dtype=np.int32), 0, False, 0, b"", False, 0)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])

    def properties(self, buf: pa.Buffer, u8: np.ndarray, props_pos: np.ndarray, props_len: np.ndarray
                   ) -> PropertyColumns:
        """:meth:`NumpyKernels.properties` in one pass over the properties bytes that splits them, drops
        earlier duplicates and finds TAGS / KEYS / UNIQ_KEY (same rules, same results)."""
        if int(props_len.sum()) >= _ARROW_INT32_MAX:
            return super().properties(buf, u8, props_pos, props_len)
        n = len(props_pos)
        map_offsets, name_offsets, names, value_offsets, values, hits = self.ext.split_properties(
            buf, np.ascontiguousarray(props_pos, dtype=np.int64), np.ascontiguousarray(props_len, dtype=np.int64),
            _SPECIAL_NAMES)
        m = len(name_offsets) // 4 - 1
        names = as_string(pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(name_offsets),
                                                                 pa.py_buffer(names)]))
        values = as_string(pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(value_offsets),
                                                                    pa.py_buffer(values)]))
        if names is None or values is None:
            return properties_by_record(memoryview(u8), props_pos, props_len)
        map_offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(map_offsets)])
        properties = pa.MapArray.from_arrays(map_offsets, names, values)
        index = np.frombuffer(hits, dtype=np.int64).reshape(len(_SPECIAL_NAMES), n)
        return (properties, *(values.take(indices_or_null(row)) for row in index))

    def body_groups(self, buf: pa.Buffer, loc, policy: BodyPolicy, max_body_bytes: int, mapped_file_size: int
                    ) -> Iterator[BodyGroup]:
        """:meth:`NumpyKernels.body_groups` with each group's bodies checked and copied, or inflated (ZLIB
        only), straight into the group's one values buffer (no per-body Python object); the group cut is
        the same rule applied to every row, stored or inflated. The reasons of the (rare) bad rows the
        kernel reports are worked out here. Batches with LZ4 or ZSTD bodies to decompress take the NumPy
        path. Raises CommitLogFormatError for a single body larger than an Arrow array can hold."""
        kinds = loc.sys_flag[(loc.sys_flag & COMPRESSED_FLAG) != 0] & COMPRESSION_TYPE_COMPARATOR
        if policy.decompress and np.isin(kinds, _PYTHON_ONLY_TYPES).any():
            return super().body_groups(buf, loc, policy, max_body_bytes, mapped_file_size)
        return self._gather_groups(buf, loc, policy, max_body_bytes, mapped_file_size)

    def _gather_groups(self, buf: pa.Buffer, loc, policy: BodyPolicy, max_body_bytes: int, mapped_file_size: int
                       ) -> Iterator[BodyGroup]:
        """The groups of :meth:`body_groups`, each from one ``gather_bodies`` call."""
        n = len(loc.s)
        if n == 0:
            yield 0, 0, binary_array([]), {}
            return
        pos = np.ascontiguousarray(loc.body_pos, dtype=np.int64)
        length = np.ascontiguousarray(loc.body_len, dtype=np.int64)
        flags = np.ascontiguousarray(loc.sys_flag, dtype=np.int32)
        crcs = np.ascontiguousarray(loc.crc, dtype=np.int32)
        view = memoryview(buf)
        first = 0
        while first < n:
            try:
                end, offsets, values, bad_rows = self.ext.gather_bodies(
                    buf, pos, length, flags, first, policy.decompress, max_body_bytes, crcs, policy.verify_crc,
                    policy.max_inflated)
            except ValueError as exc:  # only the group's first body can be too large for one Arrow array
                off = int(loc.offsets[first])
                raise record_error(f"body cannot be held in one Arrow array ({exc})", off, "BODY",
                                   mapped_file_size) from exc
            bad = {}
            for row, code in np.frombuffer(bad_rows, dtype=np.int32).reshape(-1, 2).tolist():
                stored = view[int(pos[row]):int(pos[row] + length[row])]
                if code == BAD_BODYCRC:
                    bad[row] = reason_of(check_body_crc, stored, int(crcs[row]))
                elif code == BAD_TOO_LARGE:
                    bad[row] = bad_body(body_too_large(compression_type_name(int(flags[row])), policy.max_inflated))
                else:  # does not inflate, or a compression type the kernel leaves alone: the library names why
                    bad[row] = reason_of(inflate_body, stored, int(flags[row]), max_bytes=policy.max_inflated)
            yield first, end, pa.Array.from_buffers(pa.binary(), end - first,
                                                    [None, pa.py_buffer(offsets), pa.py_buffer(values)]), bad
            first = end
