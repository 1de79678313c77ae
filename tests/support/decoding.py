"""Decoding a CommitLog range in one call for tests: the public decoder fed every chunk, then finished."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from connector.decode import kernels
from connector.decode.stream import CommitLogArrowDecoder
from connector.options.settings import DecodeSettings


def decode_commitlog_range(chunks: Iterable[tuple[int, bytes]], start: int, end: int, mapped_file_size: int, *,
                           broker: str, **kwargs) -> Iterator[pa.RecordBatch]:
    """RecordBatches of ``[start, end)`` from ``(offset, bytes)`` chunks; ``kwargs`` are
    :class:`connector.decode.stream.CommitLogArrowDecoder`'s (``columns``, ``topic_filter``) or fields of its
    :class:`connector.options.settings.DecodeSettings` (``mode``, ``verify_body_crc``, ...)."""
    fields = {k: kwargs.pop(k) for k in list(kwargs) if k in DecodeSettings.__dataclass_fields__}
    return CommitLogArrowDecoder(start, end, mapped_file_size, broker=broker, settings=DecodeSettings(**fields),
                                 **kwargs).decode_all(chunks)


def use_decode_kernels(monkeypatch, name: str) -> str:
    """Make ``"native"`` or ``"numpy"`` the decode kernels of this test (:mod:`connector.decode.kernels` chooses once
    per process; ``monkeypatch`` restores the choice). The native kernel must be built: CI builds it."""
    chosen = {"native": kernels.NATIVE, "numpy": kernels.NUMPY}[name]
    assert chosen is not None, "connector.decode._decode_kernel is not built"
    monkeypatch.setattr(kernels, "_active", chosen)
    return name
