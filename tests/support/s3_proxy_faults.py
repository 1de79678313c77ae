"""A counting, fault-injecting HTTP proxy in front of an S3 server, for tests (issue 51, object storage).

``S3FaultProxy.start(server)`` runs the proxy in a child process (``python -m tests.support.s3_proxy_faults``) on a
free loopback port. It forwards every request to ``server`` (an :class:`tests.support.s3_server.S3Endpoint`)
unchanged — the request line, every header including ``Host`` as the client sent it (SigV4 signs it: S3Proxy
checks the signature against what it receives) and the body, streamed in 64 KiB pieces both ways. A client uses
the proxy as it would the server: the proxy is an :class:`~tests.support.s3_server.S3Endpoint` too (``endpoint``,
``env()``, ``storage_options()``, ``filesystem()``, ``hadoop_conf()``, same keys).

A child process, not a thread of the test's: a client that holds the GIL while it waits for the network (some of
deltalake's calls, e.g. ``DeltaTable.history()``) would otherwise wait for a proxy that cannot run.

What it offers a test (through control requests under :data:`CONTROL_PREFIX`, which no S3 bucket name can
start with, neither forwarded nor counted):

- ``counts()``: requests forwarded (or refused) so far by kind — ``LIST`` (a GET with ``list-type``, or of a
  bucket or of the service root), ``GET``, ``HEAD``, ``PUT``, ``COPY`` (a PUT with ``x-amz-copy-source``),
  ``POST`` (multipart create/complete, multi-object delete), ``DELETE`` — and ``reset()``; ``requests()``: the
  last :data:`LOG_LIMIT` requests as :class:`Request` (method, target, kind, status, conditional headers).
- ``fail_next(n)``: answer the next ``n`` requests (of the given ``kinds``, default all) with ``503 SlowDown`` and
  S3's XML error body instead of forwarding them; ``fail_for(seconds)``: the same for a time window;
  ``clear_faults()``. Any status and S3 error code can be given instead.

When the server does not answer (stopped, killed) the proxy closes the client's connection without a response, as
a dead server's connection would end. The child exits when its parent does.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from tests.support.s3_server import S3Endpoint

CHUNK = 64 * 1024
LOG_LIMIT = 10_000
UPSTREAM_TIMEOUT_S = 120.0
START_TIMEOUT_S = 30.0
KINDS = ("LIST", "GET", "HEAD", "PUT", "COPY", "POST", "DELETE")
#: Control requests of the test process to the proxy process (S3 bucket names cannot hold an underscore)
CONTROL_PREFIX = "/__hareplica_proxy__/"
#: request headers kept in :attr:`Request.headers` (lower case)
LOGGED_HEADERS = ("if-none-match", "if-match", "x-amz-copy-source", "content-length", "range")
#: GET sub-resources of a bucket that list nothing
_BUCKET_SUBRESOURCES = {"location", "acl", "policy", "versioning", "lifecycle", "cors", "tagging", "encryption",
                        "logging", "notification", "replication", "website", "accelerate", "requestPayment",
                        "object-lock", "ownershipControls", "publicAccessBlock", "policyStatus"}
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass(frozen=True)
class Request:
    """One request the proxy saw: ``status`` is the answer's (None when the server did not answer), ``faulted``
    whether the proxy answered it itself, ``at`` the proxy's ``time.time()`` when it arrived."""

    method: str
    target: str
    kind: str
    status: int | None
    faulted: bool
    headers: dict[str, str]
    at: float


def request_kind(method: str, target: str, headers) -> str:
    """The kind (:data:`KINDS`) of a path-style S3 request ``method target`` (an unknown method: itself).

    A GET is a LIST when it has ``list-type`` (ListObjectsV2) or names no key (ListObjects of a bucket,
    ListMultipartUploads, ListBuckets), unless it asks for a bucket sub-resource (``?location``, ``?versioning``...).
    """
    parts = urlsplit(target)
    if method == "GET":
        query = {name for name, _ in parse_qsl(parts.query, keep_blank_values=True)}
        key = parts.path.lstrip("/").partition("/")[2]
        if "list-type" in query or not key and not query & _BUCKET_SUBRESOURCES:
            return "LIST"
        return "GET"
    if method == "PUT" and headers.get("x-amz-copy-source"):
        return "COPY"
    return method


