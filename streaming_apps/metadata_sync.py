"""The broker metadata sync beside bronze: every ``--metadata-sync-interval-ms`` (10,000 ms by default, the period
of RocketMQ 4.9.8's ``SlaveSynchronize``) a thread of the driver asks each broker set's master for its metadata
(:class:`connector.client.broker_metadata.BrokerMetadataClient`) and lands what changed in the four metadata tables
(:mod:`connector.delta.metadata_tables`, :mod:`connector.delta.metadata_writer`). What lands, when, exactly once, and
why a driver thread and not a Spark query: docs/metadata.md.

A request the master refuses is logged once per broker set and request (WARNING, one line), and the other tables
still land; an unreachable master is asked again at the next interval. Nothing the sync meets stops the bronze
query: every error is logged and the thread goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from connector.client.broker_metadata import BrokerMetadataClient, MetadataSnapshot
from connector.delta.metadata_tables import (
    BROKER_CONSUMER_OFFSETS,
    BROKER_DELAY_OFFSETS,
    BROKER_SUBSCRIPTION_GROUPS,
    BROKER_TOPIC_CONFIGS,
    METADATA_TABLES,
    MetadataTable,
)
from connector.delta.metadata_writer import MetadataState, append_snapshot, changed_rows, item_json, read_state
from connector.errors import MetadataRequestRefused
from connector.storage import locations
from streaming_apps.defaults import DEFAULT_METADATA_SYNC_INTERVAL_MS

log = logging.getLogger(__name__)

#: the longest wait for one answer of the master (ms)
METADATA_REQUEST_TIMEOUT_MS = 3000
#: how long :meth:`MetadataSync.close` waits for a snapshot in flight (s)
CLOSE_WAIT_S = 60.0

_TOPIC_FIELDS = ("readQueueNums", "writeQueueNums", "perm", "topicFilterType", "topicSysFlag", "order")
_GROUP_FIELDS = ("consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable", "retryQueueNums", "retryMaxTimes",
                 "brokerId", "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable")
#: the request each table comes from (a refusal names it)
TABLE_REQUESTS = {BROKER_TOPIC_CONFIGS.name: "GET_ALL_TOPIC_CONFIG",
                  BROKER_CONSUMER_OFFSETS.name: "GET_ALL_CONSUMER_OFFSET",
                  BROKER_DELAY_OFFSETS.name: "GET_ALL_DELAY_OFFSET",
                  BROKER_SUBSCRIPTION_GROUPS.name: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG"}
#: the order the tables are committed in: SlaveSynchronize's order of the requests
COMMIT_ORDER = (BROKER_TOPIC_CONFIGS, BROKER_CONSUMER_OFFSETS, BROKER_DELAY_OFFSETS, BROKER_SUBSCRIPTION_GROUPS)


def _typed(value, kind: type):
    """A JSON value as the column's Python type, None when it is missing or of another kind."""
    if value is None:
        return None
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind is int:
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
    return value if isinstance(value, str) else str(value)


def snapshot_items(snap: MetadataSnapshot) -> dict[str, dict[tuple, dict]]:
    """Table name → (key → values without ``deleted``) of every table whose request ``snap`` holds an answer to
    (a table whose request failed is left out, so nothing of it is marked deleted)."""
    out: dict[str, dict[tuple, dict]] = {}
    if snap.topics is not None:
        out[BROKER_TOPIC_CONFIGS.name] = {
            (name,): {**{f: _typed(cfg.get(f), bool if f == "order" else str if f == "topicFilterType" else int)
                         for f in _TOPIC_FIELDS}, "config": item_json(cfg)}
            for name, cfg in snap.topics.items()}
    if snap.subscription_groups is not None:
        out[BROKER_SUBSCRIPTION_GROUPS.name] = {
            (name,): {**{f: _typed(cfg.get(f), int if f in ("retryQueueNums", "retryMaxTimes", "brokerId",
                                                             "whichBrokerWhenConsumeSlowly") else bool)
                         for f in _GROUP_FIELDS}, "config": item_json(cfg)}
            for name, cfg in snap.subscription_groups.items()}
    if snap.consumer_offsets is not None:
        out[BROKER_CONSUMER_OFFSETS.name] = {
            (group, topic, queue_id): {"offset": offset, "maxOffset": snap.max_offsets.get((topic, queue_id))}
            for (group, topic), queues in snap.consumer_offsets.items() for queue_id, offset in queues.items()}
    if snap.delay_offsets is not None:
        out[BROKER_DELAY_OFFSETS.name] = {(level,): {"offset": offset} for level, offset in snap.delay_offsets.items()}
    return out


