"""A RocketMQ 4.9 broker that is still starting is waited out, not failed (docs/source.md "Broker outages").

Found against a real 4.9 broker (tests/interop): for about 1 s after boot it answers GET_BROKER_RUNTIME_INFO
with SYSTEM_ERROR and a ``java.util.NoSuchElementException`` remark (its statistics have no sample yet).
That window is too short to hit reliably with the real broker, so this peer answers with those exact bytes:
first the starting broker's answer, then a real runtime-info table.
"""

from __future__ import annotations

import socket
import threading

import pytest

from connector.client.admin import BrokerAdminClient
from connector.errors import BrokerAdminError, BrokerNotReadyError, BrokerUnreachableError
from connector.protocol.remoting import FrameDecoder, ResponseCode, encode_kv_table

STARTING_REMARK = ("java.util.NoSuchElementException\n"
                   "\tat java.base/java.util.LinkedList.getLast(LinkedList.java:261)")
ACL_REMARK = "org.apache.rocketmq.acl.common.AclException: No acl config for unknown"


class ScriptedBroker:
    """A remoting peer on a loopback port that answers the n-th request with ``answers[n]``."""

    def __init__(self, answers: list[tuple[int, str | None, bytes]]):
        self.answers = list(answers)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        decoder = FrameDecoder()
        with conn:
            while self.answers:
                data = conn.recv(65536)
                if not data:
                    return
                for request in decoder.feed(data):
                    code, remark, body = self.answers.pop(0)
                    conn.sendall(request.response(code, remark=remark, body=body).encode())

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=5)


def test_a_starting_broker_is_not_ready_and_then_answers():
    table = encode_kv_table({"commitLogMinOffset": "0", "commitLogMaxOffset": "4096", "dispatchBehindBytes": "0"})
    peer = ScriptedBroker([(ResponseCode.SYSTEM_ERROR, STARTING_REMARK, b""), (ResponseCode.SUCCESS, None, table)])
    client = BrokerAdminClient(peer.addr, 2000)
    try:
        with pytest.raises(BrokerNotReadyError, match="still starting") as info:
            client.store_offsets()
        assert isinstance(info.value, BrokerUnreachableError)  # so the source's outage wait covers it
        assert client.store_offsets() == (0, 4096, 0)
    finally:
        client.close()
        peer.close()


def test_other_system_errors_still_fail_at_once():
    peer = ScriptedBroker([(ResponseCode.SYSTEM_ERROR, ACL_REMARK, b"")])
    client = BrokerAdminClient(peer.addr, 2000)
    try:
        with pytest.raises(BrokerAdminError, match="AclException") as info:
            client.store_offsets()
        assert not isinstance(info.value, BrokerUnreachableError)
    finally:
        client.close()
        peer.close()
