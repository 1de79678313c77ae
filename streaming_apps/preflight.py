"""Checks ``hareplica run`` makes before it starts Spark (:func:`check_run_config`, :func:`check_brokers`,
:func:`check_starting_offsets`: options through the source's own :class:`connector.options.parse.SourceOptions`, the
app's folders, each master once over remoting, a new checkpoint's JSON ``startingOffsets``);
:func:`error_line`, which finds our own error (a :class:`connector.errors.HAReplicaError`) inside an exception
Spark wrapped and returns ``ClassName: message``; and :func:`spark_failure`, that line and the command's exit code
for an error Spark raised, taken while the session is alive. What is checked and what users see: docs/source.md
"Errors", docs/cli.md (error lines and exit codes).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from connector.client.admin import BrokerAdminClient
from connector.errors import (
    BrokerAdminError,
    BrokerUnreachableError,
    DataLossError,
    HAReplicaError,
    HAReplicaOptionError,
    NameServerError,
    NotARocketMQBrokerError,
    StorageAccessError,
    StorageConfigError,
    UnsupportedBrokerModeError,
)
from connector.options.declaration import EARLIEST_OFFSET_SENTINEL, LATEST_OFFSET_SENTINEL
from connector.options.parse import SourceOptions
from connector.source.driver.brokers import fetch_range
from connector.source.driver.offsets import HEAD_BYTES, starts_record
from connector.source.driver.ranges import not_a_record_start, refuse_batch_only_options
from connector.storage import locations, store
from connector.storage.probe import check_location
from streaming_apps.checkpoints import checkpoint_has_offsets

PREFLIGHT_TIMEOUT_MS = 3000


class PreflightError(HAReplicaError):
    """``hareplica run`` refuses to start: the message names the option, path or broker at fault."""


def check_run_config(source_options: dict[str, str], paths: dict[str, Path]) -> SourceOptions:
    """Validate the source options and the output folders of one run; returns the parsed options.

    Args:
        source_options: the ``format("hareplica")`` option map the app will pass.
        paths: ``{"--workdir": path, ...}``: folders the app creates or writes (flag name → path), or ``s3://``
            locations, whose bucket is asked for once with this process's storage settings
            (:func:`connector.storage.probe.check_location`).
    Raises:
        PreflightError: an option is malformed or is for batch reads only (the source's HAReplicaOptionError
            text), a path exists but is not a folder, or its nearest existing parent is not a writable folder; an
            object store refuses the credentials, has no such bucket or does not answer.
    """
    try:
        options = SourceOptions.from_options(source_options)
        refuse_batch_only_options(source_options)  # the apps' queries are streams
    except HAReplicaOptionError as exc:
        raise PreflightError(str(exc)) from None
    for flag, path in paths.items():
        if isinstance(path, str) and locations.is_uri(path):
            try:
                check_location(path, store.active(), flag)
            except (StorageAccessError, StorageConfigError) as e:
                raise PreflightError(str(e)) from None
        else:
            check_writable_dir(flag, Path(path))
    return options


def check_writable_dir(flag: str, path: Path) -> None:
    """``path`` is a folder, or can be created as one: raises PreflightError naming ``flag`` and the path."""
    if path.exists():
        if not path.is_dir():
            raise PreflightError(f"{flag} {path}: exists and is not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise PreflightError(f"{flag} {path}: folder is not writable")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise PreflightError(f"{flag} {path}: cannot be created, {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PreflightError(f"{flag} {path}: cannot be created, {parent} is not writable")


def check_brokers(options: SourceOptions, timeout_ms: int = PREFLIGHT_TIMEOUT_MS) -> None:
    """Ask each configured master (GET_BROKER_CONFIG) once; raises PreflightError naming the broker when it
    cannot be reached, is not a RocketMQ broker, or runs a DLedger CommitLog (no HA port,
    :meth:`connector.client.admin.BrokerAdminClient.ha_protocol`; controller mode is read over AutoSwitch HA).
    With ``readFrom=slave`` a master that is down is accepted (the source reads around it) when one of its
    slaves answers. With ``namesrvAddr`` the route is asked first (:func:`route_masters`) and its masters are
    checked the same way."""
    if options.namesrv_addr:
        options = dataclasses.replace(options, brokers=route_masters(options), read_from="master", slaves=())
    for broker in options.brokers:
        endpoints = [broker, *options.slaves_of(broker.name)] if options.read_from == "slave" else [broker]
        problems = []
        for endpoint in endpoints:
            role = "master" if endpoint is broker else "slave"
            with BrokerAdminClient(endpoint.remoting_addr, min(timeout_ms, options.fetch.connect_timeout_ms)) as admin:
                try:
                    admin.ha_protocol(admin.broker_config())
                except NotARocketMQBrokerError as exc:
                    raise PreflightError(f"broker {broker.name} ({role}): {exc}") from None
                except UnsupportedBrokerModeError as exc:
                    raise PreflightError(f"broker {broker.name} ({role}): {type(exc).__name__}: {exc}") from None
                except BrokerUnreachableError as exc:
                    problems.append(f"{role} {endpoint.remoting_addr} is unreachable ({_cause(exc)})")
                    continue
            break
        else:
            raise PreflightError(f"broker {broker.name}: {'; '.join(problems)}; check --brokers (remoting address "
                                 "= HA port - 1 unless given after '/') and that the broker runs")


def route_masters(options: SourceOptions) -> tuple:
    """The masters of the broker sets the name servers of ``options.namesrv_addr`` route to, asked once
    (:class:`connector.source.driver.discovery.Discovery`; sets without a master are left to the source, which
    waits them out). Raises PreflightError with the NameServerError's text: no name server answers (each named),
    or the route holds no broker set (of ``clusterName``)."""
    from connector.source.driver.discovery import Discovery

    discovery = Discovery(options)
    try:
        discovery.poll(force=True)
    except HAReplicaError as exc:
        raise PreflightError(f"{type(exc).__name__}: {exc}") from None
    finally:
        discovery.close()
    return tuple(s.master for s in discovery.sets.values() if s.master is not None)


def check_starting_offsets(options: SourceOptions, checkpoint: Path, timeout_ms: int = PREFLIGHT_TIMEOUT_MS) -> None:
    """A JSON ``startingOffsets`` for a query that has no offsets in ``checkpoint`` yet (else Spark resumes from
    the checkpoint and ignores it): each broker's offset must be at most its master's commitLogMaxOffset and,
    unless it is a mapped-file start or that max offset, the start of a record (a message whose PHYSICALOFFSET
    is the offset, or an END_FILE blank: docs/source.md "Errors"), read over HA as the first task would.

    Raises:
        PreflightError: one line naming the option, the offset, the broker and what is wrong. A broker that
            cannot be asked is left to :func:`check_brokers` and the source.
    """
    starting = options.starting_offsets
    if isinstance(starting, str) or checkpoint_has_offsets(checkpoint):
        return
    fetch = dataclasses.replace(options.fetch, connect_timeout_ms=min(timeout_ms, options.fetch.connect_timeout_ms),
                                read_timeout_ms=timeout_ms, max_outage_ms=0)
    for broker in options.brokers:
        value = starting.get(broker.name)
        if value is None or value in (EARLIEST_OFFSET_SENTINEL, LATEST_OFFSET_SENTINEL):
            continue
        try:
            with BrokerAdminClient(broker.remoting_addr, fetch.connect_timeout_ms) as admin:
                config = admin.broker_config()
                min_offset, max_offset = admin.commit_log_offsets()
                file_size = admin.mapped_file_size(config)
                protocol = admin.ha_protocol(config)
            if value > max_offset:
                raise PreflightError(str(HAReplicaOptionError(
                    "startingOffsets", dict(starting), f"offset {value} of broker {broker.name} is past its "
                    f"commitLogMaxOffset {max_offset}")))
            if value < min_offset or value == max_offset or value % file_size == 0:
                continue  # below the min: the source's failOnDataLoss rules; the others are record starts
            head = fetch_range(fetch, broker.ha_addr, value, min(value + HEAD_BYTES, max_offset), broker=broker.name,
                               server_is_slave=False, protocol=protocol)
        except PreflightError:
            raise
        except HAReplicaError:
            continue  # unreachable or refused: check_brokers names it, or the source waits it out
        if not starts_record(head, value, file_size):
            raise PreflightError(str(HAReplicaOptionError("startingOffsets", dict(starting),
                                                          not_a_record_start(value, broker.name, head))))


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__
    return str(cause) if cause is not None and str(cause) else str(exc)


def _our_error_names() -> set[str]:
    """Class names of HAReplicaError and its subclasses loaded in this process; DataLossError (raised on the
    executors, defined in connector.data_loss) is imported here so that it is always among them."""
    return _names_of(HAReplicaError) | _names_of(DataLossError)


_ERROR_LINE = re.compile(r"(?:^|[\s.:(\[])([A-Z][A-Za-z0-9]*Error): ([^\n]+)")
_BAD_LINE_TAIL = re.compile(r"\s+(?:at |\tat )?(?:org\.apache|java\.|py4j\.|scala\.).*$")


def error_line(exc: BaseException) -> str:
    """One line for ``exc``: the last error of our hierarchy named in its text (a Python data source's
    traceback inside Spark's exception), as ``ClassName: message``; else the first line of ``exc``. Never
    raises: see :func:`_text` for an exception Spark raised whose session has stopped since."""
    text = _text(exc)
    ours = _our_error_names()
    found = None
    for match in _ERROR_LINE.finditer(text):
        if match.group(1) in ours:
            found = f"{match.group(1)}: {_BAD_LINE_TAIL.sub('', match.group(2)).strip()}"
    if found:
        return found
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return first if len(first) <= 500 else first[:497] + "..."


def _text(exc: BaseException) -> str:
    """``str(exc)``. PySpark's exceptions ask the driver JVM for their message, and fail (AssertionError) once the
    SparkContext stopped: read them while the session is alive (:func:`spark_failure`). After that, the text
    PySpark kept when it raised (its description, with the Python traceback a data source's worker sent), else
    the class name."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - whatever str() of a foreign exception raises, the line must be printed
        kept = getattr(exc, "_desc", None)  # pyspark.errors CapturedException: read from the JVM when raised
        return kept if isinstance(kept, str) and kept.strip() else f"{type(exc).__name__} (message unavailable)"


#: our errors that are bad input (an option, a broker or a route that cannot be used): a command that meets one
#: while Spark plans exits 2, as when it is found before Spark starts; any other failure exits 1 (docs/cli.md)
INPUT_ERRORS: tuple[type[HAReplicaError], ...] = (HAReplicaOptionError, BrokerAdminError, NameServerError)


@dataclasses.dataclass(frozen=True, slots=True)
class SparkFailure:
    """An error met while Spark planned or ran a command: ``line`` (``ClassName: message`` of the cause,
    :func:`error_line`) and the command's ``exit_code`` (2: bad input found while planning, 1: a failure)."""

    line: str
    exit_code: int


def spark_failure(exc: BaseException) -> SparkFailure:
    """The line and exit code of ``exc``, an error raised while Spark planned or ran a command; call it while the
    Spark session is alive (a PySpark exception's message is read from the JVM). Exit 2 when the cause is one of
    :data:`INPUT_ERRORS`, raised here or by a data source while Spark planned the read (PySpark's
    AnalysisException wraps those); 1 otherwise (a task's failure, a write's)."""
    from pyspark.errors import AnalysisException

    line = error_line(exc)
    if isinstance(exc, INPUT_ERRORS):
        return SparkFailure(line, 2)
    cause = line.split(":", 1)[0]
    planning = isinstance(exc, AnalysisException)
    inputs = {name for cls in INPUT_ERRORS for name in _names_of(cls)}
    return SparkFailure(line, 2 if planning and cause in inputs else 1)


def _names_of(cls: type) -> set[str]:
    """The names of ``cls`` and its subclasses loaded in this process."""
    names, todo = set(), [cls]
    while todo:
        current = todo.pop()
        names.add(current.__name__)
        todo.extend(current.__subclasses__())
    return names
