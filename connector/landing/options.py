"""The options of ``format("hareplica-landing")``: which are the source's and which become Delta sink options,
and the writers they configure (docs/delta.md "``--landing direct``").

Options: every ``format("hareplica")`` option, plus the landing's own, declared in
:data:`connector.options.declaration.LANDING_OPTIONS` (each becomes the Delta sink option its ``sink_option``
names), plus ``storage.KEY``, the object-store settings of every table (``format("deltalake")``'s). A
``landingTargets`` entry is an object with ``path``, ``appId``, ``schema`` (the table's Spark schema as JSON)
and optionally ``partitionBy`` (list), ``targetFileSize``, ``compression`` and ``upsert``
(``{"keys": [columns]}``: the table is merged, not appended, :mod:`connector.landing.upsert`; the split then gives
it the staged columns too) or ``evolve`` (``true``: the table's columns come from the data, ``schema`` lists those
every row has, :mod:`connector.landing.evolving`). The split (``package.module:function`` importable on the
executors) takes a ``pyarrow.RecordBatch`` of the ``hareplica`` columns and returns one RecordBatch per target, in
order, holding exactly that table's columns; with a split config it names a factory, ``factory(config)``
returning the split function (so that a task builds its decoders once).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from connector.delta.options import STORAGE_OPTION_PREFIX, DeltaSinkOptions, storage_options_of
from connector.delta.sink import DeltaLakeStreamWriter, checked_stream_writer
from connector.errors import HAReplicaOptionError
from connector.landing.evolving import EvolvingStreamWriter
from connector.landing.partition_reader import resolve_split
from connector.landing.rows import DEFAULT_PARTITION_BY, landed_schema
from connector.landing.upsert import UpsertStreamWriter
from connector.options.declaration import LANDING_OPTIONS, SINK_OPTIONS

#: landing option (lower-cased, as Spark hands it over) -> the Delta sink option it becomes (the declaration's)
SINK_OPTION_OF = {option.name.lower(): option.sink_option for option in LANDING_OPTIONS.values()}
TARGETS, SPLIT, SPLIT_CONFIG = LANDING_OPTIONS.targets, LANDING_OPTIONS.split, LANDING_OPTIONS.split_config
TARGETS_KEY, SPLIT_KEY, SPLIT_CONFIG_KEY = TARGETS.sink_option, SPLIT.sink_option, SPLIT_CONFIG.sink_option
#: the keys of a targets entry that are Delta sink options of the same name (``schema`` is the entry's own)
_TARGET_KEYS = tuple(o.sink_option for o in LANDING_OPTIONS.values() if o.sink_option in SINK_OPTIONS)

def split_landing_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(source options, Delta sink options) of a ``hareplica-landing`` option map (keys case-insensitive)."""
    source, sink = {}, {}
    for key, value in options.items():
        target = SINK_OPTION_OF.get(key.lower())
        if key.lower().startswith(STORAGE_OPTION_PREFIX):  # object-store settings: every table's
            sink[key] = value
        elif target is None:
            source[key] = value
        else:
            sink[target] = value
    return source, sink


def landing_writer(sink_options: Mapping[str, str]) -> DeltaLakeStreamWriter:
    """The Delta sink writer of a landing (``partitionBy`` defaults to ``storeDate``), checked against the
    existing table on the driver (:func:`connector.delta.sink.checked_stream_writer`).

    Raises:
        DeltaSinkConfigError: missing ``landingPath`` / ``landingAppId``, bad partition columns.
        DeltaSchemaMismatchError: the existing table's columns or partitioning differ.
    """
    options = {"partitionBy": ",".join(DEFAULT_PARTITION_BY), **sink_options}
    return checked_stream_writer(DeltaSinkOptions.from_options(options), landed_schema())


