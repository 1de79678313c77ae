"""The ``config/`` a restored store needs beside its CommitLog: ``delayOffset.json``, so a broker started on it does
not deliver the scheduled messages bronze shows delivered a second time (docs/restore.md "What a restored store
holds"; 4.9.8 ``ScheduleMessageService``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.compute as pc

from connector.delta.reading import read_table
from connector.protocol.commitlog import PROPERTY_REAL_TOPIC
from connector.protocol.config_files import CONFIG_DIR, encode_delay_offsets
from connector.protocol.config_files import DELAY_OFFSET_FILE as _DELAY_OFFSET_NAME
from connector.protocol.topics import RMQ_SYS_SCHEDULE_TOPIC
from connector.restore.plan import RestorePlan, broker_filter

DELAY_OFFSET_FILE = Path(CONFIG_DIR) / _DELAY_OFFSET_NAME


def delivered_delay_offsets(table_uri: str, plan: RestorePlan) -> dict[int, int]:
    """Delay level → the next ``SCHEDULE_TOPIC_XXXX`` queue offset to deliver (level = queueId + 1) in the plan's
    range: one past the last scheduled record whose delivered copy (same UNIQ_KEY, topic its REAL_TOPIC property,
    a later offset) the table holds. Levels with nothing delivered are left out."""
    in_range = broker_filter(plan.broker) & (pc.field("commitLogOffset") >= plan.start) & (
        pc.field("commitLogOffset") < plan.end)
    scheduled = read_table(table_uri, columns=["commitLogOffset", "queueId", "queueOffset", "uniqKey", "properties"],
                           filters=in_range & (pc.field("topic") == RMQ_SYS_SCHEDULE_TOPIC)).to_pylist()
    keys = sorted({row["uniqKey"] for row in scheduled if row["uniqKey"]})
    if not keys:
        return {}
    copies = read_table(table_uri, columns=["commitLogOffset", "topic", "uniqKey"],
                        filters=in_range & pc.field("uniqKey").isin(keys)
                        & (pc.field("topic") != RMQ_SYS_SCHEDULE_TOPIC)).to_pylist()
    later: dict[tuple[str, str], int] = {}
    for row in copies:
        key = (row["uniqKey"], row["topic"])
        later[key] = max(later.get(key, -1), row["commitLogOffset"])
    table: dict[int, int] = {}
    for row in scheduled:
        real_topic = dict(row["properties"]).get(PROPERTY_REAL_TOPIC)
        if later.get((row["uniqKey"], real_topic), -1) > row["commitLogOffset"]:
            level = row["queueId"] + 1
            table[level] = max(table.get(level, 0), row["queueOffset"] + 1)
    return table


def write_delay_offsets(table_uri: str, plan: RestorePlan, store_dir: str | os.PathLike) -> Path | None:
    """Write ``STORE_DIR/config/delayOffset.json`` (``{"offsetTable":{level:offset}}`` as 4.9.8 fastjson writes it,
    levels in its ConcurrentHashMap order) from :func:`delivered_delay_offsets`; None (nothing written) when no
    scheduled message of the range was delivered."""
    offsets = delivered_delay_offsets(table_uri, plan)
    if not offsets:
        return None
    path = Path(store_dir) / DELAY_OFFSET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(encode_delay_offsets(offsets))
    return path
