"""Stored message bodies: BODYCRC, and the compression the 4.9.8 client applies (docs/source.md, "Compressed bodies").

A body is stored compressed when its SYSFLAG has COMPRESSED_FLAG; SYSFLAG bits 8..10 name the kind
(docs/protocol.md §1.4). Every decompression can be bounded so that a zip bomb cannot grow memory.
"""

from __future__ import annotations

import zlib

from connector.errors import BodyDecodeError, BodyTooLargeError, CommitLogFormatError
from connector.protocol.commitlog.layout import (
    BODYCRC_MASK,
    COMPRESSED_FLAG,
    COMPRESSION_LZ4_TYPE,
    COMPRESSION_TYPE_COMPARATOR,
    COMPRESSION_ZLIB_TYPE,
    COMPRESSION_ZSTD_TYPE,
)

Buffer = bytes | bytearray | memoryview


def body_crc(body: Buffer) -> int:
    """BODYCRC of a stored body: CRC-32 (zlib/IEEE) masked with 0x7FFFFFFF (docs/protocol.md §1.6, UtilAll.crc32)."""
    return zlib.crc32(body) & BODYCRC_MASK


def compression_type_name(sys_flag: int) -> str:
    """Name of the body compression of a COMPRESSED record: ZLIB (types 0 and 3), LZ4 or ZSTD (docs/protocol.md §1.4).

    Types 4..7 are ``UNKNOWN(n)``: the 4.9.8 client's CompressionType has no such value.
    """
    value = (sys_flag & COMPRESSION_TYPE_COMPARATOR) >> 8
    return _COMPRESSION_NAMES[value]


_COMPRESSION_NAMES = ("ZLIB", "LZ4", "ZSTD", "ZLIB", "UNKNOWN(4)", "UNKNOWN(5)", "UNKNOWN(6)", "UNKNOWN(7)")


def check_body_crc(body: Buffer, stored_crc: int) -> None:
    """Raise BodyDecodeError (field BODYCRC) unless ``stored_crc`` is the BODYCRC of the stored ``body``.

    BODYCRC is the CRC-32 (zlib/IEEE) of the body bytes as stored, i.e. after the client compressed
    them, masked to 31 bits (docs/source.md, "BODYCRC"); ``stored_crc`` is the field as a signed int32.
    """
    computed = body_crc(body)
    if computed != stored_crc:
        raise BodyDecodeError("BODYCRC", f"mismatch: stored 0x{stored_crc & 0xFFFFFFFF:08X}, computed "
                              f"0x{computed:08X} over the {len(body)} stored body bytes")


def body_too_large(kind: str, max_bytes: int) -> BodyTooLargeError:
    """The BodyTooLargeError (field BODY) of a ``kind`` (ZLIB, LZ4, ZSTD) body decompressing past ``max_bytes``."""
    return BodyTooLargeError(kind, max_bytes)


def _inflate_zlib(body: Buffer, max_bytes: int | None, zlib_module=zlib) -> bytes:
    if max_bytes is None:
        try:
            return zlib_module.decompress(body)
        except zlib_module.error as exc:
            raise BodyDecodeError("BODY", f"ZLIB body does not inflate ({exc})") from None
    inflater = zlib_module.decompressobj()
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib_module.error as exc:
        raise BodyDecodeError("BODY", f"ZLIB body does not inflate ({exc})") from None
    if len(out) > max_bytes:
        raise body_too_large("ZLIB", max_bytes)
    if not inflater.eof:
        raise BodyDecodeError("BODY", "ZLIB body does not inflate (incomplete or truncated stream)")
    return out


def _decompress_lz4(body: Buffer, max_bytes: int | None) -> bytes:
    import lz4.frame

    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        out = decompressor.decompress(bytes(body), max_length=-1 if max_bytes is None else max_bytes + 1)
    except RuntimeError as exc:
        raise BodyDecodeError("BODY", f"LZ4 body is not an LZ4 frame ({exc})") from None
    if max_bytes is not None and len(out) > max_bytes:
        raise body_too_large("LZ4", max_bytes)
    if not decompressor.eof:
        raise BodyDecodeError("BODY", "LZ4 body is not an LZ4 frame (incomplete or truncated frame)")
    return out


