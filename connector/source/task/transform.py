"""``batch_transform``: a Python function the source's own tasks apply to every decoded batch (docs/source.md
"Transforming batches in the task").

Through ``format("hareplica")`` every column a query reads crosses from the source's Python worker into the
JVM (Arrow → rows); a ``mapInArrow`` that then turns the body into other columns sends them back out
(rows → Arrow) and in again. With ``batch_transform`` the task calls the function on each decoded
``pyarrow.RecordBatch`` itself and only its result enters the JVM: for a body decoder (the gold
app's msgpack orders) the bodies never do.

The value names a module-level function, ``package.module:function``, importable wherever the tasks run
(the executors' Python). It is called as ``function(batch, columns)``: ``batch`` holds every column of
the source's schema (connector.decode.schema), ``columns`` is the tuple of column names of the query's
schema (``.schema(...)`` on the reader; without one, the source's own schema); it returns a RecordBatch of exactly
those columns, in that order, of that schema's types. The same module:function form names the direct
landing's split (connector.landing, ``landingSplit``).

A function may say which source columns it reads: an attribute ``source_columns``, a callable taking the
query's column names and returning source column names. The decoder then builds only those, and ``batch``
holds only those (in the source's column order): properties, hosts and message ids a body decoder never
reads are not built (docs/source.md "Transforming batches in the task").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa

from connector.errors import HAReplicaOptionError
from connector.options.declaration import OPTIONS
from connector.options.functions import import_function


def transform_source_columns(spec: str, columns: Sequence[str]) -> tuple[str, ...] | None:
    """The source columns the ``batch_transform`` function ``spec`` reads to build ``columns``: its
    ``source_columns(columns)`` (module docstring), or None (every column) when it has no such attribute.

    Raises HAReplicaOptionError (option ``batch_transform``) when that attribute is not callable or names a
    column the source does not have (docs/source.md "Rows").
    """
    from connector.decode.schema import column_schema

    declared = getattr(import_function(OPTIONS.batch_transform.name, spec), "source_columns", None)
    if declared is None:
        return None
    if not callable(declared):
        raise HAReplicaOptionError(OPTIONS.batch_transform.name, spec, "its source_columns attribute is not callable")
    names = tuple(declared(tuple(columns)))
    try:
        column_schema(names)
    except ValueError as e:
        raise HAReplicaOptionError(OPTIONS.batch_transform.name, spec, f"source_columns: {e}") from None
    return names


def transform_batches(batches: Iterable[pa.RecordBatch], spec: str, columns: Sequence[str]
                      ) -> Iterator[pa.RecordBatch]:
    """Apply the ``batch_transform`` function ``spec`` to every non-empty batch (module docstring).

    Raises HAReplicaOptionError (option ``batch_transform``) when the function returns anything but a
    RecordBatch of exactly ``columns``, in order; what the function itself raises propagates.
    """
    function = import_function(OPTIONS.batch_transform.name, spec)
    want = list(columns)
    for batch in batches:
        if not batch.num_rows:
            continue
        out = function(batch, tuple(columns))
        if not isinstance(out, pa.RecordBatch) or out.schema.names != want:
            got = out.schema.names if isinstance(out, pa.RecordBatch) else type(out).__name__
            raise HAReplicaOptionError(OPTIONS.batch_transform.name, spec,
                                       f"returned {got}, the query's schema has {want}")
        yield out
