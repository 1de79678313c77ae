"""Adding the source's later nullable columns to a raw-replica table landed before them (docs/source.md "Bad
records", docs/restore.md "Tables landed before the restore columns").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from connector.delta.location import open_delta_table
from connector.landing.rows import DEFAULT_PARTITION_BY, landed_schema

log = logging.getLogger(__name__)

#: Nullable columns later versions of the source added; a raw-replica table written before gets them on
#: start (:func:`add_new_source_columns`), its earlier rows reading them as null.
ADDED_SOURCE_COLUMNS = ("decodeError", "storedBody", "storedProperties", "recordFormat", "mappedFileSizeCommitLog")


def add_new_source_columns(table_uri: str, partition_by: Sequence[str] = DEFAULT_PARTITION_BY) -> list[str]:
    """Add :data:`ADDED_SOURCE_COLUMNS` missing from an existing raw-replica Delta table (a metadata-only commit).

    The bronze app calls this before it starts, so a table landed before ``decodeError`` existed goes on
    (docs/source.md, "Bad records"). Only a table that is :func:`landed_schema` minus some of those columns,
    partitioned by ``partition_by``, and writable by this project is changed; any other table is refused
    before anything is written to it (docs/source.md, "Bad records"). Returns the names added (none when the
    table does not exist or has them all).

    Raises:
        DeltaSchemaMismatchError: the table's columns or partitioning are not a raw replica's (the table is
            left as it was).
        UnsupportedTableFeatureError: the table has writer features this project cannot honour (unchanged).
        connector.delta.location.DeltaTablePathError: an unreadable ``_delta_log``.
    """
    from deltalake import Field
    from pyspark.sql.types import StructType

    from connector.delta.features import check_writable
    from connector.delta.schema import check_schema_matches
    from connector.errors import DeltaSchemaMismatchError

    table = open_delta_table(table_uri)
    if table is None:
        return []
    have = {f.name for f in table.schema().fields}
    missing = [name for name in ADDED_SOURCE_COLUMNS if name not in have]
    if missing:
        schema_json, partitions = table.schema().to_json(), table.metadata().partition_columns
        full = landed_schema()
        earlier = StructType([f for f in full.fields if f.name not in missing])
        try:  # the table must be a raw replica of an earlier version: the full schema minus the added columns
            check_schema_matches(table_uri, schema_json, partitions, earlier, partition_by)
        except DeltaSchemaMismatchError:
            check_schema_matches(table_uri, schema_json, partitions, full, partition_by)  # names every difference
            raise
        check_writable(table, table_uri, "append")
        types = {f.name: f.dataType.typeName() for f in full.fields}  # string, binary, integer: Delta's names
        table.alter.add_columns([Field(name, types[name], nullable=True) for name in missing])
        log.warning("Delta table %s: added the nullable column(s) %s of this hareplica version (earlier rows read "
                    "them as null)", table_uri, ", ".join(missing))
    return missing
