"""Command line of the broker stub (also ``hareplica broker ...``, which forwards every argument here): runs a
broker or the name server, and the operator commands ``status`` and ``delete-expired``
(:mod:`broker_stub.status`), with structured logs (:mod:`broker_stub.logs`).

Commands, options, log formats and exit codes: docs/broker_stub.md "Commands" and "Metrics and logs"; what
``delete-expired`` deletes: docs/broker_stub.md "What it does (RocketMQ 4.9.8 behaviour)", "Retention".
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from broker_stub.config import BrokerConfigError, load_config
from broker_stub.config_rules import check_environment
from broker_stub.logs import LOG_FORMATS, configure_logging

log = logging.getLogger(__name__)


def build_parser(prog: str = "broker_stub") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog,
                                     description="RocketMQ 4.9.8 broker stub (CommitLog, classic master/slave HA)")
    parser.add_argument("-c", "--config", required=True, help="broker.conf (java.util.Properties syntax)")
    parser.add_argument("-p", "--print-config", action="store_true",
                        help="print the effective configuration (GET_BROKER_CONFIG keys) and exit")
    parser.add_argument("--log-file", help="also write logs to this file")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="kv", help="log line format (default kv)")
    parser.add_argument("--cut-corrupt-commitlog", action="store_true",
                        help="for this start only: set cutCorruptCommitLogOnRecover=true (an invalid record followed "
                             "by data ends the CommitLog there; what follows is moved to STORE/quarantine/)")
    parser.epilog = ("other commands: status ADDR [--json] | delete-expired ADDR | namesrv [-c conf] [-p PORT]")
    return parser


def _broker_addr(parser: argparse.ArgumentParser) -> None:
    """The broker's remoting address, as a positional ``ADDR`` or mqadmin's ``-b/--broker-addr``."""
    parser.add_argument("addr", nargs="?", help="broker remoting address HOST:PORT (or -b)")
    parser.add_argument("-b", "--broker-addr", dest="broker_addr", help="broker remoting address HOST:PORT")


def _addr_of(parser: argparse.ArgumentParser, args) -> str:
    if (args.addr is None) == (args.broker_addr is None):
        parser.error("give the broker's remoting address once: ADDR or -b/--broker-addr ADDR")
    return args.addr or args.broker_addr


def _status_main(argv: list[str], prog: str) -> int:
    from broker_stub.status import status_command

    parser = argparse.ArgumentParser(prog=prog, description="print a broker's role, offsets and HA connections")
    _broker_addr(parser)
    parser.add_argument("--json", action="store_true", help="print the runtime info as JSON")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default 5)")
    args = parser.parse_args(argv)
    return status_command(_addr_of(parser, args), as_json=args.json, timeout_s=args.timeout)


def _delete_expired_main(argv: list[str], prog: str) -> int:
    from broker_stub.status import delete_expired_command

    parser = argparse.ArgumentParser(prog=prog,
                                     description=("DELETE_EXPIRED_COMMITLOG: a retention round now and 20 more 10 s "
                                                  "apart, each deleting up to 10 of the oldest CommitLog files "
                                                  "older than fileReservedTime hours (never the last file)"))
    _broker_addr(parser)
    args = parser.parse_args(argv)
    return delete_expired_command(_addr_of(parser, args))


def main(argv: list[str] | None = None, prog: str = "broker_stub") -> int:
    """Run the broker stub until SIGTERM/SIGINT, or one of the sub-commands; ``prog``: the command's name in usage
    lines (``hareplica broker`` when run through it). Returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "status":
        return _status_main(argv[1:], f"{prog} status")
    if argv and argv[0] == "delete-expired":
        return _delete_expired_main(argv[1:], f"{prog} delete-expired")
    if argv and argv[0] == "namesrv":
        from broker_stub.namesrv import main as namesrv_main

        return namesrv_main(argv[1:])
    args = build_parser(prog).parse_args(argv)
    configure_logging(args.log_level, args.log_file, args.log_format)
    try:
        config = load_config(args.config)
    except BrokerConfigError as exc:
        log.error("broker config rejected: %s", exc)
        return 2
    if args.cut_corrupt_commitlog:
        config.store.cutCorruptCommitLogOnRecover = True
    if args.print_config:
        for k, v in config.all_properties().items():
            print(f"{k}={v}")
        return 0
    try:
        check_environment(config)  # host names resolve, store folders can be written
    except BrokerConfigError as exc:
        log.error("broker config rejected: %s", exc)
        return 2
    from broker_stub.broker import run_broker
    from broker_stub.store.message_store import BrokerStoreError

    try:
        return asyncio.run(run_broker(config))
    except BrokerConfigError as exc:  # e.g. aclEnable with an unusable plain_acl.yml
        log.error("broker config rejected: %s", exc)
        return 2
    except (BrokerStoreError, OSError) as exc:
        log.error("broker cannot start: %s", exc)
        return 1
    except KeyboardInterrupt:
        return 0
