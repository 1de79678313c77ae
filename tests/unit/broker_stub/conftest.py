"""Fixtures shared by the broker stub's unit tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from connector.protocol.commitlog import MessageRecord, decode_record


@pytest.fixture(scope="module")
def golden(fixture_dir: Path) -> tuple[list[dict], Callable[[int], MessageRecord]]:
    """The golden 4.9.8 data: every row of ``messages.jsonl`` and a function CommitLog offset → the stored
    MessageRecord at that offset (decoded from the fixture's CommitLog files)."""
    rows = [json.loads(line) for line in (fixture_dir / "messages.jsonl").read_text(encoding="utf-8").splitlines()]
    files = {int(p.name): p.read_bytes() for p in (fixture_dir / "commitlog").iterdir()}

    def record(offset: int) -> MessageRecord:
        base = max(b for b in files if b <= offset)
        rec = decode_record(files[base], offset - base, base_offset=base)
        assert isinstance(rec, MessageRecord)
        return rec
    return rows, record
