"""The silver and gold apps on the Spark standalone cluster, executors on the packed environment (docs/deployment.md).

A stub master holds the demo's msgpack order events (``streaming_apps.workload.order_events``, their event
times spread over about two minutes), a few bodies on the order topics that are not order events, a few
messages of another topic, and last a tick: an order event ten minutes after the others, which moves gold's
watermark past every earlier window. 1 MiB mapped files make three micro-batches with data. ``hareplica run silver``
and ``hareplica run gold`` are submitted to the session's cluster with ``--archives ENV#environment`` and
Trigger.AvailableNow, as users run them; their tables are read back with deltalake's query engine and
compared with what the broker's CommitLog says: every valid order once in ``silver_orders`` with its fields,
every other body of an order topic in the dead-letter table ``silver_quarantine``, and in
``gold_orders_per_minute`` every window with data, its aggregates exact, ``final`` exactly where the last
watermark (the tick minus one minute) has passed the window's end. The executors' Python workers must have run
the archive's interpreter.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import msgpack
import pytest

from broker_stub.launcher import BrokerProcess
from streaming_apps.apps.orders import OrderDecodeError, decode_order_body
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.query import query_tables
from streaming_apps.workload import ORDER_TOPICS, order_events
from tests.cluster import app_runs
from tests.cluster.standalone import executor_tasks
from tests.support.silver import silver_verdicts

pytestmark = pytest.mark.cluster

MAPPED_FILE_SIZE = 1024 * 1024  # a micro-batch ends at a mapped-file start (docs/source.md "Batches")
MAX_BYTES_PER_TRIGGER = 1024 * 1024  # ~2.9 MB of CommitLog: three micro-batches with data
ORDERS = 2_400
SPREAD_MS = 50  # event n is at base + 50 n ms: 2,400 events over 120 s, three one-minute windows
TICK_DELAY_MS = 10 * 60_000
NOT_ORDERS = [b"\x02 no msgpack here", msgpack.packb(["not", "a", "map"]), msgpack.packb({"orderId": 7})]
MINUTE_MS = 60_000


def spread_orders():
    """The order-event messages, event n re-stamped at ``base + n * SPREAD_MS``; then the tick."""
    messages = []
    for seq, msg in enumerate(order_events(ORDERS, seed=15)):
        event = msgpack.unpackb(msg.body)
        event["eventTimeMs"] += seq * (SPREAD_MS - 1)  # order_events already adds seq ms
        messages.append(dataclasses.replace(msg, body=msgpack.packb(event)))
    tick = msgpack.unpackb(messages[-1].body)
    tick.update(orderId="ORD-TICK", eventTimeMs=tick["eventTimeMs"] + TICK_DELAY_MS)
    return messages, dataclasses.replace(messages[-1], body=msgpack.packb(tick), tags="TICK")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    orders, tick = spread_orders()
    with BrokerProcess.start(tmp_path_factory.mktemp("apps-broker"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "cluster-apps") as producer:
            futures = [producer.send_async(m.topic, m.body, tags=m.tags, keys=m.keys, properties=m.properties)
                       for m in orders]
            futures += [producer.send_async(ORDER_TOPICS[i], body, tags="BAD") for i, body in enumerate(NOT_ORDERS)]
            futures += [producer.send_async("Inventory", f"stock {i}".encode() * 30) for i in range(30)]
            futures.append(producer.send_async(tick.topic, tick.body, tags=tick.tags, keys=tick.keys))
            assert {f.result(timeout=120).send_status for f in futures} == {"SEND_OK"}
        yield b


@pytest.fixture(scope="module")
def expected(broker) -> tuple[dict[int, dict], dict[int, str]]:
    """``(orders, rejected)``: commitLogOffset → decoded order / quarantine reason, over the order topics."""
    orders: dict[int, dict] = {}
    rejected: dict[int, str] = {}
    for _, rec in iter_commitlog_dir(broker.commitlog_dir):
        if rec.topic in ORDER_TOPICS:
            try:
                orders[rec.commit_log_offset] = decode_order_body(rec.decompressed_body())
            except OrderDecodeError as e:
                rejected[rec.commit_log_offset] = str(e)
    assert len(orders) == ORDERS + 1 and len(rejected) == len(NOT_ORDERS)
    return orders, rejected


def run_on_cluster(app: str, broker, cluster, env_archive, workdir: Path) -> None:
    """Run ``hareplica run APP`` on the cluster to its end (its log: ``workdir.parent/APP.log``); its executors
    must have run the archive's Python and finished tasks of its several micro-batches."""
    known = app_runs.app_names(cluster)
    log = workdir.parent / f"{app}.log"
    cmd = app_runs.packed_run(app_runs.app_args(app, broker, cluster, workdir, MAX_BYTES_PER_TRIGGER), env_archive)
    with app_runs.PythonWatcher(cluster.root) as watcher:
        app_runs.finish(app_runs.start(cmd, log, workdir.parent), log)
    assert app_runs.executor_workers(watcher, cluster), f"no executor ran Python from the archive: {watcher.seen}"
    dirs = app_runs.new_executor_dirs(cluster, known)
    finished = set().union(*(executor_tasks(d)[1] for folders in dirs.values() for d in folders))
    committed = app_runs.batches(workdir / "checkpoints" / app, "commits")
    assert len(committed) >= 3, f"several micro-batches: {sorted(committed)}"
    assert len(finished) >= len(committed), "the micro-batches' tasks ran on the Workers' executors"


