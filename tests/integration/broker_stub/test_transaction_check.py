"""Transaction check-back on the stub (issue 14 §3, broker_stub/store/transaction_check.py).

A raw-socket "producer" plays a 4.9.8 TransactionMQProducer on one connection: HEART_BEAT with its producer
group, a half message (TRAN_MSG, PGROUP, UNIQ_KEY; sysFlag TRANSACTION_PREPARED), END_TRANSACTION with state
0 (UNKNOW). The master (short ``transactionTimeOut`` / ``transactionCheckInterval``) must then send
CHECK_TRANSACTION_STATE one-way on that connection about a new copy of the half message; answering COMMIT
delivers the message once. Without any answer the message is checked ``transactionCheckMax`` times and then
kept in TRANS_CHECK_MAX_TIME_TOPIC. A slave never checks; it replicates the records the checks write.
"""

from __future__ import annotations

import json
import socket
import time

from connector.protocol.commitlog import MessageRecord, decode_record
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode, decode_frame
from tests.support.brokers import assert_same_commitlog, max_offset, pull, read_commitlog, wait_for, wait_for_offset

TOPIC = "TxOrders"
GROUP = "pg_tx_check"
TX_PREPARED = 0x4  # MessageSysFlag.TRANSACTION_PREPARED_TYPE
FAST = {"transactionTimeOut": 300, "transactionCheckInterval": 400}


