"""What every body decoder is and gives back: :class:`BodyDecoder`, :class:`Decoded`, :class:`BodyFormatError`.

Defined here rather than in :mod:`streaming_apps.tables.decode.base` (which re-exports them beside
``decoder_for``) because ``decoder_for`` imports each format's module and each of those subclasses BodyDecoder:
one module holding both would be an import cycle (tests/unit/test_import_layers.py).

Shapes: a decoder takes a column of bodies (``pa.binary()`` or ``pa.large_binary()``, nulls allowed) and the
rows' user properties, and gives a :class:`Decoded` with exactly one entry per body in each of its parts.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from connector.errors import HAReplicaError
from streaming_apps.tables.decode.builder import ArrowBuilder

#: the error of a row whose body is null (a record the source kept without a body)
NO_BODY = "no body"
#: the longest error line a row gets; longer ones end in "..."
MAX_ERROR_CHARS = 300


class BodyFormatError(HAReplicaError, ValueError):
    """A table's body format cannot be set up: an unknown format, a missing or unreadable schema file, a descriptor
    set without the message, a bad Avro schema, a bad type text. One line naming the setting and the file; the
    caller adds the declaration file and the table."""


@dataclass(frozen=True)
class Decoded:
    """The decoding of ``n`` bodies.

    Attributes:
        fields: ``n`` rows, columns = the decoder's ``schema``; a row whose body did not decode is all null.
        errors: per row, None when decoded, else one line: what was wrong and where (field path, byte offset).
        schemas: per row, the schema it was tried against (``payment-v2.avsc``, ``shop.Payment``,
            ``payment.schema.json``, ``infer``, ``fields``); None for the string and bytes formats, and for an
            Avro body whose writer schema is unknown (its error names the fingerprint).
    """

    fields: pa.RecordBatch
    errors: list[str | None]
    schemas: list[str | None]


class BodyDecoder(ABC):
    """Turns a column of message bodies into typed Arrow columns. Instances pickle (by the schema text they were
    made from, not by file paths), so a decoder made on the driver can be shipped to the tasks."""

    format: ClassVar[str]  # avro | protobuf | json | msgpack | string | bytes
    #: whether :attr:`schema` stays what it is across :meth:`decode` calls (False: json ``infer``, which widens)
    fixed_schema: ClassVar[bool] = True

    @property
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The decoded fields' Arrow schema, every field nullable (json ``infer``: widens with each decode)."""

    @abstractmethod
    def decode(self, bodies: pa.Array, properties: list[dict[str, str]] | None = None) -> Decoded:
        """``bodies`` (``pa.binary()``/``pa.large_binary()``, a null is the error ``no body``) decoded, one row
        each. ``properties``: the rows' RocketMQ user properties (Avro's ``version_property``), or None.
        Never raises for a bad body: the row gets an error instead."""


def finish(columns: ArrowBuilder, schema: pa.Schema, rows: list[Any], errors: list[str | None],
           schemas: list[str | None]) -> Decoded:
    """The :class:`Decoded` of ``rows`` (one decoded record per row, None where ``errors`` says why): the columns
    built with ``columns``; a row whose values do not fit ``schema`` (a decimal too wide, an int out of range)
    gets that error and nulls."""
    batch, bad = columns.batch(rows, schema)
    for row, message in bad.items():
        errors[row] = one_line(message)
    return Decoded(batch, errors, schemas)


def body_list(bodies: pa.Array | pa.ChunkedArray) -> list[bytes | None]:
    """The bodies as Python ``bytes`` (None for a null).

    Raises:
        TypeError: ``bodies`` is not a binary or large_binary array.
    """
    if not (pa.types.is_binary(bodies.type) or pa.types.is_large_binary(bodies.type)):
        raise TypeError(f"bodies must be a binary or large_binary array, not {bodies.type}")
    return bodies.to_pylist()


def decode_rows(decode: Callable[[bytes], Any], values: list[bytes | None], errors: list[str | None],
                refused: Callable[[Exception], str], catch: tuple[type[Exception], ...]) -> list[Any]:
    """``decode`` of each body: in one pass when none fails, else body by body, where a null body or one that
    raises one of ``catch`` is None in the result and ``errors[row]`` says why (:data:`NO_BODY`, ``refused(e)``)."""
    try:
        return list(map(decode, values))
    except Exception:  # noqa: BLE001 - some body failed (or was null): find which, one by one
        pass
    rows: list[Any] = [None] * len(values)
    for row, body in enumerate(values):
        if body is None:
            errors[row] = NO_BODY
            continue
        try:
            rows[row] = decode(body)
        except catch as e:
            errors[row] = refused(e)
    return rows


def row_properties(properties: list[dict[str, str]] | None, n: int) -> list[Mapping[str, str]]:
    """``properties`` checked to have ``n`` entries (None: ``n`` empty ones); a None entry is an empty mapping.

    Raises:
        ValueError: ``properties`` has another length.
    """
    if properties is None:
        return [{}] * n
    if len(properties) != n:
        raise ValueError(f"{len(properties)} property maps for {n} bodies")
    return [p or {} for p in properties]


_SPACE = re.compile(r"\s+")


def one_line(text: str) -> str:
    """``text`` on one line (runs of white space, newlines included, become one space), at most
    :data:`MAX_ERROR_CHARS` characters."""
    text = _SPACE.sub(" ", str(text)).strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 3] + "..."


def error_text(e: BaseException) -> str:
    """An exception as ``Type: message`` (only the type when the message is empty), on one line."""
    message = one_line(str(e))
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def schema_file(setting: str, value: Any, base_dir: Path) -> Path:
    """The file a ``setting`` names (``value``, a path relative to ``base_dir`` unless absolute).

    Raises:
        BodyFormatError: ``value`` is not a non-empty string, or no readable file is there.
    """
    if not isinstance(value, str) or not value:
        raise BodyFormatError(f"setting {setting}: expected a file path, got {value!r}")
    path = Path(value) if Path(value).is_absolute() else base_dir / value
    if not path.is_file():
        raise BodyFormatError(f"setting {setting}: {value}: no such file ({path})")
    return path


def read_bytes(setting: str, path: Path) -> bytes:
    """The bytes of the schema file ``path`` that ``setting`` names.

    Raises:
        BodyFormatError: it cannot be read.
    """
    try:
        return path.read_bytes()
    except OSError as e:
        raise BodyFormatError(f"setting {setting}: cannot read {path}: {e.strerror or e}") from None


def read_text(setting: str, path: Path) -> str:
    """The UTF-8 text of the schema file ``path`` that ``setting`` names.

    Raises:
        BodyFormatError: it cannot be read or is not UTF-8.
    """
    data = read_bytes(setting, path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BodyFormatError(f"setting {setting}: {path} is not UTF-8 text (byte {e.start})") from None
