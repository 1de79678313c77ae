"""The broker's metadata a restored store gets beside its CommitLog: ``config/topics.json``,
``subscriptionGroup.json`` and ``consumerOffset.json`` as RocketMQ 4.9.8's ConfigManagers persist them, from the lake's
metadata tables (:mod:`connector.delta.metadata_tables`) beside the bronze table (docs/restore.md "The broker's
metadata").

The state is each table's last row per key with ``snapshotTime`` before the range's end time (the storeTimestamp of
the table's first record after the range; no bound when the range runs to the table's last record), deleted items
left out. Consumer offsets are capped to the ConsumeQueues the broker rebuilds from the restored range.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from connector.delta.metadata_tables import (
    BROKER_CONSUMER_OFFSETS,
    BROKER_SUBSCRIPTION_GROUPS,
    BROKER_TOPIC_CONFIGS,
    MetadataTable,
)
from connector.delta.reading import read_table
from connector.errors import RestoreError
from connector.protocol.commitlog import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE
from connector.protocol.config_files import (
    CONFIG_DIR,
    CONSUMER_OFFSET_FILE,
    SUBSCRIPTION_GROUP_FILE,
    TOPIC_GROUP_SEPARATOR,
    TOPICS_FILE,
    encode_consumer_offsets,
    encode_subscription_groups,
    encode_topic_configs,
)
from connector.protocol.fastjson import Bean, loads
from connector.restore.plan import RestorePlan, row_batches

log = logging.getLogger(__name__)

#: the bits of sysFlag that hold a record's transaction type (4.9.8 ``MessageSysFlag.getTransactionValue``)
_TRANSACTION_BITS = TRANSACTION_PREPARED_TYPE | TRANSACTION_COMMIT_TYPE
#: transaction types a 4.9.8 broker puts into a ConsumeQueue (``CommitLogDispatcherBuildConsumeQueue``)
_DISPATCHED = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


@dataclass(frozen=True)
class RestoredMetadata:
    """What :func:`write_metadata` wrote: the ``files`` (paths), the snapshot the state is from (``snapshot_id``,
    ``snapshot_time_ms``: epoch ms; the latest of the tables' last rows), the counts of ``topics``, ``groups`` and
    consumer offset entries (``offsets``: one per group, topic and queue) and how many offsets were ``capped`` to the
    restored ConsumeQueues; or, with no files, why nothing was written (``skipped``, one line)."""

    files: tuple[Path, ...] = ()
    snapshot_id: int = 0
    snapshot_time_ms: int = 0
    topics: int = 0
    groups: int = 0
    offsets: int = 0
    capped: int = 0
    skipped: str | None = None


def metadata_table_uri(table_uri: str, table: MetadataTable) -> str:
    """The metadata table's location beside the bronze table at ``table_uri``: ``table.name`` under the same tables
    root (the bronze table's parent folder or URI prefix)."""
    base = table_uri.rstrip("/")
    if "://" in base:
        return f"{base.rsplit('/', 1)[0]}/{table.name}"
    return os.path.join(os.path.dirname(os.path.abspath(base)), table.name)


def _exists(uri: str) -> bool:
    from connector.delta.location import open_delta_table

    return open_delta_table(uri) is not None


def range_end_time_us(table_uri: str, plan: RestorePlan) -> int | None:
    """The storeTimestamp (epoch µs) of ``plan.broker``'s first record at or after ``plan.end`` in the table — until
    then the broker's CommitLog was the restored range — or None when the table holds no record after the range."""
    best_offset, best_time = None, None
    for batch in row_batches(table_uri, plan.broker, ["commitLogOffset", "storeTimestamp"], plan.end, None,
                             files=plan.table_files):
        i = pc.index(batch.column("commitLogOffset"), pc.min(batch.column("commitLogOffset"))).as_py()
        offset = batch.column("commitLogOffset")[i].as_py()
        if best_offset is None or offset < best_offset:
            best_offset = offset
            best_time = batch.column("storeTimestamp").cast(pa.int64())[i].as_py()
    return best_time


def table_state(uri: str, table: MetadataTable, broker: str, before_us: int | None) -> tuple[list[dict], dict]:
    """``broker``'s state in the metadata table at ``uri`` before ``before_us`` (epoch µs, exclusive; None: no
    bound): per key, its last row (highest ``snapshotId``), left out when ``deleted``, as dicts in the order the
    keys first appeared (their first row's snapshotId, then key). Also ``{"counter", "timestamp", "snapshotId"}``:
    the number of snapshots with a row in the state's window, the last one's time (epoch ms) and id (0s when none).
    """
    where = pc.field("broker") == broker
    if before_us is not None:
        where = where & (pc.field("snapshotTime") < pa.scalar(before_us, pa.timestamp("us", tz="UTC")))
    rows = read_table(uri, filters=where).to_pylist()
    last: dict[tuple, dict] = {}
    first: dict[tuple, int] = {}
    snapshots: dict[int, int] = {}
    for row in rows:
        key = tuple(row[name] for name in table.key)
        sid = row["snapshotId"]
        stamp = int(row["snapshotTime"].timestamp() * 1000)
        snapshots[sid] = max(snapshots.get(sid, 0), stamp)
        first[key] = min(first.get(key, sid), sid)
        if key not in last or sid >= last[key]["snapshotId"]:
            last[key] = row
    state = [last[k] for k in sorted(last, key=lambda k: (first[k], k)) if not last[k]["deleted"]]
    newest = max(snapshots) if snapshots else 0
    return state, {"counter": len(snapshots), "timestamp": snapshots.get(newest, 0), "snapshotId": newest}


def _bean(row: dict, table: MetadataTable, key: str) -> Bean:
    """The item's bean: its ``config`` JSON as the master sent it, else the typed columns (nulls left out)."""
    if row.get("config"):
        try:
            value = loads(row["config"])
        except ValueError as exc:
            raise RestoreError(f"{table.name}: the config of {row[key]!r} (snapshot {row['snapshotId']}) is not "
                               f"JSON: {exc}") from None
        if not isinstance(value, dict):
            raise RestoreError(f"{table.name}: the config of {row[key]!r} (snapshot {row['snapshotId']}) is not "
                               "a JSON object")
        return Bean(value)
    names = [f.name for f in table.columns if f.name not in ("config", "deleted")]
    return Bean({name: row[name] for name in names if row[name] is not None})


def queue_ends(table_uri: str, plan: RestorePlan) -> dict[tuple[str, int], int]:
    """``(topic, queueId) → one past the largest queueOffset`` of the plan's range among the records a 4.9.8 broker
    puts into a ConsumeQueue (transaction type NOT or COMMIT): the max offset of each ConsumeQueue the broker rebuilds
    from the restored store (entries)."""
    parts = []
    for batch in row_batches(table_uri, plan.broker, ["topic", "queueId", "queueOffset", "sysFlag"], plan.start,
                             plan.end, files=plan.table_files):
        kind = pc.bit_wise_and(batch.column("sysFlag"), _TRANSACTION_BITS)
        keep = pc.is_in(kind, pa.array(_DISPATCHED, pa.int32()))
        part = pa.Table.from_batches([batch]).filter(keep)
        parts.append(part.group_by(["topic", "queueId"]).aggregate([("queueOffset", "max")]))
    if not parts:
        return {}
    merged = pa.concat_tables(parts).group_by(["topic", "queueId"]).aggregate([("queueOffset_max", "max")])
    return {(t, q): m + 1 for t, q, m in zip(merged.column("topic").to_pylist(), merged.column("queueId").to_pylist(),
                                              merged.column("queueOffset_max_max").to_pylist(), strict=True)}


def _skipped(reason: str) -> RestoredMetadata:
    log.info("%s: the store gets no topics, subscription groups or consumer offsets", reason)
    return RestoredMetadata(skipped=reason)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_metadata(table_uri: str, plan: RestorePlan, store_dir: str | os.PathLike) -> RestoredMetadata:
    """Write ``STORE_DIR/config/topics.json``, ``subscriptionGroup.json`` and ``consumerOffset.json`` for the plan's
    broker from the metadata tables beside the bronze table at ``table_uri`` (:func:`metadata_table_uri`), as 4.9.8
    writes them (:mod:`connector.protocol.config_files`); each file's ``dataVersion`` (topics, groups) counts the
    snapshots that changed its table, with the last one's time.

    Consumer offsets are capped per topic and queue to :func:`queue_ends` (0 for a queue the range does not hold): a
    4.9.8 master answers a pull beyond its ConsumeQueue's max with that max (``OFFSET_OVERFLOW_BADLY``), and its
    ConsumeQueue of a queue the range does not hold starts at 0.

    Writes nothing (the result's ``skipped`` says why, logged at INFO) when the topic table is not there or holds
    no snapshot of the broker before the range's end time. Raises RestoreError for a ``config`` that is no JSON
    object; what deltalake raises for an unreadable table.
    """
    topics_uri = metadata_table_uri(table_uri, BROKER_TOPIC_CONFIGS)
    if not _exists(topics_uri):
        return _skipped(f"no broker metadata tables beside {table_uri} ({topics_uri} is no Delta table)")
    before = range_end_time_us(table_uri, plan)
    topics, topics_version = table_state(topics_uri, BROKER_TOPIC_CONFIGS, plan.broker, before)
    if not topics_version["counter"]:
        return _skipped(f"the broker metadata tables beside {table_uri} hold no snapshot of broker {plan.broker} "
                        "before the restored range's end")
    groups, groups_version = [], {"counter": 0, "timestamp": 0, "snapshotId": 0}
    groups_uri = metadata_table_uri(table_uri, BROKER_SUBSCRIPTION_GROUPS)
    if _exists(groups_uri):
        groups, groups_version = table_state(groups_uri, BROKER_SUBSCRIPTION_GROUPS, plan.broker, before)
    offsets, offsets_version = [], {"counter": 0, "timestamp": 0, "snapshotId": 0}
    offsets_uri = metadata_table_uri(table_uri, BROKER_CONSUMER_OFFSETS)
    if _exists(offsets_uri):
        offsets, offsets_version = table_state(offsets_uri, BROKER_CONSUMER_OFFSETS, plan.broker, before)
    ends = queue_ends(table_uri, plan) if offsets else {}
    table: dict[str, dict[int, int]] = {}
    capped = 0
    for row in offsets:
        if row["offset"] is None:
            continue
        end = ends.get((row["topic"], row["queueId"]), 0)
        offset = min(row["offset"], end)
        capped += offset != row["offset"]
        table.setdefault(f"{row['topic']}{TOPIC_GROUP_SEPARATOR}{row['group']}", {})[row["queueId"]] = offset
    folder = Path(store_dir) / CONFIG_DIR
    files = (
        _write(folder / TOPICS_FILE, encode_topic_configs(
            {row["topicName"]: _bean(row, BROKER_TOPIC_CONFIGS, "topicName") for row in topics}, topics_version)),
        _write(folder / SUBSCRIPTION_GROUP_FILE, encode_subscription_groups(
            {row["groupName"]: _bean(row, BROKER_SUBSCRIPTION_GROUPS, "groupName") for row in groups},
            groups_version)),
        _write(folder / CONSUMER_OFFSET_FILE, encode_consumer_offsets(table)),
    )
    versions = (topics_version, groups_version, offsets_version)
    newest = max(versions, key=lambda v: v["snapshotId"])
    return RestoredMetadata(files, newest["snapshotId"], newest["timestamp"], len(topics), len(groups),
                            sum(len(q) for q in table.values()), capped)
