"""``python -m broker_stub -c broker.conf``: run the RocketMQ 4.9.8 broker stub (see :mod:`broker_stub.cli`).

The stub needs hareplica's ``broker`` extra (``pip install 'hareplica[broker]'``: PyYAML, python-json-logger, rich,
prometheus-client; pyproject.toml): without it :func:`main` says so in one line instead of a traceback.
"""

from __future__ import annotations

import re
import sys

__all__ = ["main", "missing_extra_line"]


def missing_extra_line(extra: str, what: str) -> str | None:
    """The one line telling that ``what`` (``"hareplica broker"``) needs hareplica's ``extra`` (``"broker"``,
    ``"apps"``: pyproject.toml ``[project.optional-dependencies]``) and which of its distributions are missing;
    None when every one is installed, or when hareplica's own metadata is not (a checkout run uninstalled).

    Read from the installed distribution's ``Requires-Dist`` lines (``rich<16,>=13; extra == "apps"``), so the
    extras are declared once, in pyproject.toml.
    """
    from importlib.metadata import PackageNotFoundError, requires, version

    try:
        requirements = requires("hareplica") or []
    except PackageNotFoundError:
        return None
    missing = []
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        if f'extra == "{extra}"' not in marker.replace("'", '"'):
            continue
        name = re.match(r"[A-Za-z0-9._-]+", spec.strip()).group(0)
        try:
            version(name)
        except PackageNotFoundError:
            missing.append(name)
    if not missing:
        return None
    return (f"{what} needs hareplica's {extra} extra, which is not installed (missing {', '.join(missing)}): "
            f"pip install 'hareplica[{extra}]'")


def main(argv: list[str] | None = None, prog: str = "broker_stub") -> int:
    """:func:`broker_stub.cli.main` (same arguments and exit code) once the ``broker`` extra is there; else one
    ``error:`` line on stderr naming it, exit code 1."""
    line = missing_extra_line("broker", prog)
    if line is not None:
        sys.stderr.write(f"error: {line}\n")
        return 1
    from broker_stub.cli import main as cli_main

    return cli_main(argv, prog)


if __name__ == "__main__":
    sys.exit(main())
