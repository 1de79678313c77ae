"""Issue 51, object storage: the real S3 server of the test session (S3Proxy, tests/support/s3_server.py) and the
counting, fault-injecting proxy in front of it (tests/support/s3_proxy_faults.py) do what the object-storage tests
rely on.

pyarrow round trips with its default settings (multipart uploads with their checksums); a PUT with
``If-None-Match: *`` on an existing key is refused, as deltalake's commits need; the proxy counts requests by kind
and its ``503 SlowDown`` reaches the client; a restarted server keeps its data and its port.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import os
import time
import uuid
import zipfile
from email.utils import formatdate
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from tests.support.s3_proxy_faults import S3FaultProxy, request_kind
from tests.support.s3_server import TEST_BUCKET, staged_s3a_jars


@pytest.fixture(scope="module")
def s3_proxy(s3_server, tmp_path_factory):
    with S3FaultProxy.start(s3_server, workdir=tmp_path_factory.mktemp("s3-fault-proxy")) as proxy:
        yield proxy


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test's own in the session's bucket."""
    return f"{TEST_BUCKET}/test-s3-server/{uuid.uuid4().hex[:12]}"


def _sigv2_put(endpoint, key: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """PUT ``body`` at ``key`` of the test bucket, signed with AWS signature version 2 (which S3Proxy accepts
    besides v4): the shortest way to send a header pyarrow has no option for."""
    date = formatdate(usegmt=True)
    to_sign = f"PUT\n\napplication/octet-stream\n{date}\n/{TEST_BUCKET}/{key}"
    signature = base64.b64encode(hmac.new(endpoint.secret_key.encode(), to_sign.encode(), hashlib.sha1).digest())
    conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=30)
    try:
        conn.request("PUT", f"/{TEST_BUCKET}/{key}", body=body, headers={
            "Date": date, "Content-Type": "application/octet-stream",
            "Authorization": f"AWS {endpoint.access_key}:{signature.decode()}", **headers})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_pyarrow_round_trip(s3_server, prefix):
    fs = s3_server.filesystem()
    big = os.urandom(12 * 1024 * 1024)  # over pyarrow's 5 MiB part size: a multipart upload, default checksums
    with fs.open_output_stream(f"{prefix}/big.bin") as f:
        f.write(big)
    with fs.open_output_stream(f"{prefix}/dir/small.txt") as f:
        f.write(b"hello")
    listed = {i.path: i.size for i in fs.get_file_info(pafs.FileSelector(prefix, recursive=True)) if i.is_file}
    assert listed == {f"{prefix}/big.bin": len(big), f"{prefix}/dir/small.txt": 5}
    with fs.open_input_stream(f"{prefix}/big.bin") as f:
        assert f.read() == big
    # on disk: a bucket is a folder of the server's data folder, an object a file
    assert (s3_server.data_dir / prefix / "dir" / "small.txt").read_bytes() == b"hello"


def test_put_if_absent_is_refused_on_an_existing_key(s3_server, prefix):
    key = f"{prefix.split('/', 1)[1]}/_delta_log/00000000000000000000.json"
    assert _sigv2_put(s3_server, key, b"first", {"If-None-Match": "*"})[0] == 200
    status, body = _sigv2_put(s3_server, key, b"second", {"If-None-Match": "*"})
    assert status == 412 and b"<Code>PreconditionFailed</Code>" in body
    assert (s3_server.data_dir / TEST_BUCKET / key).read_bytes() == b"first"


def test_s3a_jars_staged():
    jars = staged_s3a_jars()
    cloud = next(j for j in jars if Path(j).name.startswith("spark-hadoop-cloud_"))
    with zipfile.ZipFile(cloud) as jar:
        assert "org/apache/spark/internal/io/cloud/AbortableStreamBasedCheckpointFileManager.class" in jar.namelist()
    assert any(Path(j).name == "hadoop-aws-3.5.0.jar" for j in jars)
    # not the 690 MB AWS SDK bundle, not the server, not a second Netty beside Spark's
    assert not any(Path(j).name.startswith(("bundle-", "s3proxy-", "netty-common-")) for j in jars)