class ProducerConnection:
    """One client connection that sends requests and keeps the requests the broker sends to it."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.buf = bytearray()
        self.broker_requests: list[RemotingCommand] = []

    def close(self) -> None:
        self.sock.close()

    def _read_one(self, deadline: float) -> RemotingCommand | None:
        while True:
            decoded = decode_frame(self.buf)
            if decoded is not None:
                cmd, used = decoded
                del self.buf[:used]
                return cmd
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                return None
            assert data, "broker closed the producer connection"
            self.buf += data

    def call(self, cmd: RemotingCommand) -> RemotingCommand | None:
        """Send ``cmd``; its response (None for a one-way request)."""
        self.sock.sendall(cmd.encode())
        if cmd.is_oneway:
            return None
        deadline = time.monotonic() + 5
        while True:
            got = self._read_one(deadline)
            assert got is not None, f"no response to code {cmd.code}"
            if got.is_response and got.opaque == cmd.opaque:
                return got
            self.broker_requests.append(got)

    def wait_request(self, timeout_s: float) -> RemotingCommand | None:
        """The next request the broker sends on this connection, None after ``timeout_s``."""
        if self.broker_requests:
            return self.broker_requests.pop(0)
        return self._read_one(time.monotonic() + timeout_s)

    def heartbeat(self) -> None:
        body = json.dumps({"clientID": "127.0.0.1@tx", "producerDataSet": [{"groupName": GROUP}],
                           "consumerDataSet": []}).encode()
        assert self.call(RemotingCommand.request(RequestCode.HEART_BEAT, body=body)).code == ResponseCode.SUCCESS

    def send_half(self, body: bytes, uniq_key: str) -> RemotingCommand:
        props = f"TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02UNIQ_KEY\x01{uniq_key}\x02WAIT\x01true\x02"
        header = {"producerGroup": GROUP, "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                  "queueId": 0, "sysFlag": TX_PREPARED, "bornTimestamp": int(time.time() * 1000), "flag": 0,
                  "properties": props, "reconsumeTimes": 0, "unitMode": False, "batch": False}
        resp = self.call(RemotingCommand.request(RequestCode.SEND_MESSAGE, header, body))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return resp

    def end(self, state_offset: int, commit_log_offset: int, kind: int, uniq_key: str, *, from_check: bool) -> None:
        header = {"producerGroup": GROUP, "tranStateTableOffset": state_offset, "commitLogOffset": commit_log_offset,
                  "commitOrRollback": kind, "fromTransactionCheck": from_check, "msgId": uniq_key,
                  "transactionId": uniq_key}
        self.call(RemotingCommand.request(RequestCode.END_TRANSACTION, header, oneway=True))


def _records(broker, topic: str) -> list[MessageRecord]:
    return [r for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord) and r.topic == topic]


def test_unknown_transaction_is_checked_back_and_a_commit_delivers_it_once(broker_factory):
    master = broker_factory("master", **FAST)
    conn = ProducerConnection(master.remoting_addr)
    try:
        conn.heartbeat()
        sent = conn.send_half(b"pay order 7", "UNIQ0007")
        half_cl_offset = int(sent.ext_fields["msgId"][-16:], 16)
        conn.end(int(sent.ext_fields["queueOffset"]), half_cl_offset, 0, "UNIQ0007", from_check=False)
        check = conn.wait_request(10)
        assert check is not None, "no CHECK_TRANSACTION_STATE from the stub"
        assert (check.code, check.is_oneway) == (RequestCode.CHECK_TRANSACTION_STATE, True)
        ext = check.ext_fields
        assert (ext["msgId"], ext["transactionId"], ext["tranStateTableOffset"]) == ("UNIQ0007", "UNIQ0007", "1")
        copy_offset = int(ext["commitLogOffset"])
        assert copy_offset > half_cl_offset and ext["offsetMsgId"].endswith(f"{copy_offset:016X}")
        msg = decode_record(check.body, 0)  # MessageDecoder.encode: real topic and queue id
        assert (msg.topic, msg.queue_id, msg.body, msg.physical_offset, msg.queue_offset) == (
            TOPIC, 0, b"pay order 7", copy_offset, 1)
        assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1" and msg.properties["PGROUP"] == GROUP

        conn.end(1, copy_offset, 8, "UNIQ0007", from_check=True)  # COMMIT
        _, delivered = wait_for(lambda: (lambda r: r if r[1] else None)(pull(master.remoting_addr, TOPIC, 0, 0)),
                                "committed message")
        assert [m.body for m in delivered] == [b"pay order 7"]
        assert conn.wait_request(3 * FAST["transactionCheckInterval"] / 1000) is None  # done: no more checks
    finally:
        conn.close()
    halves = _records(master, "RMQ_SYS_TRANS_HALF_TOPIC")
    assert [h.queue_offset for h in halves] == [0, 1]
    assert "TRANSACTION_CHECK_TIMES" not in halves[0].properties
    assert halves[1].properties["TRANSACTION_CHECK_TIMES"] == "1" and halves[1].flag == 0
    assert (halves[1].body, halves[1].born_timestamp) == (halves[0].body, halves[0].born_timestamp)
    assert [op.body for op in _records(master, "RMQ_SYS_TRANS_OP_HALF_TOPIC")] == [b"1"]
    committed = _records(master, TOPIC)
    assert len(committed) == 1 and committed[0].prepared_transaction_offset == copy_offset
    _, again = pull(master.remoting_addr, TOPIC, 0, 1)
    assert again == []


def test_unanswered_transaction_is_discarded_after_transaction_check_max(broker_factory):
    master = broker_factory("master", transactionCheckMax=2, **FAST)
    conn = ProducerConnection(master.remoting_addr)
    try:
        conn.heartbeat()
        conn.send_half(b"never answered", "UNIQ0008")
        checks = [conn.wait_request(10), conn.wait_request(10)]
        assert all(c is not None and c.code == RequestCode.CHECK_TRANSACTION_STATE for c in checks)
        assert [decode_record(c.body, 0).properties["TRANSACTION_CHECK_TIMES"] for c in checks] == ["1", "2"]
        discarded = wait_for(lambda: _records(master, "TRANS_CHECK_MAX_TIME_TOPIC"), "discarded half message")
        assert conn.wait_request(3 * FAST["transactionCheckInterval"] / 1000) is None
    finally:
        conn.close()
    assert len(discarded) == 1
    assert (discarded[0].body, discarded[0].queue_id) == (b"never answered", 0)
    assert discarded[0].properties["TRANSACTION_CHECK_TIMES"] == "2"
    assert _records(master, TOPIC) == []


def test_a_producer_that_ends_its_transaction_is_never_checked(broker_factory):
    master = broker_factory("master", **FAST)
    conn = ProducerConnection(master.remoting_addr)
    try:
        conn.heartbeat()
        sent = conn.send_half(b"rolled back", "UNIQ0009")
        conn.end(0, int(sent.ext_fields["msgId"][-16:], 16), 12, "UNIQ0009", from_check=False)  # ROLLBACK
        assert conn.wait_request(4 * FAST["transactionCheckInterval"] / 1000) is None
    finally:
        conn.close()
    assert len(_records(master, "RMQ_SYS_TRANS_HALF_TOPIC")) == 1
    assert _records(master, TOPIC) == []


def test_a_slave_never_checks_and_replicates_the_check_records(broker_factory):
    master = broker_factory("master", transactionCheckMax=1, mappedFileSizeCommitLog=1 << 20, **FAST)
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr,
                           transactionCheckMax=1, mappedFileSizeCommitLog=1 << 20, **FAST)
    on_master, on_slave = ProducerConnection(master.remoting_addr), ProducerConnection(slave.remoting_addr)
    try:
        on_master.heartbeat()
        on_slave.heartbeat()
        on_master.send_half(b"checked by the master only", "UNIQ0010")
        check = on_master.wait_request(10)
        assert check is not None and check.code == RequestCode.CHECK_TRANSACTION_STATE
        wait_for(lambda: _records(master, "TRANS_CHECK_MAX_TIME_TOPIC"), "discarded half message")
        assert on_slave.wait_request(3 * FAST["transactionCheckInterval"] / 1000) is None
    finally:
        on_master.close()
        on_slave.close()
    end = wait_for_offset(slave.remoting_addr, max_offset(master.remoting_addr))
    assert_same_commitlog(master.commitlog_dir, slave.commitlog_dir, end=end)
    assert [r.topic for r in _records(slave, "RMQ_SYS_TRANS_HALF_TOPIC")] == ["RMQ_SYS_TRANS_HALF_TOPIC"] * 2
