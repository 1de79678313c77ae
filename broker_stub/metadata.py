"""Broker metadata tables besides topics (RocketMQ 4.9.8 ``ConsumerOffsetManager``, ``SubscriptionGroupManager``,
the ``ScheduleMessageService`` delay offsets), persisted as ``consumerOffset.json``, ``subscriptionGroup.json``
and ``delayOffset.json`` under ``{storePathRootDir}/config/``, each written atomically (temp file + rename).

Files and GET_ALL_* answers are fastjson's text for the same tables, read back with
:func:`broker_stub.javautil.fastjson_loads` (bare integer keys), so a real master's tables sync too: the tables
docs/protocol.md §3.2, the text §4.7.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from broker_stub.javautil import fastjson_loads
from broker_stub.name_rules import validate_group
from connector.protocol.config_files import (
    TOPIC_GROUP_SEPARATOR,
    encode_consumer_offsets,
    encode_subscription_groups,
)
from connector.protocol.fastjson import Bean

log = logging.getLogger(__name__)

# SubscriptionGroupManager.init(): groups every 4.9.8 broker creates
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                 "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")


def new_data_version(counter: int = 0) -> dict[str, int]:
    """A DataVersion: ``counter`` and the current epoch ms."""
    return {"counter": counter, "timestamp": time.time_ns() // 1_000_000}


def next_data_version(dv: dict[str, int]) -> dict[str, int]:
    """DataVersion.nextVersion: counter + 1, timestamp now."""
    return new_data_version(int(dv.get("counter", 0)) + 1)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` via a temp file and rename. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict | None:
    try:
        obj = fastjson_loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("config file unreadable, ignored path=%s error=%s", path, exc)
        return None
    return obj if isinstance(obj, dict) else None


class ConsumerOffsetManager:
    """Committed consumer offsets per ``topic@group`` and queue (ConsumerOffsetManager)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset_table: dict[str, dict[int, int]] = {}
        obj = _read_json(self.path) or {}
        for key, queues in (obj.get("offsetTable") or {}).items():
            try:
                self.offset_table[str(key)] = {int(q): int(o) for q, o in queues.items()}
            except (AttributeError, TypeError, ValueError):
                log.warning("consumer offset entry ignored key=%s", key)

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store ``offset`` (entries) for the queue; persisted by :meth:`persist` (periodically and at stop)."""
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        self.offset_table.setdefault(key, {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, −1 when there is none."""
        return self.offset_table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

    def put_all(self, table: dict[str, dict[int, int]]) -> None:
        """Slave sync (docs/protocol.md §3.2): merge the master's table in; entries are never removed."""
        for key, queues in table.items():
            self.offset_table[key] = dict(queues)

    def encode(self, pretty: bool = False) -> str:
        """``ConsumerOffsetManager.encode(pretty)``: ``{"offsetTable":{"topic@group":{queueId:offset}}}``."""
        return encode_consumer_offsets(self.offset_table, pretty)

    @staticmethod
    def decode(text: str | bytes) -> dict[str, dict[int, int]]:
        """The offsetTable of an encoded body. Raises ValueError when it is not one."""
        obj = fastjson_loads(text)
        table = obj.get("offsetTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise ValueError("no offsetTable object")
        return {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}

    def persist(self) -> None:
        write_atomically(self.path, self.encode(pretty=True))


@dataclass
class SubscriptionGroupConfig:
    """One consumer group's settings (SubscriptionGroupConfig, 4.9.8 defaults)."""

    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True

    @classmethod
    def from_json(cls, obj: dict) -> SubscriptionGroupConfig:
        known = {k: obj[k] for k in cls.__dataclass_fields__ if k in obj}
        return cls(**known)


class SubscriptionGroupManager:
    """The consumer-group table with its DataVersion (SubscriptionGroupManager)."""

    def __init__(self, path: Path, *, auto_create: bool, max_groups: int = 10000) -> None:
        self.path = Path(path)
        self.auto_create = auto_create
        self.max_groups = max_groups  # stub-only maxSubscriptionGroupNums (docs/security.md "Names and caps")
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = new_data_version()
        for name in SYSTEM_GROUPS:
            self.table[name] = SubscriptionGroupConfig(name)
        obj = _read_json(self.path)
        if obj:
            self._apply(obj)

    def _apply(self, obj: dict) -> None:
        for name, cfg in (obj.get("subscriptionGroupTable") or {}).items():
            try:
                self.table[str(name)] = SubscriptionGroupConfig.from_json(cfg)
            except TypeError:
                log.warning("subscription group entry ignored group=%s", name)
        dv = obj.get("dataVersion")
        if isinstance(dv, dict):
            self.data_version = {"counter": int(dv.get("counter", 0)), "timestamp": int(dv.get("timestamp", 0))}

    def creation_refused(self, group: str) -> str | None:
        """Why ``group`` may not be created (a one-line remark: bad name, or the table holds
        ``maxSubscriptionGroupNums`` groups), None when it exists or may be created."""
        if group in self.table:
            return None
        remark = validate_group(group)
        if remark is None and len(self.table) >= self.max_groups:
            remark = (f"subscription group table full (maxSubscriptionGroupNums={self.max_groups} reached), "
                      f"group {group!r} not created")
        return remark

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """findSubscriptionGroupConfig: the group, created with defaults when ``autoCreateSubscriptionGroup``.

        None when it does not exist and may not be created (:meth:`creation_refused`, logged on one line)."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create:
            refused = self.creation_refused(group)
            if refused is not None:
                log.warning("subscription group not created: %s", refused)
                return None
            cfg = SubscriptionGroupConfig(group)
            self.table[group] = cfg
            self.data_version = next_data_version(self.data_version)
            log.info("auto create a subscription group group=%s", group)
            try:
                self.persist()
            except OSError as exc:
                log.error("subscription group persist failed error=%s", exc)
        return cfg

    def encode(self, pretty: bool = False) -> str:
        """``SubscriptionGroupManager.encode(pretty)``: ``{"dataVersion":{..},"subscriptionGroupTable":{..}}``."""
        return encode_subscription_groups({n: Bean(asdict(c)) for n, c in self.table.items()}, self.data_version,
                                          pretty)

    def replace_from_master(self, obj: dict) -> bool:
        """Slave sync: replace the table when the master's dataVersion differs; returns True when replaced."""
        dv = obj.get("dataVersion")
        if not isinstance(dv, dict) or dv == self.data_version:
            return False
        self.table = {}
        self._apply(obj)
        self.persist()
        return True

    def persist(self) -> None:
        write_atomically(self.path, self.encode(pretty=True))


class DelayOffsetStore:
    """``delayOffset.json`` (ScheduleMessageService offsets): served to slaves and written verbatim there."""

    EMPTY = '{"offsetTable":{}}'

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def encode(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except OSError:
            return self.EMPTY

    def write_verbatim(self, text: str) -> None:
        write_atomically(self.path, text)
