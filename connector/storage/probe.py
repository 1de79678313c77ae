"""One request to an object store before a command starts work there, turning what went wrong into one line:
wrong credentials, a missing bucket, nothing listening (docs/object_storage.md "When it does not work")."""

from __future__ import annotations

from connector.errors import StorageAccessError
from connector.storage.config import StorageConfig
from connector.storage.locations import bucket_and_key, is_uri, resolve

#: Seconds the probe waits for a connection and for the answer (one attempt, no retries).
PROBE_CONNECT_TIMEOUT_S = 3.0
PROBE_REQUEST_TIMEOUT_S = 10.0
#: AWS SDK error names that mean the credentials were refused.
_CREDENTIAL_ERRORS = ("ACCESS_DENIED", "SIGNATURE_DOES_NOT_MATCH", "INVALID_ACCESS_KEY_ID", "INVALID_CLIENT_TOKEN_ID",
                      "EXPIRED_TOKEN", "UNRECOGNIZED_CLIENT", "403")
_NETWORK_ERRORS = ("NETWORK_CONNECTION", "Could not connect", "Could not resolve", "Timeout", "timed out")


def check_location(location: str, config: StorageConfig, what: str = "location") -> None:
    """Ask the store of ``location`` (``s3://bucket/…``; a local path is not checked) whether its bucket exists
    (HeadBucket), once, with short timeouts.

    Raises:
        StorageAccessError: the credentials were refused (the access key id named, never the secret), the bucket
            does not exist, or nothing answered at the endpoint; each names ``what`` and the location.
    """
    from pyarrow import fs as pafs

    text = resolve(location, what)
    if not is_uri(text):
        return
    bucket, _ = bucket_and_key(text)
    endpoint = config.endpoint or f"AWS S3 ({config.region})"
    filesystem = config.arrow_filesystem(max_attempts=1, connect_timeout=PROBE_CONNECT_TIMEOUT_S,
                                         request_timeout=PROBE_REQUEST_TIMEOUT_S)
    try:
        info = filesystem.get_file_info(bucket)
    except OSError as e:
        text_e = str(e)
        if any(code in text_e for code in _CREDENTIAL_ERRORS):
            key = config.access_key_id or "from the AWS default credential chain"
            raise StorageAccessError(f"{what} {text}: {endpoint} refused the credentials (access key id {key}): "
                                     "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or --storage-option") from None
        if any(code in text_e for code in _NETWORK_ERRORS):
            raise StorageAccessError(f"{what} {text}: nothing answers at {endpoint} (AWS_ENDPOINT_URL)") from None
        raise StorageAccessError(f"{what} {text}: {endpoint}: {text_e.splitlines()[0]}") from None
    if info.type == pafs.FileType.NotFound:
        raise StorageAccessError(f"{what} {text}: bucket {bucket} does not exist at {endpoint}")
