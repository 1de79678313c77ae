"""Every error hareplica's library raises, in one hierarchy (docs/errors.md: which class, when, what it names).

Each subclasses :class:`HAReplicaError` (except the two ``ValueError`` s of address and body parsing, which
callers turn into one); catch that to catch anything the library raises. The message of each names *where* the
problem is (CommitLog offset, file, field, frame, option, broker address, table path) so that a user can find
it. This module imports nothing from the project, so every package, ``connector.protocol`` and the broker stub
among them, takes its errors from here (docs/architecture.md "Layers").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# --- the base ------------------------------------------------------------------------------------------------

class HAReplicaError(Exception):
    """Base class of every error raised by hareplica code."""


# --- bytes and frames (connector.protocol, connector.decode) -------------------------------------------------

class CommitLogFormatError(HAReplicaError):
    """Bytes that are not a valid RocketMQ 4.9.8 CommitLog record (docs/protocol.md §1.2, §1.9).

    Attributes:
        offset: absolute CommitLog offset of the record's first byte (bytes).
        field: the record field that was wrong (RocketMQ's name, e.g. ``MAGICCODE``, ``TOTALSIZE``).
        file: the CommitLog file name, when the bytes came from a file.
    """

    def __init__(self, message: str, *, offset: int, field: str, file: str | None = None):
        where = f"CommitLog offset {offset}"
        if file:
            where += f" (file {file})"
        super().__init__(f"{message} at {where}, field {field}")
        self.offset = offset
        self.field = field
        self.file = file


class HAProtocolError(HAReplicaError):
    """A violation of the classic HA wire protocol (docs/protocol.md §2.2, §2.3)."""


class NotAnHAPortError(HAProtocolError):
    """The peer at the HA address does not speak RocketMQ's HA protocol (e.g. an HTTP or echo server)."""


class HAFetchError(HAReplicaError):
    """An HA fetch gave up: an outage longer than ``max_outage_ms`` or stalls beyond ``fetch_retries``
    (:class:`connector.options.settings.FetchSettings`)."""


class RemotingProtocolError(HAReplicaError):
    """A malformed RocketMQ remoting frame or header (docs/protocol.md §4.1, §4.2)."""


class AddressError(ValueError):
    """Text that is not ``host:port``; the message names what the address was for (an option or key)."""


class BodyDecodeError(ValueError):
    """A stored body that cannot be given back as the producer sent it (docs/source.md, "Bad records").

    Attributes:
        field: the record field at fault, ``BODY`` (does not decompress, unknown compression type, too
            large once decompressed) or ``BODYCRC`` (the stored bytes do not match their CRC).
        reason: what is wrong, one line without the field name.
    """

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class BodyTooLargeError(BodyDecodeError):
    """A compressed body that decompresses past the bound it was given (field ``BODY``).

    Attributes:
        kind: the compression type, ``ZLIB``, ``LZ4`` or ``ZSTD``.
        max_bytes: the bound, in bytes (the source's ``DecodeSettings.max_inflated_body_bytes``).
    """

    def __init__(self, kind: str, max_bytes: int):
        super().__init__("BODY", f"{kind} body decompresses to more than {max_bytes} bytes")
        self.kind = kind
        self.max_bytes = max_bytes


# --- brokers over remoting (connector.client) ----------------------------------------------------------------

class BrokerAdminError(HAReplicaError):
    """A remoting request to a broker failed: connect error, timeout, error response or bad answer.

    The message names the broker's remoting address and the request (name and code).
    """


class BrokerUnreachableError(BrokerAdminError):
    """The broker's remoting port refused, reset or timed out the request: it may be down or restarting,
    so callers wait it out (``max_outage_ms``, docs/source.md "Broker outages")."""


class MetadataRequestRefused(BrokerAdminError):
    """A master answered one of the metadata sync's requests (GET_ALL_TOPIC_CONFIG and the others a slave's
    ``SlaveSynchronize`` sends) with a code other than SUCCESS: an ACL refusal, a broker that does not serve the
    request (docs/metadata.md). ``request`` is the request's name, ``code`` and ``remark`` the answer's."""

    def __init__(self, message: str, request: str, code: int, remark: str) -> None:
        super().__init__(message)
        self.request = request
        self.code = code
        self.remark = remark


class BrokerNotReadyError(BrokerUnreachableError):
    """The broker answered, but is still starting: waited out like an unreachable broker.

    A RocketMQ 4.9 broker answers GET_BROKER_RUNTIME_INFO with SYSTEM_ERROR and a
    ``java.util.NoSuchElementException`` remark until its statistics took their first sample, about
    1 s after start (docs/source.md "Broker outages"). Other SYSTEM_ERROR answers (ACL refusals among
    them) stay BrokerAdminError and fail at once.
    """


class NotARocketMQBrokerError(BrokerAdminError):
    """The peer answered, but not with a RocketMQ remoting response (e.g. an HTTP or an echo server)."""


class NameServerError(HAReplicaError):
    """Discovery through the name server failed (docs/source.md "Discovery"): no name-server address answered
    GET_BROKER_CLUSTER_INFO (the message names each address and why), or the route it gave has no
    broker set to read."""


class UnsupportedBrokerModeError(HAReplicaError):
    """The broker serves no HA protocol hareplica speaks (a DLedger CommitLog)."""


class MQClientException(HAReplicaError):
    """Client-side failure: invalid message, connection lost, timeout (MQClientException)."""


class BrokerConnectionError(MQClientException, ConnectionError):
    """The connection to the broker failed or closed before a request was answered (refused, reset, EOF).

    Also a ``ConnectionError``; the request may or may not have been stored (as with any lost reply).
    """


# --- the source (connector.options, connector.data_loss, connector.source) -----------------------------------

class HAReplicaOptionError(HAReplicaError, ValueError):
    """A missing, unknown or malformed option of ``format("hareplica")``; the message names it."""

    def __init__(self, option: str, value: object, problem: str):
        shown = "(missing)" if value is None else repr(value)
        super().__init__(f"option {option}={shown}: {problem}")
        self.option = option
        self.value = value


class DataLossError(HAReplicaError):
    """CommitLog bytes the query still needs are no longer held by the broker (``fail_on_data_loss=True``).

    The message names the broker, the lost offset range and why the bytes are gone.
    """


# --- object stores (connector.storage) -------------------------------------------------------------------------

class StorageConfigError(HAReplicaError, ValueError):
    """A location or a storage option that cannot work: an unsupported URI scheme, an unknown key, a bad value
    (docs/object_storage.md). The message names the option or key, never a secret's value."""


class StorageAccessError(HAReplicaError):
    """An object store refused or did not answer: wrong credentials (the key id named), a missing bucket, an
    endpoint where nothing listens (docs/object_storage.md "When it does not work")."""


# --- the Delta writers (connector.delta, connector.landing) --------------------------------------------------

class DeltaTablePathError(HAReplicaError):
    """A table location that is not usable: an unreadable ``_delta_log`` or a non-empty plain folder.

    The message is one line naming the table path (and the log file, where one is to blame).
    """


class UnsupportedTableFeatureError(DeltaTablePathError):
    """A Delta table (e.g. written by Spark) uses a writer feature this project's writers cannot honour."""


class DeltaSinkError(HAReplicaError):
    """Base class of the Delta sink's errors; the message names the table path and, where known, the batch."""


class DeltaSinkConfigError(DeltaSinkError, ValueError):
    """A missing or invalid sink option (``path``, ``appId``, ``partitionBy``, ``targetFileSize``...)."""


class DeltaCommitError(DeltaSinkError):
    """The Delta transaction of a batch could not be committed (after retries on concurrent commits)."""


class DeltaFileWriteError(DeltaSinkError):
    """A data file (or its partition folder) could not be written: the file system is full, read-only, gone."""


class DeltaSchemaMismatchError(DeltaSinkError):
    """The stream's schema or partition columns differ from the existing Delta table's.

    Attributes:
        missing_in_stream: table columns the stream lacks.
        missing_in_table: stream columns the table lacks.
        type_mismatches: ``{column: (table type, stream type)}`` in Delta's type names.
    """

    def __init__(self, message: str, *, missing_in_stream: Sequence[str] = (), missing_in_table: Sequence[str] = (),
                 type_mismatches: Mapping[str, tuple[str, str]] | None = None):
        super().__init__(message)
        self.missing_in_stream = list(missing_in_stream)
        self.missing_in_table = list(missing_in_table)
        self.type_mismatches = dict(type_mismatches or {})


class InjectedFaultError(DeltaSinkError):
    """Raised at a fault-injection point (``HAREPLICA_DELTA_FAULT`` without a marker file; module docstring)."""


# --- restoring a broker's store from bronze (connector.restore) ----------------------------------------------

class RestoreError(HAReplicaError):
    """A bronze table cannot give the asked CommitLog range back byte for byte (docs/restore.md): the table lacks
    the restore columns or a file's first records, the range starts inside a record, the rows disagree on the
    broker's mapped file size, or a store folder already holds CommitLog files. The message names the broker,
    offset, file or column."""
