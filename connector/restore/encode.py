"""Bronze rows back to CommitLog records, byte for byte (docs/restore.md "Exactness").

Each row's record is re-encoded from the default columns and the restore columns
(:data:`connector.decode.schema.RESTORE_COLUMNS`); the result must have the row's ``storeSize``, else the row is
refused. :func:`encode_batch` encodes a whole Arrow batch at once with the native kernel's ``encode_records``
(``connector/decode/_encode_records.c``) when it is built and in use (:mod:`connector.decode.kernels`); the reference,
and the path without it (``HAREPLICA_PURE_PYTHON=1``), is :func:`iter_encoded`, row by row with
:func:`connector.protocol.commitlog.encode_record`. Both give the same bytes; a row the kernel refuses is
re-encoded by the reference, which names what is wrong with it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.arrow_numpy import to_numpy
from connector.decode import kernels
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


#: The rows of the fixed-field matrix ``encode_records`` takes (``enum`` of connector/decode/_encode_records.c).
ENCODE_FIXED_ROWS = ("storeSize", "bodyCRC", "queueId", "flag", "queueOffset", "commitLogOffset", "sysFlag",
                     "bornTimestamp", "bornPort", "bornIpLength", "storeTimestamp", "storePort", "storeIpLength",
                     "reconsumeTimes", "preparedTransactionOffset", "recordFormat")
_INT32 = (-2 ** 31, 2 ** 31 - 1)
_NOT_NULL = ("commitLogOffset", "storeSize", "bodyCRC", "queueId", "flag", "queueOffset", "sysFlag", "bornTimestamp",
             "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes", "preparedTransactionOffset", "topic",
             "properties", "body", "recordFormat")


def _encoder():
    """The native ``encode_records`` when the native kernels are in use and it is built, else None."""
    if not kernels.native_kernel_available():
        return None
    return getattr(kernels.NATIVE.ext, "encode_records", None)


def encode_rows(batch: pa.RecordBatch | pa.Table, *, broker: str) -> bytes:
    """The records of every row of ``batch`` (the :data:`RECORD_COLUMNS`) one after the other, in row order, row
    by row (the reference of :func:`encode_batch`; raises as :func:`iter_encoded`)."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    return b"".join(record for _, record in iter_encoded(table, broker=broker))


def _valid(array: pa.Array) -> np.ndarray:
    """uint8 per value of ``array``: 1 where set, 0 where null."""
    n = len(array)
    if array.null_count == 0:
        return np.ones(n, dtype=np.uint8)
    bitmap = array.buffers()[0]
    if bitmap is None:
        return np.zeros(n, dtype=np.uint8)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return np.ascontiguousarray(bits[array.offset:array.offset + n])


def _binary(array: pa.Array) -> tuple[np.ndarray, pa.Buffer | bytes]:
    """(int64 offsets, n + 1 of them, absolute into the data; the data) of a binary or string ``array``."""
    if pa.types.is_binary_view(array.type) or pa.types.is_string_view(array.type):
        array = array.cast(pa.binary())
    large = pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)
    buffers = array.buffers()
    if buffers[1] is None:
        return np.zeros(len(array) + 1, dtype=np.int64), b""
    width = 8 if large else 4
    offsets = np.frombuffer(buffers[1], dtype=np.int64 if large else np.int32, count=len(array) + 1,
                            offset=array.offset * width)
    return offsets.astype(np.int64), buffers[2] if buffers[2] is not None else b""


