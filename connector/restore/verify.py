"""Checking a RocketMQ store against a bronze table: the first record that differs (docs/restore.md "The command
and the library call").
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from connector.errors import CommitLogFormatError, RestoreError
from connector.protocol.commitlog import BlankRecord, MessageRecord, iter_records
from connector.protocol.commitlog.layout import MESSAGE_MAGIC_CODE_V2, field_positions
from connector.protocol.mapped_files import is_file_name
from connector.restore.encode import RECORD_COLUMNS, iter_encoded
from connector.restore.plan import broker_filter, check_restore_columns
from connector.restore.store import commitlog_dir

_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class StoreDifference:
    """Where a store first differs from the table: the CommitLog ``offset`` of the record (or byte), its ``file``,
    the record ``field`` (RocketMQ's name; None for bytes outside a record) and what differs."""

    offset: int
    file: str
    field: str | None
    reason: str

    def __str__(self) -> str:
        where = f"CommitLog offset {self.offset} (file {self.file}" + (f", field {self.field})" if self.field else ")")
        return f"{self.reason} at {where}"


def field_at(record: bytes, pos: int) -> str:
    """The name of the field of the encoded ``record`` that byte ``pos`` belongs to (docs/protocol.md §1.2)."""
    sys_flag = _I32.unpack_from(record, field_positions(0)["SYSFLAG"])[0]
    at = dict(field_positions(sys_flag))
    body_len = _I32.unpack_from(record, at["BODY"])[0]
    topic = at["BODY"] + 4 + body_len
    v2 = _I32.unpack_from(record, 4)[0] == MESSAGE_MAGIC_CODE_V2
    topic_len = struct.unpack_from(">h" if v2 else ">b", record, topic)[0]
    at["TOPIC"] = topic
    at["PROPERTIES"] = topic + (2 if v2 else 1) + topic_len
    name = "TOTALSIZE"
    for field, start in sorted(at.items(), key=lambda kv: kv[1]):
        if start <= pos:
            name = field
    return name


def _table_records(table_uri: str, broker: str, start: int, end: int) -> dict[int, bytes]:
    from pyarrow import compute as pc

    from connector.delta.reading import read_table

    rows = read_table(table_uri, columns=list(RECORD_COLUMNS), filters=broker_filter(broker)
                      & (pc.field("commitLogOffset") >= start) & (pc.field("commitLogOffset") < end))
    return dict(iter_encoded(rows.sort_by("commitLogOffset"), broker=broker))


def verify_store(table_uri: str, broker: str, store_dir: str | os.PathLike) -> StoreDifference | None:
    """Compare every CommitLog file of ``STORE_DIR/commitlog`` with what the table holds of ``broker``: each record
    of the store must be the table's record at its offset, byte for byte; the bytes after a file's last record (or
    its END_FILE blank header) zeros; a record the table holds inside a file's records is missing from the store
    unless the file is the store's last (the table may be ahead of a store). Returns the first difference, or None.

    Raises:
        RestoreError: the folder holds no CommitLog file, or the table lacks the restore columns.
    """
    check_restore_columns(table_uri)
    folder = commitlog_dir(store_dir)
    names = sorted(n for n in os.listdir(folder) if is_file_name(n)) if folder.is_dir() else []
    if not names:
        raise RestoreError(f"{folder} holds no CommitLog file")
    for k, name in enumerate(names):
        data = (folder / name).read_bytes()
        start = int(name)
        expected = _table_records(table_uri, broker, start, start + len(data))
        pos = 0
        try:
            for rec in iter_records(data, base_offset=start, file=name):
                offset = rec.commit_log_offset
                if isinstance(rec, MessageRecord):
                    mine = bytes(data[offset - start:offset - start + rec.store_size])
                    theirs = expected.pop(offset, None)
                    if theirs is None:
                        return StoreDifference(offset, name, None, "the table has no record here (the store has a "
                                               f"{rec.store_size}-byte record of topic {rec.topic})")
                    if mine != theirs:
                        i = next((j for j in range(min(len(mine), len(theirs))) if mine[j] != theirs[j]),
                                 min(len(mine), len(theirs)))
                        return StoreDifference(offset, name, field_at(theirs, min(i, len(theirs) - 1)),
                                               f"the store's record differs from the table's at its byte {i}")
                    pos = offset - start + rec.store_size
                elif isinstance(rec, BlankRecord):
                    pos = offset - start + 8
                else:
                    pos = offset - start
        except CommitLogFormatError as exc:
            return StoreDifference(exc.offset, name, exc.field, f"the store's bytes are no record: {exc}")
        tail = data[pos:]
        if tail.strip(b"\x00"):
            first = pos + next(j for j, b in enumerate(tail) if b)
            return StoreDifference(start + first, name, None, "a byte after the file's last record is not zero")
        inside = sorted(o for o in expected if o < start + pos)
        if inside or (expected and k < len(names) - 1):
            lost = inside[0] if inside else min(expected)
            return StoreDifference(lost, name, None, "the store lacks the table's record here")
    return None