def _decompress_zstd(body: Buffer, max_bytes: int | None) -> bytes:
    import zstandard

    data = bytes(body)
    dctx = zstandard.ZstdDecompressor()
    try:
        if max_bytes is not None:  # bounded first: a reader never holds more than it was asked for
            with dctx.stream_reader(data, read_across_frames=False) as reader:
                if len(reader.read(max_bytes + 1)) > max_bytes:
                    raise body_too_large("ZSTD", max_bytes)
        decompressor = dctx.decompressobj()
        out = decompressor.decompress(data)
    except zstandard.ZstdError as exc:
        raise BodyDecodeError("BODY", f"ZSTD body is not a zstd frame ({exc})") from None
    if not decompressor.eof:
        raise BodyDecodeError("BODY", "ZSTD body is not a zstd frame (incomplete or truncated frame)")
    return out


def inflate_body(body: Buffer, sys_flag: int, *, max_bytes: int | None = None, zlib_module=zlib) -> bytes:
    """The body as the producer sent it: decompressed when ``sys_flag & COMPRESSED_FLAG`` is set.

    The compression type is SYSFLAG bits 8..10 (docs/source.md, "Compressed bodies"): ZLIB (0 from
    producers before 4.9.4, or 3) is a zlib stream; LZ4 (1) one LZ4 frame; ZSTD (2) one zstd frame.
    Bytes after the end of the stream or frame are ignored.

    Args:
        body: the stored body bytes.
        sys_flag: the record's SYSFLAG.
        max_bytes: refuse bodies decompressing to more than this many bytes (None: no bound); the
            decompressor never produces more than ``max_bytes + 1`` bytes, so a zip bomb cannot grow memory.
        zlib_module: the zlib implementation (``zlib`` or the faster ``zlib_ng.zlib_ng``, same API).

    Raises BodyDecodeError (field BODY) for a body that does not decompress, an unknown compression
    type, or one past ``max_bytes``.
    """
    if not sys_flag & COMPRESSED_FLAG:
        return bytes(body)
    kind = _COMPRESSION_NAMES[(sys_flag & COMPRESSION_TYPE_COMPARATOR) >> 8]
    if kind == "ZLIB":
        return _inflate_zlib(body, max_bytes, zlib_module)
    if kind == "LZ4":
        return _decompress_lz4(body, max_bytes)
    if kind == "ZSTD":
        return _decompress_zstd(body, max_bytes)
    raise BodyDecodeError("BODY", f"unknown compression type {kind} (sysFlag 0x{sys_flag & 0xFFFFFFFF:X})")


def compress_body(body: bytes, compression: str = "ZLIB", level: int = 5) -> tuple[bytes, int]:
    """``(stored bytes, SYSFLAG bits)`` of ``body`` compressed as the 4.9.8 client does (docs/source.md,
    "Compressed bodies"): COMPRESSED_FLAG plus the type bits; ZLIB a zlib stream at ``level``, LZ4 one
    LZ4 frame (4 MiB blocks, independent, no checksums, no content size), ZSTD one zstd frame at
    ``level`` (no content size, no checksum). Raises ValueError for another ``compression``."""
    kind = compression.upper()
    if kind == "ZLIB":
        return zlib.compress(body, level), COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE
    if kind == "LZ4":
        import lz4.frame

        # the streaming compressor keeps the 4 MiB block size in the header (one-shot compress() shrinks it)
        compressor = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                                                  content_checksum=False, auto_flush=False)
        return (compressor.begin() + compressor.compress(body) + compressor.flush(),
                COMPRESSED_FLAG | COMPRESSION_LZ4_TYPE)
    if kind == "ZSTD":
        import zstandard

        compressor = zstandard.ZstdCompressor(level=level, write_content_size=False).compressobj()
        return compressor.compress(body) + compressor.flush(), COMPRESSED_FLAG | COMPRESSION_ZSTD_TYPE
    raise ValueError(f"compression {compression!r} is not ZLIB, LZ4 or ZSTD")


def decompress_body(body: Buffer, sys_flag: int, *, offset: int = -1, file: str | None = None,
                    max_bytes: int | None = None) -> bytes:
    """:func:`inflate_body`, raising CommitLogFormatError (field BODY, offset and file named) instead."""
    try:
        return inflate_body(body, sys_flag, max_bytes=max_bytes)
    except BodyDecodeError as exc:
        raise CommitLogFormatError(exc.reason, offset=offset, field=exc.field, file=file) from None
