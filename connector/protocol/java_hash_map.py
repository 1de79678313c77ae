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


# --- iteration order of hash tables with any key type (fastjson bodies, docs/protocol.md §4.7) -----------------

_HASHMAP_MAX_CAPACITY = 1 << 30


def java_long_hash(value: int) -> int:
    """``Long.hashCode()``: the two 32-bit halves XORed, as int32."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h = (v ^ (v >> 32)) & _INT_MASK
    return h - (1 << 32) if h & 0x80000000 else h


def java_int_hash(value: int) -> int:
    """``Integer.hashCode()``: the value itself (int32)."""
    h = value & _INT_MASK
    return h - (1 << 32) if h & 0x80000000 else h


def message_queue_hash(topic: str, broker_name: str, queue_id: int) -> int:
    """``MessageQueue.hashCode()`` (RocketMQ 4.9.8): ``31·(31·(31 + brokerName) + queueId) + topic`` in int32."""
    h = 31 + java_string_hash(broker_name)
    h = 31 * h + queue_id
    h = 31 * h + java_string_hash(topic)
    return java_int_hash(h)


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two ≥ ``capacity`` (at least 1, at most 2^30)."""
    n = 1
    while n < capacity and n < _HASHMAP_MAX_CAPACITY:
        n <<= 1
    return n


def hash_map_copy_capacity(size: int) -> int:
    """The table length of a ``HashMap`` filled from a map of ``size`` entries in one step (``clone()``,
    ``new HashMap<>(map)``, ``putAll`` into an empty map): ``tableSizeFor(size / 0.75 + 1)``; 16 when empty."""
    return table_size_for(int(size / _HASHMAP_LOAD_FACTOR + 1.0)) if size else _HASHMAP_DEFAULT_CAPACITY


def hash_map_order(keys: list, hash_of, initial_capacity: int = _HASHMAP_DEFAULT_CAPACITY) -> list:
    """Iteration order of a ``java.util.HashMap``/``HashSet`` made with ``new HashMap<>(initial_capacity)`` after
    ``put`` of the distinct ``keys`` in the given order (``hash_of(key)`` is the key's Java ``hashCode()``;
    docs/protocol.md §4.7).

    Buckets in index order (``(h ^ h >>> 16) & (capacity - 1)``), insertion order inside a bucket; the capacity
    starts at ``tableSizeFor(initial_capacity)`` and doubles whenever the size passes 0.75 × capacity. Treeified
    buckets (9+ colliding keys in a table of 64+) are not modelled, nor a capacity kept from a larger past size.
    """
    cap = table_size_for(initial_capacity)
    while len(keys) > int(cap * _HASHMAP_LOAD_FACTOR) and cap < _HASHMAP_MAX_CAPACITY:
        cap <<= 1
    mask = cap - 1
    return [k for _, _, k in sorted((_spread(hash_of(k)) & mask, i, k) for i, k in enumerate(keys))]


