"""Bronze rows back to CommitLog records, byte for byte (docs/restore.md "Exactness").

Each row's record is re-encoded with :func:`connector.protocol.commitlog.encode_record` from the default columns
and the restore columns (:data:`connector.decode.schema.RESTORE_COLUMNS`); the result must have the row's
``storeSize``, else the row is refused.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from connector.decode.schema import RECORD_FORMAT_TRAILING_SEPARATOR, RECORD_FORMAT_V2
from connector.errors import RestoreError
from connector.protocol.commitlog import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    HostAddress,
    encode_record,
)

#: The columns a row's record is rebuilt from, in the table's names.
RECORD_COLUMNS = ("commitLogOffset", "storeSize", "bodyCRC", "queueId", "flag", "queueOffset", "sysFlag",
                  "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
                  "preparedTransactionOffset", "topic", "properties", "body", "storedBody", "storedProperties",
                  "recordFormat")
_TIMESTAMPS = ("bornTimestamp", "storeTimestamp")


def _host(text: str) -> HostAddress:
    """A ``bornHost``/``storeHost`` value back to its stored bytes: ``ip:port`` or ``[ipv6]:port`` with the port
    as stored (any Java int, 0 and negative ones included, docs/protocol.md §1.8). Raises ValueError."""
    ip, _, port = text.rpartition(":")
    return HostAddress(ipaddress.ip_address(ip.strip("[]")).packed, int(port))


def _properties_bytes(pairs: list[tuple[str, str]], trailing: bool) -> bytes:
    """PROPERTIES re-encoded from the map's pairs in stored order (docs/protocol.md §1.5)."""
    text = PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in pairs)
    if trailing:
        text += PROPERTY_SEPARATOR
    return text.encode("utf-8")


def iter_encoded(table: pa.Table, *, broker: str) -> Iterator[tuple[int, bytes]]:
    """``(commitLogOffset, record bytes)`` of every row of ``table`` (the :data:`RECORD_COLUMNS`), in row order.

    The body is ``storedBody`` when set, else ``body``; the properties ``storedProperties`` when set, else the map
    re-encoded (recordFormat bit RECORD_FORMAT_TRAILING_SEPARATOR adds the trailing ``\\x02``); MAGICCODE is
    MESSAGE_MAGIC_CODE_V2 under bit RECORD_FORMAT_V2; BODYCRC is the row's, as stored.

    Raises:
        RestoreError: a row whose recordFormat is null (landed before the restore columns existed) or whose
            re-encoded record is not ``storeSize`` bytes (broker and offset named).
    """
    cols = {}
    for name in RECORD_COLUMNS:
        column = table.column(name)
        if name in _TIMESTAMPS:
            column = pc.divide(column.cast(pa.int64()), 1000)
        cols[name] = column.to_pylist()
    for i, offset in enumerate(cols["commitLogOffset"]):
        fmt = cols["recordFormat"][i]
        if fmt is None:
            raise RestoreError(f"broker {broker}: the row at CommitLog offset {offset} has no recordFormat (it was "
                               "landed before bronze kept the restore columns), so its exact bytes are unknown")
        body = cols["storedBody"][i]
        if body is None:
            body = cols["body"][i]
        props = cols["storedProperties"][i]
        if props is None:
            props = _properties_bytes(cols["properties"][i], bool(fmt & RECORD_FORMAT_TRAILING_SEPARATOR))
        try:
            record = encode_record(
                commit_log_offset=offset, topic=cols["topic"][i], body=body, queue_id=cols["queueId"][i],
                flag=cols["flag"][i], queue_offset=cols["queueOffset"][i], sys_flag=cols["sysFlag"][i],
                born_timestamp=cols["bornTimestamp"][i], born_host=_host(cols["bornHost"][i]),
                store_timestamp=cols["storeTimestamp"][i], store_host=_host(cols["storeHost"][i]),
                reconsume_times=cols["reconsumeTimes"][i],
                prepared_transaction_offset=cols["preparedTransactionOffset"][i], properties=props,
                body_crc_value=cols["bodyCRC"][i],
                magic=MESSAGE_MAGIC_CODE_V2 if fmt & RECORD_FORMAT_V2 else MESSAGE_MAGIC_CODE)
        except ValueError as exc:
            raise RestoreError(f"broker {broker}: the row at CommitLog offset {offset} cannot be re-encoded: "
                               f"{exc}") from exc
        if len(record) != cols["storeSize"][i]:
            raise RestoreError(f"broker {broker}: the row at CommitLog offset {offset} re-encodes to {len(record)} "
                               f"bytes, not its storeSize {cols['storeSize'][i]}")
        yield offset, record
