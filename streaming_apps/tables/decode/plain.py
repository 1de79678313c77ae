"""Bodies that are not structured: ``string`` (UTF-8 text) and ``bytes`` (the body as is), one column ``body``.

``string``: the bodies' bytes are checked as UTF-8 in Arrow's native validation (``Array.validate(full=True)``,
RFC 3629) and kept, no copy; only when that fails is each body decoded alone, and one that is not UTF-8 gets the
error ``not UTF-8: <reason> at byte <offset>`` (Python's UnicodeDecodeError ``start``) and a null. ``bytes``: the
bodies unchanged. Both: a null body -> the error ``no body``. A ``large_binary`` column comes back as ``string`` /
``binary`` (at most 2 GiB of bodies per batch). :attr:`Decoded.schemas` is None for every row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from streaming_apps.tables.decode.contract import NO_BODY, BodyDecoder, Decoded

#: the one column of these formats
BODY = "body"


def _binary(bodies: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``bodies`` as one ``binary`` array.

    Raises:
        TypeError: not a binary or large_binary array.
    """
    if isinstance(bodies, pa.ChunkedArray):
        bodies = bodies.combine_chunks() if bodies.num_chunks != 1 else bodies.chunk(0)
    if pa.types.is_large_binary(bodies.type):
        return bodies.cast(pa.binary())
    if not pa.types.is_binary(bodies.type):
        raise TypeError(f"bodies must be a binary or large_binary array, not {bodies.type}")
    return bodies


def _no_body_errors(bodies: pa.Array) -> list[str | None]:
    if bodies.null_count == 0:
        return [None] * len(bodies)
    return [None if valid else NO_BODY for valid in bodies.is_valid().to_pylist()]


class BytesDecoder(BodyDecoder):
    """The body as is: one ``binary`` column ``body``."""

    format = "bytes"
    _SCHEMA = pa.schema([pa.field(BODY, pa.binary())])

    @property
    def schema(self) -> pa.Schema:
        return self._SCHEMA

    def decode(self, bodies: pa.Array, properties: list[dict[str, str]] | None = None) -> Decoded:
        """The bodies unchanged; a null body is the error ``no body``."""
        array = _binary(bodies)
        return Decoded(pa.RecordBatch.from_arrays([array], schema=self._SCHEMA), _no_body_errors(array),
                       [None] * len(array))


class StringDecoder(BodyDecoder):
    """UTF-8 text: one ``string`` column ``body``; a body that is not UTF-8 is an error naming the byte."""

    format = "string"
    _SCHEMA = pa.schema([pa.field(BODY, pa.string())])

    @property
    def schema(self) -> pa.Schema:
        return self._SCHEMA

    def decode(self, bodies: pa.Array, properties: list[dict[str, str]] | None = None) -> Decoded:
        """The bodies as text (the module's doc)."""
        array = _binary(bodies)
        n = len(array)
        errors = _no_body_errors(array)
        text = pa.Array.from_buffers(pa.string(), n, array.buffers(), null_count=array.null_count,
                                     offset=array.offset)
        try:
            text.validate(full=True)
        except pa.ArrowInvalid:
            valid = np.zeros(array.offset + n, dtype=bool)
            for row, body in enumerate(array.to_pylist()):
                if body is None:
                    continue
                try:
                    body.decode("utf-8")
                except UnicodeDecodeError as e:
                    errors[row] = f"not UTF-8: {e.reason} at byte {e.start}"
                    continue
                valid[array.offset + row] = True
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
            text = pa.Array.from_buffers(pa.string(), n, [bitmap, *array.buffers()[1:]], offset=array.offset)
        return Decoded(pa.RecordBatch.from_arrays([text], schema=self._SCHEMA), errors, [None] * n)
