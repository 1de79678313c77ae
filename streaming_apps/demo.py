"""`hareplica demo` (what `make demo` runs): the main job end to end on an embedded default.

1. start a broker-stub ASYNC_MASTER in ``WORKDIR/broker`` on free loopback ports;
2. produce a workload of msgpack order events (``streaming_apps.workload``) with the bundled producer;
3. run the bronze app (``streaming_apps.apps.bronze``, the same code as ``hareplica run bronze``) with
   Trigger.AvailableNow: ``format("hareplica")`` into the Delta table ``WORKDIR/tables/bronze`` with
   ``format("deltalake")``, partitioned by storeDate, progress and broker lag in
   ``WORKDIR/status/bronze.jsonl``, maintenance every few micro-batches. Spark runs as ``hareplica run bronze``
   runs it on its default master, ``local[2]`` (:func:`demo_config`): that is also the run whose classes the
   driver JVM's class-data-sharing archive holds (streaming_apps.jvm_cds trains on this demo);
4. run the typed tables of the declaration :func:`demo_declaration` (written to ``WORKDIR/orders.toml``, the
   same code as ``hareplica run tables --config``): the order events as the typed table ``WORKDIR/tables/orders``;
5. check bronze against the broker's own CommitLog files (missing and duplicated messages), count the typed rows,
   and run an example query of each table with deltalake's SQL engine (no JVM), as ``hareplica query`` does;
6. stop the broker. Exit code 0 only when nothing is missing or duplicated in bronze and the typed table holds
   every message, with no dead letter.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from streaming_apps.console_log import console as console_of

log = logging.getLogger(__name__)

BROKER_NAME = "broker-a"
DEMO_MAPPED_FILE_SIZE_BYTES = 64 * 1024 * 1024  # several mapped files → several partitions per batch
DEMO_MAX_BYTES_PER_TRIGGER = 64 * 1024 * 1024
DEMO_MAINTENANCE_EVERY_BATCHES = 4
#: the typed table of the demo's order events (docs/tables.md), written to WORKDIR/orders.toml
DEMO_DECLARATION_FILE = "orders.toml"
TYPED_TABLE = "orders"
DEAD_LETTER_TABLE = "dead_letters"


def run_demo(workdir: str, *, messages: int = 100_000, keep: bool = False) -> int:
    """Run the demo in ``workdir``; returns the exit code (0 = every message landed exactly once)."""
    from broker_stub.launcher import BrokerProcess

    console = console_of()
    root = Path(workdir).resolve()
    if root.exists() and not keep:
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    table_path = root / "tables" / "bronze"
    started = time.monotonic()

    console.rule("[bold]hareplica demo")
    broker = BrokerProcess.start(root / "broker", brokerName=BROKER_NAME,
                                 mappedFileSizeCommitLog=DEMO_MAPPED_FILE_SIZE_BYTES)
    console.print(f"broker stub ASYNC_MASTER: remoting {broker.remoting_addr}, HA {broker.ha_addr}, "
                  f"store {broker.store_dir}")
    try:
        produced = _produce(console, broker.remoting_addr, messages)
        landed_batches = _stream(console, broker, root)
        ok = _check_and_query(console, broker, table_path, produced)
        ok = _typed_query(console, root, produced) and ok
        console.print("[bold green]OK[/]: every message landed exactly once, in bronze and in the typed table" if ok
                      else "[bold red]FAILED[/]: see the counts above")
    finally:
        broker.stop()
        log.info("broker stub stopped")
    console.print(f"bronze Delta table: [bold]{table_path}[/bold] ({landed_batches} micro-batches; total time "
                  f"{time.monotonic() - started:.1f} s)")
    return 0 if ok else 1


def _produce(console: Console, broker_addr: str, count: int) -> int:
    """Send ``count`` order events, pipelined; returns how many were acknowledged as stored."""
    import threading

    from connector.client.producer import Producer
    from streaming_apps.workload import order_events

    acked = 0
    failures: list[BaseException] = []
    lock = threading.Lock()

    def done(fut) -> None:
        nonlocal acked
        with lock:
            if fut.exception() is None:
                acked += 1
            else:
                failures.append(fut.exception())

    with Progress(TextColumn("producing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress, Producer(broker_addr, "hareplica-demo") as producer:
        task = progress.add_task("produce", total=count)
        futures = []
        for i, msg in enumerate(order_events(count)):
            fut = producer.send_async(msg.topic, msg.body, tags=msg.tags, keys=msg.keys, properties=msg.properties)
            fut.add_done_callback(done)
            futures.append(fut)
            if i % 1000 == 0:
                progress.update(task, completed=acked)
        for fut in futures:
            fut.exception(timeout=60)
        progress.update(task, completed=acked)
    if failures:
        raise RuntimeError(f"{len(failures)} sends failed, first: {failures[0]}")
    return acked


def demo_config(ha_addr: str, root: Path):
    """The demo's bronze :class:`streaming_apps.apps.AppConfig` for the broker's HA address ``ha_addr`` (host:port)
    and the workdir ``root``: what ``hareplica run bronze --trigger available-now`` would build on the default
    master, streaming_apps.spark_session.DEFAULT_MASTER (as many partitions per mapped file and warmed Python
    workers as the master has cores), plus the demo's read limit and maintenance interval."""
    from streaming_apps.apps import AppConfig
    from streaming_apps.spark_session import DEFAULT_MASTER, local_cores

    cores = local_cores(DEFAULT_MASTER)
    return AppConfig(app="bronze", brokers=f"{BROKER_NAME}={ha_addr}", workdir=root, trigger="available-now",
                     max_bytes_per_trigger=DEMO_MAX_BYTES_PER_TRIGGER, min_partitions=cores, warm_workers=cores,
                     maintenance_every=DEMO_MAINTENANCE_EVERY_BATCHES)


