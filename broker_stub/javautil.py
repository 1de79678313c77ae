"""Pure helpers that reproduce the Java runtime behaviour RocketMQ 4.9.8's bytes depend on.

``java.util.Properties`` text parsing (``broker.conf``), Java's ``Boolean.parseBoolean`` and fastjson's
lenient JSON (:func:`fastjson_loads`, which lives with the protocol in :mod:`connector.protocol.fastjson`: the
driver's name-server client reads it too). :class:`JavaHashMap` (property order) and :func:`java_string_hash` live
with the protocol, :mod:`connector.protocol.java_hash_map` (the producer needs them too), and are imported from here
by the stub's modules. Nothing here does IO.
"""

from __future__ import annotations

import javaproperties

from connector.protocol.fastjson import loads as fastjson_loads
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
