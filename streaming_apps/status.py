"""``hareplica status``: what the apps' progress files say, and optionally what the brokers say now.

The apps' StreamingQueryListener (:mod:`streaming_apps.progress_listener`) appends a line per micro-batch to
``WORKDIR/status/APP.jsonl``. This command reads those files and prints one row per query: its state
(running / terminated / failed), last batch id and time, rows of the last batch, input and processing
rates, batch duration, the broker lag in bytes of CommitLog at the last batch (``latestOffset`` -
``endOffset``), and the last maintenance run. With ``--brokers`` it also asks every broker
(GET_BROKER_RUNTIME_INFO) for its commitLogMaxOffset now and shows the lag against that; ``--prometheus`` prints
the same figures as Prometheus metrics (:func:`prometheus_text`).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from connector.storage import locations
from streaming_apps.progress_file import list_progress_files
from streaming_apps.progress_listener import latest_status, read_events

log = logging.getLogger(__name__)


def status_files(paths: list[str | os.PathLike]) -> list[Path | str]:
    """The progress files named by ``paths``: files as given, folders contribute their ``*.jsonl``; an ``s3://``
    path ending in ``.jsonl`` is a file, any other a folder."""
    out: list[Path | str] = []
    for text in map(os.fspath, paths):
        if locations.is_uri(text):
            where = locations.resolve(text, "status path")
            out.extend([where] if where.endswith(".jsonl") else list_progress_files(where))
            continue
        p = Path(text)
        if p.is_dir():
            out.extend(sorted(p.glob("*.jsonl")))
        elif p.exists():
            out.append(p)
    return out


def broker_max_offsets(brokers: str, timeout_ms: int = 3000) -> dict[str, int | str]:
    """``{broker name: commitLogMaxOffset now}`` (or the error text) for a ``brokers`` option value."""
    from connector.client.admin import BrokerAdminClient
    from connector.options.parse import parse_brokers

    out: dict[str, int | str] = {}
    for b in parse_brokers(brokers):
        try:
            with BrokerAdminClient(b.remoting_addr, timeout_ms) as client:
                out[b.name] = client.commit_log_max_offset()
        except Exception as e:  # noqa: BLE001 - shown, not raised
            out[b.name] = f"unreachable: {e}"
    return out


def discovered_sets(namesrv_addr: str) -> tuple[dict[str, Any], str | None]:
    """The broker sets a name server's route gives (docs/source.md "Discovery"): ``({name: {"cluster", "master",
    "slaves", "readFrom"}}, the equivalent brokers option value or None when no set has a master)``; addresses
    as ``haAddr/remotingAddr``. A failure is returned as ``{"error": text}``."""
    from connector.errors import HAReplicaError
    from connector.options.parse import SourceOptions
    from connector.source.driver.discovery import Discovery

    discovery = Discovery(SourceOptions.from_options({"namesrvAddr": namesrv_addr}))
    try:
        discovery.poll()
    except HAReplicaError as e:
        return {"error": str(e)}, None
    finally:
        discovery.close()

    def where(endpoint) -> str:
        return f"{endpoint.ha_addr}/{endpoint.remoting_addr}"

    sets = {name: {"cluster": s.cluster, "master": where(s.master) if s.master else None,
                   "slaves": [where(e) for e in s.slaves], "readFrom": where(s.master) if s.master else "(no master)"}
            for name, s in discovery.sets.items()}
    brokers = ",".join(f"{name}={s['master']}" for name, s in sets.items() if s["master"])
    return sets, brokers or None


def consumer_lag(tables_root: str | os.PathLike) -> list[dict[str, Any]]:
    """The consumer groups' lag now, as the lake's metadata holds it (docs/metadata.md "Consumer lag"): from the
    table ``broker_consumer_offsets`` under ``tables_root``, per (broker set, group, topic) the sum over its queues
    of ``maxOffset - offset`` (messages) of each queue's last row, deleted queues and queues without a
    ``maxOffset`` left out. A list of ``{"broker", "group", "topic", "lag", "queues", "snapshotTime"}`` (the
    newest snapshot time of the rows summed, ISO 8601), sorted; empty without the table.

    Raises:
        DeltaTablePathError: the table's folder holds something that is not a readable Delta table.
    """
    from connector.delta.location import open_delta_table
    from connector.delta.metadata_tables import BROKER_CONSUMER_OFFSETS
    from connector.delta.reading import read_table

    where = os.fspath(tables_root)
    location = locations.join(where, BROKER_CONSUMER_OFFSETS.name) if locations.is_uri(where) else \
        os.path.join(where, BROKER_CONSUMER_OFFSETS.name)
    if open_delta_table(location) is None:
        return []
    last: dict[tuple, dict] = {}
    for row in sorted(read_table(location).to_pylist(), key=lambda r: r["snapshotId"]):
        last[(row["broker"], row["group"], row["topic"], row["queueId"])] = row
    sums: dict[tuple, dict[str, Any]] = {}
    for (broker, group, topic, _), row in last.items():
        if row["deleted"] or row["maxOffset"] is None or row["offset"] is None:
            continue
        entry = sums.setdefault((broker, group, topic), {"broker": broker, "group": group, "topic": topic, "lag": 0,
                                                         "queues": 0, "snapshotTime": row["snapshotTime"]})
        entry["lag"] += max(0, row["maxOffset"] - row["offset"])
        entry["queues"] += 1
        entry["snapshotTime"] = max(entry["snapshotTime"], row["snapshotTime"])
    return [{**e, "snapshotTime": e["snapshotTime"].isoformat()} for _, e in sorted(sums.items())]


def collect_status(paths: list[str | os.PathLike], brokers: str | None = None,
                   namesrv_addr: str | None = None, tables_root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Everything ``hareplica status`` shows, as a JSON-friendly dict.

    ``{"files": [...], "queries": {name: latest_status entry + "liveLagBytes"?}, "brokers": {...}?,
    "brokerSets": {...}?, "consumerLag": [...]?}``; with ``namesrv_addr`` the broker sets come from its route
    (:func:`discovered_sets`); with ``tables_root`` the consumer groups' lag from the lake (:func:`consumer_lag`;
    an unreadable table gives ``"consumerLagError"`` instead).
    """
    files = status_files(paths)
    queries: dict[str, Any] = {}
    for f in files:
        for name, entry in latest_status(read_events(f)).items():
            entry["file"] = str(f)
            queries[name] = entry
    result: dict[str, Any] = {"files": [str(f) for f in files], "queries": queries}
    if tables_root is not None:
        from connector.errors import HAReplicaError

        try:
            result["consumerLag"] = consumer_lag(tables_root)
        except HAReplicaError as e:
            result["consumerLagError"] = str(e)
    if namesrv_addr:
        result["brokerSets"], brokers = discovered_sets(namesrv_addr)
    if brokers:
        now = broker_max_offsets(brokers)
        result["brokers"] = now
        for entry in queries.values():
            last = entry.get("last") or {}
            live: dict[str, int] = {}
            for src in last.get("sources") or []:
                end = src.get("endOffset")
                if isinstance(end, dict):
                    for broker, offset in end.items():
                        if isinstance(now.get(broker), int) and isinstance(offset, int):
                            live[broker] = max(0, now[broker] - offset)
            entry["liveLagBytes"] = live
    return result


