"""A real S3-compatible server for tests: S3Proxy over a local folder (issue 51, object storage).

The jar comes from ``make jvm-peers`` (jvm/s3proxy.pom.xml → ``.jvm/s3proxy/lib``); Spark's ``s3a://`` jars from
jvm/s3a.pom.xml → ``.jvm/s3a/lib`` (:func:`staged_s3a_jars`). When they are missing every start raises
:class:`~tests.support.jvm_peers.JvmPeersMissing` ("run make jvm-peers"), so a test fails instead of skipping.

``S3Server.start(workdir)`` writes ``workdir/s3proxy.conf`` (S3Proxy's ``filesystem`` blob store in ``workdir/data``:
a bucket is a folder there, an object a file; SigV2 and SigV4 accepted for one key pair),
launches ``java -jar s3proxy-*.jar --properties s3proxy.conf`` on a free loopback port with a small heap and
returns once the server answers HTTP, or raises :class:`~tests.support.jvm_peers.JvmStartError` with the tail of
its console. ``stop()`` (SIGTERM, then SIGKILL), ``kill9()``, ``restart()`` (same port, same data), context
manager use; a started server is in :data:`tests.support.jvm_peers.LIVE_PEERS` until stopped, so a failing
test's report shows its console.

What a client needs: ``endpoint``, ``access_key``, ``secret_key``, ``region``; :meth:`S3Endpoint.env` (the
``AWS_*`` variables), :meth:`S3Endpoint.storage_options` (deltalake), :meth:`S3Endpoint.filesystem` (pyarrow),
:meth:`S3Endpoint.hadoop_conf` (Spark's ``s3a://``). :class:`tests.support.s3_proxy_faults.S3FaultProxy` puts a
counting, fault-injecting proxy in front of a server and offers the same.

S3Proxy 4.1.0 (jvm/s3proxy.pom.xml) behaves as S3 where these tests need it: ``PUT`` with ``If-None-Match: *``
answers 412 when the key exists, atomically on this store (deltalake's commits rely on it), and the CRC32 checksums
current AWS SDKs send by default are verified, so clients keep their default settings. (2.6.0 ignored
If-None-Match and refused pyarrow's multipart checksums unless the client ran with
``AWS_REQUEST_CHECKSUM_CALCULATION=WHEN_REQUIRED``.)
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from broker_stub.launcher import _ChildProcess, free_port
from connector.storage.config import StorageConfig
from streaming_apps.checkpoints import ABORTABLE_CHECKPOINT_FILE_MANAGER, CHECKPOINT_FILE_MANAGER_CONF
from streaming_apps.object_store import staged_s3a_jars as staged_jars
from tests.support.jvm_peers import LIVE_PEERS, REPO_ROOT, JvmPeersMissing, JvmStartError, java_binary

S3PROXY_LIB = REPO_ROOT / ".jvm" / "s3proxy" / "lib"  # jvm/s3proxy.pom.xml: one jar-with-dependencies
S3A_LIB = REPO_ROOT / ".jvm" / "s3a" / "lib"  # jvm/s3a.pom.xml: hadoop-aws, the AWS SDK modules, spark-hadoop-cloud

ACCESS_KEY = "hareplica"
SECRET_KEY = "hareplica-secret-key"
REGION = "us-east-1"
#: The bucket the session fixture ``s3_server`` creates
TEST_BUCKET = "hareplica-tests"

STARTUP_TIMEOUT_S = 60.0  # a JVM start on a busy 2-core machine; typical: 1.5-3 s
STOP_TIMEOUT_S = 15.0
HEAP = "128m"
JVM_OPTS = ("-Xms16m", "-XX:+UseSerialGC", "-Xss512k", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
            # logback's start-up status lines (it warns that the jar's CONTAINER appender is unused) say nothing
            "-Dlogback.statusListenerClass=ch.qos.logback.core.status.NopStatusListener")

#: Spark conf of the streaming checkpoint manager that writes S3 safely (streaming_apps.checkpoints).
ABORTABLE_CHECKPOINT_CONF = {CHECKPOINT_FILE_MANAGER_CONF: ABORTABLE_CHECKPOINT_FILE_MANAGER}


def s3proxy_jar(lib: Path = S3PROXY_LIB) -> Path:
    """The staged ``s3proxy-*-jar-with-dependencies.jar``. Raises JvmPeersMissing when it is not there."""
    jars = sorted(lib.glob("s3proxy-*-jar-with-dependencies.jar")) if lib.is_dir() else []
    if not jars:
        raise JvmPeersMissing(f"the S3Proxy jar is missing in {lib}: run `make jvm-peers` "
                              "(stages jvm/s3proxy.pom.xml with Maven; docs/real_peers.md)")
    return jars[-1]


def staged_s3a_jars(lib: Path = S3A_LIB) -> list[str]:
    """Absolute paths of every jar in ``lib`` for ``spark.jars`` (hadoop-aws, the AWS SDK v2 modules it links,
    spark-hadoop-cloud), sorted. Raises JvmPeersMissing when hadoop-aws or spark-hadoop-cloud is not there."""
    jars = staged_jars([lib.parent.parent.parent])
    names = [Path(j).name for j in jars]
    missing = [n.rstrip("-_") for n in ("hadoop-aws-", "spark-hadoop-cloud_", "s3-2")
               if not any(name.startswith(n) for name in names)]
    if missing:
        raise JvmPeersMissing(f"Spark's s3a jars missing in {lib} ({', '.join(missing)}): run `make jvm-peers` "
                              "(stages jvm/s3a.pom.xml with Maven; docs/real_peers.md)")
    return jars


class S3Endpoint:
    """What a client needs to reach an S3 endpoint (a server or a proxy in front of one): subclasses set
    ``host``, ``port``, ``access_key``, ``secret_key``, ``region``."""

    host: str
    port: int
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    region: str = REGION

    @property
    def endpoint(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        """The ``AWS_*`` environment variables of a client of this endpoint (pyarrow, deltalake, the AWS CLI):
        keys, region, ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP`` (deltalake's plain-HTTP switch) and no
        instance-metadata look-ups."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region, "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ALLOW_HTTP": "true", "AWS_EC2_METADATA_DISABLED": "true"}

    def storage_options(self, **extra: str) -> dict[str, str]:
        """deltalake's ``storage_options`` for ``s3://`` tables here (``extra`` added): endpoint, keys, region,
        plain HTTP. deltalake needs nothing else against S3Proxy: its commits are conditional PUTs
        (``If-None-Match: *``), which S3Proxy honours."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": self.region, "AWS_ALLOW_HTTP": "true",
                **extra}

    def filesystem(self, **kwargs):
        """A ``pyarrow.fs.S3FileSystem`` for this endpoint (``kwargs`` passed on, e.g. ``allow_bucket_creation``)."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(endpoint_override=f"{self.host}:{self.port}", scheme="http",
                                 access_key=self.access_key, secret_key=self.secret_key, region=self.region, **kwargs)

    def hadoop_conf(self) -> dict[str, str]:
        """Spark conf (``spark.hadoop.fs.s3a.*``) for ``s3a://`` paths here, as the apps derive it from the same
        settings (:meth:`connector.storage.config.StorageConfig.hadoop_conf`), with :func:`staged_s3a_jars` in
        ``spark.jars``."""
        return StorageConfig.from_options(self.storage_options(), environ={}).hadoop_conf()

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (CreateBucket through pyarrow); an existing one is kept."""
        self.filesystem(allow_bucket_creation=True).create_dir(name)


def _answers_http(host: str, port: int) -> bool:
    conn = http.client.HTTPConnection(host, port, timeout=1.0)
    try:
        conn.request("GET", "/")
        conn.getresponse().read()  # 403 AccessDenied for an unsigned request: the server is up
        return True
    except OSError:
        return False
    finally:
        conn.close()


_STARTED: list[S3Server] = []


@atexit.register
def _kill_left_running() -> None:
    """SIGKILL the servers a process leaves running when it exits (a script's exception, an interrupted run): the
    JVMs run in sessions of their own and would outlive it."""
    for server in _STARTED:
        with contextlib.suppress(Exception):
            server.kill9()


class S3Server(S3Endpoint, _ChildProcess):
    """One S3Proxy JVM serving ``data_dir`` on ``host:port`` (module doc). Attributes: ``endpoint``,
    ``access_key``, ``secret_key``, ``region``, ``workdir``, ``data_dir``, ``conf_path``, ``log_path``,
    ``process``."""

    what = "S3Proxy server"

    def __init__(self, workdir: Path, host: str, port: int, heap: str) -> None:
        self.workdir = Path(workdir)
        self.host = host
        self.port = port
        self.heap = heap
        self.data_dir = self.workdir / "data"
        self.conf_path = self.workdir / "s3proxy.conf"
        self.log_path = self.workdir / "console.log"  # stdout + stderr of the JVM (S3Proxy logs to the console)
        self.process: subprocess.Popen | None = None

    @classmethod
    def start(cls, workdir: Path, *, port: int | None = None, host: str = "127.0.0.1", heap: str = HEAP,
              timeout_s: float = STARTUP_TIMEOUT_S) -> S3Server:
        """Write ``workdir/s3proxy.conf`` and launch on ``port`` (default: a free one). Raises JvmPeersMissing,
        JvmStartError (after retrying twice with other ports when a free one was taken meanwhile)."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        server = cls(workdir, host, port or free_port(host), heap)
        server.data_dir.mkdir(exist_ok=True)
        for attempt in range(3):
            server._write_conf()
            try:
                server._launch(timeout_s)
                return server
            except JvmStartError as exc:
                if port is None and attempt < 2 and "Address already in use" in str(exc):
                    server.port = free_port(host)
                    continue
                raise
        raise AssertionError("unreachable")

    def _write_conf(self) -> None:
        self.conf_path.write_text(
            "# written by tests/support/s3_server.py\n"
            f"s3proxy.endpoint={self.endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={self.access_key}\n"
            f"s3proxy.credential={self.secret_key}\n"
            "jclouds.provider=filesystem\n"
            f"jclouds.filesystem.basedir={self.data_dir}\n"
            f"jclouds.identity={self.access_key}\n"
            f"jclouds.credential={self.secret_key}\n", encoding="latin-1")

    def command(self) -> list[str]:
        """The java command line (``JDK_JAVA_OPTIONS`` of the environment applies as well)."""
        return [java_binary(), f"-Xmx{self.heap}", *JVM_OPTS, f"-Duser.home={self.workdir}",
                "-jar", str(s3proxy_jar()), "--properties", str(self.conf_path)]

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _launch(self, timeout_s: float) -> None:
        cmd = self.command()
        with open(self.log_path, "ab") as console:
            console.write(f"--- launch {time.strftime('%H:%M:%S')}: {' '.join(cmd)}\n".encode())
            console.flush()
            self.process = subprocess.Popen(cmd, stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=self.workdir, start_new_session=True)
        LIVE_PEERS.append(self)
        if self not in _STARTED:
            _STARTED.append(self)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._forget()
                raise JvmStartError(f"{self.what} exited with code {self.process.returncode} during start-up "
                                    f"({self.workdir}):\n{self.log_tail()}")
            if _answers_http(self.host, self.port):
                return
            time.sleep(0.1)
        self.kill9()
        raise JvmStartError(f"{self.what} did not answer HTTP within {timeout_s} s ({self.workdir}):\n"
                            f"{self.log_tail()}")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait; returns the exit code. Raises BrokerStopError (after SIGKILL) when still alive
        ``timeout_s`` later."""
        try:
            return super().stop(timeout_s)
        finally:
            self._forget()

    def kill9(self) -> None:
        """SIGKILL: requests in flight get a reset connection."""
        super().kill9()
        self._forget()

    def _forget(self) -> None:
        if self in LIVE_PEERS and not self.is_running():
            LIVE_PEERS.remove(self)

    def restart(self, timeout_s: float = STARTUP_TIMEOUT_S) -> S3Server:
        """Start again on the same port over the same data, stopping the server first if it runs."""
        if self.is_running():
            self.stop()
        self._launch(timeout_s)
        return self

    @contextlib.contextmanager
    def down(self, seconds: float | None = None, *, kill: bool = False) -> Iterator[S3Server]:
        """``with server.down():`` — stopped in the block (clients get refused connections), restarted after it,
        at the earliest ``seconds`` after the stop. ``kill``: SIGKILL (requests in flight get a reset connection)
        instead of SIGTERM (Jetty's graceful stop, which takes ~2 s while clients hold idle connections)."""
        if kill:
            self.kill9()
        else:
            self.stop()
        stopped_at = time.monotonic()
        try:
            yield self
        finally:
            if seconds is not None:
                time.sleep(max(0.0, stopped_at + seconds - time.monotonic()))
            self.restart()


__all__ = ["ABORTABLE_CHECKPOINT_CONF", "ACCESS_KEY", "REGION", "S3A_LIB", "S3PROXY_LIB",
           "SECRET_KEY", "TEST_BUCKET", "S3Endpoint", "S3Server", "s3proxy_jar", "staged_s3a_jars"]
