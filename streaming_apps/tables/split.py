"""In a task of ``hareplica run tables``: the landing's split (``landingSplit`` factory, ``landingSplitConfig`` the
declaration as :meth:`streaming_apps.tables.declaration.Declaration.to_json` gives it). Each record of the decoded
slice goes to every table whose topics and tags it matches, its body decoded by the table's format; a record that
does not decode, or whose body the source could not decode (its ``decodeError``), goes to the dead-letter table
(or stops the query for ``on_error = "fail"``). An upsert table gets staged rows (:mod:`streaming_apps.tables.upserts`).
docs/tables.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.arrow_numpy import binary_array, bool_array, from_numpy, repeat_string
from connector.errors import HAReplicaError
from streaming_apps.tables.columns import (
    DEAD_LETTER_SCHEMA,
    PROPERTY_COLUMN_PREFIX,
    STORE_DATE,
    day_of,
    kept_column,
    store_date,
)
from streaming_apps.tables.decode.base import decoder_for
from streaming_apps.tables.decode.contract import Decoded
from streaming_apps.tables.upserts import TaskUpsert

#: Bodies decoded at once: a decoder holds one Python object per field value of the bodies it decodes, so a task's
#: batch is decoded in slices of this many rows (a decoder whose schema is fixed; docs/tables.md "Where the bodies
#: are decoded").
DECODE_CHUNK_ROWS = 1024

#: The decoders of each declaration this worker process has seen, by the hash of its text: a task builds none.
_SPLITS: dict[str, _Split] = {}


class TableDecodeError(HAReplicaError):
    """A record of an ``on_error = "fail"`` table did not decode: the table, broker, offset and what was wrong."""


class _TaskTable:
    """One table of the declaration in a task: which records it takes, its decoder and its columns."""

    def __init__(self, spec: dict, schema_dir: Path):
        self.name = spec["name"]
        self.topics = binary_array(spec["topics"], pa.string())
        self.tags = None if spec["tags"] is None else binary_array(spec["tags"], pa.string())
        folder = schema_dir / self.name
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in spec["files"].items():
            (folder / name).write_bytes(base64.b64decode(data))
        self.decoder = decoder_for(spec["format"], spec["settings"], folder)
        self.columns = list(spec["columns"])
        self.store_date = STORE_DATE in spec["partitionBy"]
        self.dates = [tuple(d) for d in spec.get("dates", ())]
        self.fail = spec["onError"] == "fail"
        self.schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(spec["arrowSchema"])))
        self.wants_properties = bool(spec["settings"].get("version_property"))
        self.upsert = TaskUpsert(spec, self.columns) if spec["mode"] == "upsert" else None
        #: a table whose columns come from the data (json ``infer``): its location, to pin the decoder to it
        self.table_uri = spec.get("tableUri")

    def refresh(self) -> None:
        """Pin an ``infer`` table's decoder to the columns the table has (a task's first batch: the micro-batches
        before it are committed), so a column keeps its type (:mod:`connector.delta.schema_evolution`)."""
        from connector.delta.location import open_delta_table
        from connector.delta.schema_evolution import plain_schema

        table = open_delta_table(self.table_uri)
        fields = None
        if table is not None:
            kept = set(self.schema.names)
            fields = pa.schema([f for f in plain_schema(pa.schema(table.schema().to_arrow())) if f.name not in kept])
        self.decoder.pin(fields, reserved=frozenset(self.schema.names))

    def mask(self, batch: pa.RecordBatch) -> pa.Array | None:
        """Which records of ``batch`` the table takes (None: all)."""
        keep = pc.is_in(batch.column("topic"), value_set=self.topics)
        if self.tags is not None:
            keep = pc.and_(keep, pc.is_in(batch.column("tags"), value_set=self.tags))  # a null tag: False
        return None if keep.true_count == len(keep) else keep

    def rows(self, records: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch | None]:
        """``(the table's rows, the dead letters or None)`` of the records it takes; for an upsert table the rows
        are staged rows (:mod:`streaming_apps.tables.upserts`)."""
        if self.upsert is None:
            rows, dead, _ = self._decoded(records)
            return rows, dead
        skip = None if self.upsert.decode_tombstones else self.upsert.tombstones(records)
        if skip is None or not skip.any():
            rows, dead, kept = self._decoded(records)
        else:  # tombstones keyed by kept columns only: not decoded (an empty body would be a dead letter)
            rows, dead, kept = self._decoded(records.filter(bool_array(~skip)))
            skipped = records.filter(bool_array(skip))
            nulls = [pa.nulls(skipped.num_rows, f.type) for f in self.decoder.schema]
            rows = pa.concat_batches([rows, self._assemble(pa.RecordBatch.from_arrays(
                nulls, schema=self.decoder.schema), skipped)])
            kept = pa.concat_batches([kept, skipped])
        errors = self.upsert.null_key_errors(rows)
        if errors is not None:
            failed = np.fromiter((e is not None for e in errors), dtype=bool, count=len(errors))
            first = int(np.argmax(failed))
            if self.fail:
                raise TableDecodeError(
                    f"table {self.name}: broker {kept.column('broker')[first].as_py()} commitLogOffset "
                    f"{kept.column('commitLogOffset')[first].as_py()}: {errors[first]}")
            letters = dead_letters(self.name, kept.take(_indices(failed)), [e for e in errors if e is not None],
                                   [None] * int(failed.sum()))
            dead = letters if dead is None else pa.concat_batches([dead, letters])
            ok = _indices(~failed)
            rows, kept = rows.take(ok), kept.take(ok)
        return self.upsert.stage(rows, kept), dead

    def _decoded(self, records: pa.RecordBatch
                 ) -> tuple[pa.RecordBatch, pa.RecordBatch | None, pa.RecordBatch]:
        """``(rows, dead letters or None, the records of the rows)`` of decoding ``records``."""
        decoded = self._decode(records)
        _bad_records(records, decoded.errors, decoded.schemas)
        failed = np.fromiter((e is not None for e in decoded.errors), dtype=bool, count=records.num_rows)
        dead = None
        if failed.any():
            first = int(np.argmax(failed))
            if self.fail:
                raise TableDecodeError(
                    f"table {self.name}: broker {records.column('broker')[first].as_py()} commitLogOffset "
                    f"{records.column('commitLogOffset')[first].as_py()}: {decoded.errors[first]} "
                    f"(schema {decoded.schemas[first]})")
            dead = dead_letters(self.name, records.take(_indices(failed)),
                                [e for e in decoded.errors if e is not None],
                                [s for s, f in zip(decoded.schemas, failed, strict=True) if f])
            ok = _indices(~failed)
            fields, records = decoded.fields.take(ok), records.take(ok)
        else:
            fields = decoded.fields
        return self._assemble(fields, records), dead, records

    def _decode(self, records: pa.RecordBatch) -> Decoded:
        """The bodies of ``records`` decoded, :data:`DECODE_CHUNK_ROWS` at a time when the decoder's schema is
        fixed (one call otherwise), so the Python objects of one slice only are alive at once."""
        properties = _property_dicts(records) if self.wants_properties else None
        bodies, n = records.column("body"), records.num_rows
        step = DECODE_CHUNK_ROWS if self.decoder.fixed_schema else max(n, 1)
        parts = [self.decoder.decode(bodies.slice(i, step), None if properties is None else properties[i:i + step])
                 for i in range(0, max(n, 1), step)]  # an empty batch: one empty decode
        if len(parts) == 1:
            return parts[0]
        return Decoded(pa.concat_batches([p.fields for p in parts]), [e for p in parts for e in p.errors],
                       [s for p in parts for s in p.schemas])

    def _assemble(self, fields: pa.RecordBatch, records: pa.RecordBatch) -> pa.RecordBatch:
        """The table's rows: the decoded ``fields``, the kept columns of ``records``, the date columns and
        storeDate."""
        arrays = list(fields.columns)
        names = list(fields.schema.names)
        for column in self.columns:
            names.append(column[len(PROPERTY_COLUMN_PREFIX):] if column.startswith(PROPERTY_COLUMN_PREFIX)
                         else column)
            arrays.append(kept_column(records, column))
        for column, field in self.dates:
            names.append(column)
            arrays.append(day_of(fields.column(field)))
        if self.store_date:
            names.append(STORE_DATE)
            arrays.append(store_date(records))
        schema = self.schema if self.table_uri is None else pa.schema(list(fields.schema) + list(self.schema))
        return _as_schema(pa.RecordBatch.from_arrays(arrays, names=names), schema)


#: The source's column naming why a record's body is kept as stored (a BODYCRC mismatch, a body that does not
#: inflate: connector.decode.bodies, docs/source.md "Bad records").
DECODE_ERROR = "decodeError"
#: The dead-letter error of a record the source could not decode, before its decodeError.
BAD_RECORD = "bad record: "


def _bad_records(records: pa.RecordBatch, errors: list[str | None], schemas: list[str | None]) -> None:
    """Mark as failed (in place: ``errors`` ``bad record: <decodeError>``, ``schemas`` None) every record whose
    body the source could not decode: its stored bytes are no body of the table's format, even where they happen
    to decode."""
    index = records.schema.get_field_index(DECODE_ERROR)
    column = records.column(index) if index >= 0 else None
    if column is None or column.null_count == len(column):
        return
    for row, error in enumerate(column.to_pylist()):
        if error is not None:
            errors[row], schemas[row] = BAD_RECORD + error, None


def _as_schema(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` cast to the table's schema (one batch, also when empty)."""
    if not batch.num_rows:
        return empty_batch(schema)
    return pa.Table.from_batches([batch]).cast(schema).combine_chunks().to_batches()[0]


def _indices(mask: np.ndarray) -> pa.Array:
    """The positions where ``mask`` is True, as an int64 array for ``take``."""
    return from_numpy(np.flatnonzero(mask).astype(np.int64), pa.int64())


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A batch of no rows of ``schema`` (built without pyarrow's pandas shim)."""
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def nullable_strings(values: Sequence[str | None]) -> pa.Array:
    """A string array of ``values``, None as null (built without pyarrow's pandas shim)."""
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    dense = binary_array([v or "" for v in values], pa.string())
    if valid.all():
        return dense
    offsets, data = dense.buffers()[1:]
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(values), [bitmap, offsets, data])


def _property_dicts(records: pa.RecordBatch) -> list[dict[str, str]]:
    return [dict(p) for p in records.column("properties").to_pylist()]


def dead_letters(table: str, records: pa.RecordBatch, errors: Sequence[str], schemas: Sequence[str | None]
                 ) -> pa.RecordBatch:
    """The dead-letter rows (:data:`streaming_apps.tables.columns.DEAD_LETTER_SCHEMA`) of ``records`` that
    ``table`` could not decode, with one error and the schema tried per record."""
    n = records.num_rows
    arrays = [repeat_string(table, n)] + [records.column(name) for name in
                                          ("topic", "broker", "queueId", "queueOffset", "commitLogOffset", "msgId",
                                           "storeTimestamp", "body")]
    arrays += [nullable_strings(schemas), nullable_strings(errors)]
    return pa.RecordBatch.from_arrays(arrays, schema=DEAD_LETTER_SCHEMA)


def make_split(config: str) -> Callable[[pa.RecordBatch], list[pa.RecordBatch]]:
    """The split of a declaration (``landingSplitConfig``): ``split(batch)`` → one RecordBatch per table, in the
    declaration's order, then the dead letters. Decoders are built once per worker process and declaration.

    Raises:
        BodyFormatError: a schema the decoder refuses (the driver checked it first).
        TableDecodeError (from the split): a record of an ``on_error = "fail"`` table that does not decode.
    """
    digest = hashlib.sha256(config.encode("utf-8")).hexdigest()
    split = _SPLITS.get(digest)
    if split is None:
        split = _Split(json.loads(config))
        _SPLITS[digest] = split
    split.stale = True  # a new task: infer tables look at their table again
    return split


class _Split:
    """The split function of one declaration (:func:`make_split`)."""

    def __init__(self, config: dict):
        schema_dir = Path(tempfile.mkdtemp(prefix="hareplica-tables-"))
        self.tables = [_TaskTable(spec, schema_dir) for spec in config["tables"]]
        self.inferred = [t for t in self.tables if t.table_uri is not None]
        self.stale = True

    def __call__(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        if self.stale:  # the task's writers are open: this process has the tables' storage settings
            for table in self.inferred:
                table.refresh()
            self.stale = False
        out, dead = [], []
        for table in self.tables:
            keep = table.mask(batch)
            records = batch if keep is None else batch.filter(keep)
            rows, letters = table.rows(records)
            out.append(rows)
            if letters is not None:
                dead.append(letters)
        out.append(_as_schema(pa.concat_batches(dead), DEAD_LETTER_SCHEMA) if dead
                   else empty_batch(DEAD_LETTER_SCHEMA))
        return out

