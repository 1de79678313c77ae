"""What a bronze table already holds, per broker set: the one rule by which ``hareplica read`` and a bronze stream
starting without a checkpoint refuse to land a record the table holds (docs/cli.md "hareplica read", docs/delta.md
"One table, several writers").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

#: an end offset past every CommitLog: "from here on" (bytes)
OPEN_END = (1 << 63) - 1


@dataclass(frozen=True)
class Held:
    """The records of one broker set a table holds inside a range: ``rows``, the ``first`` and ``last``
    commitLogOffset, and ``end``, the byte after the last record (its commitLogOffset + storeSize)."""

    rows: int
    first: int
    last: int
    end: int

    def describe(self, name: str) -> str:
        """``N record(s) of NAME at commitLogOffset FIRST..LAST``."""
        plural = "" if self.rows == 1 else "s"
        return f"{self.rows} record{plural} of {name} at commitLogOffset {self.first}..{self.last}"


def landed_inside(path: str, start: Mapping[str, int], end: Mapping[str, int]) -> dict[str, Held]:
    """Per broker set, what the bronze table at ``path`` holds whose ``commitLogOffset`` lies in the set's
    ``[start, end)`` (bytes; a set missing from ``end`` has an open end); empty when it holds none or there is no
    table yet. Reads the ``broker``, ``commitLogOffset`` and ``storeSize`` columns of the files whose statistics
    overlap the range, and aggregates them in Arrow."""
    import functools
    import operator

    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    from deltalake.exceptions import TableNotFoundError

    from connector.delta.reading import read_table

    wanted = [(ds.field("broker") == name) & (ds.field("commitLogOffset") >= lo)
              & (ds.field("commitLogOffset") < end.get(name, OPEN_END))
              for name, lo in start.items() if end.get(name, OPEN_END) > lo]
    if not wanted:
        return {}
    try:
        rows = read_table(path, columns=["broker", "commitLogOffset", "storeSize"],
                          filters=functools.reduce(operator.or_, wanted))
    except TableNotFoundError:
        return {}
    rows = rows.append_column("recordEnd", pc.add(rows["commitLogOffset"], rows["storeSize"].cast("int64")))
    held = rows.group_by("broker").aggregate(
        [("commitLogOffset", "count"), ("commitLogOffset", "min"), ("commitLogOffset", "max"), ("recordEnd", "max")])
    return {r["broker"]: Held(r["commitLogOffset_count"], r["commitLogOffset_min"], r["commitLogOffset_max"],
                              r["recordEnd_max"]) for r in sorted(held.to_pylist(), key=lambda r: r["broker"])}


def overlap(path: str, start: Mapping[str, int], end: Mapping[str, int] | None = None
            ) -> tuple[str, dict[str, int]] | None:
    """When the bronze table at ``path`` holds records inside ``[start, end)`` (``end`` None: open-ended, a
    stream; :func:`landed_inside`): the line's start naming the table and what it holds there, and ``start`` with
    every such set moved past its last record (a record boundary, bytes). None when it holds none."""
    held = landed_inside(path, start, end or {})
    if not held:
        return None
    after = {name: max(held[name].end, offset) if name in held else offset for name, offset in start.items()}
    what = "; ".join(h.describe(name) for name, h in held.items())
    where = (f"inside the range {json.dumps(dict(start))} -> {json.dumps(dict(end))}" if end is not None else
             f"at or after {json.dumps(dict(start))}")
    return f"bronze ({path}) already holds {what}, {where}", after