@dataclass(frozen=True)
class SyncTarget:
    """One broker set to sync: its name and its master's remoting address."""

    broker: str
    addr: str


def targets_of(source_options: dict[str, str]) -> Callable[[], list[SyncTarget]]:
    """A function giving the masters to sync now, from the bronze source's options: the ``brokers`` option's sets
    (remoting address given, or derived from the HA address: ``haPort - 1``), or the masters (brokerId 0) of the
    sets ``namesrvAddr``'s route gives (asked again at each call). Raises HAReplicaOptionError for bad options."""
    from connector.client.namesrv import NameServerClient
    from connector.options.parse import SourceOptions
    from connector.source.driver.discovery import select_sets

    options = SourceOptions.from_options(source_options)
    if not options.namesrv_addr:
        fixed = [SyncTarget(b.name, b.remoting_addr) for b in options.brokers]
        return lambda: fixed

    def from_route() -> list[SyncTarget]:
        with NameServerClient(options.namesrv_addr, options.fetch.read_timeout_ms,
                              options.fetch.credentials) as client:
            addr, info = client.cluster_info()
        sets = select_sets(info, options.cluster_names, addr)
        return [SyncTarget(name, data.master_addr) for name, data in sorted(sets.items()) if data.master_addr]
    return from_route


class MetadataSync:
    """The sync of the module doc, for the sets ``targets()`` gives, into ``tables_root``.

    Args:
        tables_root: the folder (or ``s3://`` location) of the tables.
        targets: the masters to sync (:func:`targets_of`), asked at every round.
        credentials: the source's ACL account, or None.
        interval_ms: the period between two rounds' starts (ms).
        clock_ms: the wall clock in ms (snapshot times).
    """

    def __init__(self, tables_root: str, targets: Callable[[], list[SyncTarget]], *, credentials=None,
                 interval_ms: int = DEFAULT_METADATA_SYNC_INTERVAL_MS,
                 clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        self.tables_root = tables_root
        self.targets = targets
        self.credentials = credentials
        self.interval_ms = interval_ms
        self.clock_ms = clock_ms
        self.rounds = 0  #: rounds ended
        self.landed: dict[str, int] = {}  #: broker set → snapshots landed (a round that committed a row)
        self.synced: dict[str, int] = {}  #: broker set → snapshots taken and landed or found unchanged
        self._clients: dict[SyncTarget, BrokerMetadataClient] = {}
        self._states: dict[str, dict[str, MetadataState]] = {}  # broker → table name → state
        self._next_id: dict[str, int] = {}
        self._logged: set[tuple] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._round_lock = threading.Lock()

    def table_location(self, table: MetadataTable) -> str:
        """Where ``table`` lives: ``tables_root/NAME``."""
        root = str(self.tables_root)
        return locations.join(root, table.name) if locations.is_uri(root) else f"{root.rstrip('/')}/{table.name}"

    # --- one round --------------------------------------------------------------------------------------------
    def sync_once(self) -> None:
        """One round: a snapshot of every target, its changes landed. Never raises (errors are logged)."""
        with self._round_lock:
            try:
                targets = self.targets()
            except Exception as e:  # noqa: BLE001 - the name server may be down: next round
                self._log_once(("targets", type(e).__name__), "metadata sync: cannot list the broker sets: %s", e)
                targets = []
            for target in targets:
                try:
                    self._sync_target(target)
                except Exception as e:  # noqa: BLE001 - never stop the bronze query
                    self._states.pop(target.broker, None)  # read the tables again next round
                    log.warning("metadata sync of broker set %s (%s) failed: %s: %s", target.broker, target.addr,
                                type(e).__name__, _first_line(e))
            self.rounds += 1

    def _sync_target(self, target: SyncTarget) -> None:
        client = self._clients.get(target)
        if client is None:
            client = self._clients[target] = BrokerMetadataClient(target.broker, target.addr,
                                                                  METADATA_REQUEST_TIMEOUT_MS, self.credentials)
        snap = client.snapshot(self.clock_ms)
        if snap.unreachable:
            client.close()
            self._log_once(("unreachable", target.broker), "metadata sync: master %s of broker set %s is "
                           "unreachable, asked again every %d ms: %s", target.addr, target.broker, self.interval_ms,
                           _first_line(next(iter(snap.failures.values()))))
            return
        self._logged.discard(("unreachable", target.broker))
        for request, error in snap.failures.items():
            if isinstance(error, MetadataRequestRefused):
                self._log_once(("refused", target.broker, request), "metadata sync: master %s of broker set %s "
                               "refused %s: %s", target.addr, target.broker, request, error.remark)
            else:  # an answer that does not decode
                self._log_once(("refused", target.broker, request), "metadata sync: master %s of broker set %s: "
                               "%s failed: %s", target.addr, target.broker, request, _first_line(error))
        states = self._states.get(target.broker)
        if states is None:
            states = {t.name: read_state(self.table_location(t), t, target.broker) for t in METADATA_TABLES}
            self._states[target.broker] = states
            last = max((s.last_snapshot for s in states.values() if s.last_snapshot is not None), default=0)
            self._next_id[target.broker] = last + 1
        items = snapshot_items(snap)
        snapshot_id = self._next_id[target.broker]
        committed = False
        try:
            for table in COMMIT_ORDER:
                if table.name not in items:
                    continue
                state = states[table.name]
                rows = changed_rows(table, state.items, items[table.name])
                if append_snapshot(self.table_location(table), table, target.broker, snapshot_id,
                                   snap.time_ms * 1000, rows):
                    committed = True
                    for row in rows:
                        key = tuple(row[k] for k in table.key)
                        state.items[key] = {c: v for c, v in row.items() if c not in table.key}
                    state.last_snapshot = snapshot_id
                elif rows:  # another writer landed this snapshotId for the set: read the tables again next round
                    self._states.pop(target.broker, None)
        finally:
            if committed:
                self._next_id[target.broker] = snapshot_id + 1
        if committed:
            self.landed[target.broker] = self.landed.get(target.broker, 0) + 1
        self.synced[target.broker] = self.synced.get(target.broker, 0) + 1

    def _log_once(self, key: tuple, message: str, *args) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning(message, *args)

    # --- the thread -------------------------------------------------------------------------------------------
    def start(self) -> MetadataSync:
        """Start the thread: a round now, then one every ``interval_ms``."""
        self._thread = threading.Thread(target=self._run, name="hareplica-metadata-sync", daemon=True)
        self._thread.start()
        log.info("metadata sync every %d ms into %s", self.interval_ms, self.tables_root)
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sync_once()
            self._stop.wait(max(0.0, self.interval_ms / 1000 - (time.monotonic() - started)))

    def close(self, *, final_round: bool = False) -> None:
        """Stop the thread (a round in flight ends first, up to :data:`CLOSE_WAIT_S`); with ``final_round`` (an
        available-now run) one more round runs now, so the run ends with a snapshot of the masters at its end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(CLOSE_WAIT_S)
            if self._thread.is_alive():
                log.warning("the metadata sync still runs after %.0f s; leaving it in the background", CLOSE_WAIT_S)
                return
        if final_round:
            self.sync_once()
        for client in self._clients.values():
            client.close()


def _first_line(error: BaseException) -> str:
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__


def start_metadata_sync(config) -> MetadataSync | None:
    """The sync of a bronze run (``config``: :class:`streaming_apps.apps.common.AppConfig`), started; None when
    ``config.metadata_sync_interval_ms`` is 0 (off) or the app is not bronze."""
    if config.app != "bronze" or not config.metadata_sync_interval_ms:
        return None
    from connector.options.parse import SourceOptions

    source = config.source_option_map()
    credentials = SourceOptions.from_options(source).fetch.credentials
    return MetadataSync(str(config.tables_root), targets_of(source), credentials=credentials,
                        interval_ms=config.metadata_sync_interval_ms).start()
