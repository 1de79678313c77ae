"""Pure helpers that reproduce the Java runtime behaviour RocketMQ 4.9.8's bytes depend on.

``java.util.Properties`` text parsing (``broker.conf``), Java's ``Boolean.parseBoolean`` and fastjson's
lenient JSON. :class:`JavaHashMap` (property order) and :func:`java_string_hash` live with the protocol,
:mod:`connector.protocol.java_hash_map` (the producer needs them too), and are imported from here by the
stub's modules. Nothing here does IO.
"""

from __future__ import annotations

import json

import javaproperties

from connector.protocol.java_hash_map import JavaHashMap, java_string_hash

__all__ = ["JavaHashMap", "fastjson_loads", "java_string_hash", "parse_boolean", "parse_java_properties"]

def parse_boolean(text: str) -> bool:
    """``Boolean.parseBoolean``: true only for ``"true"`` in any case."""
    return text.strip().lower() == "true"


def parse_java_properties(text: str) -> dict[str, str]:
    """Parse ``java.util.Properties.load`` text (the syntax of RocketMQ's ``broker.conf``) with the
    ``javaproperties`` library, which follows ``Properties.load`` rule for rule.

    Rules: lines starting (after blanks) with ``#`` or ``!`` are comments; a line ending in an odd
    number of backslashes continues on the next line (its leading blanks dropped); the key ends at the
    first unescaped ``=``, ``:`` or blank (space, tab, form feed), and blanks plus one ``=``/``:`` after
    it are skipped; escapes ``\\t \\n \\r \\f \\uXXXX`` are decoded and any other escaped character stands for
    itself. Values keep their trailing blanks, as Java does. A later key wins. ``text`` is already
    decoded (``Properties.load(InputStream)`` reads ISO-8859-1).

    Raises ValueError for a malformed ``\\uXXXX`` escape, naming the line.
    """
    try:
        return dict(javaproperties.loads(text))
    except javaproperties.InvalidUEscapeError as exc:
        bad = getattr(exc, "escape", "") or ""
        line = text[:text.find(bad)].count("\n") + 1 if bad and bad in text else "?"
        raise ValueError(f"malformed \\uXXXX escape {bad!r} on line {line}") from None


def fastjson_loads(text: str | bytes) -> object:
    """Parse JSON as fastjson 1.x writes it for RocketMQ: maps with non-string keys come out with *bare*
    number keys (``{"offsetTable":{"t@g":{0:5}}}`` — ``Map<Integer, Long>`` without WriteNonStringKeyAsString),
    which standard JSON rejects. Bare integer keys are quoted first (outside strings), then ``json.loads``.

    Raises ValueError for anything that is not JSON even then.
    """
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    expect_key = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            expect_key = False
        elif ch in "{,":
            expect_key = True
        elif expect_key and (ch.isdigit() or ch == "-"):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":":
                out.append(f'"{text[i:j]}"')
                i = j
                expect_key = False
                continue
            expect_key = False
        elif not ch.isspace():
            expect_key = False
        out.append(ch)
        i += 1
    return json.loads("".join(out))
