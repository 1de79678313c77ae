"""Operations (issue 3 items 8, 9): status command, Prometheus endpoint, retention and delete-expired."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.brokers import (
    HASocket,
    free_port,
    max_offset,
    pull,
    queue_offset,
    remoting_request,
    runtime_info,
    wait_for,
)

FILE = 65536
HAREPLICA = str(Path(sys.executable).parent / "hareplica")


def _fill(addr: str, n: int = 90, size: int = 2000) -> None:
    with Producer(addr) as p:
        for f in [p.send_async("OpsTopic", bytes([i % 256]) * size, queue_id=i % 2) for i in range(n)]:
            f.result(timeout=30)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


def test_status_command_prints_role_offsets_and_every_ha_connection(broker_factory):
    broker = broker_factory(brokerRole="SYNC_MASTER", mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=200)
    _fill(broker.remoting_addr, 10)
    end = max_offset(broker.remoting_addr)
    with HASocket(broker.ha_addr) as ha:
        ha.report(end - 100)
        ha.read_until(end)
        wait_for(lambda: runtime_info(broker.remoting_addr)["haConnectionCount"] == "1", "the HA connection")
        out = _run(HAREPLICA, "broker", "status", broker.remoting_addr)  # forwarded to broker_stub's main
        assert out.returncode == 0, out.stderr
        text = out.stdout
        assert "role                 SYNC_MASTER (brokerId 0" in text
        assert f"commitLogMaxOffset   {end:,}" in text
        assert "commitLogMinOffset   0" in text
        peer = f"127.0.0.1:{ha.sock.getsockname()[1]}"
        line = next(li for li in text.splitlines() if peer in li)
        assert f"{end - 100:,}" in line and "100" in line.split()[2]  # slaveAckOffset and lagBytes
        out = _run(sys.executable, "-m", "broker_stub", "status", broker.remoting_addr, "--json")
        parsed = json.loads(out.stdout)
        assert parsed["brokerRole"] == "SYNC_MASTER" and parsed["haConnections"][0]["peer"] == peer
    out = _run(sys.executable, "-m", "broker_stub", "status", f"127.0.0.1:{free_port()}", "--timeout", "2")
    assert out.returncode == 2 and "cannot query" in out.stderr


def test_prometheus_endpoint_reports_the_same_figures(broker_factory):
    port = free_port()
    broker = broker_factory(metricsPromExporterPort=port, mappedFileSizeCommitLog=FILE, haSendHeartbeatInterval=200)
    _fill(broker.remoting_addr, 20)
    end = max_offset(broker.remoting_addr)
    with HASocket(broker.ha_addr) as ha:
        ha.report(end - 10)
        ha.read_until(end)
        wait_for(lambda: runtime_info(broker.remoting_addr)["haConnectionCount"] == "1", "the HA connection")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert samples[("rocketmq_commitlog_max_offset_bytes", ())] == end
    assert samples[("rocketmq_commitlog_min_offset_bytes", ())] == 0
    assert samples[("rocketmq_put_messages_total", ())] == 20
    assert samples[("rocketmq_ha_connections", ())] == 1
    assert samples[("rocketmq_ha_push2slave_max_offset_bytes", ())] == end - 10
    lag = [v for (name, _), v in samples.items() if name == "rocketmq_ha_connection_lag_bytes"]
    assert lag == [10]
    info = [labels for (name, labels), _ in samples.items() if name == "rocketmq_broker_info"]
    assert dict(info[0])["brokerRole"] == "ASYNC_MASTER"


def test_delete_expired_files_now_moves_the_min_offsets(broker_factory):
    # fileReservedTime=0: every full file is expired; deleteWhen=99: the timed deletion never fires by itself
    broker = broker_factory(mappedFileSizeCommitLog=FILE, fileReservedTime=0, deleteWhen="99",
                            haSendHeartbeatInterval=200, mappedFileSizeConsumeQueue=200)
    addr = broker.remoting_addr
    _fill(addr)
    end = max_offset(addr)
    last_file = end - end % FILE
    assert last_file >= 2 * FILE
    wait_for(lambda: queue_offset(addr, "OpsTopic", 0) == 45, "the ConsumeQueue")
    out = _run(HAREPLICA, "broker", "delete-expired", addr)
    assert out.returncode == 0, out.stderr
    assert f"commitLogMinOffset={last_file}" in out.stdout
    assert sorted(p.name for p in broker.commitlog_dir.iterdir()) == [f"{last_file:020d}"]
    info = runtime_info(addr)
    assert int(info["commitLogMinOffset"]) == last_file and int(info["commitLogMaxOffset"]) == end
    low = queue_offset(addr, "OpsTopic", 0, which="min")
    assert 0 < low < 45
    resp, _ = pull(addr, "OpsTopic", 0, 0)
    assert (resp.code, resp.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL")
    assert int(resp.ext_fields["nextBeginOffset"]) == low
    resp, records = pull(addr, "OpsTopic", 0, low)
    assert resp.code == ResponseCode.SUCCESS and records[0].physical_offset >= last_file
    # a reader asking for a deleted offset gets heartbeats only, and the broker shows it
    with HASocket(broker.ha_addr) as ha:
        ha.report(1000)
        assert ha.read_frame(timeout_s=5).is_heartbeat
        conns = wait_for(lambda: [c for c in json.loads(runtime_info(addr)["haConnections"])
                                  if c["requestedOffsetMissing"]], "requestedOffsetMissing")
        assert conns[0]["slaveRequestOffset"] == 1000
    # the store reopens with the gap
    broker.stop()
    broker.restart()
    assert int(runtime_info(addr)["commitLogMinOffset"]) == last_file
    assert queue_offset(addr, "OpsTopic", 0, which="min") == low


def test_files_within_file_reserved_time_are_kept(broker_factory):
    broker = broker_factory(mappedFileSizeCommitLog=FILE, deleteWhen="99")  # fileReservedTime 72 h (default)
    _fill(broker.remoting_addr, 60)
    resp = remoting_request(broker.remoting_addr, RemotingCommand.request(RequestCode.DELETE_EXPIRED_COMMITLOG))
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["deletedFiles"] == "0"
    assert runtime_info(broker.remoting_addr)["commitLogMinOffset"] == "0"
