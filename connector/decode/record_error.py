"""`record_error`: the decoder's CommitLogFormatError (connector.errors) naming offset, field and mapped file."""

from __future__ import annotations

from connector.errors import CommitLogFormatError
from connector.protocol.mapped_files import file_name_of


def record_error(msg: str, offset: int, field: str, mapped_file_size: int) -> CommitLogFormatError:
    """A CommitLogFormatError for the record at CommitLog ``offset`` (bytes), naming ``field`` and the file of
    ``mapped_file_size`` bytes (mappedFileSizeCommitLog) that holds the offset."""
    return CommitLogFormatError(msg, offset=offset, field=field, file=file_name_of(offset, mapped_file_size))
