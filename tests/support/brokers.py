"""Real broker-stub processes for tests, plus small blocking clients to talk to them.

``BrokerProcess`` / ``free_port`` come from :mod:`broker_stub.launcher` (re-exported here): ``start(workdir,
**props)`` writes a ``broker.conf`` with free loopback ports and a store inside ``workdir``, launches
``python -m broker_stub -c broker.conf`` (log in ``workdir/broker.log``) and returns once the remoting and
HA ports accept connections, raising BrokerStartError with the log tail otherwise.

Clients here: :func:`remoting_request` (one request, one response), :func:`runtime_info`, :func:`broker_config`,
and :class:`HASocket` (a raw HA-port connection: send 8-byte reports, read frames with a deadline).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from broker_stub.launcher import (
    BrokerProcess,
    BrokerProcessError,
    BrokerStartError,
    NameServerProcess,
    free_port,
    free_port_pair,
)
from connector.client.remoting import RemotingConnection
from connector.errors import BrokerAdminError
from connector.protocol.acl import AclCredentials
from connector.protocol.address import split_host_port
from connector.protocol.commitlog import BlankRecord, EndOfData, MessageRecord, decode_record, iter_records
from connector.protocol.ha import TransferFrame, TransferFrameReader, encode_report
from connector.protocol.remoting import (
    RemotingCommand,
    RequestCode,
    decode_kv_table,
    decode_properties_body,
)


# --- clients ---------------------------------------------------------------------------------------
def remoting_request(addr: str, cmd: RemotingCommand, *, timeout_s: float = 5.0) -> RemotingCommand:
    """Send one request on a fresh connection and return its response, whatever its code
    (:func:`request_once`).

    Raises BrokerAdminError when the broker cannot be reached, closes early or does not answer in time.
    """
    return request_once(addr, cmd, int(timeout_s * 1000))


def runtime_info(addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO as a dict of strings."""
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert resp.code == 0, f"GET_BROKER_RUNTIME_INFO failed: {resp.code} {resp.remark}"
    return decode_kv_table(resp.body)


def broker_config(addr: str) -> dict[str, str]:
    """GET_BROKER_CONFIG as a dict of strings."""
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG))
    assert resp.code == 0, f"GET_BROKER_CONFIG failed: {resp.code} {resp.remark}"
    return decode_properties_body(resp.body)


PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4


def pull(addr: str, topic: str, queue_id: int, offset: int, *, group: str = "test_cg", max_msgs: int = 32,
         subscription: str = "*", suspend_ms: int | None = None, commit_offset: int | None = None,
         timeout_s: float = 10.0) -> tuple[RemotingCommand, list[MessageRecord]]:
    """PULL_MESSAGE as a Java consumer sends it (subscription flag set); returns the response and its records."""
    sys_flag = PULL_FLAG_SUBSCRIPTION
    if suspend_ms is not None:
        sys_flag |= PULL_FLAG_SUSPEND
    if commit_offset is not None:
        sys_flag |= PULL_FLAG_COMMIT_OFFSET
    header = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
              "maxMsgNums": max_msgs, "sysFlag": sys_flag, "commitOffset": commit_offset or 0,
              "suspendTimeoutMillis": suspend_ms or 0, "subscription": subscription, "subVersion": 0,
              "expressionType": "TAG"}
    resp = remoting_request(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header), timeout_s=timeout_s)
    records: list[MessageRecord] = []
    pos = 0
    while pos < len(resp.body):
        rec = decode_record(resp.body, pos, check_crc=True)
        assert isinstance(rec, MessageRecord), f"pull body holds a non-message at {pos}: {rec!r}"
        records.append(rec)
        pos += rec.store_size
    return resp, records


def queue_offset(addr: str, topic: str, queue_id: int, *, which: str = "max") -> int:
    """GET_MAX_OFFSET / GET_MIN_OFFSET of a queue (entries)."""
    code = RequestCode.GET_MAX_OFFSET if which == "max" else RequestCode.GET_MIN_OFFSET
    resp = remoting_request(addr, RemotingCommand.request(code, {"topic": topic, "queueId": queue_id}))
    assert resp.code == 0, f"{which} offset failed: {resp.code} {resp.remark}"
    return int(resp.ext_fields["offset"])


def read_commitlog(commitlog_dir: Path, *, check_crc: bool = True) -> list[MessageRecord | BlankRecord]:
    """Every record and END_FILE blank of a CommitLog folder, in offset order (EndOfData dropped)."""
    out: list[MessageRecord | BlankRecord] = []
    for path in sorted(Path(commitlog_dir).iterdir()):
        if not (path.name.isdigit() and len(path.name) == 20):
            continue
        data = path.read_bytes()
        for rec in iter_records(data, base_offset=int(path.name), check_crc=check_crc, file=path.name,
                                file_end=len(data)):
            if not isinstance(rec, EndOfData):
                out.append(rec)
    return out


def max_offset(addr: str) -> int:
    """commitLogMaxOffset of the broker at ``addr``."""
    return int(runtime_info(addr)["commitLogMaxOffset"])


def wait_for(predicate, what: str, *, timeout_s: float = 15.0, interval_s: float = 0.05):
    """Poll ``predicate()`` until it returns something truthy and return it.

    Raises AssertionError naming ``what`` (and the last value seen) after ``timeout_s``. Exceptions from
    the predicate (e.g. a broker not answering yet) count as "not yet" and are shown on failure.
    """
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            value = predicate()
        except (OSError, AssertionError, ValueError, KeyError, BrokerAdminError) as exc:
            value, last = None, exc
        else:
            last = value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)