# --- the test process's side -------------------------------------------------------------------------------------
class S3FaultProxy(S3Endpoint):
    """The proxy process (module doc), started by :meth:`start`. Use as a context manager, or ``close()``.
    Attributes: ``endpoint``, ``host``, ``port``, ``upstream``, ``log_path``, ``process``."""

    what = "S3 fault proxy"

    def __init__(self, upstream: S3Endpoint, host: str, workdir: Path) -> None:
        self.upstream = upstream
        self.host = host
        self.port = 0
        self.access_key, self.secret_key, self.region = upstream.access_key, upstream.secret_key, upstream.region
        self.workdir = workdir
        self.log_path = workdir / "s3-fault-proxy.log"
        self.process: subprocess.Popen | None = None

    @classmethod
    def start(cls, upstream: S3Endpoint, *, workdir: Path | None = None, host: str = "127.0.0.1",
              timeout_s: float = START_TIMEOUT_S) -> S3FaultProxy:
        """Start the proxy process in front of ``upstream`` on a free port of ``host``; its errors go to
        ``workdir/s3-fault-proxy.log`` (default: a new temporary folder). Raises RuntimeError when it does not
        answer within ``timeout_s``."""
        workdir = Path(workdir or tempfile.mkdtemp(prefix="s3-fault-proxy-"))
        workdir.mkdir(parents=True, exist_ok=True)
        proxy = cls(upstream, host, workdir)
        port_file = workdir / f"s3-fault-proxy-{os.getpid()}-{id(proxy)}.port"
        port_file.unlink(missing_ok=True)
        repo_root = Path(__file__).resolve().parents[2]
        cmd = [sys.executable, "-m", "tests.support.s3_proxy_faults", "--listen", host,
               "--upstream", f"{upstream.host}:{upstream.port}", "--port-file", str(port_file),
               "--parent-pid", str(os.getpid())]
        with open(proxy.log_path, "ab") as log:
            proxy.process = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=repo_root,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo_root),
                                                                                 os.environ.get("PYTHONPATH")]))})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proxy.process.poll() is not None:
                raise RuntimeError(f"{cls.what} exited with code {proxy.process.returncode}:\n{proxy.log_tail()}")
            if port_file.exists() and (text := port_file.read_text().strip()):
                proxy.port = int(text)
                port_file.unlink()
                return proxy
            time.sleep(0.05)
        proxy.close()
        raise RuntimeError(f"{cls.what} did not start within {timeout_s} s:\n{proxy.log_tail()}")

    def close(self) -> None:
        """Stop the proxy process (SIGTERM, then SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def __enter__(self) -> S3FaultProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _control(self, method: str, what: str, body: dict | None = None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            conn.request(method, CONTROL_PREFIX + what, body=payload,
                         headers={"Content-Type": "application/json"} if payload else {})
            response = conn.getresponse()
            text = response.read()
            if response.status != 200:
                raise RuntimeError(f"{self.what}: {method} {what} answered {response.status}: {text[:500]!r}")
            return json.loads(text)
        finally:
            conn.close()

    def counts(self) -> dict[str, int]:
        """``{kind: requests}`` since the start or the last :meth:`reset` (every kind of :data:`KINDS`)."""
        return self._control("GET", "counts")

    def requests(self) -> list[Request]:
        """The requests since the start or the last :meth:`reset`, oldest first (the last :data:`LOG_LIMIT`)."""
        return [Request(**r) for r in self._control("GET", "requests")]

    def reset(self) -> dict[str, int]:
        """Zero the counts and the request log; returns the counts before."""
        return self._control("POST", "reset")

    def fail_next(self, n: int, *, kinds: tuple[str, ...] | None = None, status: int = 503, code: str = "SlowDown",
                  message: str = "Please reduce your request rate.") -> None:
        """Answer the next ``n`` requests of ``kinds`` (default: any) with ``status`` and S3 error ``code``."""
        self._control("POST", "faults", {"n": n, "seconds": None, "kinds": list(kinds) if kinds else None,
                                         "status": status, "code": code, "message": message})

    def fail_for(self, seconds: float, *, kinds: tuple[str, ...] | None = None, status: int = 503,
                 code: str = "SlowDown", message: str = "Please reduce your request rate.") -> None:
        """Answer every request of ``kinds`` (default: any) for the next ``seconds`` with ``status`` and ``code``."""
        self._control("POST", "faults", {"n": None, "seconds": seconds, "kinds": list(kinds) if kinds else None,
                                         "status": status, "code": code, "message": message})

    def clear_faults(self) -> None:
        """Forward every request again."""
        self._control("DELETE", "faults")

    @contextlib.contextmanager
    def failing(self, seconds: float, **kwargs):
        """``with proxy.failing(10):`` — :meth:`fail_for` ``seconds``, cleared at the end of the block."""
        self.fail_for(seconds, **kwargs)
        try:
            yield self
        finally:
            self.clear_faults()


# --- the proxy process ------------------------------------------------------------------------------------------
class _Fault:
    def __init__(self, status: int, code: str, message: str, kinds: list[str] | None, n: int | None,
                 seconds: float | None) -> None:
        self.status, self.code, self.message = status, code, message
        self.kinds = frozenset(kinds) if kinds else None
        self.remaining = n
        self.until = time.monotonic() + seconds if seconds is not None else None

    def take(self, kind: str) -> bool:
        """Whether this fault answers a request of ``kind`` now (and count it)."""
        if self.kinds is not None and kind not in self.kinds:
            return False
        if self.until is not None:
            return time.monotonic() < self.until
        if self.remaining:
            self.remaining -= 1
            return True
        return False

    def spent(self) -> bool:
        if self.until is not None:
            return time.monotonic() >= self.until
        return not self.remaining


class _ProxyState:
    """Counts, request log and faults of the proxy process (thread-safe)."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.log: deque[Request] = deque(maxlen=LOG_LIMIT)
        self.faults: list[_Fault] = []

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {kind: self.counts.get(kind, 0) for kind in KINDS} | dict(self.counts)

    def record(self, request: Request) -> None:
        with self.lock:
            self.counts[request.kind] += 1
            self.log.append(request)

    def fault_for(self, kind: str) -> _Fault | None:
        with self.lock:
            self.faults = [f for f in self.faults if not f.spent()]
            for fault in self.faults:
                if fault.take(kind):
                    return fault
        return None

    def control(self, method: str, what: str, body: dict | None):
        """The answer (JSON-able) to a control request, or None for an unknown one."""
        with self.lock:
            if (method, what) == ("GET", "counts"):
                return {kind: self.counts.get(kind, 0) for kind in KINDS} | dict(self.counts)
            if (method, what) == ("GET", "requests"):
                return [asdict(r) for r in self.log]
            if (method, what) == ("POST", "reset"):
                before = {kind: self.counts.get(kind, 0) for kind in KINDS} | dict(self.counts)
                self.counts.clear()
                self.log.clear()
                return before
            if (method, what) == ("POST", "faults"):
                self.faults.append(_Fault(**body))
                return {}
            if (method, what) == ("DELETE", "faults"):
                self.faults.clear()
                return {}
        return None


