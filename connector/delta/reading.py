"""Reading a Delta table into Arrow from Python with a clean interpreter exit: :func:`read_table` gives pyarrow a
filesystem of its own, so pyarrow's I/O threads never call back into delta-rs's Python storage handler while the
interpreter shuts down (which can abort the process with exit code 134). Why and the same by hand:
docs/install.md "Reading the tables from your own Python".
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.fs as pafs

from connector.storage import store


def arrow_filesystem(table_uri: str) -> pafs.FileSystem:
    """pyarrow's own filesystem rooted at the table: a local folder or an ``s3://`` location with this process's
    storage settings (:func:`connector.storage.store.filesystem`).

    Raises:
        StorageConfigError: a URI scheme other than ``s3``/``s3a``.
    """
    filesystem, path = store.filesystem(table_uri)
    return pafs.SubTreeFileSystem(path, filesystem)


def read_table(table_uri: str, columns: Sequence[str] | None = None, filters=None, version: int | None = None
               ) -> pa.Table:
    """The rows of the Delta table at ``table_uri`` (its current version, or ``version``) as a pyarrow Table.

    ``columns`` and ``filters`` are those of ``DeltaTable.to_pyarrow_table`` (DNF filters or a
    ``pyarrow.dataset.Expression``). Raises what deltalake raises for a path that holds no readable table
    (``TableNotFoundError``, ``DeltaError``).
    """
    table = store.delta_table(table_uri, version=version)
    return table.to_pyarrow_table(columns=list(columns) if columns is not None else None, filters=filters,
                                  filesystem=arrow_filesystem(table_uri))