def wait_for_offset(addr: str, offset: int, *, timeout_s: float = 30.0) -> int:
    """Wait until the broker at ``addr`` reports commitLogMaxOffset == ``offset``; returns it."""
    return wait_for(lambda: max_offset(addr) == offset and offset, f"{addr} to reach commitLogMaxOffset {offset}",
                    timeout_s=timeout_s)


def commitlog_files(commitlog_dir: Path) -> dict[str, bytes]:
    """``{file name: bytes}`` of every 20-digit CommitLog file in a folder."""
    return {p.name: p.read_bytes() for p in sorted(Path(commitlog_dir).iterdir())
            if p.name.isdigit() and len(p.name) == 20}


def assert_same_commitlog(master_dir: Path, slave_dir: Path, *, end: int) -> None:
    """The slave's CommitLog files hold exactly the master's bytes up to ``end`` (file names and sizes too)."""
    master, slave = commitlog_files(master_dir), commitlog_files(slave_dir)
    assert sorted(slave) == sorted(master), f"file names differ: master {sorted(master)} slave {sorted(slave)}"
    for name, data in master.items():
        start = int(name)
        upto = min(max(end - start, 0), len(data))
        other = slave[name]
        assert len(other) == len(data), f"{name}: sizes differ"
        if other[:upto] != data[:upto]:
            first = next(i for i in range(upto) if other[i] != data[i])
            raise AssertionError(f"{name}: first differing byte at file position {first} "
                                 f"(CommitLog offset {start + first})")
        assert not any(other[upto:]), f"{name}: slave has bytes past offset {end}"


class HASocket:
    """A raw connection to an HA port: ``report(offset)`` sends 8 bytes, ``read_frame`` reads one frame."""

    def __init__(self, addr: str, *, timeout_s: float = 5.0) -> None:
        host, port = split_host_port(addr, bare_ipv6=True)
        # no TCP_NODELAY (unlike the clients): tests send reports back to back and count on Nagle's algorithm
        # to keep the second in its own segment until the first was acknowledged
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.reader = TransferFrameReader()
        self.timeout_s = timeout_s

    def report(self, offset: int) -> None:
        self.sock.sendall(encode_report(offset))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self, timeout_s: float | None = None) -> TransferFrame:
        """The next frame; raises TimeoutError after ``timeout_s`` or ConnectionError on EOF."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.timeout_s)
        while True:
            frame = self.reader.next_frame()
            if frame is not None:
                return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no complete HA frame in time")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                raise TimeoutError("no complete HA frame in time") from None
            if not data:
                raise ConnectionError("HA connection closed by the broker")
            self.reader.feed(data)

    def read_until(self, end_offset: int, *, timeout_s: float = 10.0, ack: bool = False) -> list[TransferFrame]:
        """Read frames until data reaches ``end_offset``; with ``ack`` report each data frame's end."""
        frames: list[TransferFrame] = []
        deadline = time.monotonic() + timeout_s
        reached = -1
        while reached < end_offset:
            frame = self.read_frame(max(deadline - time.monotonic(), 0.001))
            frames.append(frame)
            if not frame.is_heartbeat:
                reached = frame.end_offset
                if ack:
                    self.report(frame.end_offset)
        return frames

    def is_closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the broker closes the connection within ``timeout_s`` (frames before EOF are skipped)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True
            if not data:
                return True
        return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> HASocket:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["BrokerProcess", "BrokerProcessError", "BrokerStartError", "HASocket", "NameServerProcess",
           "assert_same_commitlog", "broker_config", "commitlog_files", "free_port", "free_port_pair", "max_offset",
           "pull", "queue_offset", "read_commitlog", "remoting_request", "runtime_info", "wait_for",
           "wait_for_offset"]


#: broker.conf keys of a stub master serving the golden fixture store unchanged: the fixture holds transaction half
#: messages that were never ended, which the transaction check service would move to TRANS_CHECK_MAX_TIME_TOPIC
#: (new records past the fixture's end) once ``transactionCheckInterval`` (60 s by default) has passed.
FIXTURE_MASTER_PROPS = {"transactionCheckInterval": 24 * 3600 * 1000}


def write_delivered_delay_offsets(store_root: Path, fixture_dir: Path) -> Path:
    """Write ``{store_root}/config/delayOffset.json`` saying every delayed message of the golden fixture
    was delivered, as it was on the real 4.9.8 master that recorded it (its re-puts are in the CommitLog).

    A store made of the fixture's CommitLog files alone has no such file, so a stub master would deliver
    the parked SCHEDULE_TOPIC_XXXX messages a second time and the store would no longer equal the
    fixture. Level = queueId + 1; offset = the queue's next ConsumeQueue offset (docs/broker_stub.md
    "Delayed delivery").
    """
    import json

    from connector.protocol.config_files import encode_delay_offsets

    table: dict[int, int] = {}
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as fh:
        for line in fh:
            msg = json.loads(line)
            if msg["topic"] == "SCHEDULE_TOPIC_XXXX":
                level = msg["queueId"] + 1
                table[level] = max(table.get(level, 0), msg["queueOffset"] + 1)
    path = store_root / "config" / "delayOffset.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(encode_delay_offsets(table))
    return path


def request_once(addr: str, request: RemotingCommand, timeout_ms: int,
                 credentials: AclCredentials | None = None) -> RemotingCommand:
    """One request on a fresh connection, closed afterwards; the response whatever its code.

    Raises BrokerUnreachableError / NotARocketMQBrokerError as :meth:`RemotingConnection.invoke`.
    """
    with RemotingConnection(addr, timeout_ms, credentials) as connection:
        return connection.invoke(request)
