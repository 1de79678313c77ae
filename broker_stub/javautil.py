"""Pure helpers that reproduce the Java runtime behaviour RocketMQ 4.9.8's bytes depend on.

RocketMQ keeps message properties in a ``java.util.HashMap`` and serialises them by iterating it
(``MessageDecoder.messageProperties2String``), so the order of the stored properties string — which
is part of the CommitLog bytes — is HashMap iteration order. :class:`JavaHashMap` reproduces that
order for string keys; :func:`java_string_hash` is ``String.hashCode()``.

Also here: ``java.util.Properties`` text parsing (``broker.conf``) and Java's ``Boolean.parseBoolean``.
Nothing here does IO.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping

import javaproperties

from connector.protocol.commitlog import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, iter_properties

_INT_MASK = 0xFFFFFFFF
_HASHMAP_DEFAULT_CAPACITY = 16
_HASHMAP_LOAD_FACTOR = 0.75


@functools.lru_cache(maxsize=8192)
def java_string_hash(text: str) -> int:
    """``java.lang.String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as int32."""
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & _INT_MASK
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(text: str) -> Iterator[int]:
    for ch in text:
        cp = ord(ch)
        if cp < 0x10000:
            yield cp
        else:
            cp -= 0x10000
            yield 0xD800 + (cp >> 10)
            yield 0xDC00 + (cp & 0x3FF)


def _spread(h: int) -> int:
    """``HashMap.hash``: the hash code XOR its upper 16 bits (unsigned 32-bit result)."""
    u = h & _INT_MASK
    return u ^ (u >> 16)


class JavaHashMap:
    """A ``java.util.HashMap<String, String>`` created with ``new HashMap<>()`` — only its iteration order.

    Java iterates bucket by bucket (bucket = ``hash(key) & (capacity - 1)``), and within a bucket in
    insertion order (a resize splits each bucket preserving relative order; ``put`` of an existing key
    keeps its place; ``remove`` then ``put`` moves the key to the end of its bucket). The capacity
    starts at 16 and doubles whenever the size exceeds 0.75 × capacity; it never shrinks. Treeified
    buckets (9+ keys colliding in one bucket of a table ≥ 64) are not modelled: such property maps
    do not occur in practice.

    Values of None are kept (as Java does) but skipped by :meth:`to_properties_string`.
    """

    __slots__ = ("_entries", "_capacity")

    def __init__(self, items: Mapping[str, str | None] | None = None) -> None:
        self._entries: dict[str, str | None] = {}
        self._capacity = 0  # table not allocated yet, as in Java
        if items:
            for k, v in items.items():
                self.put(k, v)

    @property
    def capacity(self) -> int:
        """Current table length (0 before the first put)."""
        return self._capacity

    def put(self, key: str, value: str | None) -> None:
        """``HashMap.put``: replace in place, or append to the key's bucket and grow the table if needed."""
        if self._capacity == 0:
            self._capacity = _HASHMAP_DEFAULT_CAPACITY
        if key in self._entries:
            self._entries[key] = value
            return
        self._entries[key] = value
        while len(self._entries) > int(self._capacity * _HASHMAP_LOAD_FACTOR):
            self._capacity *= 2

    def remove(self, key: str) -> str | None:
        """``HashMap.remove``: the removed value, or None."""
        return self._entries.pop(key, None)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._entries.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        """Keys in Java iteration order."""
        if not self._entries:
            return []
        mask = self._capacity - 1
        indexed = [(_spread(java_string_hash(k)) & mask, i, k) for i, k in enumerate(self._entries)]
        indexed.sort()
        return [k for _, _, k in indexed]

    def items(self) -> list[tuple[str, str | None]]:
        """Entries in Java iteration order."""
        return [(k, self._entries[k]) for k in self.keys()]

    def to_dict(self) -> dict[str, str | None]:
        """A plain dict in Java iteration order."""
        return dict(self.items())

    def to_properties_string(self) -> str:
        """``MessageDecoder.messageProperties2String`` (4.9.1+, no trailing separator; None values skipped)."""
        return PROPERTY_SEPARATOR.join(
            f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in self.items() if v is not None)

    @classmethod
    def from_properties_string(cls, text: str | None) -> JavaHashMap:
        """``MessageDecoder.string2messageProperties`` into a fresh HashMap, keys put in string order.

        Pairs as :func:`connector.protocol.commitlog.iter_properties` yields them (spec §1.5).
        """
        out = cls()
        for name, value in iter_properties(text or ""):
            out.put(name, value)
        return out


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