def _hosts(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint8 (n, 16) address bytes, int64 address lengths 4 or 16, int64 ports) of a ``bornHost``/``storeHost``
    column, each distinct value parsed once by :func:`_host`. Raises ValueError as :func:`_host`, or for a port
    outside the Java int range."""
    encoded = pc.dictionary_encode(array)
    values = encoded.dictionary.to_pylist()
    ips = np.zeros((len(values), 16), dtype=np.uint8)
    lengths = np.zeros(len(values), dtype=np.int64)
    ports = np.zeros(len(values), dtype=np.int64)
    for k, text in enumerate(values):
        host = _host(text)
        if not _INT32[0] <= host.port <= _INT32[1]:
            raise ValueError(f"port {host.port} is no Java int")
        ips[k, :len(host.ip)] = np.frombuffer(host.ip, dtype=np.uint8)
        lengths[k], ports[k] = len(host.ip), host.port
    index = to_numpy(encoded.indices).astype(np.intp)
    return ips[index], lengths[index], ports[index]


def _millis(array: pa.Array) -> np.ndarray:
    """Epoch ms of a microsecond timestamp column (the value / 1000, truncated, as :func:`iter_encoded`)."""
    micros = to_numpy(array).astype(np.int64)
    return np.sign(micros) * (np.abs(micros) // 1000)


def encode_batch(batch: pa.RecordBatch, *, broker: str) -> bytes | bytearray:
    """The records of every row of ``batch`` (the :data:`RECORD_COLUMNS`) one after the other, in row order:
    ``sum(storeSize)`` bytes, the same as :func:`encode_rows` (the rules: :func:`iter_encoded`; the record layout:
    docs/protocol.md §1.2, RocketMQ 4.9.8 ``CommitLog.DefaultAppendMessageCallback``).

    Encoded by the native kernel in one call when it is in use; a batch with a null where the reference needs a
    value, a host the kernel cannot take, or a row the kernel refuses goes to :func:`encode_rows`.

    Raises:
        RestoreError: as :func:`iter_encoded` (a null recordFormat, a row that does not re-encode to its storeSize).
    """
    encode = _encoder()
    if encode is None or batch.num_rows == 0 or any(batch.column(c).null_count for c in _NOT_NULL):
        return encode_rows(batch, broker=broker)
    props = batch.column("properties")
    if props.values.field(1).null_count:  # a null property value: the reference decides what it writes
        return encode_rows(batch, broker=broker)
    try:
        born_ip, born_len, born_port = _hosts(batch.column("bornHost"))
        store_ip, store_len, store_port = _hosts(batch.column("storeHost"))
    except ValueError:
        return encode_rows(batch, broker=broker)  # raises, naming the row
    n = batch.num_rows
    fixed = np.empty((len(ENCODE_FIXED_ROWS), n), dtype=np.int64)
    derived = {"bornTimestamp": _millis(batch.column("bornTimestamp")),
               "storeTimestamp": _millis(batch.column("storeTimestamp")), "bornPort": born_port,
               "bornIpLength": born_len, "storePort": store_port, "storeIpLength": store_len}
    for k, name in enumerate(ENCODE_FIXED_ROWS):
        fixed[k] = derived[name] if name in derived else to_numpy(batch.column(name))
    sizes = fixed[0]
    out = bytearray(int(sizes.sum()))
    keys, values = props.values.field(0), props.values.field(1)
    count, bad = encode(out, fixed, np.stack((born_ip, store_ip)), *_binary(batch.column("topic")),
                        *_binary(batch.column("body")), *_binary(batch.column("storedBody")),
                        _valid(batch.column("storedBody")), *_binary(batch.column("storedProperties")),
                        _valid(batch.column("storedProperties")), to_numpy(props.offsets).astype(np.int64),
                        *_binary(keys), *_binary(values))
    if bad:
        encode_rows(batch.slice(count, 1), broker=broker)  # raises, naming the row
        raise RestoreError(f"broker {broker}: the row at CommitLog offset {int(fixed[5][count])} cannot be "
                           "re-encoded")
    return out


def encoded_runs(batch: pa.RecordBatch, *, broker: str) -> Iterator[tuple[int, memoryview]]:
    """``(commitLogOffset, bytes)`` of each run of rows of ``batch`` whose records follow each other in the
    CommitLog (a row starting where the one before it ends), encoded by :func:`encode_batch`: one run for a batch
    in offset order, more where the rows jump (offsets in bytes). Raises as :func:`encode_batch`."""
    data = memoryview(encode_batch(batch, broker=broker))
    offsets = to_numpy(batch.column("commitLogOffset")).astype(np.int64)
    sizes = to_numpy(batch.column("storeSize")).astype(np.int64)
    ends = np.cumsum(sizes)
    cuts = np.flatnonzero(offsets[1:] != offsets[:-1] + sizes[:-1]) + 1
    first = 0
    for cut in [*cuts.tolist(), len(offsets)]:
        lo = int(ends[first - 1]) if first else 0
        yield int(offsets[first]), data[lo:int(ends[cut - 1])]
        first = cut
