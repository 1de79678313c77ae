"""The body of a client batch (SEND_BATCH_MESSAGE): the inner messages one after another (docs/protocol.md §1.10).

Source: MessageDecoder.encodeMessages / decodeMessages, RocketMQ 4.9.8 client.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from connector.errors import CommitLogFormatError
from connector.protocol.commitlog.bodies import Buffer
from connector.protocol.commitlog.records import check_available

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_BATCH_HEAD = struct.Struct(">iiii")  # TOTALSIZE, MAGICCODE (0), BODYCRC (0), FLAG


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One inner message of a client batch body: flag, body and properties string."""

    flag: int
    body: bytes
    properties: str


def encode_batch_body(entries: list[BatchEntry]) -> bytes:
    """Encode a batch as the 4.9.8 client's ``MessageDecoder.encodeMessages`` (docs/protocol.md §1.10)."""
    out = []
    for e in entries:
        props = e.properties.encode("utf-8")
        size = 4 + 4 + 4 + 4 + 4 + len(e.body) + 2 + len(props)
        out += [_BATCH_HEAD.pack(size, 0, 0, e.flag), _I32.pack(len(e.body)), e.body, _I16.pack(len(props)), props]
    return b"".join(out)


def decode_batch_body(body: Buffer) -> list[BatchEntry]:
    """Decode a client batch body into its inner messages.

    Raises CommitLogFormatError (offset = position in the body, field named) on truncated or
    inconsistent entries.
    """
    entries: list[BatchEntry] = []
    pos = 0
    n = len(body)
    while pos < n:
        check_available(body, pos, 20, "TOTALSIZE", pos, "batch body")
        size, _magic, _crc, flag = _BATCH_HEAD.unpack_from(body, pos)
        body_len = _I32.unpack_from(body, pos + 16)[0]
        if body_len < 0 or pos + 20 + body_len + 2 > n:
            raise CommitLogFormatError(f"batch BODY length {body_len} runs past the batch", offset=pos, field="BODY",
                                       file="batch body")
        b = bytes(body[pos + 20:pos + 20 + body_len])
        p = pos + 20 + body_len
        props_len = _I16.unpack_from(body, p)[0]
        if props_len < 0 or p + 2 + props_len > n or size != 22 + body_len + props_len:
            raise CommitLogFormatError(f"batch PROPERTIES length {props_len} inconsistent with TOTALSIZE {size}",
                                       offset=pos, field="PROPERTIES", file="batch body")
        props = bytes(body[p + 2:p + 2 + props_len]).decode("utf-8")
        entries.append(BatchEntry(flag, b, props))
        pos = p + 2 + props_len
    return entries
