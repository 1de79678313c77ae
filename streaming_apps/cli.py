"""The `hareplica` command line: one entry point, one sub-command per job."""

from __future__ import annotations

import argparse
import logging
import sys


def _offset(text: str) -> int:
    value = int(text, 0)
    if value < 0:
        raise argparse.ArgumentTypeError(f"offset must be >= 0, got {value}")
    return value


def _positive(text: str) -> int:
    value = int(text, 0)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hareplica",
        description="Replicate a RocketMQ CommitLog into Delta Lake over the classic HA protocol.")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect-commitlog", help="print every record of a CommitLog folder (offline)")
    p.add_argument("directory", help="CommitLog folder holding 20-digit mapped files")
    p.add_argument("--from", dest="from_offset", type=_offset, default=0,
                   help="first CommitLog offset to print (records at or after it)")
    p.add_argument("--format", choices=("jsonl", "table"), default="jsonl",
                   help="jsonl: the fields of messages.jsonl; table: a readable summary")

    p = sub.add_parser("broker", help="run the bundled RocketMQ 4.9.8 broker stub (python -m broker_stub)",
                       add_help=False)
    p.add_argument("broker_args", nargs=argparse.REMAINDER, help="arguments of python -m broker_stub (-c broker.conf)")

    p = sub.add_parser("produce", help="send a generated load to a broker with the bundled producer")
    p.add_argument("--broker", required=True, help="broker remoting address HOST:PORT")
    p.add_argument("--topic", required=True, help="topic (comma-separate several to spread the load)")
    p.add_argument("--count", type=_positive, required=True, help="number of messages")
    p.add_argument("--body-bytes", type=_positive, default=256, help="body size in bytes (default 256)")

    p = sub.add_parser("demo", help="the main job on an embedded default: broker stub, workload, bronze Delta table")
    p.add_argument("--workdir", default="hareplica-demo", help="folder for the broker store, checkpoint and tables")
    p.add_argument("--messages", type=_positive, default=100_000, help="messages to produce (default 100000)")
    p.add_argument("--keep", action="store_true", help="keep an existing workdir instead of starting fresh")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # `hareplica broker ...` forwards its arguments verbatim (they start with options such as -c,
    # which argparse.REMAINDER would not capture)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "broker":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.command == "inspect-commitlog":
        from streaming_apps.inspect_commitlog import run

        return run(args.directory, args.from_offset, args.format)
    if args.command == "broker":
        from broker_stub.__main__ import main as broker_main

        return broker_main(extra + args.broker_args)
    if args.command == "produce":
        from streaming_apps.workload import produce_command

        return produce_command(args.broker, args.topic.split(","), args.count, args.body_bytes)
    if args.command == "demo":
        from streaming_apps.demo import run_demo

        return run_demo(args.workdir, messages=args.messages, keep=args.keep)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
