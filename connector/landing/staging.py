"""Staged rows of a landing target that the driver writes into its table itself (upserts, tables whose columns come
from the data): the tasks write Parquet files into :data:`STAGED_FOLDER` under the table root, named as the sink's
data files (``part-<appTag>-b<batchId>-...``); the driver reads the files its tasks reported, commits, and removes
them with any left by earlier attempts. Staged files are never referenced by the table, so removing them is always
safe; Delta readers and the orphan rules ignore ``_`` folders. docs/delta.md "The replay rule".
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from connector.delta.file_names import DATA_FILE_PREFIX, app_tag
from connector.delta.files import delete_quietly, table_filesystem
from connector.delta.options import DeltaSinkOptions
from connector.delta.sink import DeltaLakeStreamWriter, DeltaLakeTaskWrite

log = logging.getLogger(__name__)

#: The folder under the table root that holds the tasks' staged rows until the driver's commit.
STAGED_FOLDER = "_hareplica_staged"


@dataclass(frozen=True)
class StagedFiles:
    """The staged files of one target (module docstring); picklable, holds only options."""

    options: DeltaSinkOptions

    @property
    def uri(self) -> str:
        """The location of the staged files: :data:`STAGED_FOLDER` under the table root."""
        return posixpath.join(self.options.table_uri, STAGED_FOLDER)

    def open_task(self, schema) -> DeltaLakeTaskWrite:
        """A task's writer of staged rows of the Spark schema ``schema`` (a batch of another Arrow schema starts
        new files: :class:`connector.delta.parquet.TaskFileWriter`), unpartitioned."""
        return DeltaLakeStreamWriter(replace(self.options, table_uri=self.uri), schema, ()).open_task()

    def read(self, paths: Sequence[str]) -> list[pa.Table]:
        """The rows of the staged files at ``paths`` (relative to :attr:`uri`), one table per file.

        Raises:
            OSError: a file cannot be read.
        """
        import pyarrow.parquet as pq

        fs, root = table_filesystem(self.uri)
        return [pq.read_table(posixpath.join(root, p), filesystem=fs) for p in paths]

    def remove(self, paths: Sequence[str], batch_id: int, *, only_batch: bool = False) -> None:
        """Delete ``paths`` and every staged file of this appId of a batch up to ``batch_id`` (only ``batch_id``
        when ``only_batch``): left by task attempts Spark dropped and by runs that died before this point.
        Best effort: a file left is removed by a later batch's commit."""
        from pyarrow import fs as pafs

        fs, root = table_filesystem(self.uri)
        pattern = re.compile(f"^{re.escape(DATA_FILE_PREFIX)}{app_tag(self.options.app_id)}-b(\\d+)-")
        stale = set(paths)
        try:
            for info in fs.get_file_info(pafs.FileSelector(root, allow_not_found=True)):
                match = pattern.match(info.base_name)
                if info.type == pafs.FileType.File and match:
                    number = int(match.group(1))
                    if number == batch_id or (number < batch_id and not only_batch):
                        stale.add(info.base_name)
        except OSError as e:
            log.warning("could not list the staged files of %s: %s", self.uri, e)
        removed = sum(delete_quietly(fs, posixpath.join(root, p)) for p in sorted(stale))
        log.debug("removed %d staged files of batch %d from %s", removed, batch_id, self.uri)
