"""The progress file's storage: JSON lines appended to a local file, or to an object in an object store, which
cannot be appended to, so the listener rewrites it whole with each line (one PUT per line, the object capped at
:data:`OBJECT_STORE_MAX_BYTES`). Both rotate to ``NAME.1``. docs/object_storage.md "What differs from a local
table".
"""

from __future__ import annotations

import os
from pathlib import Path

from connector.storage import locations, store

#: The size past which a progress object in an object store is rotated: each line rewrites the object whole.
OBJECT_STORE_MAX_BYTES = 1024 * 1024


class ProgressFile:
    """Append-only JSON lines at a local path or an ``s3://`` location, rotated to ``NAME.1`` past ``max_bytes``.

    Raises OSError from :meth:`append` when the file or object cannot be written (the listener logs it).
    """

    def __init__(self, location: str | os.PathLike, max_bytes: int):
        text = os.fspath(location)
        self.remote = locations.is_uri(text)
        self.location = text
        self.max_bytes = min(max_bytes, OBJECT_STORE_MAX_BYTES) if self.remote else max_bytes
        self._text: bytes | None = None  # the object's bytes (object store only), read once
        if not self.remote:
            Path(text).parent.mkdir(parents=True, exist_ok=True)

    def append(self, line: str) -> None:
        """Add one line (ending in a newline)."""
        data = line.encode("utf-8")
        if not self.remote:
            path = Path(self.location)
            if path.exists() and path.stat().st_size + len(data) > self.max_bytes:
                os.replace(path, path.with_name(path.name + ".1"))
            with open(path, "ab") as fh:
                fh.write(data)
            return
        fs, key = store.filesystem(self.location)
        if self._text is None:
            self._text = _read_object(fs, key) or b""
        if len(self._text) + len(data) > self.max_bytes:
            fs.copy_file(key, key + ".1")
            self._text = b""
        self._text += data
        with fs.open_output_stream(key) as out:
            out.write(self._text)


def _read_object(fs, key: str) -> bytes | None:
    try:
        with fs.open_input_stream(key) as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_progress_texts(location: str | os.PathLike) -> list[tuple[str, str]]:
    """``[(name, text)]`` of a progress file's rotated ``.1`` and then the file itself, those that exist."""
    text = os.fspath(location)
    out = []
    if locations.is_uri(text):
        fs, key = store.filesystem(text)
        for name in (key + ".1", key):
            data = _read_object(fs, name)
            if data is not None:
                out.append((f"s3://{name}", data.decode("utf-8", errors="replace")))
        return out
    path = Path(text)
    for p in (path.with_name(path.name + ".1"), path):
        if p.exists():
            out.append((str(p), p.read_text(encoding="utf-8", errors="replace")))
    return out


def list_progress_files(folder: str) -> list[str]:
    """The ``*.jsonl`` progress files in an object-store folder (``s3://…``), sorted."""
    from pyarrow import fs as pafs

    fs, key = store.filesystem(folder)
    infos = fs.get_file_info(pafs.FileSelector(key, allow_not_found=True))
    return sorted(f"s3://{i.path}" for i in infos if i.type == pafs.FileType.File and i.path.endswith(".jsonl"))
