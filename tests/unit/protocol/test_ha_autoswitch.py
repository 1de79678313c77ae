"""AutoSwitch HA framing (docs/protocol.md §10): round trips, epoch rules, malformed frames named by field and byte."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import HAProtocolError
from connector.protocol.ha_autoswitch import (
    HANDSHAKE_HEADER_SIZE_BYTES,
    SLAVE_HANDSHAKE_SIZE_BYTES,
    SLAVE_REPORT_SIZE_BYTES,
    TRANSFER_HEADER_SIZE_BYTES,
    AutoSwitchFrameReader,
    EpochEntry,
    EpochHistory,
    HandshakeReply,
    SlaveHandshake,
    TransferHeader,
    encode_slave_report,
)


def test_slave_frames_have_rocketmqs_sizes_and_bytes():
    handshake = SlaveHandshake(slave_broker_id=7, sync_from_last_file=True, async_learner=False)
    assert len(handshake.encode()) == SLAVE_HANDSHAKE_SIZE_BYTES == 16
    assert len(encode_slave_report(0)) == SLAVE_REPORT_SIZE_BYTES == 12
    # state HANDSHAKE, isSyncFromLastFile 1, isAsyncLearner 0, brokerId 7 (AutoSwitchHAClient's handshake header)
    assert handshake.encode() == bytes.fromhex("00000001 0001 0000 0000000000000007")
    # the learner the connector sends: brokerId -1, isAsyncLearner 1
    assert SlaveHandshake().encode() == bytes.fromhex("00000001 0000 0001 ffffffffffffffff")
    # state TRANSFER, the slave's max CommitLog offset
    assert encode_slave_report(1234) == struct.pack(">iq", 2, 1234) == bytes.fromhex("00000002 00000000000004d2")


def test_a_negative_report_offset_is_refused():
    with pytest.raises(ValueError, match="must be >= 0"):
        encode_slave_report(-1)


def _feed_in_pieces(reader: AutoSwitchFrameReader, raw: bytes, piece: int):
    for i in range(0, len(raw), piece):
        reader.feed(raw[i:i + piece])
        yield


@given(entries=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 1 << 40)), max_size=20, unique_by=lambda e: e[0]),
       bodies=st.lists(st.binary(max_size=300), max_size=6), piece=st.integers(1, 97))
@settings(max_examples=60, deadline=None)
def test_handshake_reply_and_transfer_frames_round_trip_in_any_pieces(entries, bodies, piece):
    entries = sorted(entries)
    reply = HandshakeReply(99_000, entries[-1][0] if entries else -1, tuple(EpochEntry(e, o) for e, o in entries))
    frames, offset = [], 500
    for body in bodies:
        frames.append((TransferHeader(offset, len(body), 3, 100, offset + len(body)), body))
        offset += len(body)
    raw = reply.encode() + b"".join(h.encode() + b for h, b in frames)
    reader = AutoSwitchFrameReader(buffer_bytes=64)
    got_reply, got = None, []
    for _ in _feed_in_pieces(reader, raw, piece):
        if got_reply is None:
            got_reply = reader.next_handshake()
        if got_reply is not None:
            while (frame := reader.next_transfer_view()) is not None:
                got.append((frame[0], frame[1].tobytes()))
    assert got_reply == reply and got == frames and reader.buffered_bytes == 0


def test_a_heartbeat_may_carry_offset_minus_one_but_data_may_not():
    reader = AutoSwitchFrameReader()
    reader.feed(TransferHeader(-1, 0, 1, 0, 0).encode())
    assert reader.next_transfer_view()[0].offset == -1
    reader.feed(struct.pack(">iiqiqq", 2, 5, -1, 1, 0, 0))
    with pytest.raises(HAProtocolError, match=r"stream byte 36: field offset is -1 \(bodySize 5\)"):
        reader.peek_transfer()


@pytest.mark.parametrize(("raw", "expect", "ask"), [
    (struct.pack(">iiqi", 1, 13, 0, 1), r"stream byte 0: field bodySize is 13, expected a multiple of 12", "hs"),
    (struct.pack(">iiqi", 1, 12 * 1001, 0, 1), r"field bodySize is 12012", "hs"),
    (struct.pack(">iiqi", 1, 0, -5, 1), r"field offset \(the master's max offset\) is -5", "hs"),
    (struct.pack(">iiqiqq", 2, 0, 0, 1, 0, 0), r"field state is TRANSFER, expected HANDSHAKE \(1\)", "hs"),
    (struct.pack(">iiqiqq", 2, -1, 0, 1, 0, 0), r"field bodySize is -1 \(allowed 0\.\.", "tr"),
    (struct.pack(">iiqiqq", 2, 1 << 30, 0, 1, 0, 0), r"field bodySize is 1073741824", "tr"),
    (struct.pack(">iiqi", 1, 0, 0, 1), r"field state is HANDSHAKE, expected TRANSFER \(2\)", "tr"),
    (b"HTTP/1.1 400 Bad Request\r\n", r"field state is state 1213486160", "tr"),
])
def test_malformed_frames_name_the_field_and_stream_byte_before_any_body_is_buffered(raw, expect, ask):
    reader = AutoSwitchFrameReader(buffer_bytes=64)
    reader.feed(raw)
    with pytest.raises(HAProtocolError, match=expect):
        reader.next_handshake() if ask == "hs" else reader.next_transfer_view()
    assert reader.buffered_bytes == len(raw)  # nothing waits for the announced body


def test_incomplete_frames_wait_for_their_bytes():
    reader = AutoSwitchFrameReader()
    reply = HandshakeReply(10, 2, (EpochEntry(1, 0), EpochEntry(2, 4)))
    raw = reply.encode()
    reader.feed(raw[:HANDSHAKE_HEADER_SIZE_BYTES + 5])
    assert reader.next_handshake() is None
    reader.feed(raw[HANDSHAKE_HEADER_SIZE_BYTES + 5:])
    assert reader.next_handshake() == reply
    frame = TransferHeader(0, 4, 1, 0, 10).encode() + b"abcd"
    reader.feed(frame[:TRANSFER_HEADER_SIZE_BYTES - 1])
    assert reader.peek_transfer() is None
    reader.feed(frame[TRANSFER_HEADER_SIZE_BYTES - 1:-1])
    assert reader.peek_transfer() == TransferHeader(0, 4, 1, 0, 10) and reader.next_transfer_view() is None
    reader.feed(frame[-1:])
    assert reader.next_transfer_view()[1].tobytes() == b"abcd"
    with pytest.raises(TypeError):
        reader.next_frame_view()


def test_epoch_history_covers_offsets_like_epochfilecache():
    history = EpochHistory([EpochEntry(1, 0), EpochEntry(2, 500), EpochEntry(3, 500), EpochEntry(5, 900)], 1200)
    assert history.covering(0) == (EpochEntry(1, 0), 500)
    assert history.covering(499) == (EpochEntry(1, 0), 500)
    assert history.covering(500) == (EpochEntry(3, 500), 900)  # epoch 2 is empty: nothing was written in it
    assert history.covering(5000) == (EpochEntry(5, 900), None)
    assert EpochHistory([EpochEntry(4, 100)], 200).covering(99) is None
    assert history.end_of(3) == 1200 and history.end_of(0) == 500
    with pytest.raises(ValueError, match="out of order"):
        EpochHistory([EpochEntry(2, 0), EpochEntry(1, 10)], 20)


def test_common_point_is_rocketmqs_consistent_point():
    master = EpochHistory([EpochEntry(1, 0), EpochEntry(2, 1000), EpochEntry(4, 3000)], 5000)
    # an old master that went on writing epoch 2 past the switch point: truncated to where epoch 2 ended
    assert EpochHistory([EpochEntry(1, 0), EpochEntry(2, 1000)], 3500).common_point(master) == 3000
    # a slave that is behind: its own end
    assert EpochHistory([EpochEntry(1, 0), EpochEntry(2, 1000)], 2500).common_point(master) == 2500
    # epoch 3 was elected elsewhere and never reached the master: back to the end of epoch 2 on both
    assert EpochHistory([EpochEntry(1, 0), EpochEntry(2, 1000), EpochEntry(3, 2000)], 2600).common_point(master) == 2000
    # same epoch number, different start: no common point inside it
    assert EpochHistory([EpochEntry(2, 1001)], 1500).common_point(master) == -1
