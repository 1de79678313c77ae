"""A query given only ``namesrvAddr`` follows a real RocketMQ 5.5.0 controller-mode master switch (issue 43,
docs/source.md "Discovery").

The set-up of tests/interop/test_source_real_5_controller_switch.py (its ``broker_set`` fixture: a real 5.5.0
name server and controller, two controller-mode brokers of ``broker-a``, ``allAckInSyncStateSet=true``): the query
learns both members and their mode from the name server's route and the members' GET_BROKER_CONFIG. A batch's sink
SIGKILLs the master before the batch's data is read; the controller elects the other member, and the query goes on
from it. The rows equal the final master's CommitLog as 5.5.0's ``MessageDecoder`` reads it, every SEND_OK message
is in them once.
"""

from __future__ import annotations

import json
import threading

import pytest

from connector.client.namesrv import NameServerClient
from tests.interop.peers import message_decoder_rows
from tests.interop.test_source_real_5_controller_switch import (  # noqa: F401 - broker_set is the shared fixture
    TOPIC,
    Sender,
    _in_sync,
    _role,
    broker_set,
    electable,
)
from tests.interop.test_source_real_peers import assert_rows_equal_decoder
from tests.support.brokers import max_offset, wait_for
from tests.support.jvm_peers import ROCKETMQ5_LIB


def _members_in_route(ns_addr: str) -> int:
    with NameServerClient((ns_addr,)) as client:
        data = client.cluster_info()[1].broker_addr_table.get("broker-a")
    return len(data.broker_addrs) if data else 0


@pytest.mark.spark
def test_the_master_elected_after_a_kill_is_followed_with_namesrv_addr_alone(hareplica_spark_session,
                                                                              broker_set, tmp_path):  # noqa: F811
    ns, ctl, brokers = broker_set
    wait_for(lambda: _in_sync(brokers), "the controller to elect a master and the other to follow it", timeout_s=90,
             interval_s=0.5)
    wait_for(lambda: _members_in_route(ns.addr) == 2 or None, "both members in the route", timeout_s=60)
    sender = Sender(brokers)
    sender.start()
    wait_for(lambda: len(sender.ok) >= 50 or None, "the first sends", timeout_s=60, interval_s=0.2)
    kill_next = threading.Event()
    killed = []
    batches: list[list[dict]] = []

    def collect(df, batch_id):
        if kill_next.is_set():
            try:  # only when the controller could elect the other member (5.5.0's SyncStateSet dip, issue 50)
                master = electable(brokers, ctl)
            except AssertionError:
                master = None  # a later batch kills it
            if master is not None:
                kill_next.clear()
                master.kill9()  # the batch was planned against it; its data is read only below
                killed.append(master)
        batches.append([r.asDict(recursive=False) for r in df.selectExpr(
            "*", "unix_millis(bornTimestamp) AS bornMs", "unix_millis(storeTimestamp) AS storeMs").collect()])

    query = (hareplica_spark_session.readStream.format("hareplica").option("namesrvAddr", ns.addr)
             .option("namesrvPollIntervalMs", "1000").option("maxBytesPerTrigger", str(256 * 1024))
             .option("maxOutageMs", "60000")
             .load().writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="1 second").start())
    try:
        wait_for(lambda: len(batches) > 1 or None, "the query to land batches", timeout_s=120, interval_s=0.2)
        kill_next.set()
        wait_for(lambda: killed or None, "a batch to kill the master", timeout_s=120, interval_s=0.2)
        victim = killed[0]
        wait_for(lambda: any(_role(b) == "SYNC_MASTER" for b in brokers if b is not victim) or None,
                 "the controller to elect a new master", timeout_s=120, interval_s=0.2)
        victim.restart()  # rejoins as a slave of the new master
        wait_for(lambda: _in_sync(brokers), "both brokers in sync again", timeout_s=120, interval_s=0.5)
        sender.stop.set()
        sender.join(30)
        master = next(b for b in brokers if _role(b) == "SYNC_MASTER")
        assert master is not victim
        wait_for(lambda: _in_sync(brokers), "the last sends replicated", timeout_s=60, interval_s=0.5)
        end = max_offset(master.remoting_addr)

        def reached():
            progress = query.lastProgress
            return progress and json.loads(progress["sources"][0]["endOffset"]).get("broker-a") == end or None

        wait_for(reached, "the query to read up to the new master's max offset", timeout_s=180, interval_s=0.5)
        assert query.isActive, query.exception()
    finally:
        query.stop()
        sender.stop.set()
    rows = [r for rs in batches for r in rs]
    offsets = [r["commitLogOffset"] for r in rows]
    assert len(offsets) == len(set(offsets)), "a record was landed twice"
    assert_rows_equal_decoder(rows, message_decoder_rows(master.commitlog_dir, ROCKETMQ5_LIB))
    bodies = {bytes(r["body"]) for r in rows if r["topic"] == TOPIC}
    assert set(sender.ok) <= bodies, "a message acknowledged SEND_OK is missing"