def _error_body(code: str, message: str, target: str) -> bytes:
    return (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message>"
            f"<Resource>{urlsplit(target).path}</Resource><RequestId>hareplica-fault-proxy</RequestId></Error>"
            ).encode()


class _ProxyHandler(BaseHTTPRequestHandler):
    """One client connection: its requests go, one at a time, over one connection to the server."""

    state: _ProxyState
    protocol_version = "HTTP/1.1"  # keep-alive, as S3 clients expect
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's signature
        pass

    def handle_expect_100(self) -> bool:
        return True  # decided per request in _proxy: a faulted request gets its error instead of "100 Continue"

    def do_GET(self) -> None:
        if self.path.startswith(CONTROL_PREFIX):
            self._control()
        else:
            self._proxy()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_OPTIONS = do_PATCH = do_GET

    def _control(self) -> None:
        raw = b"".join(self._body_pieces())
        answer = self.state.control(self.command, self.path[len(CONTROL_PREFIX):],
                                    json.loads(raw) if raw else None)
        body = json.dumps(answer).encode()
        self.send_response_only(200 if answer is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _proxy(self) -> None:
        kind = request_kind(self.command, self.path, self.headers)
        logged = {k: v for k in LOGGED_HEADERS if (v := self.headers.get(k)) is not None}
        at = time.time()
        fault = self.state.fault_for(kind)
        if fault is not None:
            self._answer_fault(fault)
            self.state.record(Request(self.command, self.path, kind, fault.status, True, logged, at))
            return
        if self.headers.get("Expect", "").lower() == "100-continue":
            self.send_response_only(100)
            self.end_headers()
        status = None
        try:
            status = self._forward()
        finally:
            self.state.record(Request(self.command, self.path, kind, status, False, logged, at))

    def _answer_fault(self, fault: _Fault) -> None:
        expects = self.headers.get("Expect", "").lower() == "100-continue"
        if not expects:
            self._drain_body()  # the connection stays usable for the next request
        body = _error_body(fault.code, fault.message, self.path)
        self.send_response_only(fault.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("x-amz-request-id", "hareplica-fault-proxy")
        self.send_header("Content-Length", str(len(body)))
        if expects:  # the client may or may not send the body now: this connection ends here
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _drain_body(self) -> None:
        for _ in self._body_pieces():
            pass

    def _body_pieces(self):
        """The request body in pieces (a chunked one decoded)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailer lines
                    return
                yield from self._read_exactly(size)
                self.rfile.readline()
        else:
            yield from self._read_exactly(int(self.headers.get("Content-Length") or 0))

    def _read_exactly(self, left: int):
        while left:
            piece = self.rfile.read(min(CHUNK, left))
            if not piece:
                raise ConnectionError("the client closed the connection mid-body")
            left -= len(piece)
            yield piece

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """The connection to the server, and whether it served a request before. One the server closed while it
        was idle (its idle timeout, a restart) is replaced first: the proxy must not turn that into a failure."""
        if self._upstream is not None and self._upstream.sock is not None:
            readable, _, _ = select.select([self._upstream.sock], [], [], 0)
            if readable:  # an idle connection has nothing to read unless the server closed it
                self._drop_upstream()
        if self._upstream is None:
            self._upstream = http.client.HTTPConnection(*self.state.upstream, timeout=UPSTREAM_TIMEOUT_S)
            return self._upstream, False
        return self._upstream, self._upstream.sock is not None

    def _forward(self) -> int | None:
        """Send the request to the server and its answer back; the answer's status, or None when the server did
        not answer (then the client's connection is closed). A request without a body is sent once more on a new
        connection when a reused one failed."""
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        bodyless = not chunked and int(self.headers.get("Content-Length") or 0) == 0
        while True:
            conn, reused = self._connection()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        conn.putheader(name, value)
                if chunked:
                    conn.putheader("Transfer-Encoding", "chunked")
                conn.endheaders()
                for piece in self._body_pieces():
                    conn.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                if chunked:
                    conn.send(b"0\r\n\r\n")
                response = conn.getresponse()
                break
            except (OSError, http.client.HTTPException):
                self._drop_upstream()
                if reused and bodyless:
                    continue
                self.close_connection = True  # as a dead server's connection: no answer
                return None
        try:
            self._relay(response)
        except (OSError, http.client.HTTPException):
            self._drop_upstream()
            self.close_connection = True
        return response.status

    def _relay(self, response: http.client.HTTPResponse) -> None:
        self.send_response_only(response.status, response.reason)
        body_allowed = self.command != "HEAD" and response.status not in (204, 304)
        chunked = body_allowed and response.getheader("Content-Length") is None
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        if response.will_close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if body_allowed:
            while piece := response.read(CHUNK):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        else:
            response.read()
        if response.will_close:
            self._drop_upstream()

    def _drop_upstream(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._drop_upstream()


def serve(listen: str, upstream: str, port_file: Path, parent_pid: int | None) -> None:
    """The proxy process: serve until SIGTERM, or until ``parent_pid`` is gone."""
    host, _, port = upstream.rpartition(":")

    class Handler(_ProxyHandler):
        state = _ProxyState(host, int(port))

    httpd = ThreadingHTTPServer((listen, 0), Handler)
    httpd.daemon_threads = True
    httpd.request_queue_size = 128
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown, daemon=True).start())
    if parent_pid:
        def watch_parent() -> None:
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            httpd.shutdown()

        threading.Thread(target=watch_parent, daemon=True).start()
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(httpd.server_address[1]))
    tmp.replace(port_file)
    httpd.serve_forever(poll_interval=0.2)
    httpd.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1")
    parser.add_argument("--upstream", required=True, help="host:port of the S3 server")
    parser.add_argument("--port-file", type=Path, required=True, help="where to write the port listened on")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    args = parser.parse_args(argv)
    serve(args.listen, args.upstream, args.port_file, args.parent_pid)


__all__ = ["CONTROL_PREFIX", "KINDS", "LOG_LIMIT", "Request", "S3FaultProxy", "request_kind"]

if __name__ == "__main__":
    main()