def _fmt_rate(v: Any) -> str:
    return "-" if v is None else f"{float(v):,.0f}"


def print_status(status: dict[str, Any], console=None) -> None:
    """Print :func:`collect_status`'s result: one two-column rich table per query (fits narrow terminals)."""
    from rich.table import Table

    from streaming_apps.console_log import console as console_of

    console = console or console_of()
    for name, found in (status.get("brokerSets") or {}).items():
        if name == "error":
            console.print(f"name server: {found}", highlight=False)
            continue
        slaves = ", ".join(found["slaves"]) or "none"
        console.print(f"broker set {name} (cluster {found['cluster']}): read from {found['readFrom']}; "
                      f"slaves {slaves}", highlight=False)
    if not status["queries"]:
        console.print(f"no progress recorded in {', '.join(status['files']) or 'the given paths'}")
    for name, e in sorted(status["queries"].items()):
        last = e.get("last") or {}
        t = Table(title=f"query {name}", show_header=False)
        t.add_column("field", style="bold")
        t.add_column("value")
        state = e["state"] + (f": {e['exception']}" if e.get("exception") else "")
        t.add_row("state", state)
        t.add_row("started", str(e.get("started") or "-"))
        if e.get("terminated"):
            t.add_row("terminated", str(e["terminated"]))
        t.add_row("last batch", f"{last.get('batchId', '-')} at {last.get('time', '-')}")
        t.add_row("rows", f"{last.get('numInputRows', '-')} in the last batch, {e['rows']:,} in {e['batches']} "
                          "batches recorded")
        t.add_row("rates", f"input {_fmt_rate(last.get('inputRowsPerSecond'))} rows/s, processed "
                           f"{_fmt_rate(last.get('processedRowsPerSecond'))} rows/s")
        t.add_row("batch duration", f"{last.get('batchDurationMs', '-')} ms")
        if last.get("watermark"):
            t.add_row("watermark", str(last["watermark"]))
        for src in last.get("sources") or []:
            for broker, lag in (src.get("lagBytes") or {}).items():
                end = (src.get("endOffset") or {}).get(broker)
                latest = (src.get("latestOffset") or {}).get(broker)
                t.add_row(f"lag {broker}", f"{lag:,} bytes (batch end {end}, broker max {latest} when planned)")
        for broker, lag in (e.get("liveLagBytes") or {}).items():
            t.add_row(f"lag {broker} now", f"{lag:,} bytes")
        m = e.get("maintenance")
        if m:
            t.add_row("maintenance", f"error {m['error']}" if m.get("error") else
                      f"{m.get('table')} v{m.get('version')}: compaction -{m.get('filesRemoved')}/+"
                      f"{m.get('filesAdded')} files, {m.get('vacuumed')} vacuumed, {m.get('orphans')} orphans, "
                      f"at {m.get('time')}")
        t.add_row("progress file", str(e.get("file")))
        console.print(t)
    for broker, value in (status.get("brokers") or {}).items():
        console.print(f"broker {broker}: commitLogMaxOffset {value}")
    if status.get("consumerLagError"):
        console.print(f"consumer lag: {status['consumerLagError']}", highlight=False)
    if status.get("consumerLag"):
        t = Table(title="consumer lag (the lake's last metadata snapshot)")
        for column in ("broker", "group", "topic", "lag (messages)", "queues", "snapshot time"):
            t.add_column(column)
        for e in status["consumerLag"]:
            t.add_row(e["broker"], e["group"], e["topic"], f"{e['lag']:,}", str(e["queues"]), e["snapshotTime"])
        console.print(t)


