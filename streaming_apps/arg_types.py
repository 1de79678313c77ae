"""The argparse value types the ``hareplica`` commands share: each parses one flag's text or raises
``argparse.ArgumentTypeError``, which argparse prints naming the flag (docs/cli.md)."""

from __future__ import annotations

import argparse


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
