"""Decoding a CommitLog range in one call for tests: the public decoder fed every chunk, then finished."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from connector.decode.stream import CommitLogArrowDecoder


def decode_commitlog_range(chunks: Iterable[tuple[int, bytes]], start: int, end: int, mapped_file_size: int, *,
                           broker: str, **kwargs) -> Iterator[pa.RecordBatch]:
    """RecordBatches of ``[start, end)`` from ``(offset, bytes)`` chunks; ``kwargs`` are
    :class:`connector.decode.stream.CommitLogArrowDecoder`'s (``mode``, ``columns``, ...)."""
    return CommitLogArrowDecoder(start, end, mapped_file_size, broker=broker, **kwargs).decode_all(chunks)
