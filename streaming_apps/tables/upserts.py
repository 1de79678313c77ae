"""In a task of ``hareplica run tables``: the staged rows of an upsert table (docs/tables.md "Upserts"). Each
record's row gets its ``commitLogOffset`` as the order (the largest of a key wins at the driver's merge,
:mod:`connector.landing.upsert`) and whether it is a tombstone (the declaration's ``tombstone``: an empty body, or
a user property); a row whose key is null cannot be merged and is a dead letter.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.arrow_numpy import binary_array, bool_array, bool_to_numpy
from connector.landing.upsert import DELETE_COLUMN, ORDER_COLUMN
from streaming_apps.tables.columns import PROPERTY_COLUMN_PREFIX
from streaming_apps.tables.declaration import EMPTY_BODY

__all__ = ["TaskUpsert"]


class TaskUpsert:
    """The upsert settings of one table in a task: its key columns and its tombstone rule.

    ``spec``: the table's entry of the declaration's JSON (``key``, ``tombstone``); ``columns``: its kept columns
    (``property:NAME`` as declared). ``decode_tombstones``: whether a tombstone's body must be decoded (its key
    has fields of the body) or its row is built from the kept columns alone.
    """

    def __init__(self, spec: dict, columns: list[str]):
        self.keys = list(spec["key"])
        kept = {c[len(PROPERTY_COLUMN_PREFIX):] if c.startswith(PROPERTY_COLUMN_PREFIX) else c for c in columns}
        self.decode_tombstones = any(k not in kept for k in self.keys)
        rule = spec.get("tombstone")
        self.empty_body = rule == EMPTY_BODY
        self.property = self.value = None
        if rule and rule.startswith(PROPERTY_COLUMN_PREFIX):
            name, _, value = rule[len(PROPERTY_COLUMN_PREFIX):].partition("=")
            self.property = binary_array([name], pa.string())[0]
            self.value = value if "=" in rule else None

    def tombstones(self, records: pa.RecordBatch) -> np.ndarray:
        """Which of the source ``records`` are tombstones (bool per record)."""
        n = records.num_rows
        if self.empty_body:
            body = records.column("body")
            return bool_to_numpy(pc.fill_null(pc.equal(pc.binary_length(body), 0), True))
        if self.property is not None:
            found = pc.map_lookup(records.column("properties"), self.property, "first")
            hit = pc.is_valid(found) if self.value is None else pc.fill_null(pc.equal(found, self.value), False)
            return bool_to_numpy(hit)
        return np.zeros(n, dtype=bool)

    def null_key_errors(self, rows: pa.RecordBatch) -> list[str | None] | None:
        """One error per row whose key has a null column (``key NAME is null``), None for the others; None when
        every key is complete."""
        errors: list[str | None] | None = None
        for key in self.keys:
            column = rows.column(key)
            if column.null_count:
                errors = errors or [None] * rows.num_rows
                for i in np.flatnonzero(bool_to_numpy(pc.is_null(column))):
                    errors[i] = errors[i] or f"key {key} is null: an upsert row needs its whole key"
        return errors

    def stage(self, rows: pa.RecordBatch, records: pa.RecordBatch) -> pa.RecordBatch:
        """``rows`` (the table's columns) plus the order (``records``' commitLogOffset) and the tombstone flag."""
        order = records.column("commitLogOffset").cast(pa.int64())
        delete = bool_array(self.tombstones(records))
        return pa.RecordBatch.from_arrays(
            [*rows.columns, order, delete],
            schema=rows.schema.append(pa.field(ORDER_COLUMN, pa.int64(), nullable=False))
            .append(pa.field(DELETE_COLUMN, pa.bool_(), nullable=False)))
