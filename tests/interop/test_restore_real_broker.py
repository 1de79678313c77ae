"""A real RocketMQ 4.9.8 broker started on a store restored from bronze serves every message again: a real 4.9.8
consumer reads each one with its original topic, queue offset, offset msgId and body (docs/restore.md "Disaster
recovery: a new master"); a real 4.9.8 slave seeded with a restored store continues from its end (docs/restore.md
"Seeding a slave").

The table holds the golden CommitLog of a real 4.9.8 broker (tests/fixtures/rocketmq-4.9.8), decoded with every
column and written with deltalake, as bronze lands it. The restored store has ``commitlog/`` and
``config/delayOffset.json``: the broker rebuilds its ConsumeQueues from the CommitLog, delivers no scheduled message
a second time and delivers those still parked when the golden broker stopped; the topic is created again as the
procedure says.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from connector.decode.columns import iter_record_batches
from connector.decode.schema import ALL_ARROW_SCHEMA
from connector.protocol.commitlog import MessageRecord, iter_records
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.restore import restore_commitlog
from tests.interop.java_fixtures import wait_for_route
from tests.interop.peers import FILE_SIZE, MiB, assert_same_commitlog_span, produce_bytes, wait_same_max_offset
from tests.support.brokers import max_offset, remoting_request
from tests.support.java_tools import run_java
from tests.support.jvm_peers import RealBroker, killed_at_exit

SIZE = 1024 * 1024  # the golden broker's mappedFileSizeCommitLog
TOPIC = "FixOrders611"


def _commitlog_table(commitlog_dir, path: str, size: int = SIZE) -> None:
    """Every record of a CommitLog folder decoded with every column and written with deltalake, as bronze lands
    them (broker ``broker-a``, mapped files of ``size`` bytes)."""
    tables = []
    for name in sorted(os.listdir(commitlog_dir)):
        data = (commitlog_dir / name).read_bytes()
        starts = [r.commit_log_offset - int(name) for r in iter_records(data, base_offset=int(name))
                  if isinstance(r, MessageRecord)]
        if starts:
            tables.append(pa.Table.from_batches(list(iter_record_batches(
                data, np.array(starts, dtype=np.int64), int(name), broker="broker-a", mapped_file_size=size,
                columns=ALL_ARROW_SCHEMA.names))))
    write_deltalake(path, pa.concat_tables(tables))


def _sha(message: dict) -> str:
    return hashlib.sha256(base64.b64decode(message["bodyDecompressedBase64"])).hexdigest()


def test_a_real_broker_on_a_restored_store_serves_every_message(fixture_dir, real_namesrv, tmp_path):
    table = str(tmp_path / "bronze")
    _commitlog_table(fixture_dir / "commitlog", table)
    store = tmp_path / "broker" / "store"
    plan = restore_commitlog(table, "broker-a", store)
    assert plan.missing is None and len(plan.files) == 4
    messages = [json.loads(line) for line in (fixture_dir / "messages.jsonl").read_text().splitlines()]
    expected = {m["msgId"]: (m["queueId"], m["queueOffset"], _sha(m)) for m in messages if m["topic"] == TOPIC}
    # scheduled messages still parked when the golden broker stopped (no copy in their real topic) come due now
    copies = {(m["uniqKey"], m["topic"]) for m in messages}
    parked = {m["uniqKey"]: _sha(m) for m in messages if m["topic"] == "SCHEDULE_TOPIC_XXXX"
              and m["properties"].get("REAL_TOPIC") == TOPIC and (m["uniqKey"], TOPIC) not in copies}
    assert parked, "the golden log holds parked scheduled messages of the topic"
    broker = RealBroker.start(tmp_path / "broker", namesrvAddr=real_namesrv.addr, storePathRootDir=str(store),
                              mappedFileSizeCommitLog=SIZE, brokerName="broker-a",
                              fileReservedTime=10**6)  # the golden records are years old: never expire them
    with killed_at_exit(broker):
        header = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        resp = remoting_request(broker.remoting_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                                             header))
        assert resp.code == 0, resp.remark
        wait_for_route(real_namesrv.addr, TOPIC)
        run = run_java("JavaConsumer", ["mode=push", f"namesrv={real_namesrv.addr}", f"topic={TOPIC}",
                                        "group=cg_restored", f"count={len(expected) + len(parked)}",
                                        "timeoutMs=60000"],
                       props={"rocketmq.client.rebalance.waitInterval": "1000"}, log_dir=tmp_path / "consumer",
                       timeout_s=90, check=False)
        assert run.returncode == 0 and len(run.lines) == len(expected) + len(parked), run.describe()
        restored = [line for line in run.lines if line["offsetMsgId"] in expected]
        assert {line["offsetMsgId"]: (line["queueId"], line["queueOffset"], line["bodySha256"])
                for line in restored} == expected
        assert {line["msgId"]: line["bodySha256"] for line in run.lines if line not in restored} == parked
        assert {line["topic"] for line in run.lines} == {TOPIC}


def test_a_real_slave_seeded_from_a_restored_store_continues_the_masters_log_from_offset_0(real_namesrv, tmp_path):
    """A real master writes three files; its rows (as bronze lands them) are restored into a new slave's store;
    more is written; a real slave started on the restored store reports the restored end, and its CommitLog then
    equals the master's from offset 0. A slave started empty would start at the master's last file."""
    with killed_at_exit(RealBroker.start(tmp_path / "master", brokerRole="ASYNC_MASTER", namesrvAddr=real_namesrv.addr,
                                         mappedFileSizeCommitLog=FILE_SIZE)) as master:
        sent = produce_bytes(master.remoting_addr, int(2.5 * MiB), seed=5)
        restored_end = max_offset(master.remoting_addr)
        assert restored_end > 2 * FILE_SIZE
        table = str(tmp_path / "bronze")
        _commitlog_table(master.commitlog_dir, table, FILE_SIZE)
        plan = restore_commitlog(table, "broker-a", tmp_path / "slave" / "store")
        assert plan.missing is None and plan.end == restored_end and len(plan.files) == 3
        produce_bytes(master.remoting_addr, MiB // 2, seed=6, start_seq=len(sent))
        with killed_at_exit(RealBroker.start(tmp_path / "slave", brokerRole="SLAVE", brokerId=1,
                                             namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE,
                                             storePathRootDir=str(tmp_path / "slave" / "store"),
                                             haSendHeartbeatInterval=1000)) as slave:
            end = wait_same_max_offset(master.remoting_addr, slave.remoting_addr)
            assert end > restored_end
            assert_same_commitlog_span(master.commitlog_dir, slave.commitlog_dir, end=end)