def _stream(console: Console, broker, root: Path) -> int:
    """Run the bronze app until caught up (streaming_apps.apps.run_app, as ``hareplica run bronze``); returns the
    number of micro-batches. Spark's and py4j's output go to ``root/logs/demo.log`` (named on the console)."""
    from streaming_apps.apps import progress_line, run_app
    from streaming_apps.console_log import open_log_file
    from streaming_apps.spark_session import DEFAULT_MASTER, build_spark_session, stop_session

    console.print(f"starting Spark ({DEFAULT_MASTER}) …")
    log_file = open_log_file(root, "demo")
    if log_file is not None:
        console.print(f"Spark's and py4j's log: {log_file}", highlight=False, soft_wrap=True)
    config = demo_config(broker.ha_addr, root)
    spark = build_spark_session("hareplica-demo", c1_only_jit=config.c1_only_jit, parallel_gc=config.parallel_gc,
                                log_file=log_file)
    console.print(f"bronze app: checkpoint {config.checkpoint()}, progress {config.status_file}")
    try:
        result = run_app(spark, config, on_progress=lambda record, rows: console.print(progress_line(record, rows)))
        console.print(f"caught up: {result.rows} rows in {result.batches} micro-batches; "
                      f"{len(result.maintenance)} table maintenance runs")
        declaration = root / DEMO_DECLARATION_FILE
        declaration.write_text(demo_declaration(), encoding="utf-8")
        tables = dataclasses.replace(config, app="tables", declaration=declaration, maintenance_every=0)
        console.print(f"tables app: declaration {declaration}, checkpoint {tables.checkpoint()}")
        typed = run_app(spark, tables)
        console.print(f"typed tables caught up: {typed.rows} rows in {typed.batches} micro-batches")
    finally:
        stop_session(spark)
    return result.batches


def demo_declaration() -> str:
    """The declaration (docs/tables.md) of the demo's order events (streaming_apps.workload.order_event) as the
    typed table :data:`TYPED_TABLE`: the silver app's declaration
    (:func:`streaming_apps.apps.silver.orders_declaration`) with the demo's table names."""
    from streaming_apps.apps.silver import orders_declaration

    return (f"# The demo's order events as a typed table: hareplica run tables --config {DEMO_DECLARATION_FILE}\n"
            + orders_declaration(TYPED_TABLE, DEAD_LETTER_TABLE))


#: The typed query the demo runs and prints.
TYPED_QUERY = ("paid orders, revenue and items per currency, from the typed table",
               "SELECT currency, count(*) AS orders, sum(amountCents) AS amount_cents, "
               f"sum(cardinality(items)) AS items FROM {TYPED_TABLE} WHERE status = 'PAID' "
               "GROUP BY currency ORDER BY currency")