def sql(table: Path, statement: str) -> list[dict]:
    """``statement`` over the Delta table at ``table`` (registered as ``t``), read by deltalake's engine."""
    return query_tables(statement, {"t": str(table)}).to_pylist()


def test_silver_on_the_cluster_lands_every_order_once_and_quarantines_the_rest(
        broker, expected, spark_cluster, env_archive, tmp_path):
    orders, rejected = expected
    workdir = tmp_path / "wd"
    run_on_cluster("silver", broker, spark_cluster, env_archive, workdir)

    declared, dead = silver_verdicts((rec.commit_log_offset, rec.decompressed_body())
                                     for _, rec in iter_commitlog_dir(broker.commitlog_dir)
                                     if rec.topic in ORDER_TOPICS)
    assert set(declared) == set(orders) and set(dead) == set(rejected), "the declaration and gold's decoder agree"
    rows = sql(workdir / "tables" / "silver_orders", "SELECT commitLogOffset, orderId, customerId, status, "
               "amountCents, currency, region, items, eventTimeMs, eventDate FROM t")
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert set(counts) == set(orders) and max(counts.values()) == 1, "every order once"
    for r in rows:
        want = orders[r["commitLogOffset"]]
        assert {k: r[k] for k in ("orderId", "customerId", "status", "amountCents", "currency", "region", "items")} \
            == {k: want[k] for k in ("orderId", "customerId", "status", "amountCents", "currency", "region", "items")}
        assert r["eventTimeMs"] == want["eventTime"] and r["eventDate"] == want["eventTime"].date()
    quarantined = sql(workdir / "tables" / "silver_quarantine", "SELECT commitLogOffset, error FROM t")
    assert {r["commitLogOffset"]: r["error"] for r in quarantined} == dead



def ms(moment) -> int:
    """An aware datetime as ms since the epoch."""
    return int(moment.timestamp() * 1000)


def expected_windows(orders: dict[int, dict]) -> dict[tuple, list]:
    """(windowStart ms, status, region, currency) → [orders, amountCents, itemQuantity, final] (gold's docstring)."""
    times = {off: ms(o["eventTime"]) for off, o in orders.items()}
    watermark = max(times.values()) - MINUTE_MS  # the last batch's: gold's default --watermark "1 minute"
    out: dict[tuple, list] = {}
    for off, o in orders.items():
        start_ms = times[off] - times[off] % MINUTE_MS
        row = out.setdefault((start_ms, o["status"], o["region"], o["currency"]),
                             [0, 0, 0, start_ms + MINUTE_MS <= watermark])
        row[0] += 1
        row[1] += o["amountCents"]
        row[2] += o["itemQuantity"]
    return out


def test_gold_on_the_cluster_has_every_window_exact_and_final_where_the_watermark_passed(
        broker, expected, spark_cluster, env_archive, tmp_path):
    orders, _ = expected
    workdir = tmp_path / "wd"
    run_on_cluster("gold", broker, spark_cluster, env_archive, workdir)

    want = expected_windows(orders)
    starts = {key[0] for key in want}
    assert len(starts) == 4 and {row[3] for row in want.values()} == {True, False}, "closed windows, the tick's open"
    rows = sql(workdir / "tables" / "gold_orders_per_minute", "SELECT windowStart, windowEnd, status, region, "
               "currency, orders, amountCents, itemQuantity, final FROM t")
    got = {(ms(r["windowStart"]), r["status"], r["region"], r["currency"]):
           [r["orders"], r["amountCents"], r["itemQuantity"], r["final"]] for r in rows}
    assert len(got) == len(rows), "one row per window and group"
    assert got == want
    assert all(ms(r["windowEnd"]) - ms(r["windowStart"]) == MINUTE_MS for r in rows)
