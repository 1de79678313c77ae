"""Mapped-file arithmetic: names, file starts, next and ceiling starts (connector.protocol.mapped_files)."""

import pytest

from connector.protocol.mapped_files import (
    ceil_file_start,
    file_name,
    file_name_of,
    file_start,
    is_file_name,
    is_file_start,
    next_file_start,
)

GIB = 1024 * 1024 * 1024


def test_file_name_is_the_start_offset_in_twenty_digits():
    assert file_name(0) == "00000000000000000000"
    assert file_name(GIB) == "00000000001073741824"
    assert file_name_of(GIB + 5, GIB) == "00000000001073741824"


@pytest.mark.parametrize("name, expected", [
    ("00000000001073741824", True), ("0000000000107374182", False), ("000000000010737418240", False),
    ("0000000000107374182x", False), ("00000000001073741824.tmp", False), ("checkpoint", False)])
def test_is_file_name(name, expected):
    assert is_file_name(name) is expected


@pytest.mark.parametrize("offset, start, nxt, ceil", [
    (0, 0, 1000, 0), (1, 0, 1000, 1000), (999, 0, 1000, 1000), (1000, 1000, 2000, 1000), (2500, 2000, 3000, 3000)])
def test_file_starts(offset, start, nxt, ceil):
    assert file_start(offset, 1000) == start
    assert next_file_start(offset, 1000) == nxt
    assert ceil_file_start(offset, 1000) == ceil
    assert is_file_start(offset, 1000) is (offset == start)
