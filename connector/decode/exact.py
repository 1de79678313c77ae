"""The restore columns of a batch: what re-encoding each record byte for byte needs beside the default columns
(:data:`connector.decode.schema.RESTORE_COLUMNS`; docs/restore.md "The columns bronze keeps").
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.arrow_numpy import binary_array, from_numpy, to_numpy
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
    """
    n = len(loc.s)
    raw = kernels.slices(buf, loc.props_pos, loc.props_len)
    pairs = pc.binary_join_element_wise(properties.keys, properties.items, NAME_VALUE_SEPARATOR)
    lists = pa.ListArray.from_arrays(properties.offsets, pairs)
    joined = pc.binary_join(lists, PROPERTY_SEPARATOR).cast(pa.binary())
    exact = pc.fill_null(pc.equal(raw, joined), False)
    empty = binary_array([b""])[0]
    trailing = pc.binary_join_element_wise(joined, empty, PROPERTY_SEPARATOR.encode())
    with_separator = pc.and_not(pc.fill_null(pc.equal(raw, trailing), False), exact)
    stored = pc.if_else(pc.or_(exact, with_separator), pa.nulls(n, pa.binary()), raw)
    magic = gather_be(u8, loc.s + MAGICCODE_POSITION, 4, ">i4")
    fmt = np.where(magic == MESSAGE_MAGIC_CODE_V2, RECORD_FORMAT_V2, 0).astype(np.int32)
    fmt |= to_numpy(pc.cast(with_separator, pa.int32())) * RECORD_FORMAT_TRAILING_SEPARATOR
    return stored, from_numpy(fmt, pa.int32())
