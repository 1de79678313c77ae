"""The native kernel's locate loop (``connector/decode/_decode_locate.c``) against its NumPy reference
(:func:`connector.decode.locate.locate`): the same fields and positions, the same checks and errors; the IPv4
host strings built from what it reads."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.decode import _decode_kernel as kernel
from connector.decode import kernels
from connector.decode.hosts import ipv4_hosts
from connector.decode.locate import CHECKS, Located
from connector.errors import CommitLogFormatError
from connector.protocol.commitlog import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, HostAddress, encode_record

MAPPED_FILE_SIZE = 1 << 30
_hosts = st.one_of(st.builds(HostAddress, st.binary(min_size=4, max_size=4), st.integers(0, 65535)),
                   st.builds(HostAddress, st.binary(min_size=16, max_size=16), st.integers(-2 ** 31, 2 ** 31 - 1)))


@st.composite
def _batch(draw) -> tuple[bytes, list[int], int]:
    """A few records with IPv4 or IPv6 hosts and V1 or V2 magic, at CommitLog offset ``base``."""
    base = draw(st.integers(0, 2 ** 40))
    data, starts = bytearray(), []
    for _ in range(draw(st.integers(1, 5))):
        starts.append(len(data))
        data += encode_record(
            commit_log_offset=base + len(data), topic=draw(st.text(alphabet="ab", max_size=20)),
            body=draw(st.binary(max_size=40)), queue_id=draw(st.integers(-2 ** 31, 2 ** 31 - 1)),
            flag=draw(st.integers(-2 ** 31, 2 ** 31 - 1)), queue_offset=draw(st.integers(-2 ** 63, 2 ** 63 - 1)),
            sys_flag=draw(st.integers(0, 0xFFF)), born_timestamp=draw(st.integers(-2 ** 63, 2 ** 63 - 1)),
            born_host=draw(_hosts), store_timestamp=draw(st.integers(0, 2 ** 45)), store_host=draw(_hosts),
            reconsume_times=draw(st.integers(-2 ** 31, 2 ** 31 - 1)),
            prepared_transaction_offset=draw(st.integers(-2 ** 63, 2 ** 63 - 1)),
            properties=draw(st.binary(max_size=30)),
            magic=draw(st.sampled_from([MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2])))
    return data, starts, base


def _located(name: str, data: bytes, starts: list[int], base: int) -> Located | str:
    """What kernels ``name`` locate: the Located, or the error's message."""
    try:
        return getattr(kernels, name).locate(np.frombuffer(data, np.uint8), np.array(starts, np.int64), base,
                                              MAPPED_FILE_SIZE)
    except CommitLogFormatError as exc:
        return str(exc)


def _same(native: Located | str, numpy: Located | str) -> None:
    if isinstance(numpy, str) or isinstance(native, str):
        assert native == numpy
        return
    for name in Located.__slots__:
        a, b = getattr(native, name), getattr(numpy, name)
        if b is None:
            assert a is None, name
        else:
            assert a.dtype == b.dtype and np.array_equal(a, b), name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=_batch(), cut=st.data())
def test_native_locate_equals_numpy_on_whole_and_corrupted_records(batch, cut):
    data, starts, base = batch
    _same(_located("NATIVE", data, starts, base), _located("NUMPY", data, starts, base))
    # one byte of a record changed, but not its TOTALSIZE (the walk checked it: records stay whole in the buffer)
    i = cut.draw(st.integers(0, len(starts) - 1))
    end = starts[i + 1] if i + 1 < len(starts) else len(data)
    bad = bytearray(data)
    bad[cut.draw(st.integers(starts[i] + 4, end - 1))] = cut.draw(st.integers(0, 255))
    _same(_located("NATIVE", bad, starts, base), _located("NUMPY", bad, starts, base))


def test_each_check_names_its_field_and_the_first_record_failing_it():
    recs = [encode_record(commit_log_offset=100 + 200 * i, topic="t", body=b"x" * (200 - 92)) for i in range(3)]
    assert {len(r) for r in recs} == {200}
    data = bytearray(b"".join(recs))
    data[400 + 84:400 + 88] = (10 ** 6).to_bytes(4, "big")  # record 2: BODY length past TOTALSIZE
    data[200 + 28:200 + 36] = (7).to_bytes(8, "big")  # record 1: PHYSICALOFFSET, a check made before BODY's
    for name in ("NATIVE", "NUMPY"):
        got = _located(name, bytes(data), [0, 200, 400], 100)
        assert got.startswith(CHECKS["PHYSICALOFFSET"]) and "offset 300" in got and "PHYSICALOFFSET" in got, got


def test_located_rows_and_checks_are_the_numpy_ones_and_bad_arguments_are_value_errors():
    assert set(kernel.LOCATED_ROWS) == set(Located.__slots__) - {"s", "offsets", "born_v6", "store_v6"}
    assert kernel.LOCATED_CHECKS == tuple(CHECKS)  # the same checks in the same order as the NumPy reference
    rec = encode_record(commit_log_offset=0, topic="t", body=b"")
    rows = np.empty((len(kernel.LOCATED_ROWS), 1), np.int64)
    with pytest.raises(ValueError, match=r"starts\[0\]: the record at 1 does not lie inside data"):
        kernel.locate_records(rec, np.array([1], np.int64), 0, rows)
    with pytest.raises(ValueError, match="not 20 rows of 2 int64 values"):
        kernel.locate_records(rec + rec, np.array([0, len(rec)], np.int64), 0, rows)
    assert kernel.locate_records(rec, np.array([0], np.int64), 0, rows) == (None, -1)
    _same(_located("NATIVE", rec, [], 0), _located("NUMPY", rec, [], 0))  # no record: empty fields, no hosts


@pytest.mark.parametrize("hosts", [
    [(b"\x0a\x00\x00\x01", 10911)] * 3,  # one host (a broker's storeHost): one string repeated
    [(b"\x0a\x00\x00\x01", 10911), (b"\xc0\xa8\x01\xfe", -2), (b"\x0a\x00\x00\x01", 10911)],  # distinct, Java ints
    [(b"\xff\xff\xff\xff", -1)],
])
def test_ipv4_hosts_format_each_host_as_the_scalar_codec_does(hosts):
    packed = np.array([int.from_bytes(ip, "big") << 32 | (port & 0xFFFFFFFF) for ip, port in hosts], np.uint64)
    got = ipv4_hosts(packed)
    assert got.type == pa.string()
    assert got.to_pylist() == [str(HostAddress(ip, port)) for ip, port in hosts]
    assert ipv4_hosts(packed[:0]).to_pylist() == []
