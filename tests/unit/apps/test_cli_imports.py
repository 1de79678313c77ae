"""The ``hareplica`` parser and every command's ``--help`` import neither pyspark nor pandas, pyarrow or deltalake
(issue 53: they cost about 50 MiB of every command); each command imports what it runs.

Each check runs in a fresh interpreter, since this process has imported them already.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming_apps.cli import build_parser

CHECKOUT = Path(__file__).resolve().parents[3]
#: what no parser and no --help may import
HEAVY = ("pyspark", "pandas", "pyarrow", "deltalake", "py4j")
_PROBE = """
import contextlib, io, json, sys
from streaming_apps.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(json.loads(sys.argv[1]))
    except SystemExit:
        pass
print(json.dumps({"help": out.getvalue(), "imported": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


def _commands() -> list[str]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    return sorted(sub.choices)


def _probe(argv: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)], cwd=CHECKOUT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_parser_is_built_without_spark_pandas_pyarrow_or_deltalake():
    code = f"import sys; from streaming_apps.cli import build_parser; build_parser(); " \
           f"print([m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], cwd=CHECKOUT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize("argv", [["--help"]] + [[c, "--help"] for c in _commands()], ids=" ".join)
def test_help_prints_without_importing_spark_pandas_pyarrow_or_deltalake(argv):
    seen = _probe(argv)
    assert "usage:" in seen["help"], seen
    assert seen["imported"] == [], f"hareplica {' '.join(argv)} imported {seen['imported']}"

