"""``hareplica run`` errors for people: bad options, folders and peers are refused in one line with exit 2
before Spark starts; a failure inside Spark is printed as our own one-line error, exit 1; tracebacks only
with ``--log-level DEBUG`` (docs/source.md "Errors")."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

CLI_TIMEOUT_S = 240


class TinyServer:
    """A loopback TCP server that is not a RocketMQ broker: ``http`` answers a 400 page and closes, ``echo``
    sends every byte back."""

    def __init__(self, kind: str):
        self.kind = kind
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        with conn:
            conn.settimeout(30)
            try:
                while data := conn.recv(65536):
                    if self.kind == "http":
                        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: 11"
                                     b"\r\nConnection: close\r\n\r\nBad Request")
                        return
                    conn.sendall(data)
            except OSError:
                return

    def close(self):
        self.sock.close()


@pytest.fixture
def peer():
    servers = []

    def start(kind):
        servers.append(TinyServer(kind))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def hareplica(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streaming_apps.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)


def one_line(result: subprocess.CompletedProcess, *, only: bool = True) -> str:
    """The one ``error:`` line on stderr (``only``: and nothing else; after Spark started, the line naming the
    log file that holds Spark's output comes too), and no Python or Java stack anywhere."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and (not only or len(lines) == 1), f"stderr:\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr, result.stderr[-3000:]
    return errors[0]


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


@pytest.mark.parametrize("args, expected", [
    (["--brokers", "broker-a"], "option brokers='broker-a': entry 'broker-a' is not name=host:haPort"),
    (["--brokers", "broker-a=127.0.0.1:99999"], "HA address of broker-a '127.0.0.1:99999' is not host:port with a "
                                                "port in 1..65535"),
    (["--brokers", "broker-a=127.0.0.1:10912", "--option", "maxOutageMs=-1"], "option maxOutageMs='-1': must be >= 0"),
    (["--brokers", "broker-a=127.0.0.1:10912", "--option", "nope=1"], "option nope='1': unknown option"),
    (["--brokers", "broker-a=127.0.0.1:10912", "--starting-offsets", "{bad"], "option startingOffsets='{bad'"),
    (["--brokers", "broker-a=127.0.0.1:10912", "--trigger", "soon"], "--trigger 'soon' must be available-now"),
    (["--brokers", "broker-a=127.0.0.1:10912", "--option", "endingOffsets=latest"],  # issue 49: it was taken
     "option endingOffsets='latest': is for batch reads (spark.read) only; a stream has no end"),
])
def test_bad_options_are_one_line_and_exit_2_before_spark(tmp_path, args, expected):
    result = hareplica("run", "bronze", "--workdir", str(tmp_path / "w"), *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert expected in one_line(result)
    assert not (tmp_path / "w").exists()  # nothing was started, nothing written


def test_a_workdir_that_is_a_file_is_named(tmp_path):
    (tmp_path / "w").write_text("not a folder")
    result = hareplica("run", "bronze", "--workdir", str(tmp_path / "w"), "--brokers", "broker-a=127.0.0.1:10912",
                       cwd=tmp_path)
    assert result.returncode == 2
    assert f"--workdir {tmp_path / 'w'}: exists and is not a folder" in one_line(result)


def test_an_unreachable_broker_is_named(tmp_path):
    port = _free_port()
    result = hareplica("run", "bronze", "--workdir", str(tmp_path / "w"), "--brokers", f"broker-a=127.0.0.1:{port}",
                       cwd=tmp_path)
    assert result.returncode == 2
    line = one_line(result)
    assert f"broker broker-a: master 127.0.0.1:{port - 1} is unreachable" in line and "refused" in line


@pytest.mark.parametrize("kind, how", [("http", "b'HTTP/1.1 400 Bad Request"), ("echo", "echo server")])
def test_a_peer_that_is_not_rocketmq_is_named(tmp_path, peer, kind, how):
    server = peer(kind)
    result = hareplica("run", "bronze", "--workdir", str(tmp_path / "w"), "--brokers",
                       f"broker-a=127.0.0.1:1/{server.addr}", cwd=tmp_path)
    assert result.returncode == 2
    line = one_line(result)
    assert f"broker broker-a (master): {server.addr} is not a RocketMQ broker's remoting port" in line
    assert how in line


@pytest.mark.spark
def test_an_error_inside_spark_is_our_one_line(tmp_path, peer, broker_factory):
    """The remoting port is a real stub broker, the HA port an HTTP server: the failure happens in a Spark task
    and comes back wrapped in Java exceptions; the CLI prints the NotAnHAPortError line, exit 1."""
    broker = broker_factory("master")
    from connector.client.producer import Producer

    with Producer(broker.remoting_addr) as producer:
        producer.send("orders", b"one message")
    http = peer("http")
    args = ["run", "bronze", "--workdir", str(tmp_path / "w"), "--trigger", "available-now", "--brokers",
            f"broker-a={http.addr}/{broker.remoting_addr}"]
    result = hareplica(*args, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    line = one_line(result, only=False)
    assert f"NotAnHAPortError: {http.addr} (broker broker-a) is not a RocketMQ HA port" in line, line
    others = [x for x in result.stderr.splitlines() if x.strip() and not x.startswith("error:")]
    assert others == [f"Spark's and py4j's log: {tmp_path / 'w' / 'logs' / 'bronze.log'}"], others  # Spark's: there
    debug = hareplica("--log-level", "DEBUG", *args, cwd=tmp_path)
    assert debug.returncode == 1 and "Traceback" in debug.stderr  # the stacks are there when asked for



@pytest.fixture
def stored_broker(broker_factory):
    """A stub master holding three messages."""
    from connector.client.producer import Producer

    broker = broker_factory("master")
    with Producer(broker.remoting_addr) as producer:
        for i in range(3):
            producer.send("orders", f"message {i}".encode() * 10)
    return broker


def _max_offset(broker) -> int:
    from tests.support.brokers import max_offset

    return max_offset(broker.remoting_addr)


@pytest.mark.parametrize("where, expected", [
    ("past the max", "is past its commitLogMaxOffset"),
    ("inside a record", "is not the start of a record (the bytes there begin"),
])
def test_a_starting_offset_the_broker_cannot_start_at_is_one_line_and_exit_2_before_spark(tmp_path, stored_broker,
                                                                                           where, expected):
    """Issue 22 item 4: these were found inside Spark (exit 1, Spark's banner and then the error)."""
    offset = _max_offset(stored_broker) + 1000 if where == "past the max" else 5
    result = hareplica("run", "bronze", "--workdir", str(tmp_path / "w"), "--brokers",
                       f"broker-a={stored_broker.ha_addr}", "--starting-offsets", f'{{"broker-a": {offset}}}',
                       cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    line = one_line(result)
    assert "option startingOffsets=" in line and f"offset {offset} of broker broker-a {expected}" in line, line


def test_a_starting_offset_at_a_record_start_is_accepted_by_the_check(tmp_path, stored_broker):
    from connector.options.parse import SourceOptions
    from streaming_apps.preflight import check_starting_offsets
    from tests.support.brokers import read_commitlog

    second = read_commitlog(stored_broker.commitlog_dir)[1].commit_log_offset
    options = SourceOptions.from_options({"brokers": f"broker-a={stored_broker.ha_addr}",
                                          "startingOffsets": f'{{"broker-a": {second}}}'})
    check_starting_offsets(options, tmp_path / "cp")  # no error: a record starts there
    offsets = tmp_path / "cp2" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text("v1")
    bad = SourceOptions.from_options({"brokers": f"broker-a={stored_broker.ha_addr}",
                                      "startingOffsets": '{"broker-a": 5}'})
    check_starting_offsets(bad, tmp_path / "cp2")  # a checkpoint with offsets: Spark ignores startingOffsets


def test_a_table_folder_that_is_not_a_table_is_one_line_and_exit_2_before_spark(tmp_path, stored_broker):
    folder = tmp_path / "w" / "tables" / "bronze"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("not a Delta table")
    result = hareplica("run", "bronze", "--workdir", str(tmp_path / "w"), "--brokers",
                       f"broker-a={stored_broker.ha_addr}", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    line = one_line(result)
    assert "table bronze: " in line and str(folder) in line, line
