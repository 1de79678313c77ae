"""Broker stub under faults (issue 3 items 8, 10): kill -9 with ConsumeQueues, a slave killed mid-catch-up,
half-open and garbage peers, fuzzed frames against a live broker."""

from __future__ import annotations

import os
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.client.producer import Producer
from connector.protocol.commitlog import MessageRecord
from connector.protocol.remoting import RemotingCommand, RequestCode
from tests.support.brokers import (
    BrokerProcess,
    assert_same_commitlog,
    max_offset,
    pull,
    queue_offset,
    read_commitlog,
    remoting_request,
    runtime_info,
    wait_for,
    wait_for_offset,
)

FILE = 65536


def _send(addr: str, n: int, size: int = 1500, topic: str = "FaultTopic") -> list:
    with Producer(addr, timeout_ms=15000) as p:
        return [f.result(timeout=30) for f in [p.send_async(topic, bytes([i % 251]) * size, queue_id=i % 2)
                                                for i in range(n)]]


def test_kill9_with_a_torn_tail_rebuilds_consume_queues_past_it(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE, mappedFileSizeConsumeQueue=400)
    addr = broker.remoting_addr
    results = _send(addr, 101)
    wait_for(lambda: queue_offset(addr, "FaultTopic", 0) == 51, "dispatch before the crash")
    end = max_offset(addr)
    broker.kill9()
    last = results[-1]  # queue 0, queue offset 50: tear it in half
    off = int(last.offset_msg_id[-16:], 16)
    path = broker.commitlog_dir / f"{off - off % FILE:020d}"
    with open(path, "r+b") as f:
        f.seek(off % FILE + 200)
        f.write(b"\0" * (end - off - 200))
        f.write(os.urandom(64))  # garbage after the torn record too
    broker.restart()
    assert "lastShutdown=abnormal" in broker.log_path.read_text()
    assert max_offset(addr) == off
    assert queue_offset(addr, "FaultTopic", 0) == 50  # the torn record's entry is gone
    assert queue_offset(addr, "FaultTopic", 1) == 50
    redo = _send(addr, 3)  # queue offsets continue where the valid records ended
    assert [(r.queue_id, r.queue_offset) for r in redo] == [(0, 50), (1, 50), (0, 51)]
    wait_for(lambda: queue_offset(addr, "FaultTopic", 0) == 52, "dispatch after the restart")
    got, offset = [], 0
    while offset < 52:
        resp, records = pull(addr, "FaultTopic", 0, offset)
        assert resp.code == 0, resp.remark
        got += records
        offset = int(resp.ext_fields["nextBeginOffset"])
    assert [r.queue_offset for r in got] == list(range(52))
    assert [r.physical_offset for r in got[:50]] == [int(r.offset_msg_id[-16:], 16) for r in results[:100:2]]


def test_slave_killed_mid_catch_up_recovers_and_finishes_identical(broker_factory):
    common = {"mappedFileSizeCommitLog": FILE, "haSendHeartbeatInterval": 300}
    master = broker_factory("master", **common)
    _send(master.remoting_addr, 400, size=3000)
    end = max_offset(master.remoting_addr)
    # the slave starts mid-way: it holds the master's first file, so it resumes from there
    slave_dir = master.workdir.parent / "slave" / "store" / "commitlog"
    slave_dir.mkdir(parents=True)
    (slave_dir / f"{0:020d}").write_bytes((master.commitlog_dir / f"{0:020d}").read_bytes())
    slave = broker_factory("slave", brokerRole="SLAVE", brokerId=1, haMasterAddress=master.ha_addr, **common)
    wait_for(lambda: max_offset(slave.remoting_addr) > FILE, "some progress")
    slave.kill9()
    slave.restart()
    wait_for_offset(slave.remoting_addr, end)
    slave.stop()
    master.stop()
    assert_same_commitlog(master.commitlog_dir, slave.commitlog_dir, end=end)


def test_half_open_and_garbage_peers_do_not_disturb_other_clients(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=200)
    addr = broker.remoting_addr
    before = _send(addr, 10)
    host, port = addr.rsplit(":", 1)
    half = socket.create_connection((host, int(port)), timeout=5)
    half.sendall(struct.pack(">i", 5000) + b"\x00\x00\x00\x10{\"code\":")  # a frame that never completes
    ha_host, ha_port = broker.ha_addr.rsplit(":", 1)
    ha_garbage = socket.create_connection((ha_host, int(ha_port)), timeout=5)
    ha_garbage.sendall(b"\x7f" * 16)  # an "ack" far above the max offset
    huge = socket.create_connection((host, int(port)), timeout=5)
    huge.sendall(struct.pack(">i", 17 * 1024 * 1024) + b"\x00" * 64)  # over the 16 MiB frame limit
    try:
        after = _send(addr, 10)  # others are served meanwhile
        assert len(after) == 10
        assert runtime_info(addr)["brokerRole"] == "ASYNC_MASTER"
        huge.settimeout(5)
        assert huge.recv(100) == b""  # the oversized frame closed its own connection
    finally:
        for s in (half, ha_garbage, huge):
            s.close()
    msgs = [r for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord)]
    assert len(msgs) == len(before) + 10


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    broker = BrokerProcess.start(tmp_path_factory.mktemp("fuzz"), mappedFileSizeCommitLog=FILE)
    try:
        with Producer(broker.remoting_addr) as p:
            for i in range(5):
                p.send("FuzzTopic", b"keep me %d" % i)
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            broker.kill9()


_codes = st.sampled_from([RequestCode.PULL_MESSAGE, RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.GET_MAX_OFFSET,
                          RequestCode.GET_MIN_OFFSET, RequestCode.HEART_BEAT, RequestCode.GET_ALL_TOPIC_CONFIG,
                          RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                          RequestCode.GET_BROKER_RUNTIME_INFO, 9999, -1, 0])
_text = st.text(max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=_codes, fields=st.dictionaries(st.sampled_from(["topic", "queueId", "consumerGroup", "queueOffset",
                                                            "maxMsgNums", "sysFlag", "commitOffset",
                                                            "subscription", "expressionType"]), _text, max_size=9),
       body=st.binary(max_size=64), raw=st.binary(max_size=48))
def test_fuzzed_requests_are_answered_or_dropped_and_nothing_stored_is_lost(fuzz_broker, code, fields, body, raw):
    addr = fuzz_broker.remoting_addr
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(RemotingCommand.request(code, fields, body).encode() + raw)
        s.settimeout(2)
        try:
            s.recv(1 << 16)  # an answer, or the broker closing a malformed stream
        except TimeoutError:
            pass  # waiting for the rest of a frame the garbage announced: that only holds this connection
    info = runtime_info(addr)  # a new connection is still served
    assert int(info["commitLogMaxOffset"]) >= 5 * 100
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                          {"topic": "FuzzTopic", "queueId": 0}))
    assert int(resp.ext_fields["offset"]) >= 1


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=200))
def test_fuzzed_ha_streams_never_take_the_master_down(fuzz_broker, data):
    host, port = fuzz_broker.ha_addr.rsplit(":", 1)
    before = max_offset(fuzz_broker.remoting_addr)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(data)
        s.settimeout(0.1)
        try:
            s.recv(1 << 16)
        except (TimeoutError, ConnectionResetError):
            pass
    assert max_offset(fuzz_broker.remoting_addr) == before
