"""Restoring a stub master's CommitLog from the bronze table the real bronze app landed: every restored file equals
the broker's, byte for byte (docs/restore.md).

One master with small mapped files holds a workload of every kind of record the exactness rules cover: plain
messages with tags, keys and user properties, bodies compressed with ZLIB (the producer's own) and with LZ4 and ZSTD
as the 5.x client sends them, delayed messages (the SCHEDULE_TOPIC_XXXX copy and the delivered one) and a committed
transaction (the half message, its op message and the delivered one).
"""

from __future__ import annotations

import filecmp
import os
import random

import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess
from connector.client.producer import Producer, build_message_properties
from connector.delta.maintenance import run_maintenance
from connector.protocol.commitlog import MessageRecord, compress_body
from connector.protocol.commitlog.layout import TRANSACTION_COMMIT_TYPE
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.restore import restore_commitlog, restore_commitlog_spark, verify_store
from streaming_apps.apps import AppConfig, run_app
from streaming_apps.spark_session import register_data_sources
from tests.support.brokers import max_offset, read_commitlog, wait_for

pytestmark = pytest.mark.spark

FILE = 16 * 1024
APP_TIMEOUT_S = 240


def _send_compressed(producer: Producer, topic: str, body: bytes, kind: str, i: int) -> None:
    """One SEND_MESSAGE_V2 whose body is ``kind``-compressed as the 5.x client stores it (sysFlag bits)."""
    stored, flags = compress_body(body, kind)
    props = build_message_properties(tags=kind, keys=f"k{i}", properties=None, wait_store_msg_ok=True,
                                     delay_level=None, uniq_key=f"UNIQ{kind}{i:04d}")
    header = producer._header(topic, i % 4, flags, 0, props.to_properties_string(), False)
    future = producer.connection.send(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, stored),
                                      lambda resp: resp)
    assert producer.connection.wait(future).code == 0


def _workload(addr: str) -> None:
    with Producer(addr, "restore-test", compress_msg_body_over_howmuch=2048) as producer:
        futures = []
        for i in range(120):
            futures.append(producer.send_async("Orders", random.Random(i).randbytes(200 + 7 * i), tags=f"T{i % 3}",
                                               keys=[f"order-{i}", f"c{i % 7}"], properties={"region": f"r{i % 2}"}))
        for i in range(20):  # ZLIB (the producer compresses bodies of 2048 bytes and more)
            futures.append(producer.send_async("Orders", random.Random(i).randbytes(1500) * 2, tags="ZLIB"))
        for i in range(6):
            futures.append(producer.send_async("Delayed", f"later {i}".encode(), delay_level=1))
        assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
        for i in range(10):
            _send_compressed(producer, "Orders", random.Random(-i).randbytes(900) * 3, "LZ4", i)
            _send_compressed(producer, "Orders", random.Random(100 + i).randbytes(900) * 3, "ZSTD", i)
        half = producer.send("Payments", b"pay order 7", properties={"TRAN_MSG": "true", "PGROUP": "restore-test"})
        header = {"producerGroup": "restore-test", "tranStateTableOffset": half.queue_offset,
                  "commitLogOffset": int(half.offset_msg_id[-16:], 16), "commitOrRollback": TRANSACTION_COMMIT_TYPE,
                  "fromTransactionCheck": False, "msgId": half.msg_id, "transactionId": half.msg_id}
        end = RemotingCommand.request(RequestCode.END_TRANSACTION, header, oneway=True)
        producer.connection.send(end, lambda resp: resp)


def _topics(commitlog_dir) -> list[str]:
    return [r.topic for r in read_commitlog(commitlog_dir) if isinstance(r, MessageRecord)]


