"""Telling a full file system apart from other write errors, for the Delta writers' one-line messages.

The writers' errors themselves are in :mod:`connector.errors` (docs/errors.md).
"""

from __future__ import annotations

import errno

#: errnos that mean the file system has no room for the write (ENOSPC; EDQUOT: the user's quota is used up)
_NO_SPACE_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_NO_SPACE_TEXTS = ("no space left on device", "disk quota exceeded")


def no_space_text(error: BaseException) -> str | None:
    """``"no space left on device (ENOSPC)"`` (or the quota's EDQUOT text) when ``error`` says the file system
    is full, else None. Looks at ``errno`` (OSError, also pyarrow's) and at the message, since delta-rs
    reports an I/O error as text only."""
    code = getattr(error, "errno", None)
    text = str(error).lower()
    if code in _NO_SPACE_ERRNOS or any(t in text for t in _NO_SPACE_TEXTS):
        if code == getattr(errno, "EDQUOT", None) or "quota" in text:
            return "disk quota exceeded (EDQUOT)"
        return "no space left on device (ENOSPC)"
    return None
