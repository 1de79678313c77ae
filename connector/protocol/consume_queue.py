"""A RocketMQ 4.9.8 ConsumeQueue entry (``ConsumeQueue``, docs/protocol.md §5.1), defined once.

Entry ``n`` of a queue (the record whose QUEUEOFFSET is ``n``) is the 20 bytes at logical byte offset ``20 n``::

    [CommitLog offset int64][TOTALSIZE int32][tagsCode int64]     (big-endian)

A *placeholder* entry ``(0, Integer.MAX_VALUE, 0)`` fills a queue file created at a non-zero entry up to that
entry (``fillPreBlank``); it points at no record.

Pure constants and codecs; the broker stub's store and the connector's ConsumeQueue reader import them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

#: The entry's fields in stored order: (name, struct code); big-endian. numpy users build their dtype from it.
CQ_ENTRY_FIELDS = (("offset", "q"), ("size", "i"), ("tags", "q"))
#: ``struct`` codec of one entry: ``(CommitLog offset, TOTALSIZE, tagsCode)``.
CQ_ENTRY = struct.Struct(">" + "".join(code for _, code in CQ_ENTRY_FIELDS))
CQ_STORE_UNIT_SIZE = CQ_ENTRY.size  # ConsumeQueue.CQ_STORE_UNIT_SIZE: 20 bytes
PLACEHOLDER_SIZE = 2**31 - 1  # Integer.MAX_VALUE: the TOTALSIZE of a placeholder entry
#: The bytes of one placeholder entry.
PLACEHOLDER_ENTRY = CQ_ENTRY.pack(0, PLACEHOLDER_SIZE, 0)


def iter_cq_entries(buf: bytes | memoryview, count: int) -> Iterator[tuple[int, int, int]]:
    """The first ``count`` whole 20-byte entries of ``buf`` as ``(CommitLog offset, size, tagsCode)``,
    placeholders included (docs/protocol.md §5.1). A partial entry at the end is not returned."""
    for pos in range(0, min(len(buf) // CQ_STORE_UNIT_SIZE, count) * CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE):
        yield CQ_ENTRY.unpack_from(buf, pos)


def is_placeholder(size: int) -> bool:
    """True when an entry's TOTALSIZE ``size`` marks a placeholder (it points at no record)."""
    return size == PLACEHOLDER_SIZE
