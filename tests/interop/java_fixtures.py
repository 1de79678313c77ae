"""Shared pieces of the real-Java-client tests (tests/interop/test_java_clients*.py).

Module-scoped stub peers (a name server and brokers registered with it), a bounded wait for a name-server
route, and the two readers every producer test compares: RocketMQ's own ``MessageDecoder`` (the
``CommitLogDecoder`` Java program) and ``hareplica inspect-commitlog``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

from broker_stub.javautil import fastjson_loads
from connector.protocol.remoting import RemotingCommand, RequestCode
from streaming_apps import inspect_commitlog
from tests.support.brokers import remoting_request, wait_for
from tests.support.java_tools import JavaRun, run_java

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
COMPRESSED_FLAG = 0x1
COMPRESSION_TYPE_BITS = {"LZ4": 0x1 << 8, "ZSTD": 0x2 << 8, "ZLIB": 0x3 << 8}
COMPRESS_MSG_BODY_OVER_HOWMUCH = 4096


def wait_for_route(namesrv_addr: str, topic: str = "TBW102", *, broker_ids: set[int] | None = None,
                   timeout_s: float = 20.0) -> dict:
    """Wait until the name server answers GET_ROUTEINFO_BY_TOPIC for ``topic`` (with exactly ``broker_ids``
    registered, when given) and return the route (TopicRouteData as a dict)."""
    def route():
        resp = remoting_request(namesrv_addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                      {"topic": topic}))
        if resp.code != 0:
            return None
        data = fastjson_loads(resp.body)  # a real name server writes fastjson's bare integer keys
        if broker_ids is not None:
            ids = {int(i) for bd in data.get("brokerDatas", []) for i in bd.get("brokerAddrs", {})}
            if ids != broker_ids:
                return None
        return data
    return wait_for(route, f"route of {topic} on name server {namesrv_addr}", timeout_s=timeout_s)


def decode_with_rocketmq(commitlog_dir: Path, log_dir: Path) -> JavaRun:
    """Every message of a CommitLog folder as RocketMQ's MessageDecoder decodes it (CommitLogDecoder)."""
    return run_java("CommitLogDecoder", [str(commitlog_dir)], log_dir=log_dir, timeout_s=60)


def inspect_commitlog_text(commitlog_dir: Path) -> tuple[int, str]:
    """``hareplica inspect-commitlog DIR`` (jsonl) run in-process: (exit code, stdout text)."""
    out = io.StringIO()
    code = inspect_commitlog.run(str(commitlog_dir), out=out)
    return code, out.getvalue()


def sha256_b64(data_b64: str) -> str:
    """SHA-256 hex of base64 data (bodies in MessageDecoder rows)."""
    return hashlib.sha256(base64.b64decode(data_b64)).hexdigest()


def assert_same_rows(java: JavaRun, inspect_code: int, inspect_text: str) -> None:
    """inspect-commitlog printed exactly the MessageDecoder rows, line for line and byte for byte."""
    java_lines = java.stdout.splitlines()
    ours = inspect_text.splitlines()
    assert inspect_code == 0, f"inspect-commitlog exit code {inspect_code} after {len(ours)} of {len(java_lines)} rows"
    assert len(ours) == len(java_lines), f"inspect-commitlog printed {len(ours)} rows, MessageDecoder {len(java_lines)}"
    for i, (a, b) in enumerate(zip(java_lines, ours, strict=True)):
        if a != b:
            ja, jb = json.loads(a), json.loads(b)
            diff = {k: (ja.get(k), jb.get(k)) for k in ja.keys() | jb.keys() if ja.get(k) != jb.get(k)}
            raise AssertionError(f"row {i} (commitLogOffset {ja.get('commitLogOffset')}) differs "
                                 f"(MessageDecoder, inspect-commitlog): {diff if diff else 'formatting'}")


def assert_exactly_once(run: JavaRun, sent: dict[str, str], topic: str) -> None:
    """JavaConsumer delivered each message of ``sent`` ({UNIQ_KEY: body sha256}) exactly once, from ``topic``,
    with its body, and exited 0."""
    got = [line["msgId"] for line in run.lines]
    missing = sorted(set(sent) - set(got))
    dupes = sorted({m for m in got if got.count(m) > 1})
    assert not missing and not dupes and len(got) == len(sent), (
        f"{len(got)} deliveries of {len(sent)} messages; missing {missing[:5]}, duplicated {dupes[:5]}\n"
        f"{run.describe()}")
    assert run.returncode == 0, run.describe()
    for line in run.lines:
        assert line["topic"] == topic
        assert line["bodySha256"] == sent[line["msgId"]], f"body of {line['msgId']} differs"
