"""The restore columns of PROPERTIES of every shape (docs/restore.md "The columns bronze keeps"): storedProperties is
null exactly when the decoded pairs re-encode to the stored bytes (with recordFormat's trailing-separator bit for
one more ``\\x02``), and each record re-encodes byte for byte from its row, with both decode kernels."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.decode.columns import iter_record_batches
from connector.decode.schema import ALL_ARROW_SCHEMA, RECORD_FORMAT_TRAILING_SEPARATOR
from connector.protocol.commitlog import encode_record
from connector.restore.encode import encode_batch, encode_rows
from tests.support.decoding import use_decode_kernels

SHAPES = [
    b"", b"\x02", b"\x02\x02", b"a\x01b", b"a\x01b\x02", b"a\x01b\x02\x02", b"\x02a\x01b", b"a\x01b\x02\x02c\x01d",
    b"a\x01x\x02a\x01y", b"a\x01x\x02b\x01y\x02a\x01z", b"a\x01b\x02c", b"\x01b", b"a\x01", b"a\x01b\x01c",
    # a value replaced by U+FFFD (+2 bytes), a 1-byte segment dropped
    b"a\x01\xff\xfe", b"a\x01b\x02\xff", b"a\x01\xff\x02Z",
    "a\x01\ufffd".encode(), "\ufffd\x01v\x02".encode(), "k\x01\u00e9t\u00e9\x02x\x01\U0001f600".encode(),
    b"TAGS\x01t\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",
]


def _records(properties: list[bytes]) -> tuple[bytes, list[bytes]]:
    records, offset = [], 0
    for i, props in enumerate(properties):
        records.append(encode_record(commit_log_offset=offset, topic="T", body=b"body%d" % i, queue_offset=i,
                                     store_timestamp=1_790_000_000_000, born_timestamp=1_790_000_000_000,
                                     properties=props))
        offset += len(records[-1])
    return b"".join(records), records


def _check(properties: list[bytes]) -> None:
    data, records = _records(properties)
    starts = np.cumsum([0, *map(len, records[:-1])]).astype(np.int64)
    batches = list(iter_record_batches(data, starts, 0, broker="b", mapped_file_size=1 << 30,
                                       columns=ALL_ARROW_SCHEMA.names))
    table = pa.Table.from_batches(batches)
    stored = table.column("storedProperties").to_pylist()
    formats = table.column("recordFormat").to_pylist()
    for props, kept, fmt, pairs in zip(properties, stored, formats, table.column("properties").to_pylist(),
                                       strict=True):
        rejoined = "\x02".join(f"{k}\x01{v}" for k, v in pairs).encode()
        trailing = fmt & RECORD_FORMAT_TRAILING_SEPARATOR
        if props == rejoined:
            assert (kept, trailing) == (None, 0), props
        elif props == rejoined + b"\x02":
            assert (kept, trailing) == (None, RECORD_FORMAT_TRAILING_SEPARATOR), props
        else:
            assert (kept, trailing) == (props, 0), props
    for batch in batches:
        assert encode_rows(batch, broker="b") == bytes(encode_batch(batch, broker="b"))
    assert b"".join(encode_rows(batch, broker="b") for batch in batches) == data


@pytest.mark.parametrize("kernel", ["native", "numpy"])
def test_every_properties_shape_gets_the_restore_columns_that_give_its_bytes_back(monkeypatch, kernel):
    use_decode_kernels(monkeypatch, kernel)
    for shape in SHAPES:
        _check([shape])
    _check(SHAPES)


_PIECES = st.sampled_from([b"a", b"bc", b"\x01", b"\x02", b"\xff", b"\xef\xbf\xbd", b"\xc3\xa9", b"\xe2"])


@pytest.mark.parametrize("kernel", ["native", "numpy"])
def test_random_properties_get_the_restore_columns_that_give_their_bytes_back(monkeypatch, kernel):
    use_decode_kernels(monkeypatch, kernel)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.lists(_PIECES, max_size=12).map(b"".join), min_size=1, max_size=8))
    def check(properties):
        _check(properties)

    check()
