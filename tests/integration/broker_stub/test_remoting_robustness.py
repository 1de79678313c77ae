"""Remoting edge cases: unknown codes, oneway, serialize types, malformed and oversized frames."""

from __future__ import annotations

import socket
import struct
import time

from connector.client.producer import MQBrokerException, Producer
from connector.protocol.remoting import (
    SERIALIZE_TYPE_ROCKETMQ,
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
)
from tests.support.brokers import remoting_request, runtime_info


def _connect(addr: str) -> socket.socket:
    host, _, port = addr.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=5)


def _closed_by_peer(sock: socket.socket, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def test_unknown_code_is_not_supported_with_remark(broker_factory):
    broker = broker_factory()
    resp = remoting_request(broker.remoting_addr, RemotingCommand.request(12345))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "12345" in resp.remark and resp.is_response


def test_rocketmq_serialize_type_is_echoed(broker_factory):
    broker = broker_factory()
    req = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, serialize_type=SERIALIZE_TYPE_ROCKETMQ)
    resp = remoting_request(broker.remoting_addr, req)
    assert resp.serialize_type == SERIALIZE_TYPE_ROCKETMQ and resp.code == 0 and resp.opaque == req.opaque
    header = {"a": "pg", "b": "BinTopic", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0, "i": "TAGS\x01t"}
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, b"bin", serialize_type=SERIALIZE_TYPE_ROCKETMQ)
    resp = remoting_request(broker.remoting_addr, req)
    assert resp.serialize_type == SERIALIZE_TYPE_ROCKETMQ and resp.code == 0, resp.remark
    assert resp.ext_fields["queueOffset"] == "0"


def test_oneway_requests_get_no_response_but_are_processed(broker_factory):
    broker = broker_factory()
    header = {"a": "pg", "b": "OneWay", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0}
    with _connect(broker.remoting_addr) as s:
        s.sendall(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, b"x", oneway=True).encode())
        s.sendall(RemotingCommand.request(999, oneway=True).encode())
        probe = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        s.sendall(probe.encode())
        decoder = FrameDecoder()
        got = []
        while not got:
            got = decoder.feed(s.recv(1 << 20))
        assert [c.opaque for c in got] == [probe.opaque]  # nothing came back for the two oneways
    assert int(runtime_info(broker.remoting_addr)["commitLogMaxOffset"]) > 0


def test_malformed_frames_close_only_their_connection(broker_factory):
    broker = broker_factory()
    with Producer(broker.remoting_addr) as healthy:
        healthy.send("Survivor", b"before")
        bad_frames = [
            struct.pack(">i", 17 * 1024 * 1024),                       # announces more than 16 MiB
            struct.pack(">i", 2),                                       # shorter than its own header field
            struct.pack(">ii", 12, 8) + b"not json",                    # JSON header that is not JSON
            struct.pack(">ii", 8, (7 << 24) | 4) + b"abcd",             # unknown serialize type
            struct.pack(">ii", 8, 100) + b"abcd",                       # header length past the frame
            struct.pack(">ii", 18, 14) + b'{"code":"x"}  ',             # code is not an integer
        ]
        for frame in bad_frames:
            with _connect(broker.remoting_addr) as s:
                s.sendall(frame)
                assert _closed_by_peer(s), frame
        with _connect(broker.remoting_addr) as s:  # a half-sent frame just waits; the broker is not stuck
            s.sendall(struct.pack(">i", 1000) + b"partial")
            assert healthy.send("Survivor", b"after").send_status == "SEND_OK"
    assert broker.is_running()
    assert "remoting frame rejected" in broker.log_path.read_text()


def test_producer_raises_broker_exception_with_remark(broker_factory):
    broker = broker_factory(autoCreateTopicEnable=False)
    with Producer(broker.remoting_addr) as p:
        try:
            p.send("NoSuchTopic", b"x")
        except MQBrokerException as exc:
            assert exc.code == ResponseCode.TOPIC_NOT_EXIST
            assert "NoSuchTopic" in exc.remark and "NoSuchTopic" in str(exc)
        else:
            raise AssertionError("TOPIC_NOT_EXIST expected")


def test_requests_before_a_malformed_frame_are_still_answered(broker_factory):
    broker = broker_factory()
    good = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG)
    with _connect(broker.remoting_addr) as s:
        s.sendall(good.encode() + struct.pack(">i", 17 * 1024 * 1024))
        decoder = FrameDecoder()
        got = []
        while not got:
            data = s.recv(1 << 20)
            assert data, "closed before answering the valid request"
            got = decoder.feed(data)
        assert got[0].opaque == good.opaque and got[0].code == 0
        assert _closed_by_peer(s)
