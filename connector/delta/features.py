"""Table features this project's writers can honour (tables Spark's Delta Lake wrote).

docs/delta.md, "Spark's Delta Lake and this project's writers". The appends of the sink, the direct
landing and ``write_batch``, and delta-rs maintenance, check a table's protocol first
(:func:`check_writable`) and refuse, in one line, a table whose writer features they would break.
"""

from __future__ import annotations

import json

from connector.errors import UnsupportedTableFeatureError

#: Writer features (Delta protocol "Table Features") under which this project's appends (the sink, the
#: direct landing, write_batch) and delta-rs maintenance are still correct: they add plain Parquet files
#: under the logical column names, never delete rows and carry no row ids. Checked on tables Spark wrote.
SUPPORTED_WRITER_FEATURES = frozenset({
    "appendOnly", "invariants", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "deletionVectors",
    "changeDataFeed",
})
#: Why a feature outside that set is refused (the rest: "not supported by this project's writers").
_FEATURE_REASONS = {
    "columnMapping": "data files use physical column names this writer does not produce",
    "rowTracking": "every added file needs row ids this writer does not assign",
    "domainMetadata": "delta-rs cannot commit to tables with domain metadata",
    "identityColumns": "identity values are assigned by the writer",
    "generatedColumns": "generated values are computed by the writer",
    "checkConstraints": "CHECK constraints are not enforced by this writer",
}


UNKNOWN_FEATURE_REASON = "not supported by this project's writers"


def check_writable(table, table_uri: str, operation: str) -> None:
    """Refuse ``operation`` (e.g. ``append``, ``maintenance``) on a table with features outside the supported set.

    Also refuses a writer version above 7 or a reader version above 3 (unknown protocols). The rules and
    the supported features are in docs/delta.md, "Spark's Delta Lake and this project's writers".

    Raises:
        UnsupportedTableFeatureError: one line naming the table path, the features and why.
    """
    protocol = table.protocol()
    if protocol.min_writer_version > 7 or protocol.min_reader_version > 3:
        raise UnsupportedTableFeatureError(
            f"{table_uri}: Delta protocol reader {protocol.min_reader_version} / writer {protocol.min_writer_version} "
            f"is newer than this project's {operation} supports (reader 3 / writer 7)")
    features = set(protocol.writer_features or []) if protocol.min_writer_version == 7 else _legacy_features(table)
    unsupported = sorted(features - SUPPORTED_WRITER_FEATURES)
    if unsupported:
        why = "; ".join(f"{f}: {_FEATURE_REASONS.get(f, UNKNOWN_FEATURE_REASON)}" for f in unsupported)
        raise UnsupportedTableFeatureError(
            f"{table_uri}: table feature{'s' if len(unsupported) > 1 else ''} {', '.join(unsupported)} "
            f"cannot be honoured by this project's {operation} ({why}); write and maintain this table with Spark's "
            "format(\"delta\") (--sink delta)")


def _legacy_features(table) -> set[str]:
    """Features a writer version 2..6 implies (Delta protocol, "Table Features"), those the table really uses."""
    version = table.protocol().min_writer_version
    config = table.metadata().configuration or {}
    keys = _schema_metadata_keys(table)
    used = {
        "checkConstraints": version >= 3 and any(k.startswith("delta.constraints.") for k in config),
        "generatedColumns": version >= 4 and "delta.generationExpression" in keys,
        "columnMapping": version >= 5 and config.get("delta.columnMapping.mode", "none") != "none",
        "identityColumns": version >= 6 and any(k.startswith("delta.identity.") for k in keys),
    }
    return {name for name, on in used.items() if on}


def _schema_metadata_keys(table) -> set[str]:
    keys: set[str] = set()
    for field in json.loads(table.schema().to_json()).get("fields", []):
        keys.update((field.get("metadata") or {}).keys())
    return keys
