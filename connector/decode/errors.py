"""The decoder's CommitLogFormatError: offset, field and the mapped file named."""

from __future__ import annotations

from connector.protocol.errors import CommitLogFormatError
from connector.protocol.mapped_files import file_name_of


def record_error(msg: str, offset: int, field: str, mapped_file_size: int) -> CommitLogFormatError:
    """A CommitLogFormatError for the record at CommitLog ``offset`` (bytes), naming ``field`` and the file of
    ``mapped_file_size`` bytes (mappedFileSizeCommitLog) that holds the offset."""
    return CommitLogFormatError(msg, offset=offset, field=field, file=file_name_of(offset, mapped_file_size))