def prometheus_text(status: dict[str, Any]) -> str:
    """:func:`collect_status`'s result in Prometheus' text exposition format (prometheus_client's
    ``generate_latest``), for a node_exporter textfile collector or a scrape wrapper (docs/delta.md "Lag
    monitoring"): per query ``hareplica_query_lag_bytes{query,broker}`` (CommitLog bytes behind at the last batch,
    true on every Spark), ``hareplica_query_live_lag_bytes{query,broker}`` (with ``--brokers``: behind the
    brokers' max offset now), ``hareplica_query_last_batch_id{query}``, ``hareplica_query_last_batch_rows{query}``
    and ``hareplica_query_failed{query}`` (1 when it failed); with brokers asked (``--brokers`` or
    ``--namesrv-addr``), also with no progress recorded, ``hareplica_broker_commitlog_max_offset_bytes{broker}``;
    per consumer group and topic the lake's metadata holds, ``hareplica_consumer_lag_messages{broker,group,topic}``
    (:func:`consumer_lag`)."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry()
    lag = Gauge("hareplica_query_lag_bytes", "CommitLog bytes behind the brokers' max offset at the last batch",
                ["query", "broker"], registry=registry)
    live = Gauge("hareplica_query_live_lag_bytes", "CommitLog bytes behind the brokers' max offset now",
                 ["query", "broker"], registry=registry)
    batch = Gauge("hareplica_query_last_batch_id", "id of the last micro-batch recorded", ["query"],
                  registry=registry)
    rows = Gauge("hareplica_query_last_batch_rows", "input rows of the last micro-batch", ["query"],
                 registry=registry)
    failed = Gauge("hareplica_query_failed", "1 when the query failed", ["query"], registry=registry)
    max_offset = Gauge("hareplica_broker_commitlog_max_offset_bytes", "the broker set's commitLogMaxOffset now",
                       ["broker"], registry=registry)
    for broker, value in (status.get("brokers") or {}).items():
        if isinstance(value, int):
            max_offset.labels(broker).set(value)
    consumer = Gauge("hareplica_consumer_lag_messages", "messages a consumer group has not consumed, summed over the "
                     "topic's queues, at the lake's last metadata snapshot", ["broker", "group", "topic"],
                     registry=registry)
    for e in status.get("consumerLag") or []:
        consumer.labels(e["broker"], e["group"], e["topic"]).set(e["lag"])
    for name, entry in status["queries"].items():
        last = entry.get("last") or {}
        for src in last.get("sources") or []:
            for broker, value in (src.get("lagBytes") or {}).items():
                lag.labels(name, broker).set(value)
        for broker, value in (entry.get("liveLagBytes") or {}).items():
            live.labels(name, broker).set(value)
        if isinstance(last.get("batchId"), int):
            batch.labels(name).set(last["batchId"])
        if isinstance(last.get("numInputRows"), int):
            rows.labels(name).set(last["numInputRows"])
        failed.labels(name).set(1 if entry.get("state") == "failed" else 0)
    return generate_latest(registry).decode("utf-8")


def status_command(paths: list[str], *, brokers: str | None = None, as_json: bool = False,
                   prometheus: bool = False, namesrv_addr: str | None = None,
                   tables_root: str | None = None) -> int:
    """``hareplica status``: print the status (``as_json``: as JSON; ``prometheus``: :func:`prometheus_text`);
    0 when every query is fine, or when nothing is recorded yet but a broker asked (``brokers``, ``namesrv_addr``)
    answered; 1 when a query failed, or nothing is recorded and no broker answered. ``tables_root``: where the
    consumer lag is read from (:func:`consumer_lag`)."""
    import sys

    from connector.errors import StorageAccessError, StorageConfigError
    from connector.storage import store
    from connector.storage.probe import check_location

    try:
        for path in paths:
            if locations.is_uri(path):
                check_location(str(path), store.active(), "status path")
    except (StorageAccessError, StorageConfigError) as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    status = collect_status(paths, brokers, namesrv_addr, tables_root)
    if prometheus:
        sys.stdout.write(prometheus_text(status))
    elif as_json:
        sys.stdout.write(json.dumps(status, indent=2, default=str) + "\n")
    else:
        print_status(status)
    if not status["queries"]:
        return 0 if any(isinstance(v, int) for v in (status.get("brokers") or {}).values()) else 1
    return 1 if any(e["state"] == "failed" for e in status["queries"].values()) else 0
