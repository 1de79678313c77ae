"""Table, checkpoint and status locations: a local path or an object-store URI, in the one form each consumer
takes (delta-rs and pyarrow read ``s3://``, Spark's Hadoop file systems ``s3a://``). The rules:
docs/object_storage.md "Locations".
"""

from __future__ import annotations

import os
import posixpath
from urllib.parse import urlsplit

from connector.errors import StorageConfigError

#: URI schemes of S3-compatible stores, as the user may write them; delta-rs and pyarrow take ``s3``.
S3_SCHEMES = ("s3", "s3a")
#: The scheme Spark's Hadoop S3 file system (hadoop-aws) registers.
HADOOP_S3_SCHEME = "s3a"
#: Every scheme a location may have: local files and S3-compatible stores.
SUPPORTED_SCHEMES = ("file",) + S3_SCHEMES


def is_uri(location: str | os.PathLike) -> bool:
    """True for ``scheme://…`` other than ``file://`` (a location in an object store)."""
    text = os.fspath(location)
    return "://" in text and not text.startswith("file://")


def scheme_of(location: str | os.PathLike) -> str:
    """The lower-case URI scheme of ``location`` (``file`` for a local path)."""
    text = os.fspath(location)
    return urlsplit(text).scheme.lower() if "://" in text else "file"


def resolve(location: str | os.PathLike, what: str = "location") -> str:
    """A location as every part of the project names it: an absolute local path, or ``s3://bucket/key`` (``s3a://``
    written as ``s3://``, no trailing slash).

    Raises:
        StorageConfigError: a scheme other than :data:`SUPPORTED_SCHEMES`, or an S3 URI without a bucket
            (the message names ``what``, e.g. ``--workdir``).
    """
    text = os.fspath(location).strip()
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif text.startswith("file:"):
        text = text[len("file:"):]
    if "://" not in text:
        return os.path.abspath(os.path.expanduser(text))
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in SUPPORTED_SCHEMES:
        raise StorageConfigError(f"{what} {text}: URI scheme {scheme}:// is not supported: use a local path or "
                                 f"s3://bucket/prefix (s3a:// is the same store)")
    if not parts.netloc:
        raise StorageConfigError(f"{what} {text}: no bucket: write s3://bucket/prefix")
    key = parts.path.strip("/")
    return f"s3://{parts.netloc}/{key}" if key else f"s3://{parts.netloc}"


def join(root: str | os.PathLike, *names: str) -> str:
    """``root`` (a resolved location) with ``names`` appended, ``/``-separated for URIs."""
    text = os.fspath(root)
    if is_uri(text):
        return posixpath.join(text.rstrip("/"), *names)
    return os.path.join(text, *names)


def for_spark(location: str | os.PathLike) -> str:
    """The location as Spark's Hadoop file systems take it: ``s3://`` becomes ``s3a://`` (hadoop-aws registers
    only ``s3a``); local paths unchanged."""
    text = os.fspath(location)
    if scheme_of(text) in S3_SCHEMES:
        return f"{HADOOP_S3_SCHEME}://" + text.split("://", 1)[1]
    return text


def bucket_and_key(location: str) -> tuple[str, str]:
    """``(bucket, key)`` of an ``s3://`` / ``s3a://`` location (key without a leading slash)."""
    parts = urlsplit(location)
    return parts.netloc, parts.path.lstrip("/")
