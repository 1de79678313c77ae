"""Real Apache RocketMQ processes for tests: 4.9 name server and brokers, 5.x brokers and controller.

The jars come from ``make jvm-peers`` (``.jvm/rocketmq-4.9/lib``, see docs/real_peers.md "Real RocketMQ
brokers"); when they are missing every start raises :class:`JvmPeersMissing` ("run make jvm-peers"), so a
test fails instead of skipping.

``RealNameServer.start(workdir)`` and ``RealBroker.start(workdir, **props)`` mirror
:class:`broker_stub.launcher.BrokerProcess`: they write a config file into ``workdir`` (a ``broker.conf`` of
RocketMQ property names; free loopback ports below the ephemeral range, ``brokerIP1 = brokerIP2 =
127.0.0.1``, ``storePathRootDir`` inside ``workdir``), generate a private ``ROCKETMQ_HOME`` with small
logback configurations writing into ``workdir/logs/``, launch ``java`` with a small heap and return once
the process printed "boot success" and its ports accept connections — or raise :class:`JvmStartError`
with the tail of its console and log files within ``timeout_s``. ``user.home`` points into ``workdir`` too,
so nothing is written outside it. Use them as context managers; ``stop()`` (SIGTERM, then SIGKILL),
``kill9()``, ``sigstop()`` / ``sigcont()``, ``restart()`` (same config, same store).

A 4.9 broker always listens on ``listenPort`` (remoting), ``listenPort + 1`` (HA; a configured
``haListenPort`` is overwritten at start) and ``listenPort - 2`` (the VIP remoting port).

``RealBroker.start(workdir, version="5", ...)`` runs the 5.x jars (``.jvm/rocketmq-5/lib``) the same way
(a DLedger broker opens no HA port); ``RealController.start(workdir)`` runs a 5.x controller for brokers in
controller mode.

Every process started and not yet stopped is in :data:`LIVE_PEERS`, so a test report can show their logs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import javaproperties

from broker_stub.launcher import (
    BrokerProcessError,
    BrokerStartError,
    BrokerStopError,
    _addr,
    _ChildProcess,
    _port_open,
    free_port,
    free_port_pair,
)
from connector.errors import BrokerAdminError
from connector.protocol.broker import ha_listen_port, vip_listen_port
from tests.support.brokers import runtime_info

REPO_ROOT = Path(__file__).resolve().parents[2]
ROCKETMQ_LIB = REPO_ROOT / ".jvm" / "rocketmq-4.9" / "lib"
ROCKETMQ5_LIB = REPO_ROOT / ".jvm" / "rocketmq-5" / "lib"  # jvm/rocketmq-5.pom.xml: a 5.x broker, no name server
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
CONTROLLER_MAIN = "org.apache.rocketmq.controller.ControllerStartup"  # 5.x only (rocketmq-controller)
BOOT_MARKER = "boot success"

STARTUP_TIMEOUT_S = 90.0  # a JVM start on a busy 2-core machine; typical: 3-6 s
#: broker.conf values every RealBroker gets unless given: the 200 ms default of waitTimeMillsInSendQueue refuses
#: pipelined sends with TIMEOUT_CLEAN_QUEUE (SYSTEM_BUSY) whenever a busy 2-core machine keeps a request queued
#: longer (BrokerFastFailure); tests and benchmarks measure other things
REAL_BROKER_DEFAULTS = {"waitTimeMillsInSendQueue": "10000"}
STOP_TIMEOUT_S = 30.0  # a broker's shutdown hook flushes and persists its config files
HEAP = "256m"
JVM_OPTS = (
    "-Xms64m", "-XX:+UseSerialGC", "-Xss512k", "-XX:TieredStopAtLevel=1", "-XX:MaxDirectMemorySize=512m",
    "-XX:-OmitStackTraceInFastThrow", "-Djava.net.preferIPv4Stack=true",
    # RocketMQ 4.9 frees mapped buffers through JDK internals (MappedFile.clean); Java 17 needs these opens
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
)

LIVE_PEERS: list[_JavaProcess] = []


class JvmPeersMissing(RuntimeError):
    """The real RocketMQ jars (or ``java``) are not there; the message says what to run."""


class JvmStartError(BrokerStartError):
    """A real RocketMQ process exited or did not boot in time; the message holds its console and log tail."""


def rocketmq_classpath(lib: Path = ROCKETMQ_LIB) -> str:
    """``lib/*`` for ``java -cp``. Raises JvmPeersMissing when the broker, name-server or store jar is absent.

    The 5.x folder (:data:`ROCKETMQ5_LIB`) holds no name server: only the broker, store and client are needed.
    """
    needed = ("rocketmq-broker-", "rocketmq-store-", "rocketmq-client-")
    if lib != ROCKETMQ5_LIB:
        needed += ("rocketmq-namesrv-",)
    names = [p.name for p in lib.glob("*.jar")] if lib.is_dir() else []
    missing = [n.rstrip("-") for n in needed if not any(name.startswith(n) for name in names)]
    if missing:
        raise JvmPeersMissing(f"real RocketMQ jars missing in {lib} ({', '.join(missing)}): run `make jvm-peers` "
                              "(stages jvm/rocketmq-*.pom.xml with Maven; docs/real_peers.md)")
    return f"{lib}/*"


def java_binary() -> str:
    """The ``java`` on PATH. Raises JvmPeersMissing when there is none."""
    java = shutil.which("java")
    if java is None:
        raise JvmPeersMissing("no `java` on PATH: install Java 17 (Debian/Ubuntu: apt-get install "
                              "openjdk-17-jre-headless)")
    return java


_LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<!-- written by tests/support/jvm_peers.py: every logger into one file -->
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log_file}</file>
    <append>true</append>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level [%thread] %logger{{0}} - %msg%n</pattern></encoder>
  </appender>
  <logger name="RocketmqStats" level="WARN"/>
  <logger name="RocketmqWaterMark" level="WARN"/>
  <logger name="RocketmqRemoting" level="WARN"/>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def write_rocketmq_home(home: Path, log_dir: Path) -> Path:
    """Create ``home/conf/logback_{broker,namesrv,tools}.xml`` (one FileAppender each, into ``log_dir``).

    The 4.9 entry points load ``$ROCKETMQ_HOME/conf/logback_<role>.xml`` and exit when ROCKETMQ_HOME is
    unset. Returns ``home``.
    """
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    for role in ("broker", "namesrv", "tools"):
        (conf / f"logback_{role}.xml").write_text(_LOGBACK.format(log_file=log_dir / f"{role}.log"),
                                                  encoding="utf-8")
    return home


@contextlib.contextmanager
def killed_at_exit(peer: _JavaProcess) -> Iterator[_JavaProcess]:
    """``with killed_at_exit(RealBroker.start(...)) as broker:`` — SIGKILL at the end instead of the clean
    stop of ``with RealBroker.start(...)``, for a module fixture whose store nobody reads afterwards: a
    broker's shutdown hooks take 5-15 s (4.9.8 / 5.x) that the suite need not wait."""
    try:
        yield peer
    finally:
        peer.kill9()


def _text_props(props: dict[str, object]) -> dict[str, str]:
    return {k: (("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in props.items()}


def _all_threads_stopped(pid: int) -> bool:
    """True when every thread of ``pid`` is in state T (stopped) per ``/proc/<pid>/task/*/stat``."""
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread exited
        if state not in ("T", "t"):
            return False
    return True


class _JavaProcess(_ChildProcess):
    """One real RocketMQ JVM: launch with a generated ROCKETMQ_HOME, wait for boot, signals, log tails.

    Subclasses set ``what``, ``main_class``, ``role`` (logback file name) and implement ``_ports()``.
    """

    main_class = ""
    role = ""
    lib = ROCKETMQ_LIB  # the staged jars this process runs from

    def __init__(self, workdir: Path, heap: str) -> None:
        self.workdir = Path(workdir)
        self.heap = heap
        self.conf_path = self.workdir / f"{self.role}.conf"
        self.log_path = self.workdir / "console.log"  # stdout + stderr of the JVM
        self.log_dir = self.workdir / "logs"
        self.home = self.workdir / "rocketmq_home"
        self.process: subprocess.Popen | None = None
        self.suspended = False

    @property
    def logback_log(self) -> Path:
        """The file the process logs into (RocketMQ's loggers, level INFO)."""
        return self.log_dir / f"{self.role}.log"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _ports(self) -> list[tuple[str, int]]:
        raise NotImplementedError

    def command(self) -> list[str]:
        """The java command line (without the environment: ``ROCKETMQ_HOME``)."""
        return [java_binary(), f"-Xmx{self.heap}", *JVM_OPTS, f"-Duser.home={self.workdir}",
                "-cp", rocketmq_classpath(self.lib), self.main_class, "-c", str(self.conf_path)]

    def _launch(self, timeout_s: float) -> None:
        cmd = self.command()
        write_rocketmq_home(self.home, self.log_dir)
        with open(self.log_path, "ab") as console:
            start_at = console.tell()
            console.write(f"--- launch {time.strftime('%H:%M:%S')}: {' '.join(cmd)}\n".encode())
            console.flush()
            self.process = subprocess.Popen(
                cmd, stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                env={**os.environ, "ROCKETMQ_HOME": str(self.home)}, start_new_session=True)
        self.suspended = False
        LIVE_PEERS.append(self)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise JvmStartError(f"{self.what} exited with code {self.process.returncode} during start-up "
                                    f"({self.workdir}):\n{self.log_tail()}")
            if self._booted(start_at) and all(_port_open(h, p) for h, p in self._ports()) and self._ready():
                return
            time.sleep(0.1)
        self.kill9()
        raise JvmStartError(f"{self.what} did not boot within {timeout_s} s ({self.workdir}):\n{self.log_tail()}")

    def _ready(self) -> bool:
        """Whether the booted process answers requests (subclasses check more)."""
        return True

    def _booted(self, start_at: int) -> bool:
        with open(self.log_path, "rb") as console:
            console.seek(start_at)
            return BOOT_MARKER.encode() in console.read()

    # --- signals ---------------------------------------------------------------------------------------
    def sigstop(self) -> None:
        """Freeze the JVM (SIGSTOP): its sockets stay open but nothing is read or written.

        Returns once every thread of the JVM is in the stopped state: the kernel stops a thread group
        thread by thread, so on a loaded machine a running thread (e.g. the HA client's) could otherwise
        still send one ack after ``kill`` returned. Raises TimeoutError when that takes over 10 s.
        """
        if self.is_running():
            os.kill(self.process.pid, signal.SIGSTOP)
            self.suspended = True
            deadline = time.monotonic() + 10
            while not _all_threads_stopped(self.process.pid):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pid {self.process.pid}: not every thread stopped 10 s after SIGSTOP")
                time.sleep(0.01)

    def sigcont(self) -> None:
        """Resume a frozen JVM (SIGCONT)."""
        if self.is_running():
            os.kill(self.process.pid, signal.SIGCONT)
        self.suspended = False

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGCONT if frozen, SIGTERM (the shutdown hook runs) and wait; returns the exit code.

        Raises BrokerStopError (after SIGKILL) when still alive ``timeout_s`` later.
        """
        if self.suspended:
            self.sigcont()
        try:
            return super().stop(timeout_s)
        finally:
            self._forget()

    def kill9(self) -> None:
        """SIGKILL (a broker then recovers its store as after a crash: the ``abort`` file stays)."""
        super().kill9()
        self.suspended = False
        self._forget()

    def _forget(self) -> None:
        if self in LIVE_PEERS and not self.is_running():
            LIVE_PEERS.remove(self)

    def restart(self, timeout_s: float = STARTUP_TIMEOUT_S) -> _JavaProcess:
        """Start the same config (same store) again, stopping the process first if it runs."""
        if self.is_running():
            self.stop()
        self._launch(timeout_s)
        return self

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the console output and of the logback log, labelled."""
        parts = []
        for path in (self.log_path, self.logback_log):
            try:
                text = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
            except OSError:
                text = ["(none)"]
            parts.append(f"--- {path} (last {lines} lines)\n" + "\n".join(text))
        return "\n".join(parts)


class RealNameServer(_JavaProcess):
    """A real 4.9 name server (``NamesrvStartup``); ``addr`` is its ``host:port``."""

    what = "real name server"
    main_class = NAMESRV_MAIN
    role = "namesrv"

    def __init__(self, workdir: Path, host: str, port: int, heap: str) -> None:
        super().__init__(workdir, heap)
        self.host = host
        self.port = port

    @property
    def addr(self) -> str:
        return _addr(self.host, self.port)

    def _ports(self) -> list[tuple[str, int]]:
        return [(self.host, self.port)]

    @classmethod
    def start(cls, workdir: Path, *, port: int | None = None, host: str = "127.0.0.1", heap: str = "128m",
              timeout_s: float = STARTUP_TIMEOUT_S) -> RealNameServer:
        """Launch on ``port`` (default: a free one). Raises JvmPeersMissing, JvmStartError."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        ns = cls(workdir, host, port or free_port(host), heap)
        ns.conf_path.write_text(f"# written by tests/support/jvm_peers.py\nlistenPort={ns.port}\n",
                                encoding="latin-1")
        ns._launch(timeout_s)
        return ns


class RealController(_JavaProcess):
    """A real 5.x controller (``ControllerStartup``, jvm/rocketmq-5.pom.xml): a one-node DLedger controller
    group that brokers in controller mode (``enableControllerMode=true``, ``controllerAddr``) register with.

    ``addr`` is its ``host:port``: a DLedger controller serves the brokers' requests on its DLedger peer port
    (``controllerDLegerPeers``, peer ``n0``) — the ``listenPort`` of its config opens nothing. Its own logs go to
    ``workdir/logs/rocketmqlogs/`` (the controller jar's logback file; ``user.home`` is ``workdir``).
    """

    what = "real controller"
    main_class = CONTROLLER_MAIN
    role = "controller"
    lib = ROCKETMQ5_LIB

    def __init__(self, workdir: Path, host: str, port: int, heap: str) -> None:
        super().__init__(workdir, heap)
        self.host = host
        self.port = port

    @property
    def addr(self) -> str:
        return _addr(self.host, self.port)

    @property
    def logback_log(self) -> Path:
        return self.workdir / "logs" / "rocketmqlogs" / "broker_default.log"

    def _ports(self) -> list[tuple[str, int]]:
        return [(self.host, self.port)]

    @classmethod
    def start(cls, workdir: Path, *, host: str = "127.0.0.1", heap: str = "128m",
              timeout_s: float = STARTUP_TIMEOUT_S) -> RealController:
        """Launch on a free port (store and config inside ``workdir``). Raises JvmPeersMissing (no
        rocketmq-controller jar: run make jvm-peers), JvmStartError."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        lib = ROCKETMQ5_LIB
        if not any(lib.glob("rocketmq-controller-*.jar")):
            raise JvmPeersMissing(f"rocketmq-controller jar missing in {lib}: run `make jvm-peers`")
        ctl = cls(workdir, host, free_port(host), heap)
        props = {"controllerDLegerGroup": "hareplica-ctl", "controllerDLegerPeers": f"n0-{host}:{ctl.port}",
                 "controllerDLegerSelfId": "n0", "controllerStorePath": workdir / "store",
                 "configStorePath": workdir / "controller.properties", "mappedFileSize": 4 << 20}
        ctl.conf_path.write_text(javaproperties.dumps({k: str(v) for k, v in props.items()}, timestamp=None),
                                 encoding="latin-1")
        ctl._launch(timeout_s)
        return ctl


class RealBroker(_JavaProcess):
    """A real 4.9 broker (``BrokerStartup``): master or slave, any ``broker.conf`` properties.

    Attributes as :class:`broker_stub.launcher.BrokerProcess`: ``remoting_addr``, ``ha_addr``, ``vip_addr``,
    ``listen_port``, ``ha_port``, ``store_dir``, ``commitlog_dir``, ``conf_path``, ``props``; plus
    ``log_path`` (console) and ``logback_log``.
    """

    what = "real broker"
    main_class = BROKER_MAIN
    role = "broker"

    def __init__(self, workdir: Path, props: dict[str, str], heap: str, version: str = "4.9") -> None:
        super().__init__(workdir, heap)
        self.props = props
        self.version = version
        self.lib = ROCKETMQ5_LIB if version == "5" else ROCKETMQ_LIB

    @property
    def logback_log(self) -> Path:
        """4.9: the generated logback file; 5.x logs with the broker jar's own rmq.broker.logback.xml into
        ``${user.home}/logs/rocketmqlogs`` (``user.home`` is ``workdir``)."""
        if self.version == "5":
            return self.workdir / "logs" / "rocketmqlogs" / "broker.log"
        return super().logback_log

    @property
    def host(self) -> str:
        return self.props["brokerIP1"]

    @property
    def listen_port(self) -> int:
        return int(self.props["listenPort"])

    @property
    def ha_port(self) -> int:
        return ha_listen_port(self.listen_port)  # BrokerStartup overwrites a configured haListenPort

    @property
    def remoting_addr(self) -> str:
        return _addr(self.host, self.listen_port)

    @property
    def vip_addr(self) -> str:
        return _addr(self.host, vip_listen_port(self.listen_port))

    @property
    def ha_addr(self) -> str:
        return _addr(self.props["brokerIP2"], self.ha_port)

    @property
    def store_dir(self) -> Path:
        return Path(self.props["storePathRootDir"])

    @property
    def commitlog_dir(self) -> Path:
        return Path(self.props.get("storePathCommitLog") or self.store_dir / "commitlog")

    @property
    def config_dir(self) -> Path:
        """``store/config``: topics.json, consumerOffset.json, delayOffset.json, subscriptionGroup.json."""
        return self.store_dir / "config"

    def _ports(self) -> list[tuple[str, int]]:
        if self.props.get("enableDLegerCommitLog") == "true":  # a DLedger store runs no HA service
            return [(self.host, self.listen_port)]
        return [(self.host, self.listen_port), (self.props["brokerIP2"], self.ha_port)]

    def _ready(self) -> bool:
        # A 4.9 broker answers GET_BROKER_RUNTIME_INFO with a SYSTEM_ERROR (NoSuchElementException) until its
        # StoreStatsService took the first 1 s sample; wait for a real answer.
        try:
            return runtime_info(self.remoting_addr).get("commitLogMaxOffset") is not None
        except AssertionError as exc:  # aclEnable=true: an unsigned request is refused once requests are served
            return "AclException" in str(exc)
        except (OSError, BrokerAdminError):
            return False

    @classmethod
    def start(cls, workdir: Path, *, heap: str = HEAP, timeout_s: float = STARTUP_TIMEOUT_S, version: str = "4.9",
              **props: object) -> RealBroker:
        """Write ``workdir/broker.conf`` and launch; see the module doc.

        ``version`` "4.9" (default) runs the jars of :data:`ROCKETMQ_LIB`, "5" those of :data:`ROCKETMQ5_LIB`
        (jvm/rocketmq-5.pom.xml) in classic master/slave mode: ``enableControllerMode=false`` and
        ``enableDLegerCommitLog=false`` unless given, so replication is DefaultHAService's (same property
        names as 4.9; the HA port is ``listenPort + 1`` when ``haListenPort`` is unset).

        ``props`` are RocketMQ property names (``brokerRole="SLAVE", brokerId=1, namesrvAddr=...``); a SLAVE
        gets ``brokerId=1`` unless given, and :data:`REAL_BROKER_DEFAULTS` unless given. Raises
        JvmPeersMissing, JvmStartError (after retrying twice with
        other ports when the chosen ones were taken meanwhile).
        """
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        text = _text_props(props)
        text.setdefault("brokerIP1", "127.0.0.1")
        text.setdefault("brokerIP2", text["brokerIP1"])
        text.setdefault("brokerClusterName", "TestCluster")
        text.setdefault("brokerName", "broker-a")
        text.setdefault("storePathRootDir", str(workdir / "store"))
        for key, value in REAL_BROKER_DEFAULTS.items():
            text.setdefault(key, value)
        if text.get("brokerRole") == "SLAVE":
            text.setdefault("brokerId", "1")
        if version == "5":
            text.setdefault("enableControllerMode", "false")
            text.setdefault("enableDLegerCommitLog", "false")
        elif version != "4.9":
            raise ValueError(f"RealBroker version must be '4.9' or '5', not {version!r}")
        auto_ports = "listenPort" not in text
        broker = cls(workdir, text, heap, version)
        for attempt in range(3):
            if auto_ports:
                text["listenPort"] = str(free_port_pair(text["brokerIP1"]))
            broker._write_conf()
            try:
                broker._launch(timeout_s)
                return broker
            except JvmStartError as exc:
                if auto_ports and attempt < 2 and "Address already in use" in str(exc):
                    continue
                raise
        raise AssertionError("unreachable")

    def _write_conf(self) -> None:
        text = javaproperties.dumps({k: str(v) for k, v in self.props.items()}, timestamp=None,
                                    comments="written by tests/support/jvm_peers.py")
        self.conf_path.write_text(text, encoding="latin-1")


__all__ = ["LIVE_PEERS", "ROCKETMQ5_LIB", "ROCKETMQ_LIB", "BrokerProcessError", "BrokerStopError", "JvmPeersMissing",
           "JvmStartError", "RealBroker", "RealController", "RealNameServer", "java_binary", "rocketmq_classpath",
           "write_rocketmq_home"]
