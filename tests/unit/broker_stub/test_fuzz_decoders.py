"""Fuzzing the decoders the broker stub feeds with network and disk bytes (hypothesis)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from broker_stub.config import MessageStoreConfig
from broker_stub.ha.client import HAClient, _MasterChannel
from broker_stub.store.commit_log import CommitLog
from broker_stub.store.mapped_file import MappedFileQueue
from connector.errors import CommitLogFormatError, HAProtocolError, HAReplicaError
from connector.protocol.commitlog import BlankRecord, DispatchInfo, EndOfData, decode_dispatch_info, encode_record
from connector.protocol.ha import TransferFrameReader, encode_transfer_header

RECORD = encode_record(commit_log_offset=0, topic="T", body=b"body", properties=b"TAGS\x01a")


@settings(max_examples=300)
@given(data=st.binary(max_size=300), pos=st.integers(min_value=0, max_value=40))
def test_dispatch_decoder_raises_only_format_errors(data, pos):
    try:
        out = decode_dispatch_info(data, min(pos, len(data)))
    except CommitLogFormatError as exc:
        assert "offset" in str(exc)
        return
    assert isinstance(out, (DispatchInfo, BlankRecord, EndOfData))


@settings(max_examples=200)
@given(flip=st.integers(min_value=0, max_value=len(RECORD) - 1), value=st.integers(min_value=0, max_value=255))
def test_dispatch_decoder_on_a_corrupted_record(flip, value):
    data = bytearray(RECORD)
    data[flip] = value
    try:
        info = decode_dispatch_info(bytes(data))
    except CommitLogFormatError:
        return
    if isinstance(info, DispatchInfo):
        assert info.store_size == len(RECORD)  # accepted only when the lengths still agree


@settings(max_examples=300)
@given(data=st.binary(max_size=40), pos=st.integers(min_value=0, max_value=30))
def test_transfer_header_parser_raises_only_protocol_errors(data, pos):
    reader = TransferFrameReader()
    reader.feed(data[pos:])
    try:
        out = reader.peek_header()
    except HAProtocolError:
        return
    assert out is None or (out[0] >= 0 and 0 <= out[1] <= 4 * 1024 * 1024)


@settings(max_examples=60, deadline=None)
@given(chunks=st.lists(st.binary(max_size=80), max_size=6), good_frames=st.integers(min_value=0, max_value=3))
def test_slave_receive_path_survives_garbage_after_good_frames(tmp_path_factory, chunks, good_frames):
    """The HA client's receive side: valid frames are appended, garbage fails the connection, never raises."""
    folder = tmp_path_factory.mktemp("cl")
    queue = MappedFileQueue(folder, 4096)
    queue.load()
    commit_log = CommitLog(queue, max_message_size=1 << 20, max_delay_level=18)

    async def scenario():
        client = HAClient(commit_log, MessageStoreConfig(), master_address=None)
        channel = _MasterChannel(client)
        stream = b""
        offset = 0
        for _ in range(good_frames):
            stream += encode_transfer_header(offset, len(RECORD)) + RECORD
            offset += len(RECORD)
        for chunk in [stream, *chunks]:
            view = channel.get_buffer(len(chunk))
            view[:len(chunk)] = chunk
            channel.buffer_updated(len(chunk))
            if channel.error is not None:
                break
        return channel

    channel = asyncio.run(scenario())
    assert commit_log.max_offset >= good_frames * len(RECORD)
    if channel.error is not None:  # a protocol/continuity error of our hierarchy, never anything else
        assert isinstance(channel.error, HAReplicaError), repr(channel.error)
    data = queue.files[0].read(0, good_frames * len(RECORD)) if queue.files else b""
    assert data == RECORD * good_frames
    queue.close()