class JavaConcurrentHashMap:
    """The iteration order of a ``java.util.concurrent.ConcurrentHashMap`` (JDK 8–17), simulated bin by bin
    (docs/protocol.md §4.7).

    Only keys are kept. ``put`` appends to the key's bin (``spread(h) & (n - 1)``); a table grows when the count
    reaches 0.75 × length, and the move (``transfer``) splits each bin into a low and a high list, keeping the
    trailing run of nodes bound for one side in order and *reversing* the nodes before it — so a resized map's
    order is not insertion order. ``ConcurrentHashMap(n)`` starts at ``tableSizeFor(1 + n / 0.75)`` bins, the
    default constructor at 16; ``putAll`` first presizes the table for the incoming size. Tree bins (8+ colliding
    keys in a table of 64+) are not modelled.
    """

    def __init__(self, hash_of, initial_capacity: int | None = None) -> None:
        self._hash_of = hash_of
        self._bins: list[list[tuple[int, object]]] | None = None
        self._size_ctl = 0 if initial_capacity is None else table_size_for(int(1.0 + initial_capacity / 0.75))
        self._keys: set = set()

    def _spread_hash(self, key: object) -> int:
        return _spread(self._hash_of(key)) & 0x7FFFFFFF

    def _init_table(self, n: int) -> None:
        self._bins = [[] for _ in range(n)]
        self._size_ctl = n - (n >> 2)

    def _transfer(self) -> None:
        old = self._bins
        n = len(old)
        new: list[list[tuple[int, object]]] = [[] for _ in range(2 * n)]
        for i, nodes in enumerate(old):
            if not nodes:
                continue
            last_run = 0
            run_bit = nodes[0][0] & n
            for j in range(1, len(nodes)):
                b = nodes[j][0] & n
                if b != run_bit:
                    run_bit, last_run = b, j
            low = nodes[last_run:] if run_bit == 0 else []
            high = nodes[last_run:] if run_bit != 0 else []
            for node in nodes[:last_run]:
                if node[0] & n == 0:
                    low = [node, *low]
                else:
                    high = [node, *high]
            new[i], new[i + n] = low, high
        self._bins = new
        self._size_ctl = (n << 1) - (n >> 1)

    def put(self, key: object) -> None:
        """``put``: a new key goes to the end of its bin (an existing key keeps its place)."""
        if key in self._keys:
            return
        if self._bins is None:
            self._init_table(self._size_ctl if self._size_ctl > 0 else _HASHMAP_DEFAULT_CAPACITY)
        h = self._spread_hash(key)
        self._bins[h & (len(self._bins) - 1)].append((h, key))
        self._keys.add(key)
        while len(self._keys) >= self._size_ctl and len(self._bins) < _HASHMAP_MAX_CAPACITY:
            self._transfer()

    def put_all(self, keys: list) -> None:
        """``putAll`` of a map iterating ``keys``: ``tryPresize(len(keys))``, then ``put`` each."""
        size = len(keys)
        c = table_size_for(size + (size >> 1) + 1)
        while self._size_ctl >= 0:
            if self._bins is None:
                self._init_table(max(self._size_ctl, c))
            elif c <= self._size_ctl or len(self._bins) >= _HASHMAP_MAX_CAPACITY:
                break
            else:
                self._transfer()
        for key in keys:
            self.put(key)

    def remove(self, key: object) -> None:
        """``remove``: the key leaves its bin; the others keep their order."""
        if key in self._keys:
            self._keys.discard(key)
            nodes = self._bins[self._spread_hash(key) & (len(self._bins) - 1)]
            nodes[:] = [node for node in nodes if node[1] != key]

    def keys(self) -> list:
        """Keys in Java iteration order (bin by bin)."""
        return [key for nodes in (self._bins or []) for _, key in nodes]

    @classmethod
    def order(cls, keys: list, hash_of, initial_capacity: int | None = None) -> list:
        """Iteration order after ``put`` of the distinct ``keys`` in order into a fresh map."""
        table = cls(hash_of, initial_capacity)
        for key in keys:
            table.put(key)
        return table.keys()


class JavaHashMapTable:
    """The iteration order of a ``java.util.HashMap`` driven call by call, for maps whose history matters
    (docs/protocol.md §4.7).

    Only keys are kept, in real bins. ``put`` appends a new key to its bin and then doubles the table when the
    size passes 0.75 × length; ``compute_if_absent`` first doubles a table whose size already passed that
    threshold, then puts a new key at the *head* of its bin (``HashMap.computeIfAbsent``); a resize splits each
    bin keeping relative order; ``remove`` never shrinks the table. ``new HashMap<>(n)`` starts at
    ``tableSizeFor(n)``. Treeified bins are not modelled.
    """

    def __init__(self, hash_of, initial_capacity: int = _HASHMAP_DEFAULT_CAPACITY) -> None:
        self._hash_of = hash_of
        self._initial = table_size_for(initial_capacity)
        self._bins: list[list[tuple[int, object]]] = []
        self._keys: set = set()

    def _threshold(self) -> int:
        return int(len(self._bins) * _HASHMAP_LOAD_FACTOR)

    def _resize(self) -> None:
        if not self._bins:
            self._bins = [[] for _ in range(self._initial)]
            return
        n = len(self._bins)
        new: list[list[tuple[int, object]]] = [[] for _ in range(2 * n)]
        for nodes in self._bins:
            for h, key in nodes:
                new[h & (2 * n - 1)].append((h, key))
        self._bins = new

    def _bin(self, key: object) -> tuple[int, list[tuple[int, object]]]:
        h = _spread(self._hash_of(key))
        return h, self._bins[h & (len(self._bins) - 1)]

    def put(self, key: object) -> None:
        """``HashMap.put``: a new key goes to the end of its bin (an existing key keeps its place)."""
        if not self._bins:
            self._resize()
        if key in self._keys:
            return
        h, nodes = self._bin(key)
        nodes.append((h, key))
        self._keys.add(key)
        if len(self._keys) > self._threshold() and len(self._bins) < _HASHMAP_MAX_CAPACITY:
            self._resize()

    def compute_if_absent(self, key: object) -> None:
        """``HashMap.computeIfAbsent`` (the mapping function returning a value)."""
        if not self._bins or len(self._keys) > self._threshold():
            self._resize()
        if key in self._keys:
            return
        h, nodes = self._bin(key)
        nodes.insert(0, (h, key))
        self._keys.add(key)

    def remove(self, key: object) -> None:
        """``HashMap.remove``: the others keep their order; the table keeps its length."""
        if key in self._keys:
            self._keys.discard(key)
            _, nodes = self._bin(key)
            nodes[:] = [node for node in nodes if node[1] != key]

    def keys(self) -> list:
        """Keys in Java iteration order."""
        return [key for nodes in self._bins for _, key in nodes]
