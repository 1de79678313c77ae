"""One set of object-store settings, turned into what each client takes: delta-rs's ``storage_options``, pyarrow's
``S3FileSystem`` and Spark's ``spark.hadoop.fs.s3a.*`` conf. Keys, precedence and what each client receives:
docs/object_storage.md "Credentials and settings".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from connector.errors import StorageConfigError

#: Every storage option key, as delta-rs names it, with what it is (docs/object_storage.md keeps the same list).
STORAGE_KEYS = {
    "AWS_ACCESS_KEY_ID": "access key id",
    "AWS_SECRET_ACCESS_KEY": "secret access key (never logged)",
    "AWS_SESSION_TOKEN": "session token of temporary credentials (never logged)",
    "AWS_REGION": "region (default us-east-1)",
    "AWS_ENDPOINT_URL": "endpoint of an S3-compatible store, http(s)://host:port",
    "AWS_ALLOW_HTTP": "true to allow an http:// endpoint (default: true when AWS_ENDPOINT_URL is http://)",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true for bucket.host addressing (default false: path style)",
    "AWS_REQUEST_CHECKSUM_CALCULATION": "when_supported or when_required (stores that refuse CRC checksums)",
    "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_supported or when_required",
}
#: Keys whose values are secrets: shown as ``***`` wherever settings are printed.
SECRET_KEYS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
#: Environment variables read when no option gives the key (the AWS SDKs' own names); AWS_DEFAULT_REGION and
#: AWS_ENDPOINT_URL_S3 are the SDKs' alternatives.
ENVIRONMENT_ALIASES = {"AWS_REGION": ("AWS_REGION", "AWS_DEFAULT_REGION"),
                       "AWS_ENDPOINT_URL": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")}
#: Keys that pyarrow's AWS SDK (C++) reads only from the process environment.
SDK_ENVIRONMENT_KEYS = ("AWS_REQUEST_CHECKSUM_CALCULATION", "AWS_RESPONSE_CHECKSUM_VALIDATION")
DEFAULT_REGION = "us-east-1"
#: Attempts pyarrow's S3 client makes per request (the AWS SDK's standard retry, throttling such as ``503 SlowDown``
#: and refused connections included). Before retry n (from 0) it waits a random time below 2**n s, at most 20 s:
#: 9 retries wait about 85 s in all (measured 65-95 s; under 40 s about once in a thousand requests).
ARROW_MAX_ATTEMPTS = 10
#: delta-rs's retry settings (its object_store's keys): a request that fails with a server error (5xx, ``503
#: SlowDown``), a 429 or a connection error is tried again for 60 s, waiting between 0.5 and 5 s (jittered) before
#: each attempt. Its defaults (10 retries from 100 ms) give up after 2-5 s: a store's restart failed the commit.
DELTA_RETRY_OPTIONS = {"max_retries": "100", "retry_timeout": "60s", "backoff_config.init_backoff": "500ms",
                       "backoff_config.max_backoff": "5s", "backoff_config.base": "2"}
#: hadoop-aws (S3A) retry settings: the values Hadoop 3.3.6 to 3.5.0 ship in core-default.xml, given explicitly so
#: that the budget does not depend on the Hadoop a Spark bundles. A connection failure or a 5xx is retried 7 times,
#: retry n (from 0) after 0.5 s * 2**(n+1) * [0.5, 1.5) (63-190 s in all); throttling (503 SlowDown) 20 times the
#: same way from 100 ms (about 50 s of waiting after 8 retries). Each of those attempts is itself up to
#: ``fs.s3a.attempts.maximum`` attempts of the AWS SDK (5 in Hadoop 3.5).
S3A_RETRY_CONF = {"fs.s3a.retry.limit": "7", "fs.s3a.retry.interval": "500ms",
                  "fs.s3a.retry.throttle.limit": "20", "fs.s3a.retry.throttle.interval": "100ms"}
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _canonical(key: str) -> str:
    return key.strip().upper().replace("-", "_").replace(".", "_")


@dataclass(frozen=True, eq=False)
class StorageConfig:
    """Object-store settings: :data:`STORAGE_KEYS` → value, explicit options over the environment.

    Picklable: the writers carry it to Spark's executors, which then need no credentials of their own. Its
    ``repr`` hides :data:`SECRET_KEYS`.
    """

    values: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str] | None = None, *, environ: Mapping[str, str] | None = None,
                     source: str = "storage option") -> StorageConfig:
        """Settings from ``options`` (keys any case, ``-`` or ``_``) over the AWS variables of ``environ``
        (default ``os.environ``).

        Raises:
            StorageConfigError: a key not in :data:`STORAGE_KEYS`, a blank value, or a bad boolean / endpoint (the
                message names ``source`` and the key, never a secret's value).
        """
        environ = os.environ if environ is None else environ
        values: dict[str, str] = {}
        for key in STORAGE_KEYS:
            for name in ENVIRONMENT_ALIASES.get(key, (key,)):
                if environ.get(name, "").strip():
                    values[key] = environ[name].strip()
                    break
        for raw_key, raw_value in (options or {}).items():
            key = _canonical(str(raw_key))
            if key not in STORAGE_KEYS:
                raise StorageConfigError(f"{source} {raw_key}: unknown key; known: {', '.join(STORAGE_KEYS)}")
            value = str(raw_value).strip()
            if not value:
                raise StorageConfigError(f"{source} {raw_key}: empty value")
            values[key] = value
        config = cls(values)
        config._check(source)
        return config

    def merged(self, options: Mapping[str, str], source: str = "storage option") -> StorageConfig:
        """These settings with ``options`` over them (checked as :meth:`from_options`)."""
        extra = StorageConfig.from_options(options, environ={}, source=source)
        return StorageConfig({**self.values, **extra.values})

    def _check(self, source: str) -> None:
        for key in ("AWS_ALLOW_HTTP", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST"):
            if key in self.values and self.values[key].lower() not in _TRUE + _FALSE:
                raise StorageConfigError(f"{source} {key}={self.values[key]!r}: must be true or false")
        endpoint = self.values.get("AWS_ENDPOINT_URL")
        if endpoint:
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise StorageConfigError(f"{source} AWS_ENDPOINT_URL={endpoint!r}: must be http(s)://host[:port]")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorageConfig) and dict(self.values) == dict(other.values)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.values.items())))

    def __repr__(self) -> str:
        return f"StorageConfig({self.redacted()})"

    def redacted(self) -> dict[str, str]:
        """The settings with :data:`SECRET_KEYS` shown as ``***``: what logs and errors may print."""
        return {k: "***" if k in SECRET_KEYS else v for k, v in sorted(self.values.items())}

    def _flag(self, key: str, default: bool) -> bool:
        value = self.values.get(key)
        return default if value is None else value.lower() in _TRUE

    @property
    def endpoint(self) -> str | None:
        """``AWS_ENDPOINT_URL`` without a trailing slash, or None for AWS itself."""
        value = self.values.get("AWS_ENDPOINT_URL")
        return value.rstrip("/") if value else None

    @property
    def region(self) -> str:
        """``AWS_REGION``, or :data:`DEFAULT_REGION`."""
        return self.values.get("AWS_REGION", DEFAULT_REGION)

    @property
    def access_key_id(self) -> str | None:
        """``AWS_ACCESS_KEY_ID`` (not a secret: errors name it), or None for the SDK's default chain."""
        return self.values.get("AWS_ACCESS_KEY_ID")

    @property
    def allow_http(self) -> bool:
        """True when an ``http://`` endpoint may be used: ``AWS_ALLOW_HTTP``, else whether the endpoint is http."""
        return self._flag("AWS_ALLOW_HTTP", bool(self.endpoint and self.endpoint.startswith("http://")))

    @property
    def virtual_hosted(self) -> bool:
        """True for ``bucket.host`` addressing; path style (``host/bucket``, what S3-compatible stores expect) else."""
        return self._flag("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", False)

    def delta_storage_options(self) -> dict[str, str]:
        """delta-rs's ``storage_options`` (its own key names; the endpoint's http permission made explicit; the
        retries of :data:`DELTA_RETRY_OPTIONS`)."""
        out = {**DELTA_RETRY_OPTIONS, **{k: v for k, v in self.values.items() if k not in SDK_ENVIRONMENT_KEYS}}
        out["AWS_REGION"] = self.region
        if self.endpoint:
            out["AWS_ENDPOINT_URL"] = self.endpoint
            out["AWS_ALLOW_HTTP"] = "true" if self.allow_http else "false"
        return out

    def arrow_filesystem(self, *, max_attempts: int = ARROW_MAX_ATTEMPTS, connect_timeout: float | None = None,
                         request_timeout: float | None = None):
        """A ``pyarrow.fs.S3FileSystem`` with these settings (credentials from the SDK's default chain when none are
        given; ``max_attempts`` per request, the AWS standard retry: :data:`ARROW_MAX_ATTEMPTS`; timeouts in
        seconds, None for the SDK's); exports
        :data:`SDK_ENVIRONMENT_KEYS` to this process's environment, where that SDK reads them."""
        from pyarrow import fs as pafs

        for key in SDK_ENVIRONMENT_KEYS:
            if key in self.values:
                os.environ[key] = self.values[key]
        kwargs: dict = {"region": self.region,
                        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=max_attempts),
                        "force_virtual_addressing": self.virtual_hosted,
                        "connect_timeout": connect_timeout, "request_timeout": request_timeout}
        if self.access_key_id:
            kwargs.update(access_key=self.access_key_id, secret_key=self.values.get("AWS_SECRET_ACCESS_KEY"),
                          session_token=self.values.get("AWS_SESSION_TOKEN"))
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            kwargs.update(endpoint_override=parts.netloc + parts.path, scheme=parts.scheme)
        return pafs.S3FileSystem(**kwargs)

    def hadoop_conf(self) -> dict[str, str]:
        """``spark.hadoop.fs.s3a.*`` conf for Spark's Hadoop S3 file system (hadoop-aws's S3A) with these settings and
        the retries of :data:`S3A_RETRY_CONF`."""
        conf = {**S3A_RETRY_CONF, "fs.s3a.endpoint.region": self.region,
                "fs.s3a.path.style.access": "false" if self.virtual_hosted else "true"}
        if self.endpoint:
            conf["fs.s3a.endpoint"] = self.endpoint
            conf["fs.s3a.connection.ssl.enabled"] = "false" if self.endpoint.startswith("http://") else "true"
        if self.access_key_id:
            conf["fs.s3a.access.key"] = self.access_key_id
            conf["fs.s3a.secret.key"] = self.values.get("AWS_SECRET_ACCESS_KEY", "")
            if "AWS_SESSION_TOKEN" in self.values:
                conf["fs.s3a.session.token"] = self.values["AWS_SESSION_TOKEN"]
                conf["fs.s3a.aws.credentials.provider"] = (
                    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider")
            else:
                conf["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return {f"spark.hadoop.{k}": v for k, v in conf.items()}


def parse_storage_options(pairs: list[str] | tuple[str, ...], source: str = "--storage-option") -> dict[str, str]:
    """``{KEY: VALUE}`` of ``KEY=VALUE`` texts (the CLI's repeated ``--storage-option``).

    Raises:
        StorageConfigError: a text without ``=`` (named with ``source``; the value is not echoed).
    """
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise StorageConfigError(f"{source} {key.strip() or pair[:20]!r}: write KEY=VALUE")
        out[key.strip()] = value
    return out
