"""Helpers shared by the interop tests against real RocketMQ 4.9 and 5.x brokers: load, metadata tables, waits.

Everything here talks to brokers over the wire (remoting) or reads their store folders; the metadata
requests and file names are RocketMQ's (docs/real_peers.md, "Real RocketMQ brokers").
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

from broker_stub.javautil import fastjson_loads
from connector.client.producer import Producer, SendResult
from connector.protocol.remoting import RemotingCommand, RequestCode
from tests.support.brokers import commitlog_files, max_offset, remoting_request, wait_for
from tests.support.java_tools import JVM_FLAGS, JavaToolError, compiled_classes
from tests.support.jvm_peers import rocketmq_classpath

MiB = 1 << 20
# The CommitLog file size both sides of every interop test use: small, so a few MiB roll over several files.
FILE_SIZE = MiB


def produce_bytes(addr: str, total_bytes: int, *, topics: tuple[str, ...] = ("InteropA", "InteropB"),
                  seed: int = 7, start_seq: int = 0) -> list[tuple[str, bytes]]:
    """Send messages to ``addr`` with the stub's producer until about ``total_bytes`` of bodies went out.

    Bodies are 200 B – 3 KiB, every 50th 6 KiB (zlib-compressed by the producer, as the Java client does);
    each starts with ``seq=<n>;`` so it can be found again. Returns ``[(topic, body)]`` in send order;
    every send must be SEND_OK (AssertionError otherwise).
    """
    rnd = random.Random(seed)
    sent: list[tuple[str, bytes]] = []
    size = 0
    seq = start_seq
    with Producer(addr, "interop_pg") as producer:
        futures = []
        while size < total_bytes:
            topic = topics[seq % len(topics)]
            n = 6144 if seq % 50 == 49 else rnd.randrange(200, 3072)
            body = (f"seq={seq};".encode() + bytes(rnd.getrandbits(8) for _ in range(16)) * (n // 16))[:n]
            futures.append(producer.send_async(topic, body, tags=f"t{seq % 3}", keys=f"k{seq}",
                                               properties={"seq": str(seq)}))
            sent.append((topic, body))
            size += len(body)
            seq += 1
        results: list[SendResult] = [f.result(timeout=30) for f in futures]
    bad = [r for r in results if r.send_status != "SEND_OK"]
    assert not bad, f"{len(bad)} sends not SEND_OK, first: {bad[0]}"
    return sent


def commit_consumer_offset(addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
    """UPDATE_CONSUMER_OFFSET (15), as a consumer's offset store sends it."""
    resp = remoting_request(addr, RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}))
    assert resp.code == 0, f"UPDATE_CONSUMER_OFFSET to {addr} answered {resp.code}: {resp.remark}"


def metadata_table(addr: str, code: int) -> dict:
    """The fastjson body of a GET_ALL_* request (topics 21, consumer offsets 43, delay offsets 45,
    subscription groups 201), parsed."""
    resp = remoting_request(addr, RemotingCommand.request(code))
    assert resp.code == 0, f"request {code} to {addr} answered {resp.code}: {resp.remark}"
    return fastjson_loads(resp.body)


def delay_offsets_text(addr: str) -> str | None:
    """GET_ALL_DELAY_OFFSET's text (the broker's delay offset table as it persists it in delayOffset.json),
    None when the broker answers an error or no body."""
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET))
    return resp.body.decode("utf-8") if resp.code == 0 and resp.body else None


def delay_offsets_with_level_1(addr: str) -> str | None:
    """:func:`delay_offsets_text` once the table holds an offset for delay level 1."""
    text = delay_offsets_text(addr)
    if text is None:
        return None
    table = fastjson_loads(text).get("offsetTable", {})
    return text if table.get(1) or table.get("1") else None


def read_config_file(path: Path) -> dict | None:
    """A broker's ``config/*.json`` file parsed (fastjson text: integer map keys allowed), None if absent."""
    try:
        return fastjson_loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def wait_same_max_offset(master_addr: str, slave_addr: str, *, timeout_s: float = 60.0) -> int:
    """Wait until the slave's commitLogMaxOffset equals the master's (and is > 0); returns it."""
    def same() -> int | None:
        m = max_offset(master_addr)
        return m if m > 0 and max_offset(slave_addr) == m else None
    return wait_for(same, f"slave {slave_addr} to reach master {master_addr}'s commitLogMaxOffset",
                    timeout_s=timeout_s, interval_s=0.2)


def attach_slave(master_addr: str, slave_addr: str) -> int:
    """Send one message to the master and wait until the slave holds it; returns the common max offset.

    A 4.9 slave's first report of 0 means "the start of the master's last file" (docs/real_peers.md), and
    a real slave reports only ``haSendHeartbeatInterval`` after connecting: writing several files before
    that report would leave the slave starting at the last one. Call this before a load.
    """
    produce_bytes(master_addr, 1, topics=("InteropAttach",), seed=0, start_seq=-1)
    return wait_same_max_offset(master_addr, slave_addr)


def assert_same_commitlog_span(master_dir: Path, slave_dir: Path, *, end: int) -> None:
    """Both CommitLog folders hold the same files with the same bytes for [0, end) (file names and sizes
    too); files starting at or past ``end`` — a real broker pre-creates the next file — hold only zeros."""
    master, slave = commitlog_files(master_dir), commitlog_files(slave_dir)
    for side, files in (("master", master), ("slave", slave)):
        for name, data in files.items():
            if int(name) >= end:
                assert not any(data), f"{side} file {name} starts past the end {end} but holds data"
    m_names = sorted(n for n in master if int(n) < end)
    s_names = sorted(n for n in slave if int(n) < end)
    assert m_names == s_names, f"file names below {end} differ: master {m_names} slave {s_names}"
    for name in m_names:
        a, b = master[name], slave[name]
        assert len(a) == len(b), f"{name}: sizes differ (master {len(a)}, slave {len(b)})"
        upto = min(end - int(name), len(a))
        if a[:upto] != b[:upto]:
            first = next(i for i in range(upto) if a[i] != b[i])
            raise AssertionError(f"{name}: first differing byte at file position {first} "
                                 f"(CommitLog offset {int(name) + first})")
        assert not any(b[upto:]) and not any(a[upto:]), f"{name}: bytes past the end offset {end}"


def message_decoder_rows(commitlog_dir: Path, lib: Path, *, timeout_s: float = 120.0) -> list[dict]:
    """Every record of a CommitLog folder as the ``MessageDecoder`` of the RocketMQ jars in ``lib`` reads it.

    Runs tests/java/CommitLogDecoder.java (compiled against the 4.9 jars; the few ``MessageDecoder`` and
    ``MessageExt`` methods it calls have the same signatures in 5.x) with ``lib`` on the class path instead, so
    a 5.x CommitLog is checked by 5.x's own decoder. Returns its JSON lines; raises JavaToolError on a non-zero
    exit (e.g. a record it cannot decode) or a timeout.
    """
    cmd = ["java", *JVM_FLAGS, "-cp", f"{compiled_classes()}:{rocketmq_classpath(lib)}", "CommitLogDecoder",
           str(commitlog_dir)]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise JavaToolError(f"CommitLogDecoder on {commitlog_dir} did not finish within {timeout_s} s") from None
    if proc.returncode != 0:
        raise JavaToolError(f"CommitLogDecoder on {commitlog_dir} with {lib} exited {proc.returncode}:\n"
                            f"{proc.stderr.decode('utf-8', 'replace')[-4000:]}")
    # 5.x's shaded logback prints its status lines to stdout too; the decoder's rows are the JSON objects
    return [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines() if line.startswith("{")]