def _typed_query(console: Console, root: Path, produced: int) -> bool:
    """Print :data:`TYPED_QUERY`; True when the typed table holds every order event and there is no dead letter."""
    from streaming_apps.query import discover_tables, query_tables, render

    tables = discover_tables(root / "tables")
    rows = query_tables(f"SELECT count(*) AS n FROM {TYPED_TABLE}", tables).to_pylist()[0]["n"]
    dead = (query_tables(f"SELECT count(*) AS n FROM {DEAD_LETTER_TABLE}", tables).to_pylist()[0]["n"]
            if DEAD_LETTER_TABLE in tables else 0)
    title, sql = TYPED_QUERY
    console.print(f"[bold]{title}[/bold] ({rows} rows, {dead} dead letters):", highlight=False)
    render(query_tables(sql, tables), console=console)
    console.print(f"the same query: hareplica query --workdir {root} \"{sql}\"", highlight=False, soft_wrap=True)
    return rows == produced and dead == 0


#: The example query the demo runs and prints (also shown as a `hareplica query` command).
EXAMPLE_QUERY = ("messages, CommitLog bytes and store dates (the partition column) per topic",
                 "SELECT topic, count(*) AS messages, sum(storeSize) AS commitlog_bytes, "
                 "sum(CASE WHEN sysFlag & 1 = 1 THEN 1 ELSE 0 END) AS compressed, min(storeDate) AS first_date, "
                 "max(storeDate) AS last_date FROM bronze GROUP BY topic ORDER BY topic")


def _check_and_query(console: Console, broker, table_path: Path, produced: int) -> bool:
    from deltalake import DeltaTable

    from streaming_apps.inspect_commitlog import iter_commitlog_dir
    from streaming_apps.query import query_tables, render
    from streaming_apps.workload import decode_order

    broker_offsets = {rec.commit_log_offset: rec.msg_id for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
    tables = {"bronze": str(table_path)}
    table = query_tables("SELECT commitLogOffset, msgId FROM bronze", tables)
    offsets = table.column("commitLogOffset").to_pylist()
    landed = Counter(offsets)
    missing = sorted(set(broker_offsets) - set(landed))
    duplicated = sum(n - 1 for n in landed.values() if n > 1)
    foreign = sorted(set(landed) - set(broker_offsets))
    wrong_ids = sum(1 for off, mid in zip(offsets, table.column("msgId").to_pylist(), strict=True)
                    if off in broker_offsets and broker_offsets[off] != mid)
    dt = DeltaTable(str(table_path))

    summary = Table(title="bronze vs. the broker's CommitLog", show_header=False, box=None, padding=(0, 1))
    summary.add_row("messages produced", str(produced))
    summary.add_row("messages in the broker's CommitLog", str(len(broker_offsets)))
    summary.add_row("rows landed in Delta", str(table.num_rows))
    summary.add_row("missing", str(len(missing)))
    summary.add_row("duplicated", str(duplicated))
    summary.add_row("rows not in the CommitLog", str(len(foreign)))
    summary.add_row("msgId mismatches", str(wrong_ids))
    summary.add_row("Delta table version", str(dt.version()))
    summary.add_row("data files (after maintenance)", str(len(dt.file_uris())))
    console.print(summary)

    workdir = table_path.parent.parent
    title, sql = EXAMPLE_QUERY
    console.print(f"[bold]{title}[/bold]:", highlight=False)
    render(query_tables(sql, tables), console=console)
    console.print(f"the same query: hareplica query --workdir {workdir} \"{sql}\"", highlight=False, soft_wrap=True)

    one = query_tables("SELECT commitLogOffset, topic, tags, keys, body FROM bronze "
                       "WHERE topic = 'OrderPaid' ORDER BY commitLogOffset LIMIT 1", tables).to_pylist()
    if one:
        event = decode_order(one[0]["body"])
        console.print(f"one order decoded from msgpack (commitLogOffset {one[0]['commitLogOffset']}, tags "
                      f"{one[0]['tags']}): {event.get('orderId')}, {event.get('status')}, "
                      f"{event.get('amountCents')} cents ({event.get('currency')}), {len(event.get('items', []))} "
                      "items", highlight=False)
    console.print(f"progress and broker lag of the run: hareplica status --workdir {workdir}", highlight=False,
                  soft_wrap=True)
    return produced == len(broker_offsets) == table.num_rows and not missing and not duplicated and not foreign \
        and not wrong_ids
