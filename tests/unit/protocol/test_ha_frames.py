"""HA framing against the streams recorded from a real 4.9.8 master (docs/protocol.md §2.3; fixtures ha_stream/)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import HAProtocolError
from connector.protocol.ha import (
    HA_TRANSFER_BATCH_SIZE_BYTES,
    ReportReader,
    TransferFrameReader,
    encode_report,
    encode_transfer_header,
)

FILE_SIZE = 1048576
STREAMS = ["report_0", "report_boundary_554616", "report_max_3402931"]


@pytest.fixture(scope="module")
def commitlog(fixture_dir):
    return b"".join(p.read_bytes() for p in sorted((fixture_dir / "commitlog").iterdir()))


def _frames(raw: bytes, chunk: int):
    reader = TransferFrameReader()
    out = []
    for i in range(0, len(raw), chunk):
        reader.feed(raw[i:i + chunk])
        while (frame := reader.next_frame()) is not None:
            out.append(frame)
    assert reader.buffered_bytes == 0
    return out


@pytest.mark.parametrize("name", STREAMS)
@pytest.mark.parametrize("chunk", [1, 7, 12, 4096, 1 << 30])
def test_recorded_stream_parses_and_equals_commitlog(fixture_dir, commitlog, name, chunk):
    raw = (fixture_dir / "ha_stream" / f"{name}.bin").read_bytes()
    meta = json.loads((fixture_dir / "ha_stream" / f"{name}.json").read_text())
    frames = _frames(raw, chunk)
    data = [f for f in frames if not f.is_heartbeat]
    beats = [f for f in frames if f.is_heartbeat]
    expected_start = meta.get("first_header_offset", frames[0].master_phy_offset)
    assert frames[0].master_phy_offset == expected_start
    pos = frames[0].master_phy_offset
    for f in data:
        assert f.master_phy_offset == pos, "data frames are contiguous"
        assert len(f.body) <= HA_TRANSFER_BATCH_SIZE_BYTES
        assert f.master_phy_offset // FILE_SIZE == (f.end_offset - 1) // FILE_SIZE, "never crosses a file"
        assert f.body == commitlog[f.master_phy_offset:f.end_offset]
        pos = f.end_offset
    assert all(b.master_phy_offset == 3402931 for b in beats)
    assert sum(len(f.body) for f in data) + 12 * len(frames) == len(raw)


def test_report_0_starts_at_the_current_last_file(fixture_dir):
    frames = _frames((fixture_dir / "ha_stream" / "report_0.bin").read_bytes(), 1 << 20)
    assert frames[0].master_phy_offset == 3145728  # 3402931 - 3402931 % 1048576


def test_report_reader_takes_the_last_complete_value():
    reader = ReportReader()
    assert reader.feed(encode_report(5)[:3]) is None
    assert reader.feed(encode_report(5)[3:] + encode_report(9) + encode_report(11)[:4]) == 9
    assert reader.feed(encode_report(11)[4:]) == 11


def test_bad_transfer_headers_raise():
    reader = TransferFrameReader(max_body_bytes=1024)
    reader.feed(encode_transfer_header(0, 2048))
    with pytest.raises(HAProtocolError, match="bodySize=2048"):
        reader.next_frame()
    reader = TransferFrameReader()
    reader.feed(encode_transfer_header(10, -1))
    with pytest.raises(HAProtocolError):
        reader.next_frame()
    with pytest.raises(ValueError):
        encode_report(-1)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_frame_reader_never_crashes_on_garbage(data):
    reader = TransferFrameReader(max_body_bytes=64)
    reader.feed(data)
    try:
        while reader.next_frame() is not None:
            pass
    except HAProtocolError:
        pass


def _receive(reader: TransferFrameReader, data: bytes, chunk: int) -> None:
    """What a socket does: recv_into the reader's free space, then report the count."""
    for i in range(0, len(data), chunk):
        piece = data[i:i + chunk]
        while piece:
            free = reader.writable()
            n = min(len(free), len(piece))
            free[:n] = piece[:n]
            reader.wrote(n)
            piece = piece[n:]


@pytest.mark.parametrize("chunk", [1, 5, 12, 100, 1 << 20])
def test_received_in_place_frames_are_views_of_the_buffer_and_equal_the_copies(chunk):
    bodies = [b"a" * 40, b"", b"b" * 300, b"c" * 7]
    offset, raw = 1000, b""
    for body in bodies:
        raw += encode_transfer_header(offset, len(body)) + body
        offset += len(body)
    reader = TransferFrameReader(buffer_bytes=64, compact_below_free_bytes=16)  # small: compacts and grows
    seen = []
    for i in range(0, len(raw), chunk):
        _receive(reader, raw[i:i + chunk], chunk)
        while (frame := reader.next_frame_view()) is not None:
            assert isinstance(frame[1], memoryview)
            seen.append((frame[0], bytes(frame[1])))
    assert [b for _, b in seen] == bodies and [o for o, _ in seen] == [1000, 1040, 1040, 1340]
    assert reader.buffered_bytes == 0 and reader.bytes_consumed == len(raw)


@pytest.mark.parametrize("chunk", [5, 100, 1 << 20])
def test_with_keep_views_the_bodies_handed_out_stay_valid_while_later_frames_arrive(chunk):
    bodies = [bytes([i]) * (7 + 13 * i) for i in range(40)]
    offset, raw = 0, b""
    for body in bodies:
        raw += encode_transfer_header(offset, len(body)) + body
        offset += len(body)
    reader = TransferFrameReader(buffer_bytes=256, keep_views=True)  # small: many new buffers, one growth
    kept = []
    for i in range(0, len(raw), chunk):
        _receive(reader, raw[i:i + chunk], chunk)
        while (frame := reader.next_frame_view()) is not None:
            kept.append(frame[1])  # kept, not copied
    assert [bytes(view) for view in kept] == bodies, "no view was written over by a later receive"
    if chunk < len(raw):  # (one receive of everything just grows the first buffer)
        assert len({id(view.obj) for view in kept}) > 1, "the reader moved on to new buffers"


def test_a_header_shows_before_its_body_is_complete():
    reader = TransferFrameReader()
    reader.feed(encode_transfer_header(4096, 10) + b"12345")
    assert reader.peek_header() == (4096, 10)
    assert reader.next_frame_view() is None and reader.buffered_bytes == 17  # nothing consumed
    assert reader.head(4) == encode_transfer_header(4096, 10)[:4]
    reader.feed(b"67890")
    assert reader.next_frame().body == b"1234567890"


def test_a_bad_header_names_the_stream_byte():
    reader = TransferFrameReader()
    reader.feed(encode_transfer_header(0, 1) + b"x" + encode_transfer_header(-5, 0))
    assert reader.next_frame().body == b"x"
    with pytest.raises(HAProtocolError, match=r"at stream byte 13: masterPhyOffset=-5"):
        reader.peek_header()
    with pytest.raises(ValueError):
        reader.wrote(1 << 30)
