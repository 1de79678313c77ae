"""Remoting frames: JSON and ROCKETMQ headers, incremental decoding, malformed input (docs/protocol.md §4)."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import RemotingProtocolError
from connector.protocol.remoting import (
    SERIALIZE_TYPE_JSON,
    SERIALIZE_TYPE_ROCKETMQ,
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_frame,
    decode_kv_table,
    decode_properties_body,
    encode_kv_table,
    encode_properties_body,
)

ext = st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=20), max_size=6)


@settings(max_examples=200, deadline=None)
@given(code=st.integers(0, 32767), fields=ext, body=st.binary(max_size=100),
       stype=st.sampled_from([SERIALIZE_TYPE_JSON, SERIALIZE_TYPE_ROCKETMQ]), remark=st.none() | st.text(max_size=20))
def test_round_trip(code, fields, body, stype, remark):
    req = RemotingCommand.request(code, fields, body, serialize_type=stype)
    resp = req.response(ResponseCode.SUCCESS, fields, body, remark=remark)
    for cmd in (req, resp):
        got, used = decode_frame(cmd.encode())
        assert used == len(cmd.encode())
        assert (got.code, got.ext_fields, got.body, got.opaque, got.flag) == (cmd.code, cmd.ext_fields, body,
                                                                              cmd.opaque, cmd.flag)
        assert got.serialize_type == stype
    got = decode_frame(resp.encode())[0]
    assert got.is_response and (got.remark or None) == (remark or None)


def test_json_header_shape_is_what_java_clients_read():
    cmd = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {"k": 1, "b": True})
    raw = cmd.encode()
    length, ori = struct.unpack(">ii", raw[:8])
    assert length == len(raw) - 4 and ori >> 24 == 0
    header = json.loads(raw[8:8 + (ori & 0xFFFFFF)])
    assert header["code"] == 28 and header["language"] == "JAVA" and header["flag"] == 0
    assert header["extFields"] == {"k": "1", "b": "true"}


def test_incremental_decoder_and_oneway():
    frames = b"".join(RemotingCommand.request(c, oneway=(c == 3)).encode() for c in (1, 2, 3))
    dec = FrameDecoder()
    got = []
    for i in range(len(frames)):
        got += dec.feed(frames[i:i + 1])
    assert [c.code for c in got] == [1, 2, 3] and got[2].is_oneway


def test_malformed_frames_raise():
    with pytest.raises(RemotingProtocolError, match="outside"):
        decode_frame(struct.pack(">i", 16 * 1024 * 1024 + 1) + b"\0" * 8)
    with pytest.raises(RemotingProtocolError, match="header length"):
        decode_frame(struct.pack(">ii", 8, 100) + b"\0" * 4)
    with pytest.raises(RemotingProtocolError, match="serialize type"):
        decode_frame(struct.pack(">ii", 6, (7 << 24) | 2) + b"{}")
    with pytest.raises(RemotingProtocolError, match="JSON"):
        decode_frame(struct.pack(">ii", 7, 3) + b"{x}")
    assert decode_frame(b"\0\0") is None
    assert decode_frame(struct.pack(">i", 100) + b"\0" * 10) is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_decoder_never_crashes_on_garbage(data):
    dec = FrameDecoder(max_frame_bytes=1024)
    try:
        dec.feed(data)
    except RemotingProtocolError:
        pass


def test_kv_table_and_properties_bodies(fixture_dir):
    table = {"commitLogMaxOffset": "3402931", "commitLogMinOffset": "0"}
    assert decode_kv_table(encode_kv_table(table)) == table
    raw = (fixture_dir / "broker_config.properties").read_bytes()
    props = decode_properties_body(raw)
    assert props["mappedFileSizeCommitLog"] == "1048576" and props["brokerRole"] == "ASYNC_MASTER"
    assert decode_properties_body(encode_properties_body(props)) == props
    with pytest.raises(RemotingProtocolError):
        decode_kv_table(b"[]")
