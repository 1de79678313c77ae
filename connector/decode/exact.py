"""The restore columns of a batch: what re-encoding each record byte for byte needs beside the default columns
(:data:`connector.decode.schema.RESTORE_COLUMNS`; docs/restore.md "The columns bronze keeps").
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.arrow_numpy import binary_array, bool_array, from_numpy, to_numpy
from connector.decode.arrays import gather_be
from connector.decode.locate import Located
from connector.decode.schema import RECORD_FORMAT_TRAILING_SEPARATOR, RECORD_FORMAT_V2
from connector.protocol.commitlog import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from connector.protocol.commitlog.layout import COMPRESSED_FLAG, MAGICCODE_POSITION, MESSAGE_MAGIC_CODE_V2


def stored_bodies(kernels, buf: pa.Buffer, loc: Located, lo: int, hi: int, body: pa.Array) -> pa.BinaryArray:
    """``storedBody`` of rows ``lo:hi``: the BODY bytes as stored where ``body`` (that group's body column) holds
    other bytes — a body the decoder decompressed — else null. Only COMPRESSED records (sysFlag bit, docs/protocol.md
    §1.4) are compared; the others' body is the stored one."""
    compressed = (loc.sys_flag[lo:hi] & COMPRESSED_FLAG) != 0
    if not compressed.any():
        return pa.nulls(hi - lo, pa.binary())
    stored = kernels.slices(buf, loc.body_pos[lo:hi], loc.body_len[lo:hi])
    same = pc.equal(stored, body.cast(pa.binary()))
    return pc.if_else(same, pa.nulls(hi - lo, pa.binary()), stored)


def stored_properties(kernels, buf: pa.Buffer, u8: np.ndarray, loc: Located, properties: pa.MapArray
                      ) -> tuple[pa.BinaryArray, pa.Int32Array]:
    """``storedProperties`` and ``recordFormat`` of every row of ``loc``.

    ``properties`` is the batch's map column (pairs in stored order, a later duplicate kept). Re-encoding it as
    RocketMQ's ``messageProperties2String`` does (``name\\x01value`` joined by ``\\x02``, docs/protocol.md §1.5)
    gives the stored PROPERTIES exactly, or with one more ``\\x02`` at the end (recordFormat bit
    RECORD_FORMAT_TRAILING_SEPARATOR); for any other record ``storedProperties`` holds the stored bytes (null
    otherwise). recordFormat bit RECORD_FORMAT_V2: MAGICCODE is MESSAGE_MAGIC_CODE_V2 (docs/protocol.md §8).

    Which rows re-encode is told from lengths alone (:func:`_rejoined_lengths`), with no copy of the properties'
    bytes, unless the map holds U+FFFD (a name or value that was not valid UTF-8 and was replaced): then the
    re-encoded bytes are built and compared with the stored ones (:func:`_compared`).
    """
    n = len(loc.s)
    lengths = _rejoined_lengths(properties)
    if lengths is None:
        exact, with_separator = _compared(kernels, buf, loc, properties)
    else:
        stored_len = np.asarray(loc.props_len, dtype=np.int64)
        last = u8[np.maximum(np.asarray(loc.props_pos, dtype=np.int64) + stored_len - 1, 0)]
        exact = stored_len == lengths
        with_separator = (stored_len == lengths + 1) & (last == PROPERTY_SEPARATOR.encode()[0])
    if (exact | with_separator).all():
        stored = pa.nulls(n, pa.binary())
    else:
        raw = kernels.slices(buf, loc.props_pos, loc.props_len)
        stored = pc.if_else(bool_array(exact | with_separator), pa.nulls(n, pa.binary()), raw)
    magic = gather_be(u8, loc.s + MAGICCODE_POSITION, 4, ">i4")
    fmt = np.where(magic == MESSAGE_MAGIC_CODE_V2, RECORD_FORMAT_V2, 0).astype(np.int32)
    fmt |= with_separator.astype(np.int32) * RECORD_FORMAT_TRAILING_SEPARATOR
    return stored, from_numpy(fmt, pa.int32())


def _offsets(array: pa.Array) -> np.ndarray:
    """int64 value offsets (``len(array) + 1``) of a string or binary ``array``, into its data buffer."""
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    width = 8 if large else 4
    if array.buffers()[1] is None:
        return np.zeros(len(array) + 1, dtype=np.int64)
    return np.frombuffer(array.buffers()[1], dtype=np.int64 if large else np.int32, count=len(array) + 1,
                         offset=array.offset * width).astype(np.int64)


def _replaced(array: pa.Array, offsets: np.ndarray) -> bool:
    """True when the values of ``array`` hold U+FFFD (bytes EF BF BD)."""
    data = array.buffers()[2]
    if data is None or offsets[-1] == offsets[0]:
        return False
    u8 = np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]]
    at = np.flatnonzero(u8[:-2] == 0xEF)
    return bool(((u8[at + 1] == 0xBF) & (u8[at + 2] == 0xBD)).any())


