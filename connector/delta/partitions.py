"""Partition values and folders of a Delta table written Hive-style (``col=value/`` sub-folders).

Partition columns are not stored in the data files (Delta protocol "Partition Value Serialization");
each file's values are in its ``add`` action and in the folder names, escaped as Spark and Hive escape
them (ExternalCatalogUtils.escapePathName), with ``__HIVE_DEFAULT_PARTITION__`` for null.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Sequence

#: Folder name Hive and Delta use for a null partition value.
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: Characters Spark/Hive percent-escape in partition folder names (ExternalCatalogUtils.escapePathName).
_PATH_ESCAPE_CHARS = frozenset('"#%\'*/:=?\\\x7f{[]^') | frozenset(chr(c) for c in range(0x01, 0x20))


def partition_value_string(value) -> str | None:
    """Serialize one partition value as the Delta protocol's ``partitionValues`` (None for null).

    Strings as-is ("" becomes null, as Spark does), numbers in decimal notation, booleans
    ``true``/``false``, dates ``YYYY-MM-DD``, timestamps with a time zone as ISO-8601 UTC
    ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, timestamps without one as ``YYYY-MM-DD HH:MM:SS.ffffff``
    (Delta PROTOCOL.md "Partition Value Serialization").
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value or None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            return value.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return str(value)


def escape_partition_path(value: str) -> str:
    """Percent-escape a partition value for a folder name, as Spark/Hive's escapePathName does."""
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPE_CHARS else c for c in value)


def partition_folder(columns: Sequence[str], values: Sequence[str | None]) -> str:
    """Hive-style relative folder ``a=1/b=x`` (no trailing slash; "" when unpartitioned)."""
    return "/".join(
        f"{escape_partition_path(c)}={HIVE_DEFAULT_PARTITION if v is None else escape_partition_path(v)}"
        for c, v in zip(columns, values, strict=True))

