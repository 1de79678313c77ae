"""Schema evolution of the declared tables, Delta's way: a declaration whose schema adds fields (a new Avro
version, new Protobuf or JSON Schema fields) adds them to the existing table as nullable columns before the query
starts, earlier rows reading them as null; any other difference (a type changed, a column gone, other
partitioning) is refused before anything is written. docs/tables.md "Schema evolution".
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def added_columns(table_uri: str, declared, partition_by: tuple[str, ...], *, add: bool) -> list[str]:
    """The declared top-level columns the existing table at ``table_uri`` lacks (``[]`` when it has them all or does
    not exist), added to it as nullable columns when ``add`` (one metadata-only commit).

    ``declared``: the table's Spark schema from the declaration. The table's own columns must be the declared ones
    minus those it lacks, with the same types and ``partition_by``.

    Raises:
        DeltaSchemaMismatchError: any other difference (every one named; the table is left as it was).
        UnsupportedTableFeatureError: writer features this project cannot honour.
        DeltaTablePathError: an unreadable ``_delta_log``.
    """
    import json

    from deltalake import Schema
    from pyspark.sql.types import StructType

    from connector.delta.features import check_writable
    from connector.delta.location import open_delta_table
    from connector.delta.schema import check_schema_matches
    from connector.errors import DeltaSchemaMismatchError

    table = open_delta_table(table_uri)
    if table is None:
        return []
    have = {f.name for f in table.schema().fields}
    missing = [f.name for f in declared.fields if f.name not in have]
    schema_json, partitions = table.schema().to_json(), table.metadata().partition_columns
    earlier = StructType([f for f in declared.fields if f.name in have])
    try:
        check_schema_matches(table_uri, schema_json, partitions, earlier, partition_by)
    except DeltaSchemaMismatchError:
        check_schema_matches(table_uri, schema_json, partitions, declared, partition_by)  # names every difference
        raise
    if missing and add:
        check_writable(table, table_uri, "append")
        fields = {f.name: f for f in Schema.from_json(json.dumps(declared.jsonValue())).fields}
        table.alter.add_columns([fields[name] for name in missing])
        log.warning("Delta table %s: added the nullable column(s) %s of the declaration (earlier rows read them as "
                    "null)", table_uri, ", ".join(missing))
    return missing
