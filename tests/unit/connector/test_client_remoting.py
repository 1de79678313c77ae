"""connector.client.remoting against in-process peers on loopback (no broker): matching, refusals, signing."""

from __future__ import annotations

import socket
import threading

import pytest

from connector.client.remoting import PipelinedConnection, RemotingConnection
from connector.errors import BrokerConnectionError, BrokerUnreachableError, MQClientException, NotARocketMQBrokerError
from connector.protocol.acl import SIGNATURE, AclCredentials
from connector.protocol.remoting import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import request_once


class Peer:
    """A loopback peer: ``answer(request) -> bytes`` is sent back for every request of one connection."""

    def __init__(self, answer, *, raw: bool = False):
        self.answer = answer
        self.raw = raw
        self.requests: list[RemotingCommand] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        decoder = FrameDecoder()
        with conn:
            while data := conn.recv(65536):
                if self.raw:
                    conn.sendall(self.answer(data))
                    continue
                for request in decoder.feed(data):
                    self.requests.append(request)
                    conn.sendall(self.answer(request))

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=5)


def test_the_matching_response_is_returned_and_unrelated_frames_are_skipped():
    def answer(request):
        other = RemotingCommand(code=0, opaque=request.opaque + 1000, flag=1)
        return other.encode() + request.response(ResponseCode.SYSTEM_ERROR, remark="busy").encode()

    peer = Peer(answer)
    try:
        response = request_once(peer.addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 2000)
        assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "busy")  # whatever its code
    finally:
        peer.close()


def test_an_echo_server_and_a_non_remoting_peer_are_not_brokers():
    echo = Peer(lambda data: data, raw=True)
    http = Peer(lambda data: b"HTTP/1.1 400 Bad Request\r\n\r\n", raw=True)
    try:
        with pytest.raises(NotARocketMQBrokerError, match="our own request sent back"):
            request_once(echo.addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 2000)
        with pytest.raises(NotARocketMQBrokerError, match=r"is not a RocketMQ broker's remoting port.*HTTP/1\.1"):
            request_once(http.addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 2000)
    finally:
        echo.close()
        http.close()


def test_a_closed_port_and_a_bad_address_are_unreachable():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(BrokerUnreachableError, match=rf"GET_BROKER_CONFIG \(26\) to broker 127\.0\.0\.1:{port} failed"):
        request_once(f"127.0.0.1:{port}", RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 1000)
    with pytest.raises(BrokerUnreachableError, match="not host:port"):
        request_once("no-port", RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 1000)


def test_requests_are_signed_with_credentials_and_the_connection_is_kept():
    peer = Peer(lambda request: request.response(ResponseCode.SUCCESS).encode())
    try:
        with RemotingConnection(peer.addr, 2000, AclCredentials("ak", "sk")) as connection:
            connection.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CONFIG))
            kept = connection.sock
            connection.invoke(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
            assert connection.sock is kept
        assert [r.ext_fields["AccessKey"] for r in peer.requests] == ["ak", "ak"]
        assert all(SIGNATURE in r.ext_fields for r in peer.requests)
    finally:
        peer.close()


def test_pipelined_requests_complete_by_opaque_and_fail_once_closed():
    peer = Peer(lambda request: request.response(ResponseCode.SUCCESS, {"n": request.ext_fields["n"]}).encode())
    connection = PipelinedConnection(peer.addr, timeout_ms=2000, max_in_flight=4, owner="tester")
    try:
        futures = [connection.send(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"n": i}),
                                   lambda response: int(response.ext_fields["n"]) * 10) for i in range(20)]
        assert [connection.wait(f) for f in futures] == [i * 10 for i in range(20)]
        assert connection.local_ip() == "127.0.0.1"
    finally:
        connection.close()
        peer.close()
    with pytest.raises(MQClientException, match="tester is closed"):
        connection.send(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2), lambda response: response)


def test_pipelined_connect_failure_is_a_broker_connection_error():
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(BrokerConnectionError, match=f"connect to 127.0.0.1:{port} failed"):
        PipelinedConnection(f"127.0.0.1:{port}", timeout_ms=1000, connect_timeout_s=1)