def _rejoined_lengths(properties: pa.MapArray) -> np.ndarray | None:
    """int64 per row: the byte length of its pairs re-encoded (``name\\x01value`` joined by ``\\x02``), or None
    when a name or value holds U+FFFD.

    The decoder's names and values are the stored bytes cut at the separators, in stored order (RocketMQ's
    ``string2messageProperties``, :func:`connector.decode.properties.split_properties`): each segment between
    ``\\x02`` is kept whole as one pair or dropped (an empty one, one without a name or value, an earlier
    duplicate name). So the re-encoded bytes equal the stored ones exactly when their lengths are equal (a
    dropped segment of k bytes makes them k + 1 shorter), and the stored bytes are the re-encoded ones plus a
    last ``\\x02`` exactly when they are one byte longer and end with ``\\x02`` (one dropped segment, empty,
    last). Only names or values not valid UTF-8 are not their stored bytes: the decoder replaces them with U+FFFD
    (:func:`connector.decode.properties.properties_by_record`), hence None."""
    keys, items = properties.keys, properties.items
    key_offsets, value_offsets = _offsets(keys), _offsets(items)
    if _replaced(keys, key_offsets) or _replaced(items, value_offsets):
        return None
    rows = to_numpy(properties.offsets).astype(np.int64)
    pair_bytes = np.zeros(len(key_offsets), dtype=np.int64)  # each pair with its two separators, summed
    np.cumsum(np.diff(key_offsets) + np.diff(value_offsets) + 2, out=pair_bytes[1:])
    pairs = np.diff(rows)
    return pair_bytes[rows[1:]] - pair_bytes[rows[:-1]] - (pairs > 0)


def _compared(kernels, buf: pa.Buffer, loc: Located, properties: pa.MapArray) -> tuple[np.ndarray, np.ndarray]:
    """(exact, with_separator), bool per row: the pairs re-encoded equal the stored PROPERTIES, or equal them
    without their last ``\\x02``; built and compared byte for byte (see :func:`stored_properties`)."""
    raw = kernels.slices(buf, loc.props_pos, loc.props_len)
    pairs = pc.binary_join_element_wise(properties.keys, properties.items, NAME_VALUE_SEPARATOR)
    lists = pa.ListArray.from_arrays(properties.offsets, pairs)
    joined = pc.binary_join(lists, PROPERTY_SEPARATOR).cast(pa.binary())
    exact = pc.fill_null(pc.equal(raw, joined), False)
    empty = binary_array([b""])[0]
    trailing = pc.binary_join_element_wise(joined, empty, PROPERTY_SEPARATOR.encode())
    with_separator = pc.and_not(pc.fill_null(pc.equal(raw, trailing), False), exact)
    return (to_numpy(exact.cast(pa.uint8())).astype(bool),
            to_numpy(with_separator.cast(pa.uint8())).astype(bool))