@pytest.fixture(scope="module")
def landed(tmp_path_factory, spark):
    """(broker, its CommitLog end, the bronze table) after the workload and one bronze run (AvailableNow)."""
    root = tmp_path_factory.mktemp("restore")
    with BrokerProcess.start(root / "master", mappedFileSizeCommitLog=FILE) as broker:
        _workload(broker.remoting_addr)
        # the delayed copies and the committed transaction are stored by the broker itself, later
        wait_for(lambda: _topics(broker.commitlog_dir).count("Delayed") == 6
                 and "Payments" in _topics(broker.commitlog_dir), "delayed and committed messages delivered")
        end = max_offset(broker.remoting_addr)
        register_data_sources(spark)
        cfg = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=root / "work",
                        trigger="available-now", max_bytes_per_trigger=3 * FILE,
                        source_options={"includeSystemTopics": "true"})  # every record: a restorable bronze
        run_app(spark, cfg, max_runtime_s=APP_TIMEOUT_S)
        assert max_offset(broker.remoting_addr) == end, "the broker wrote more while bronze ran"
        yield broker, end, str(cfg.table_path("bronze"))


def _same_files(broker_dir, restored_dir, names) -> None:
    for name in names:
        assert filecmp.cmp(broker_dir / name, restored_dir / name, shallow=False), f"{name} differs"


def test_the_whole_log_restores_byte_for_byte(landed, tmp_path):
    broker, end, table = landed
    names = sorted(os.listdir(broker.commitlog_dir))
    assert len(names) >= 5
    records = read_commitlog(broker.commitlog_dir)
    kinds = {r.sys_flag & 0x700 for r in records if isinstance(r, MessageRecord) and r.sys_flag & 1}
    assert kinds == {0x100, 0x200, 0x300}, "the workload must hold LZ4, ZSTD and ZLIB bodies"
    assert {"SCHEDULE_TOPIC_XXXX", "Delayed", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
            "Payments"} <= {r.topic for r in records if isinstance(r, MessageRecord)}

    plan = restore_commitlog(table, "broker-a", tmp_path / "store")
    assert (plan.start, plan.end, plan.missing) == (0, end, None)
    assert [f.name for f in plan.files] == names
    assert sorted(os.listdir(tmp_path / "store" / "commitlog")) == names
    _same_files(broker.commitlog_dir, tmp_path / "store" / "commitlog", names)


def test_a_middle_range_restores_its_files_byte_for_byte(landed, tmp_path):
    broker, _, table = landed
    plan = restore_commitlog(table, "broker-a", tmp_path / "store", from_offset=2 * FILE,
                             to_offset=4 * FILE)
    names = [f"{2 * FILE:020d}", f"{3 * FILE:020d}"]
    assert [f.name for f in plan.files] == names and all(f.full for f in plan.files) and plan.missing is None
    assert sorted(os.listdir(tmp_path / "store" / "commitlog")) == names
    _same_files(broker.commitlog_dir, tmp_path / "store" / "commitlog", names)


def test_the_spark_job_form_writes_the_same_files_one_task_per_file(landed, spark, tmp_path):
    broker, end, table = landed
    plan = restore_commitlog_spark(spark, table, "broker-a", tmp_path / "store")
    names = sorted(os.listdir(broker.commitlog_dir))
    assert (plan.end, [f.name for f in plan.files]) == (end, names)
    _same_files(broker.commitlog_dir, tmp_path / "store" / "commitlog", names)


def test_compaction_and_vacuum_leave_the_restore_unchanged(landed, tmp_path):
    broker, _, table = landed
    def files() -> set[str]:
        return {os.path.relpath(uri, table) for uri in DeltaTable(table).file_uris()}

    before = files()
    assert run_maintenance(table)["compaction"]["numFilesRemoved"] > 0
    vacuumed = DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert vacuumed and set(vacuumed) == before - files()
    assert not any(os.path.exists(os.path.join(table, f)) for f in vacuumed)
    names = sorted(os.listdir(broker.commitlog_dir))
    restore_commitlog(table, "broker-a", tmp_path / "store")
    _same_files(broker.commitlog_dir, tmp_path / "store" / "commitlog", names)
    assert verify_store(table, "broker-a", broker.store_dir) is None
