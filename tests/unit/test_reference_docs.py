"""The reference pages are checked against the code's one declaration of what they list:

* docs/columns.md (section ``format("hareplica")``): the source's columns, in order, with their Spark types and
  nullability, as ``connector.decode.schema.COLUMNS`` declares them;
* docs/cli.md: a section per ``hareplica`` command (``## hareplica COMMAND``) whose flag table names exactly the
  command's long flags in ``streaming_apps.cli.build_parser()``, and the global flags under "Global flags".
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _sections(path: Path, level: str = "##") -> dict[str, str]:
    """The text under each heading of ``level`` of markdown file ``path``, keyed by the heading's text."""
    parts = re.split(rf"^{level} (.+)$", path.read_text(encoding="utf-8"), flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _table(section: str, first_header: str) -> list[list[str]]:
    """The body rows (cells stripped) of the first table in ``section`` whose first header cell is
    ``first_header``."""
    rows, inside = [], False
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] if line.startswith("|") else None
        if cells and not inside and cells[0] == first_header:
            inside = True
        elif inside and cells is None:
            break
        elif inside and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    assert rows, f"no table with the header {first_header!r}"
    return rows


def test_columns_page_is_the_schema():
    from connector.decode.schema import COLUMNS, spark_schema

    rows = _table(_sections(ROOT / "docs" / "columns.md")['`format("hareplica")`'], "column")
    documented = [(re.fullmatch(r"`([^`]+)`", r[0]).group(1), r[1], r[2]) for r in rows]
    code = [(f.name, f.dataType.simpleString(), "yes" if f.nullable else "no") for f in spark_schema().fields]
    assert [name for name, _, _ in COLUMNS] == [name for name, _, _ in code]
    assert documented == code


def _long_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions for s in action.option_strings
            if s.startswith("--") and not isinstance(action, argparse._HelpAction)}


def _documented_flags(section: str) -> set[str]:
    return {re.fullmatch(r"`(--[a-z0-9-]+)`", row[0]).group(1) for row in _table(section, "flag")}


def _commands() -> dict[str, argparse.ArgumentParser]:
    from streaming_apps.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_cli_page_has_a_section_per_command():
    documented = {h.removeprefix("hareplica ") for h in _sections(ROOT / "docs" / "cli.md")
                  if h.startswith("hareplica ")}
    assert documented == set(_commands())


@pytest.mark.parametrize("command", sorted(_commands()))
def test_cli_page_lists_every_flag_of(command):
    section = _sections(ROOT / "docs" / "cli.md")[f"hareplica {command}"]
    flags = _long_flags(_commands()[command])
    if not flags:  # `hareplica broker` forwards every argument to python -m broker_stub
        assert "| flag |" not in section
        return
    assert _documented_flags(section) == flags


def test_cli_page_lists_the_global_flags():
    from streaming_apps.cli import build_parser

    section = _sections(ROOT / "docs" / "cli.md")["Global flags"]
    assert _documented_flags(section) == _long_flags(build_parser())
