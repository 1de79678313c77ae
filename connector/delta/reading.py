"""Reading a Delta table into Arrow from Python, with a clean interpreter exit (README "Reading the tables").

``deltalake.DeltaTable(path).to_pyarrow_table()`` hands pyarrow a filesystem implemented in Python (delta-rs's
storage handler). pyarrow's I/O threads call into it, and when one of them does so while the interpreter is
shutting down, CPython 3.11-3.13 ends that thread with a forced unwind through C++ frames that may not unwind:
``terminate called without an active exception`` and exit code 134, although the read itself was complete
(seen in 3 to 16 of 20 runs, with every deltalake 1.x and pyarrow 21-26 combination tried). Given a filesystem of
pyarrow's own (C++, no Python callbacks), the same read never calls back into Python and exits cleanly:
:func:`read_table` does that, and the three-line form in the README does the same by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.fs as pafs


def arrow_filesystem(table_uri: str) -> pafs.FileSystem:
    """pyarrow's own filesystem rooted at the table: a local folder or any URI ``pyarrow.fs.FileSystem.from_uri``
    understands (``s3://``, ``gs://``, ``hdfs://``, ``file://``).

    Raises:
        pyarrow.ArrowInvalid: a URI scheme pyarrow has no filesystem for.
    """
    if "://" not in table_uri:
        return pafs.SubTreeFileSystem(str(table_uri), pafs.LocalFileSystem())
    filesystem, path = pafs.FileSystem.from_uri(table_uri)
    return pafs.SubTreeFileSystem(path, filesystem)


def read_table(table_uri: str, columns: Sequence[str] | None = None, filters=None, version: int | None = None
               ) -> pa.Table:
    """The rows of the Delta table at ``table_uri`` (its current version, or ``version``) as a pyarrow Table.

    ``columns`` and ``filters`` are those of ``DeltaTable.to_pyarrow_table`` (DNF filters or a
    ``pyarrow.dataset.Expression``). Raises what deltalake raises for a path that holds no readable table
    (``TableNotFoundError``, ``DeltaError``).
    """
    from deltalake import DeltaTable

    table = DeltaTable(table_uri, version=version)
    return table.to_pyarrow_table(columns=list(columns) if columns is not None else None, filters=filters,
                                  filesystem=arrow_filesystem(table_uri))
