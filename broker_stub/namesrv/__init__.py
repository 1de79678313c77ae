"""A RocketMQ 4.9.8-compatible name server (``mqnamesrv``), enough for 4.9 clients and stub slaves.

Run it with ``python -m broker_stub.namesrv [-c namesrv.conf] [--host 127.0.0.1] [-p 9876]`` or
``python -m broker_stub namesrv ...`` (also ``hareplica broker namesrv ...``). The route tables are in
:mod:`broker_stub.namesrv.route_info`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from broker_stub.javautil import parse_java_properties
from broker_stub.logs import LOG_FORMATS, configure_logging
from broker_stub.namesrv.route_info import SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS, RouteInfoManager
from broker_stub.remoting.server import RemotingServer

log = logging.getLogger(__name__)

DEFAULT_NAMESRV_PORT = 9876  # NamesrvStartup: nettyServerConfig.setListenPort(9876)


class NamesrvController:
    """The name server process: one remoting server + :class:`RouteInfoManager` + the expiry scan."""

    def __init__(self, host: str, port: int) -> None:
        self.route_info = RouteInfoManager()
        self.server = RemotingServer(host, port)
        self.server.register(RouteInfoManager.CODES, self.route_info)
        self.server.connection_closed_listeners.append(self.route_info.on_channel_destroy)
        self._scan: asyncio.Task | None = None

    async def start(self) -> None:
        """Bind and listen. Raises OSError when the port is taken."""
        await self.server.start()
        self._scan = asyncio.create_task(self._scan_loop(), name="scanNotActiveBroker")

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS / 1000)
            self.route_info.scan_not_active_broker()

    async def shutdown(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
        await self.server.shutdown()


async def run_namesrv(host: str, port: int) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code."""
    controller = NamesrvController(host, port)
    await controller.start()
    log.info("name server started host=%s listenPort=%d", host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        await stop.wait()
    finally:
        await controller.shutdown()
        log.info("name server stopped")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="broker_stub namesrv", description="RocketMQ 4.9.8 name server stub")
    parser.add_argument("-c", "--config", help="namesrv.conf (java.util.Properties); listenPort is read from it")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("-p", "--port", type=int, help=f"listen port (default: listenPort of -c, else "
                                                        f"{DEFAULT_NAMESRV_PORT})")
    parser.add_argument("--log-file", help="also write logs to this file")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="kv", help="log line format (default kv)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m broker_stub.namesrv``; returns the exit code (1: bad config or port in use)."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_file, args.log_format)
    port = args.port
    if port is None and args.config:
        try:
            with open(args.config, encoding="latin-1") as f:
                props = parse_java_properties(f.read())
            port = int(props.get("listenPort", DEFAULT_NAMESRV_PORT))
        except (OSError, ValueError) as exc:
            print(f"broker_stub namesrv: bad config {args.config}: {exc}", file=sys.stderr)
            return 1
    port = DEFAULT_NAMESRV_PORT if port is None else port
    try:
        return asyncio.run(run_namesrv(args.host, port))
    except OSError as exc:
        print(f"broker_stub namesrv: cannot start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
