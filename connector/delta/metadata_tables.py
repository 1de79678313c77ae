"""The broker metadata tables: what the lake keeps of a master's metadata, as a slave's ``SlaveSynchronize`` syncs it
(docs/metadata.md). Names, columns and keys declared once here; the apps write these tables, restore reads them.

Every table has the columns of :data:`SNAPSHOT_COLUMNS` first: the broker set, the snapshot's id (per broker set,
1, 2, 3… — the Delta ``txn`` version of the table's writer, so a snapshot lands at most once) and its time (UTC, when
its first request was sent). A row is landed only when an item's value changed since the table's last row for the
same key; an item the master no longer lists gets a row with ``deleted = true``. The state at a time T is, per key,
the last row with ``snapshotTime <= T``, left out when ``deleted``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = [
    "BROKER_CONSUMER_OFFSETS",
    "BROKER_DELAY_OFFSETS",
    "BROKER_SUBSCRIPTION_GROUPS",
    "BROKER_TOPIC_CONFIGS",
    "METADATA_TABLES",
    "SNAPSHOT_COLUMNS",
    "MetadataTable",
    "txn_app_id",
]

#: the columns every metadata table starts with
SNAPSHOT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("broker", pa.string(), nullable=False),  # the broker set's name (brokerName), as bronze's ``broker``
    pa.field("snapshotId", pa.int64(), nullable=False),  # 1, 2, 3… per broker set; the table's txn version
    pa.field("snapshotTime", pa.timestamp("us", tz="UTC"), nullable=False),
)
_DELETED = pa.field("deleted", pa.bool_(), nullable=False)
#: the item's JSON as the master sent it (one entry of the table's map, compact), for what the typed columns leave out
_CONFIG = pa.field("config", pa.string(), nullable=True)


@dataclass(frozen=True)
class MetadataTable:
    """One metadata table: its Delta table name under the tables root, its columns after
    :data:`SNAPSHOT_COLUMNS`, and the columns that key an item (a row per key and change)."""

    name: str
    columns: tuple[pa.Field, ...]
    key: tuple[str, ...]

    @property
    def schema(self) -> pa.Schema:
        """The table's Arrow schema: :data:`SNAPSHOT_COLUMNS`, then :attr:`columns`."""
        return pa.schema([*SNAPSHOT_COLUMNS, *self.columns])


#: GET_ALL_TOPIC_CONFIG (21), one row per topic and change (4.9.8 ``TopicConfig``'s property names)
BROKER_TOPIC_CONFIGS = MetadataTable(
    "broker_topic_configs",
    (pa.field("topicName", pa.string(), nullable=False),
     pa.field("readQueueNums", pa.int32()),
     pa.field("writeQueueNums", pa.int32()),
     pa.field("perm", pa.int32()),
     pa.field("topicFilterType", pa.string()),
     pa.field("topicSysFlag", pa.int32()),
     pa.field("order", pa.bool_()),
     _CONFIG, _DELETED),
    ("topicName",),
)

#: GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), one row per group and change (4.9.8 ``SubscriptionGroupConfig``)
BROKER_SUBSCRIPTION_GROUPS = MetadataTable(
    "broker_subscription_groups",
    (pa.field("groupName", pa.string(), nullable=False),
     pa.field("consumeEnable", pa.bool_()),
     pa.field("consumeFromMinEnable", pa.bool_()),
     pa.field("consumeBroadcastEnable", pa.bool_()),
     pa.field("retryQueueNums", pa.int32()),
     pa.field("retryMaxTimes", pa.int32()),
     pa.field("brokerId", pa.int64()),
     pa.field("whichBrokerWhenConsumeSlowly", pa.int64()),
     pa.field("notifyConsumerIdsChangedEnable", pa.bool_()),
     _CONFIG, _DELETED),
    ("groupName",),
)

#: GET_ALL_CONSUMER_OFFSET (43) with the ConsumeQueue's max offset (GET_MAX_OFFSET, 30) sampled in the same
#: snapshot: one row per (group, topic, queueId) whose ``offset`` or ``maxOffset`` changed. Lag = maxOffset - offset.
BROKER_CONSUMER_OFFSETS = MetadataTable(
    "broker_consumer_offsets",
    (pa.field("group", pa.string(), nullable=False),
     pa.field("topic", pa.string(), nullable=False),
     pa.field("queueId", pa.int32(), nullable=False),
     pa.field("offset", pa.int64()),
     pa.field("maxOffset", pa.int64()),  # null when the master did not answer GET_MAX_OFFSET for the queue
     _DELETED),
    ("group", "topic", "queueId"),
)

#: GET_ALL_DELAY_OFFSET (45), one row per delay level and change (``ScheduleMessageService.offsetTable``)
BROKER_DELAY_OFFSETS = MetadataTable(
    "broker_delay_offsets",
    (pa.field("delayLevel", pa.int32(), nullable=False),
     pa.field("offset", pa.int64()),
     _DELETED),
    ("delayLevel",),
)

METADATA_TABLES: tuple[MetadataTable, ...] = (
    BROKER_TOPIC_CONFIGS, BROKER_SUBSCRIPTION_GROUPS, BROKER_CONSUMER_OFFSETS, BROKER_DELAY_OFFSETS)


def txn_app_id(broker: str) -> str:
    """The Delta ``txn`` appId a metadata table's writer commits a broker set's snapshots under (version =
    snapshotId), so a snapshot replayed after a restart is recognised as landed."""
    return f"hareplica-metadata-{broker}"
