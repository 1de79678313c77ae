"""Every fixed field of a batch of records, and where its variable-length fields lie (vectorised).

:func:`locate` is the NumPy implementation, the reference of the native kernel's ``locate_records``
(``connector/decode/_decode_locate.c``, through :meth:`connector.decode.native_kernels.NativeKernels.locate`), which
fills the same :class:`Located` and applies the same checks (:data:`CHECKS`) in one pass in C.

Positions and widths come from the one layout table, :data:`connector.protocol.commitlog.RECORD_FIELDS`
(docs/protocol.md §1.2). With IPv4 hosts (the common case) the fixed header of all records is gathered in one copy
through a view with a one-byte stride and read as a NumPy structured array (:data:`V4_HEADER`); records
with an IPv6 host are read with per-field big-endian gathers whose positions follow the host widths.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from connector.decode.arrays import gather_be
from connector.decode.record_error import record_error
from connector.protocol.commitlog import (
    BORNHOST_V6_FLAG,
    HOST_V4_BYTES,
    HOST_V6_BYTES,
    MAGICCODE_POSITION,
    MESSAGE_MAGIC_CODE_V2,
    RECORD_FIELDS,
    STOREHOSTADDRESS_V6_FLAG,
    V4_HEADER_BYTES,
    V4_POSITIONS,
)

#: The fields before the variable-length values (TOTALSIZE .. BODY's length prefix) in stored order.
_FIXED_FIELDS = tuple(f for f in RECORD_FIELDS if V4_POSITIONS[f.name] < V4_HEADER_BYTES)
#: The three length prefixes (BODY int, TOPIC byte, PROPERTIES short): bytes a record needs past its hosts.
_PREFIX_BYTES = sum(f.width for f in RECORD_FIELDS if f.variable)


def _dtype(field) -> str:
    """Big-endian NumPy type of a fixed field: a host (IPv4 + port) as one uint64, else a signed int."""
    return ">u8" if field.v6_flag else f">i{field.width}"


#: The fixed header of a record with IPv4 born and store hosts as a NumPy structured type (field names
#: as in the layout table, e.g. ``TOTALSIZE``, ``BORNHOST``; ``BODY`` is the body's length prefix).
V4_HEADER = np.dtype({
    "names": [f.name for f in _FIXED_FIELDS],
    "formats": [_dtype(f) for f in _FIXED_FIELDS],
    "offsets": [V4_POSITIONS[f.name] for f in _FIXED_FIELDS],
    "itemsize": V4_HEADER_BYTES,
})

#: Located attribute ← layout field, for the fixed fields every path reads the same way.
_ATTRIBUTES = (("crc", "BODYCRC"), ("queue_id", "QUEUEID"), ("flag", "FLAG"), ("queue_offset", "QUEUEOFFSET"),
               ("born_ts", "BORNTIMESTAMP"), ("store_ts", "STORETIMESTAMP"), ("recon", "RECONSUMETIMES"),
               ("prepared", "PREPAREDTRANSACTIONOFFSET"))


#: The consistency checks of a batch's records, in the order they are applied: the field named in the error,
#: and what is wrong. The first check that some record fails raises, at the first record failing it.
CHECKS = {
    "TOTALSIZE": "TOTALSIZE is too small for the record's hosts",
    "PHYSICALOFFSET": "PHYSICALOFFSET field does not equal the record's offset",
    "BODY": "BODY length does not fit in TOTALSIZE",
    "TOPIC": "TOPIC length does not fit in TOTALSIZE",
    "PROPERTIES": "PROPERTIES length disagrees with TOTALSIZE",
}
#: Located attributes that hold 4-byte fields (int32); the other fields and every position and length are int64.
_INT32_ATTRIBUTES = frozenset({"crc", "queue_id", "flag", "sys_flag", "recon"})


class Located:
    """Per-record fields and positions of a batch (NumPy arrays, one entry per record).

    ``s``: record starts in the batch's bytes; ``offsets``: their CommitLog offsets; ``total``..``prepared``:
    the fixed fields; ``*_pos`` / ``*_len``: positions in the batch's bytes and lengths (bytes) of the
    hosts, body, topic and properties; ``born_v6`` / ``store_v6``: host kinds; ``born_packed`` /
    ``store_packed``: IPv4 hosts as ``ip << 32 | port`` (None when a record of the batch has an IPv6 host).
    """

    __slots__ = ("s", "offsets", "total", "crc", "queue_id", "flag", "queue_offset", "sys_flag", "born_ts",
                 "store_ts", "recon", "prepared", "born_host_pos", "store_host_pos", "born_v6", "store_v6",
                 "body_pos", "body_len", "topic_pos", "topic_len", "props_pos", "props_len", "born_packed",
                 "store_packed")

    @classmethod
    def from_rows(cls, rows: dict[str, np.ndarray], starts: np.ndarray, base_offset: int) -> Located:
        """The records at ``starts`` (int64) from int64 ``rows`` named as this class's attributes (every
        fixed field, position and length; ``born_packed`` / ``store_packed`` with any value for an IPv6
        host), as the native kernel's ``locate_records`` fills them."""
        loc = cls()
        loc.s = starts
        loc.offsets = base_offset + starts
        for name, row in rows.items():
            setattr(loc, name, row.astype(np.int32) if name in _INT32_ATTRIBUTES else row)
        loc.born_v6 = (loc.sys_flag & BORNHOST_V6_FLAG) != 0
        loc.store_v6 = (loc.sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0
        v4 = len(starts) and not loc.born_v6.any() and not loc.store_v6.any()  # as locate(): None for no record
        loc.born_packed = rows["born_packed"].view(np.uint64) if v4 else None
        loc.store_packed = rows["store_packed"].view(np.uint64) if v4 else None
        return loc

    def take(self, index: np.ndarray) -> None:
        """Keep only the records at ``index`` (in place)."""
        for name in self.__slots__:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value[index])


