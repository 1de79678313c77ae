"""Command line of the broker stub: ``python -m broker_stub -c broker.conf`` (also ``hareplica broker -c ...``).

Options mirror ``mqbroker`` where they exist (``-c`` config file, ``-p`` print the effective config and
exit) plus ``--log-file`` and ``--log-level``. Logs are single lines of ``key=value`` pairs on stderr (and
the log file when given). Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when the broker cannot
start (bad config, locked or inconsistent store, port in use).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time

from broker_stub.config import BrokerConfigError, load_config

log = logging.getLogger(__name__)


class KeyValueFormatter(logging.Formatter):
    """``ts=<UTC ISO-8601 ms> level=<LEVEL> logger=<name> <message>``, always one line per record."""

    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        ts = self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z"
        text = f"ts={ts} level={record.levelname} logger={record.name} {record.getMessage()}"
        if record.exc_info:
            text += " exc=" + self.formatException(record.exc_info).replace("\n", " | ")
        return text.replace("\n", " | ")


def configure_logging(level: str = "INFO", log_file: str | None = None) -> None:
    """Send every log record to stderr (and ``log_file``) in :class:`KeyValueFormatter` form."""
    root = logging.getLogger()
    root.setLevel(level.upper())
    for h in list(root.handlers):
        root.removeHandler(h)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    for h in handlers:
        h.setFormatter(KeyValueFormatter())
        root.addHandler(h)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="broker_stub",
                                     description="RocketMQ 4.9.8 master broker stub (CommitLog + classic HA)")
    parser.add_argument("-c", "--config", required=True, help="broker.conf (java.util.Properties syntax)")
    parser.add_argument("-p", "--print-config", action="store_true",
                        help="print the effective configuration (GET_BROKER_CONFIG keys) and exit")
    parser.add_argument("--log-file", help="also write logs to this file")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the broker stub until SIGTERM/SIGINT. Returns the exit code."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_file)
    try:
        config = load_config(args.config)
    except BrokerConfigError as exc:
        log.error("broker config rejected error=%s", exc)
        print(f"broker_stub: {exc}", file=sys.stderr)
        return 1
    if args.print_config:
        for k, v in config.all_properties().items():
            print(f"{k}={v}")
        return 0
    from broker_stub.broker import run_broker
    from broker_stub.store.message_store import BrokerStoreError

    try:
        return asyncio.run(run_broker(config))
    except (BrokerStoreError, OSError) as exc:
        log.error("broker failed to start error=%s", exc)
        print(f"broker_stub: cannot start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
