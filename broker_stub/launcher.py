"""Start and stop broker-stub processes from Python (demo, benchmarks, tests).

``BrokerProcess.start(workdir, **props)`` writes ``workdir/broker.conf`` (the given RocketMQ properties,
free loopback ports, ``storePathRootDir`` inside ``workdir``), runs ``python -m broker_stub -c broker.conf``
with its log in ``workdir/broker.log``, and returns once both the remoting and the HA port accept
connections and, at log level INFO or DEBUG, the broker has logged ``broker started`` (start-up and the
recovery report are over) — or raises BrokerStartError with the log tail within ``timeout_s``. Unless given,
the ports follow the RocketMQ convention ``haListenPort = listenPort + 1`` (a free pair is picked). ``stop()``
sends SIGTERM and waits, ``kill9()`` kills, ``restart()`` starts the same config again.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import javaproperties

from connector.protocol.broker import broker_ports, ha_listen_port, vip_listen_port

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0
_BIND_RETRIES = 3


class BrokerProcessError(RuntimeError):
    """A broker process misbehaved; the message holds the tail of its log."""


class BrokerStartError(BrokerProcessError):
    """The broker process died or did not open its ports in time."""


class BrokerStopError(BrokerProcessError):
    """The broker process did not exit after SIGTERM within the timeout (it was then killed)."""


def _addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# Ports handed to brokers come from below Linux's ephemeral range (32768-60999 by default): a port in that
# range can be taken, while a broker is down for a restart, by an outgoing connection's source port or by a
# client's TCP self-connect to the dead port, and the restarted broker would then fail with EADDRINUSE.
LISTEN_PORT_RANGE = (20000, 32000)


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


_PORT_KEYS = ("haListenPort", "metricsPromExporterPort")  # ports a caller may set beside the automatic ones


def free_port(host: str = "127.0.0.1", attempts: int = 200) -> int:
    """A TCP port in LISTEN_PORT_RANGE that was free on ``host`` a moment ago. Raises OSError if none is."""
    for _ in range(attempts):
        port = random.randrange(*LISTEN_PORT_RANGE)
        if _bindable(host, port):
            return port
    raise OSError(f"no free port in {LISTEN_PORT_RANGE} on {host}")


def free_port_pair(host: str = "127.0.0.1", attempts: int = 200, *, vip: bool = True) -> int:
    """A port ``p`` such that ``p`` and ``p + 1`` (listenPort, haListenPort) — and with ``vip`` also ``p - 2``
    (the VIP remoting port) — were all free a moment ago, all in LISTEN_PORT_RANGE.

    Raises OSError when no such port turns up in ``attempts`` tries.
    """
    low, high = LISTEN_PORT_RANGE
    for _ in range(attempts):
        port = random.randrange(low + 2, high - 1)
        if all(_bindable(host, p) for p in broker_ports(port, vip=vip)):
            return port
    raise OSError(f"no free listenPort/haListenPort/VIP port set found on {host}")


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class _ChildProcess:
    """What a broker and a name server child process share: stop (SIGTERM, wait), kill9, log tail,
    context-manager use. Subclasses set ``process``, ``log_path`` and ``what`` (for messages)."""

    what = "process"
    process: subprocess.Popen | None = None
    log_path: Path

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait; returns the exit code (None if never started).

        Raises BrokerStopError (after SIGKILL) when the process is still alive ``timeout_s`` later.
        """
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout_s)
                raise BrokerStopError(f"{self.what} did not stop within {timeout_s} s of SIGTERM:\n"
                                      f"{self.log_tail()}") from None
        return self.process.returncode

    def kill9(self) -> None:
        """SIGKILL the process (no shutdown: a broker's store keeps its ``abort`` file)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            self.kill9()


class BrokerProcess(_ChildProcess):
    """One ``python -m broker_stub`` child process (see module doc). Use as a context manager to stop it.

    Attributes: ``remoting_addr`` / ``ha_addr`` (``"host:port"``), ``listen_port``, ``ha_port``, ``store_dir``,
    ``commitlog_dir``, ``conf_path``, ``log_path``, ``workdir``, ``props`` (the written properties), ``process``.
    """

    what = "broker"

    def __init__(self, workdir: Path, props: dict[str, str], *, auto_ports: bool) -> None:
        self.workdir = Path(workdir)
        self.props = props
        self.auto_ports = auto_ports
        self.conf_path = self.workdir / "broker.conf"
        self.log_path = self.workdir / "broker.log"
        self.process: subprocess.Popen | None = None
        self.log_level = "INFO"
        self.command_prefix: tuple[str, ...] = ()

    # --- attributes ----------------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return self.props.get("brokerIP1", "127.0.0.1")

    @property
    def listen_port(self) -> int:
        return int(self.props["listenPort"])

    @property
    def ha_port(self) -> int:
        return int(self.props.get("haListenPort", ha_listen_port(self.listen_port)))

    @property
    def remoting_addr(self) -> str:
        return _addr(self.host, self.listen_port)

    @property
    def vip_addr(self) -> str:
        """The VIP remoting port, ``listenPort - 2`` (GET_ALL_TOPIC_CONFIG for slaves)."""
        return _addr(self.host, vip_listen_port(self.listen_port))

    @property
    def ha_addr(self) -> str:
        return _addr(self.ha_host, self.ha_port)

    @property
    def ha_host(self) -> str:
        return self.props.get("brokerIP2", self.host)

    @property
    def store_dir(self) -> Path:
        return Path(self.props["storePathRootDir"])

    @property
    def commitlog_dir(self) -> Path:
        return Path(self.props.get("storePathCommitLog") or self.store_dir / "commitlog")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # --- lifecycle -----------------------------------------------------------------------------------
    @classmethod
    def start(cls, workdir: Path, *, timeout_s: float = STARTUP_TIMEOUT_S, log_level: str = "INFO",
              command_prefix: Sequence[str] = (), **props: object) -> BrokerProcess:
        """Write the config and launch the broker; see the module doc. Raises BrokerStartError.

        ``command_prefix`` runs the broker under a wrapper command, e.g. ``("ip", "netns", "exec", "host1")``
        to start it on another (network namespace) host; give ``brokerIP1`` and ``listenPort`` then, since
        free ports are only looked for on this host.
        """
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        text_props = {k: (("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in props.items()}
        text_props.setdefault("brokerIP1", "127.0.0.1")
        text_props.setdefault("brokerClusterName", "TestCluster")
        text_props.setdefault("brokerName", "broker-a")
        text_props.setdefault("storePathRootDir", str(workdir / "store"))
        auto_ports = "listenPort" not in text_props
        explicit_ha = "haListenPort" in text_props
        broker = cls(workdir, text_props, auto_ports=auto_ports)
        broker.log_level = log_level
        broker.command_prefix = tuple(command_prefix)
        for attempt in range(_BIND_RETRIES):
            if auto_ports:  # never one of the ports the caller set (e.g. metricsPromExporterPort)
                taken = {text_props[k] for k in _PORT_KEYS if k in text_props}
                while True:
                    port = free_port_pair() if not explicit_ha else free_port()
                    if not {str(p) for p in broker_ports(port)} & taken:
                        break
                text_props["listenPort"] = str(port)
            broker._write_conf()
            try:
                broker._launch(timeout_s)
                return broker
            except BrokerStartError as exc:
                if auto_ports and attempt + 1 < _BIND_RETRIES and "address already in use" in str(exc).lower():
                    log.warning("broker port taken meanwhile, retrying with other ports workdir=%s", workdir)
                    continue
                raise
        raise AssertionError("unreachable")

    def _write_conf(self) -> None:
        """``broker.conf`` in java.util.Properties syntax (javaproperties escapes what Properties.load reads)."""
        text = javaproperties.dumps({k: str(v) for k, v in self.props.items()}, timestamp=None,
                                    comments="written by broker_stub.launcher")
        self.conf_path.write_text(text, encoding="latin-1")

    def _launch(self, timeout_s: float) -> None:
        with open(self.log_path, "ab") as log_file:
            log_file.write(f"--- launch {time.strftime('%H:%M:%S')} ---\n".encode())
            log_file.flush()
            launched_at = log_file.tell()  # this launch's lines start here
            self.process = subprocess.Popen(
                [*self.command_prefix, sys.executable, "-m", "broker_stub", "-c", str(self.conf_path), "--log-level",
                 self.log_level],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout_s
        host, ha_host = self.host, self.ha_host
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerStartError(f"broker exited with code {self.process.returncode} during start-up:\n"
                                       f"{self.log_tail()}")
            if (_port_open(host, self.listen_port) and _port_open(ha_host, self.ha_port)
                    and self._started_line_logged(launched_at)):
                return
            time.sleep(0.05)
        self.kill9()
        raise BrokerStartError(f"broker ports {self.listen_port}/{self.ha_port} not open after {timeout_s} s:\n"
                               f"{self.log_tail()}")

    def _started_line_logged(self, launched_at: int) -> bool:
        """Whether this launch logged ``broker started``, the last line of ``Broker.start``; always true
        above INFO, where the line is not written."""
        if self.log_level.upper() not in ("DEBUG", "INFO"):
            return True
        with open(self.log_path, "rb") as log_file:
            log_file.seek(launched_at)
            return b"broker started" in log_file.read()

    def restart(self, timeout_s: float = STARTUP_TIMEOUT_S) -> BrokerProcess:
        """Start the same config again (stopping it first if it still runs). Raises BrokerStartError."""
        if self.is_running():
            self.stop()
        self._launch(timeout_s)
        return self


class NameServerProcess(_ChildProcess):
    """One ``python -m broker_stub namesrv`` child process; ``addr`` is its ``host:port``.

    ``start(workdir)`` picks a free port, logs to ``workdir/namesrv.log`` and returns once the port accepts
    connections (BrokerStartError otherwise). ``stop()`` sends SIGTERM and waits; ``kill9()`` kills.
    """

    what = "name server"

    def __init__(self, workdir: Path, host: str, port: int) -> None:
        self.workdir = Path(workdir)
        self.host = host
        self.port = port
        self.log_path = self.workdir / "namesrv.log"
        self.process: subprocess.Popen | None = None

    @property
    def addr(self) -> str:
        return _addr(self.host, self.port)

    @classmethod
    def start(cls, workdir: Path, *, port: int | None = None, host: str = "127.0.0.1",
              timeout_s: float = STARTUP_TIMEOUT_S, command_prefix: Sequence[str] = ()) -> NameServerProcess:
        """Launch a name server on ``host:port`` (a free port of this host when None), under ``command_prefix``
        when given (see :meth:`BrokerProcess.start`). Raises BrokerStartError."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        ns = cls(workdir, host, port or free_port(host))
        with open(ns.log_path, "ab") as log_file:
            ns.process = subprocess.Popen(
                [*command_prefix, sys.executable, "-m", "broker_stub", "namesrv", "--host", host, "-p", str(ns.port)],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ns.process.poll() is not None:
                raise BrokerStartError(f"name server exited with code {ns.process.returncode}:\n"
                                       f"{ns.log_path.read_text(errors='replace')[-4000:]}")
            if _port_open(host, ns.port):
                return ns
            time.sleep(0.05)
        ns.kill9()
        raise BrokerStartError(f"name server port {ns.port} not open after {timeout_s} s")