def locate(u8: np.ndarray, starts: np.ndarray, base_offset: int, mapped_file_size: int) -> Located:
    """Read every fixed field and find every variable-width field of the records at ``starts``.

    ``u8`` holds the records (``u8[0]`` at CommitLog offset ``base_offset``); ``starts`` are record
    starts in it. Raises CommitLogFormatError (offset and field named) when a length field disagrees
    with TOTALSIZE or PHYSICALOFFSET is not the record's offset.
    """
    loc = Located()
    s = starts.astype(np.int64)
    loc.s = s
    loc.offsets = offsets = base_offset + s
    sys_flag = gather_be(u8, s + V4_POSITIONS["SYSFLAG"], 4, ">i4")
    loc.sys_flag = sys_flag
    loc.born_v6 = (sys_flag & BORNHOST_V6_FLAG) != 0
    loc.store_v6 = (sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0
    if len(s) and not loc.born_v6.any() and not loc.store_v6.any():
        physical, body_len_pos = _read_v4(u8, loc)
    else:
        physical, body_len_pos = _read_any_hosts(u8, loc, mapped_file_size)
    _check(physical != offsets, offsets, "PHYSICALOFFSET", mapped_file_size)
    _find_variable(u8, loc, body_len_pos, mapped_file_size)
    return loc


def _read_v4(u8: np.ndarray, loc: Located) -> tuple[np.ndarray, np.ndarray]:
    """Fixed fields of records that all have IPv4 hosts, in one structured gather; returns PHYSICALOFFSET
    and the positions of BODY's length prefix."""
    s = loc.s
    head = sliding_window_view(u8, V4_HEADER_BYTES)[s].view(V4_HEADER).reshape(len(s))
    loc.total = head["TOTALSIZE"].astype(np.int64)
    for attr, name in _ATTRIBUTES:
        setattr(loc, attr, head[name].astype(np.int64 if V4_HEADER[name].itemsize == 8 else np.int32))
    loc.born_packed = head["BORNHOST"].astype(np.uint64)
    loc.store_packed = head["STOREHOSTADDRESS"].astype(np.uint64)
    loc.born_host_pos = s + V4_POSITIONS["BORNHOST"]
    loc.store_host_pos = s + V4_POSITIONS["STOREHOSTADDRESS"]
    return head["PHYSICALOFFSET"].astype(np.int64), s + V4_POSITIONS["BODY"]


def _read_any_hosts(u8: np.ndarray, loc: Located, mapped_file_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed fields of records with IPv4 or IPv6 hosts, field by field; positions past a host follow its
    width. Returns PHYSICALOFFSET and the positions of BODY's length prefix."""
    s = loc.s
    kinds = {BORNHOST_V6_FLAG: loc.born_v6, STOREHOSTADDRESS_V6_FLAG: loc.store_v6}
    pos = {}
    at = s
    for f in _FIXED_FIELDS:
        pos[f.name] = at
        at = at + (np.where(kinds[f.v6_flag], HOST_V6_BYTES, HOST_V4_BYTES) if f.v6_flag else f.width)
    loc.total = gather_be(u8, s, 4, ">i4").astype(np.int64)
    _check(pos["BODY"] + _PREFIX_BYTES > s + loc.total, loc.offsets, "TOTALSIZE", mapped_file_size)
    widths = {f.name: f.width for f in _FIXED_FIELDS}
    for attr, name in _ATTRIBUTES:
        width = widths[name]
        setattr(loc, attr, gather_be(u8, pos[name], width, f">i{width}"))
    loc.born_host_pos = pos["BORNHOST"]
    loc.store_host_pos = pos["STOREHOSTADDRESS"]
    loc.born_packed = loc.store_packed = None
    return gather_be(u8, pos["PHYSICALOFFSET"], 8, ">i8"), pos["BODY"]


def _find_variable(u8: np.ndarray, loc: Located, body_len_pos: np.ndarray, mapped_file_size: int) -> None:
    """Body, topic and properties positions and lengths from their length prefixes; each must fit in
    TOTALSIZE and PROPERTIES must end exactly at the record's end. A V2 record (MESSAGE_MAGIC_CODE_V2,
    docs/protocol.md §8) has a 2-byte TOPIC length prefix, a V1 record a 1-byte one."""
    offsets = loc.offsets
    rec_end = loc.s + loc.total
    body_len = gather_be(u8, body_len_pos, 4, ">i4").astype(np.int64)
    loc.body_pos = body_len_pos + 4
    loc.body_len = body_len
    topic_len_pos = loc.body_pos + body_len
    v2 = gather_be(u8, loc.s + MAGICCODE_POSITION, 4, ">i4") == MESSAGE_MAGIC_CODE_V2
    prefix = np.where(v2, 2, 1) if v2.any() else 1
    _check((body_len < 0) | (topic_len_pos + prefix + 2 > rec_end), offsets, "BODY", mapped_file_size)
    loc.topic_len = u8[topic_len_pos].view(np.int8).astype(np.int64)
    if v2.any():
        short = ((u8[topic_len_pos[v2]].astype(np.int64) << 8) | u8[topic_len_pos[v2] + 1]).astype(np.int16)
        loc.topic_len[v2] = short.astype(np.int64)
    loc.topic_pos = topic_len_pos + prefix
    props_len_pos = loc.topic_pos + loc.topic_len
    _check((loc.topic_len < 0) | (props_len_pos + 2 > rec_end), offsets, "TOPIC", mapped_file_size)
    loc.props_len = ((u8[props_len_pos].astype(np.int64) << 8) | u8[props_len_pos + 1]).astype(np.int16).astype(
        np.int64)
    loc.props_pos = props_len_pos + 2
    _check((loc.props_len < 0) | (loc.props_pos + loc.props_len != rec_end), offsets, "PROPERTIES",
           mapped_file_size)


def _check(bad: np.ndarray, offsets: np.ndarray, field: str, mapped_file_size: int) -> None:
    """Raise :func:`check_failed` for the first record where ``bad`` is true."""
    if bad.any():
        raise check_failed(field, int(offsets[int(np.flatnonzero(bad)[0])]), mapped_file_size)


def check_failed(field: str, offset: int, mapped_file_size: int) -> Exception:
    """The CommitLogFormatError of the :data:`CHECKS` entry ``field`` for the record at CommitLog ``offset``."""
    return record_error(CHECKS[field], offset, field, mapped_file_size)
