"""The argparse value types the ``hareplica`` commands share: each parses one flag's text or raises
``argparse.ArgumentTypeError``, which argparse prints naming the flag (docs/cli.md); and the flags several commands
take (``--storage-option``, the where-flags ``--brokers`` and ``-n/--namesrv-addr``; ``--tables-root``'s default)."""

from __future__ import annotations

import argparse
import os


def offset(text: str) -> int:
    """A CommitLog offset in bytes (decimal or ``0x`` hex), >= 0."""
    value = int(text, 0)
    if value < 0:
        raise argparse.ArgumentTypeError(f"offset must be >= 0, got {value}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds, > 0 (a fraction allowed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def positive(text: str) -> int:
    """An integer > 0 (decimal or ``0x`` hex)."""
    value = int(text, 0)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def non_negative(text: str) -> int:
    """An integer >= 0 (decimal or ``0x`` hex)."""
    value = int(text, 0)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as ``(key, value)``, the key stripped of spaces; the key must not be empty."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` lines that end with the flag's default, ``(default X)``, unless the text already names one or the
    flag has none (required, a switch, unset)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = action.default is None or isinstance(action.default, bool) or action.default in ([], argparse.SUPPRESS)
        if "default" in text or action.required or unset or not action.option_strings:
            return text
        return f"{text} (default %(default)s)"


class Parser(argparse.ArgumentParser):
    """The parser of ``hareplica`` and of each sub-command: :class:`DefaultsHelpFormatter` unless one is given."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)


class DeprecatedAlias(argparse.Action):
    """A flag kept for one release under its old spelling: stores its value as the new flag does and prints one
    line on stderr naming the new spelling (``new``)."""

    def __init__(self, option_strings, dest, new: str = "", **kwargs):
        self.new = new
        kwargs.setdefault("help", f"deprecated spelling of {new}")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        import sys

        sys.stderr.write(f"{parser.prog}: {option_string} is deprecated and goes in the next release; use {self.new}\n")
        setattr(namespace, self.dest, values)


def add_storage_option_arg(p) -> None:
    """``--storage-option KEY=VALUE`` (repeatable): object-store settings over the ``AWS_*`` variables."""
    p.add_argument("--storage-option", dest="storage_options", action="append", default=[], metavar="KEY=VALUE",
                   help="object-store setting over the AWS_* environment variables, e.g. "
                        "AWS_ENDPOINT_URL=http://host:9000 (repeatable; docs/object_storage.md)")


#: the short flag and the metavar of a where-flag, by option attribute (``-n``: ``mqadmin``'s spelling, docs/cli.md)
_WHERE_SHORT = {"namesrv_addr": "-n"}
_WHERE_METAVARS = {"namesrv_addr": "HOST:PORT[;HOST:PORT]"}


def add_where_flags(p, *, required: bool, purposes: dict[str, str] | None = None) -> None:
    """``--brokers`` and ``-n/--namesrv-addr``, one or the other (``required``: one must be given): where the broker
    sets are, as the source options ``brokers`` and ``namesrvAddr`` say (connector/options/declaration.py gives
    each flag's name, dest and the meaning in its help). ``purposes``: by option attribute, what the command does
    with the value, when that is not to read them (``hareplica status``)."""
    from connector.options.declaration import OPTIONS

    where = p.add_mutually_exclusive_group(required=required)
    for option in (OPTIONS.brokers, OPTIONS.namesrv_addr):
        flags = [flag for flag in (_WHERE_SHORT.get(option.attr), option.flag) if flag]
        purpose = (purposes or {}).get(option.attr)
        text = (f"{option.meaning} (the source's {option.name})" if purpose is None
                else f"{purpose}; as the source's {option.name}: {option.meaning}")
        where.add_argument(*flags, dest=option.attr, default=None, metavar=_WHERE_METAVARS.get(option.attr),
                           help=text)


def tables_root_of(args) -> str:
    """The tables' root of a command's parsed ``args``: ``--tables-root`` when given, else ``WORKDIR/tables``
    (``--workdir``'s); a path or a URI, as given."""
    return args.tables_root or os.path.join(args.workdir, "tables")
