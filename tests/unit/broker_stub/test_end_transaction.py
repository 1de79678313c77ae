"""END_TRANSACTION's records against the golden 4.9.8 data (broker_stub.remoting.end_transaction_processor).

The fixtures hold committed transactional messages and op messages written by a real 4.9.8 broker; the stub's
builders must produce the same stored fields from the same half messages.
"""

from __future__ import annotations

import base64

from broker_stub.remoting.end_transaction_processor import _check_half, committed_message, op_message
from connector.protocol.commitlog import HostAddress


def test_committed_message_equals_real_brokers(golden):
    rows, record = golden
    committed = [r for r in rows if r["sysFlag"] & 0xC == 0x8]
    assert len(committed) == 5
    for row in committed:
        half = record(row["preparedTransactionOffset"])
        assert half.topic == "RMQ_SYS_TRANS_HALF_TOPIC"
        msg = committed_message(half)
        assert msg.properties_string.encode("utf-8") == base64.b64decode(row["propertiesRawBase64"])
        assert (msg.topic, msg.queue_id, msg.sys_flag, msg.flag) == (row["topic"], row["queueId"], row["sysFlag"],
                                                                     row["flag"])
        assert (msg.born_timestamp, str(msg.born_host), msg.reconsume_times) == (
            row["bornTimestamp"], row["bornHost"], row["reconsumeTimes"])
        assert msg.prepared_transaction_offset == row["preparedTransactionOffset"]
        assert msg.body == base64.b64decode(row["bodyBase64"])
        assert "REAL_TOPIC" not in msg.properties and "REAL_QID" not in msg.properties


def test_op_message_equals_real_brokers(golden):
    rows, record = golden
    ops = [r for r in rows if r["topic"] == "RMQ_SYS_TRANS_OP_HALF_TOPIC"]
    halves = [record(r["commitLogOffset"]) for r in rows if r["topic"] == "RMQ_SYS_TRANS_HALF_TOPIC"]
    assert ops and halves
    store_host = HostAddress.parse(ops[0]["storeHost"])
    by_queue_offset = {h.queue_offset: h for h in halves}
    for row in ops:
        half = by_queue_offset[int(base64.b64decode(row["bodyBase64"]))]
        msg = op_message(half, store_host, now_ms=row["bornTimestamp"])
        assert msg.properties_string.encode("utf-8") == base64.b64decode(row["propertiesRawBase64"])
        assert (msg.topic, msg.queue_id, msg.sys_flag, msg.flag) == (row["topic"], row["queueId"], row["sysFlag"],
                                                                     row["flag"])
        assert msg.body == base64.b64decode(row["bodyBase64"])
        assert (str(msg.born_host), str(msg.store_host)) == (row["bornHost"], row["storeHost"])


def test_check_half_names_each_mismatch(golden):
    rows, record = golden
    row = next(r for r in rows if r["topic"] == "RMQ_SYS_TRANS_HALF_TOPIC")
    half = record(row["commitLogOffset"])
    group = row["properties"]["PGROUP"]
    assert _check_half(half, group, half.queue_offset, half.commit_log_offset) is None
    assert _check_half(None, group, 0, 0) == "Find prepared transaction message failed"
    assert _check_half(half, "other", half.queue_offset, half.commit_log_offset) == "The producer group wrong"
    assert _check_half(half, group, half.queue_offset + 1, half.commit_log_offset) == \
        "The transaction state table offset wrong"
    assert _check_half(half, group, half.queue_offset, half.commit_log_offset + 1) == "The commit log offset wrong"
