"""Fuzzing the remoting JSON header decoder: every bad header is a RemotingProtocolError naming the
field, never a RecursionError, OverflowError or any other exception (docs/broker_stub.md "Remoting")."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import RemotingProtocolError
from connector.protocol.remoting import SERIALIZE_TYPE_JSON, FrameDecoder, decode_frame

FIELDS = ("code", "opaque", "flag", "version", "language", "remark", "extFields", "serializeTypeCurrentRPC")


def _frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (SERIALIZE_TYPE_JSON << 24) | len(header)) + header + body


def _decode_or_named_error(header: bytes) -> None:
    try:
        decoded = decode_frame(_frame(header))
    except RemotingProtocolError as exc:
        assert "JSON header" in str(exc)
        return
    assert decoded is not None
    cmd, _ = decoded
    for value in (cmd.code, cmd.opaque, cmd.flag, cmd.version):
        assert isinstance(value, int) and -2**31 <= value < 2**31
    assert cmd.remark is None or isinstance(cmd.remark, str)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cmd.ext_fields.items())


@pytest.mark.parametrize("text, field", [
    ('{"code":10,"opaque":1e400}', "opaque"),
    ('{"code":10,"opaque":-1e400}', "opaque"),
    ('{"code":10,"opaque":NaN}', "'opaque' is nan"),
    ('{"code":10,"flag":Infinity}', "'flag' is inf"),
    ('{"code":10,"version":-Infinity}', "'version' is -inf"),
    ('{"code":1e400}', "code"),
    ('{"code":10,"opaque":4294967296}', "opaque"),
    ('{"code":10,"opaque":1.5}', "opaque"),
    ('{"code":true}', "code"),
    ('{"code":10,"remark":[1]}', "remark"),
    ('{"code":10,"extFields":{"a":{"b":1}}}', "extFields"),
    ('{"code":10,"extFields":{"a":NaN}}', "extFields"),
    ('{"code":10,"opaque":' + "9" * 5000 + "}", "5000-digit"),
])
def test_non_finite_and_out_of_range_numbers_are_named_errors(text, field):
    with pytest.raises(RemotingProtocolError, match=field):
        decode_frame(_frame(text.encode()))


@pytest.mark.parametrize("depth", [100, 3000, 200_000])
@pytest.mark.parametrize("opener", ["[", "{\"a\":"])
def test_deep_nesting_is_a_named_error(depth, opener):
    header = ('{"code":10,"extFields":' + opener * depth).encode()
    with pytest.raises(RemotingProtocolError, match="JSON header"):
        decode_frame(_frame(header))


def test_deep_nesting_in_a_complete_document_is_a_named_error():
    header = ('{"code":10,"remark":' + "[" * 50_000 + "]" * 50_000 + "}").encode()
    with pytest.raises(RemotingProtocolError, match="JSON header"):
        decode_frame(_frame(header))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({"code": st.integers(-2**40, 2**40) | json_values},
                             optional={f: json_values for f in FIELDS[1:]}))
def test_any_json_object_decodes_or_is_a_named_error(obj):
    _decode_or_named_error(json.dumps(obj).encode())  # json.dumps writes NaN/Infinity as Python does


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(['{', '}', '[', ']', '"code"', ':', ',', '1e400', 'NaN', '-Infinity', '10',
                                 '"opaque"', '"extFields"', '"x"', 'null', 'true', '1.5', '\\u0000', '"']),
                max_size=60).map("".join))
def test_token_soup_decodes_or_is_a_named_error(text):
    _decode_or_named_error(text.encode())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_raw_header_bytes_decode_or_are_a_named_error(raw):
    try:
        FrameDecoder().feed(_frame(raw))
    except RemotingProtocolError:
        pass
