"""A store holding the golden 4.9.8 CommitLog: recovery, HA streams equal to the recorded ones, appends after it."""

from __future__ import annotations

import json
import shutil

from connector.client.producer import Producer
from connector.protocol.ha import TransferFrameReader
from tests.support.brokers import (
    FIXTURE_MASTER_PROPS,
    HASocket,
    read_commitlog,
    runtime_info,
    write_delivered_delay_offsets,
)

FIXTURE_MAX_OFFSET = 3402931


def _fixture_broker(broker_factory, tmp_path, fixture_dir, name="fixture"):
    store = tmp_path / name / "store"
    shutil.copytree(fixture_dir / "commitlog", store / "commitlog")
    write_delivered_delay_offsets(store, fixture_dir)
    return broker_factory(name, mappedFileSizeCommitLog=1048576, brokerClusterName="LocalCluster",
                          storePathRootDir=store, haSendHeartbeatInterval=1000, **FIXTURE_MASTER_PROPS)


def _recorded_data_frames(path):
    reader = TransferFrameReader()
    reader.feed(path.read_bytes())
    frames = []
    while (f := reader.next_frame()) is not None:
        if not f.is_heartbeat:
            frames.append((f.master_phy_offset, f.body))
    return frames


def _served_data_frames(broker, report: int):
    frames = []
    with HASocket(broker.ha_addr) as ha:
        ha.report(report)
        for f in ha.read_until(FIXTURE_MAX_OFFSET, ack=True, timeout_s=30):
            if not f.is_heartbeat:
                frames.append((f.master_phy_offset, f.body))
    return frames


def test_fixture_store_recovers_to_the_real_max_offset_and_serves_identical_ha_streams(
        broker_factory, tmp_path, fixture_dir):
    broker = _fixture_broker(broker_factory, tmp_path, fixture_dir)
    info = runtime_info(broker.remoting_addr)
    assert info["commitLogMaxOffset"] == str(FIXTURE_MAX_OFFSET)
    assert info["commitLogMinOffset"] == "0"

    for name, report in (("report_0.bin", 0), ("report_boundary_554616.bin", 554616)):
        sidecar = json.loads((fixture_dir / "ha_stream" / name.replace(".bin", ".json")).read_text())
        assert sidecar["reportedOffset"] == report
        expected = _recorded_data_frames(fixture_dir / "ha_stream" / name)
        served = _served_data_frames(broker, report)
        assert len(served) == sidecar["dataFrames"]
        assert [(o, len(b)) for o, b in served] == [(o, len(b)) for o, b in expected]
        assert served == expected

    with HASocket(broker.ha_addr) as ha:  # report_max: heartbeats at the max offset only
        ha.report(FIXTURE_MAX_OFFSET)
        frame = ha.read_frame(timeout_s=5)
        assert frame.is_heartbeat and frame.master_phy_offset == FIXTURE_MAX_OFFSET


def test_new_messages_land_right_after_the_fixture_data(broker_factory, tmp_path, fixture_dir):
    broker = _fixture_broker(broker_factory, tmp_path, fixture_dir)
    with Producer(broker.remoting_addr, default_topic_queue_nums=8) as p:  # Q8Topic_11 has 8 queues
        first = p.send("FixOrders611", b"appended after 4.9.8 data", queue_id=0)
        second = p.send("Q8Topic_11", b"second", queue_id=7)
    assert int(first.offset_msg_id[-16:], 16) == FIXTURE_MAX_OFFSET
    fixture_msgs = [json.loads(line) for line in (fixture_dir / "messages.jsonl").open()]
    last_q0 = max(m["queueOffset"] for m in fixture_msgs if m["topic"] == "FixOrders611" and m["queueId"] == 0)
    assert first.queue_offset == last_q0 + 1  # topicQueueTable rebuilt from the CommitLog
    last_q7 = max(m["queueOffset"] for m in fixture_msgs if m["topic"] == "Q8Topic_11" and m["queueId"] == 7)
    assert second.queue_offset == last_q7 + 1
    recs = read_commitlog(broker.commitlog_dir)
    original = (fixture_dir / "commitlog" / "00000000000003145728").read_bytes()
    now = (broker.commitlog_dir / "00000000000003145728").read_bytes()
    assert now[:FIXTURE_MAX_OFFSET - 3145728] == original[:FIXTURE_MAX_OFFSET - 3145728]
    assert recs[-2].commit_log_offset == FIXTURE_MAX_OFFSET and recs[-2].body == b"appended after 4.9.8 data"
    assert sum(1 for r in recs if hasattr(r, "topic")) == 557 + 2
