"""The iteration order of a ``java.util.HashMap<String, String>``, on which RocketMQ 4.9.8's stored bytes depend.

RocketMQ keeps message properties in a ``java.util.HashMap`` and serialises them by iterating it
(``MessageDecoder.messageProperties2String``), so the order of the stored properties string — which
is part of the CommitLog bytes — is HashMap iteration order. :class:`JavaHashMap` reproduces that
order for string keys; :func:`java_string_hash` is ``String.hashCode()``. Pure: no IO.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping

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
        """``HashMap.getOrDefault``."""
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

        Pairs as :func:`connector.protocol.commitlog.iter_properties` yields them (docs/protocol.md §1.5).
        """
        out = cls()
        for name, value in iter_properties(text or ""):
            out.put(name, value)
        return out