def target_writers(targets_json: str, storage: dict[str, str] | None = None
                   ) -> list[DeltaLakeStreamWriter | UpsertStreamWriter]:
    """The writers of a ``landingTargets`` value (this module's docstring), each checked as :func:`landing_writer`;
    an entry with ``upsert`` gets an :class:`connector.landing.upsert.UpsertStreamWriter`.

    Raises:
        HAReplicaOptionError: not a JSON list of objects with ``path``, ``appId`` and ``schema``.
        DeltaSinkConfigError, DeltaSchemaMismatchError: as :func:`landing_writer`, per table.
    """
    from pyspark.sql.types import StructType

    try:
        targets = json.loads(targets_json)
        if not isinstance(targets, list) or not targets:
            raise ValueError("expected a non-empty JSON list")
        writers = []
        for i, target in enumerate(targets):
            missing = [k for k in ("path", "appId", "schema") if k not in target]
            if missing:
                raise ValueError(f"entry {i} has no {', '.join(missing)}")
            options = {k: ",".join(v) if k == "partitionBy" else str(v) for k, v in target.items() if k in _TARGET_KEYS}
            options.update({f"{STORAGE_OPTION_PREFIX}{k}": v for k, v in (storage or {}).items()})
            schema = StructType.fromJson(target["schema"])
            keys, evolve = None, bool(target.get("evolve"))
            if evolve and "upsert" in target:
                raise ValueError(f"entry {i}: a table whose columns come from the data (evolve) cannot be upserted")
            if "upsert" in target:
                keys = [str(k) for k in target["upsert"]["keys"]]
                missing_keys = [k for k in keys if k not in schema.fieldNames()]
                if not keys or missing_keys:
                    raise ValueError(f"entry {i}: upsert keys {keys} must be columns of its schema")
            writers.append((options, schema, keys, evolve))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise HAReplicaOptionError(TARGETS.name, targets_json[:200], str(e)) from None
    out = []
    for options, schema, keys, evolve in writers:
        if evolve:  # the table's schema is checked as it evolves, at each commit
            opts = DeltaSinkOptions.from_options(options)
            out.append(EvolvingStreamWriter(opts, schema, opts.partition_by or ()))
            continue
        writer = checked_stream_writer(DeltaSinkOptions.from_options(options), schema)
        out.append(writer if keys is None else UpsertStreamWriter(writer.options, schema, writer.partition_by, keys))
    return out


def landing_writers(sink_options: Mapping[str, str]
                    ) -> tuple[list[DeltaLakeStreamWriter], tuple[str, str | None] | None]:
    """``(writers, (split spec, split config or None))`` of a landing's sink options: several tables
    (``landingTargets`` with ``landingSplit``) or one (``landingPath``...). Raises as :func:`target_writers` /
    :func:`landing_writer`, and HAReplicaOptionError for ``landingTargets`` without ``landingSplit`` or mixed with
    ``landingPath``."""
    if TARGETS_KEY not in sink_options:
        if SPLIT_KEY in sink_options or SPLIT_CONFIG_KEY in sink_options:
            raise HAReplicaOptionError(SPLIT.name, sink_options.get(SPLIT_KEY, ""), f"needs {TARGETS.name}")
        return [landing_writer(sink_options)], None
    storage = storage_options_of(sink_options)
    others = sorted(k for k in sink_options if k not in (TARGETS_KEY, SPLIT_KEY, SPLIT_CONFIG_KEY)
                    and not k.lower().startswith(STORAGE_OPTION_PREFIX))
    if others:
        raise HAReplicaOptionError(TARGETS.name, sink_options[TARGETS_KEY][:200],
                                   f"give the tables' options inside it, not as {', '.join(others)}")
    if SPLIT_KEY not in sink_options:
        raise HAReplicaOptionError(TARGETS.name, sink_options[TARGETS_KEY][:200], f"needs {SPLIT.name}")
    split = (sink_options[SPLIT_KEY], sink_options.get(SPLIT_CONFIG_KEY))
    resolve_split(split)  # fail at start, on the driver
    return target_writers(sink_options[TARGETS_KEY], storage), split