@pytest.mark.parametrize(("method", "target", "headers", "kind"), [
    ("GET", "/b?list-type=2&prefix=x%2F", {}, "LIST"),
    ("GET", "/b", {}, "LIST"),
    ("GET", "/b/", {}, "LIST"),
    ("GET", "/", {}, "LIST"),
    ("GET", "/b?location", {}, "GET"),
    ("GET", "/b/k/x.json", {}, "GET"),
    ("HEAD", "/b/k", {}, "HEAD"),
    ("PUT", "/b/k", {}, "PUT"),
    ("PUT", "/b/k", {"x-amz-copy-source": "/b/j"}, "COPY"),
    ("POST", "/b/k?uploads", {}, "POST"),
    ("DELETE", "/b/k", {}, "DELETE"),
])
def test_request_kind(method, target, headers, kind):
    assert request_kind(method, target, headers) == kind


def test_proxy_counts_by_kind(s3_proxy, prefix):
    fs = s3_proxy.filesystem()
    s3_proxy.reset()
    with fs.open_output_stream(f"{prefix}/a.txt") as f:
        f.write(b"counted")
    after_put = s3_proxy.counts()
    assert after_put["PUT"] == 1 and after_put["GET"] == 0 and after_put["LIST"] == 0
    with fs.open_input_stream(f"{prefix}/a.txt") as f:
        assert f.read() == b"counted"
    fs.get_file_info(pafs.FileSelector(prefix))
    counts = s3_proxy.counts()
    assert counts["GET"] >= 1 and counts["LIST"] >= 1 and counts["PUT"] == 1
    key_requests = [(r.kind, r.status) for r in s3_proxy.requests() if r.target.startswith(f"/{prefix}/a.txt")]
    assert ("PUT", 200) in key_requests and ("GET", 206) in key_requests  # pyarrow reads in ranges
    assert s3_proxy.reset() == counts and sum(s3_proxy.counts().values()) == 0


def test_proxy_slowdown_reaches_the_client(s3_proxy, prefix):
    fs = s3_proxy.filesystem()
    s3_proxy.reset()
    s3_proxy.fail_next(20, kinds=("PUT", "POST"))
    once = s3_proxy.filesystem(retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
    try:
        with pytest.raises(OSError, match="SLOW_DOWN"):
            with once.open_output_stream(f"{prefix}/refused.txt") as f:
                f.write(b"x")
    finally:
        s3_proxy.clear_faults()
    refused = [r for r in s3_proxy.requests() if r.faulted]
    assert refused and all(r.status == 503 for r in refused)
    assert not fs.get_file_info(f"{prefix}/refused.txt").is_file

    # the answer is S3's: 503 with the XML error body, and the connection serves the next request; a time window
    def answer() -> tuple[int, bytes, str | None]:
        conn.request("GET", f"/{prefix}/nothing")
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("x-amz-request-id")

    conn = http.client.HTTPConnection(s3_proxy.host, s3_proxy.port, timeout=30)
    try:
        s3_proxy.fail_next(1)
        status, body, _ = answer()
        assert status == 503 and b"<Code>SlowDown</Code>" in body
        status, body, request_id = answer()  # forwarded this time: the server's own answer
        assert status in (403, 404) and b"<Error>" in body and request_id != "hareplica-fault-proxy"
        s3_proxy.fail_for(0.5)
        assert answer()[0] == 503
        time.sleep(0.6)
        assert answer()[0] != 503
    finally:
        conn.close()

    # a PUT refused once succeeds on pyarrow's next attempt (about 1 s later)
    s3_proxy.fail_next(1, kinds=("PUT",))
    with fs.open_output_stream(f"{prefix}/retried.txt") as f:
        f.write(b"y")
    with fs.open_input_stream(f"{prefix}/retried.txt") as f:
        assert f.read() == b"y"


def test_restart_keeps_data_and_port(s3_server, s3_proxy, prefix):
    fs = s3_server.filesystem()
    with fs.open_output_stream(f"{prefix}/kept.txt") as f:
        f.write(b"before restart")
    endpoint, pid = s3_server.endpoint, s3_server.pid
    with s3_server.down(kill=True):
        assert not s3_server.is_running()
        conn = http.client.HTTPConnection(s3_proxy.host, s3_proxy.port, timeout=30)
        try:  # the proxy ends the client's connection without an answer, as the dead server's would end
            conn.request("GET", f"/{prefix}/kept.txt")
            with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
                conn.getresponse()
        finally:
            conn.close()
    assert s3_server.endpoint == endpoint and s3_server.pid != pid
    for client in (s3_server.filesystem(), s3_proxy.filesystem()):
        with client.open_input_stream(f"{prefix}/kept.txt") as f:
            assert f.read() == b"before restart"
