"""Generated workloads: the demo's msgpack order events and the plain load of `hareplica produce`.

Both send with :class:`connector.client.producer.Producer`; :func:`produce_load` is also what tests and
benchmarks use to fill a broker.

Order events are what the silver app decodes (issue 5): a msgpack map per message, padded with a
``note`` string so bodies span ``ORDER_BODY_MIN_BYTES``..``ORDER_BODY_MAX_BYTES``; bodies of 4096 bytes
or more are zlib-compressed by the producer as the RocketMQ 4.9.8 client does.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import msgpack

from connector.client.producer import Producer, SendResult, check_topic
from connector.errors import MQClientException

log = logging.getLogger(__name__)

ORDER_TOPICS = ("OrderCreated", "OrderPaid", "OrderShipped", "OrderAudit")
ORDER_BODY_MIN_BYTES = 100
ORDER_BODY_MAX_BYTES = 64 * 1024
REGIONS = ("eu-west", "us-east", "ap-south", "sa-east")
CURRENCIES = ("EUR", "USD", "INR", "BRL")
SKUS = tuple(f"SKU-{i:04d}" for i in range(200))


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One message to send: topic, body bytes, tags, keys and user properties."""

    topic: str
    body: bytes
    tags: str | None
    keys: list[str]
    properties: dict[str, str]


def _body_size(rng: random.Random) -> int:
    """Mostly small bodies, a tail of large ones: ~85% 100 B-2 KiB, ~12% 2-16 KiB, ~3% 16-64 KiB."""
    r = rng.random()
    if r < 0.85:
        return rng.randint(ORDER_BODY_MIN_BYTES, 2048)
    if r < 0.97:
        return rng.randint(2049, 16 * 1024)
    return rng.randint(16 * 1024 + 1, ORDER_BODY_MAX_BYTES)


def order_event(seq: int, rng: random.Random, base_ts_ms: int) -> dict:
    """The msgpack map of order event number ``seq`` (without padding)."""
    items = [{"sku": rng.choice(SKUS), "qty": rng.randint(1, 5), "priceCents": rng.randint(99, 99_999)}
             for _ in range(rng.randint(1, 4))]
    return {
        "orderId": f"ORD-{seq:09d}",
        "customerId": f"C-{rng.randint(1, 50_000):06d}",
        "status": ("CREATED", "PAID", "SHIPPED", "AUDITED")[seq % 4],
        "amountCents": sum(i["qty"] * i["priceCents"] for i in items),
        "currency": rng.choice(CURRENCIES),
        "region": rng.choice(REGIONS),
        "items": items,
        "eventTimeMs": base_ts_ms + seq,
    }


def order_events(count: int, *, seed: int = 20240611, base_ts_ms: int = 1_790_000_000_000
                 ) -> Iterator[OutgoingMessage]:
    """Yield ``count`` order-event messages spread over ``ORDER_TOPICS`` (deterministic for a seed).

    Each has tags = status, keys = orderId (plus customerId on every third), properties ``region`` and
    ``schema=order-v1``; the body is msgpack, padded with random text to a size drawn by ``_body_size``.
    """
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
    for seq in range(count):
        event = order_event(seq, rng, base_ts_ms)
        target = _body_size(rng)
        event["note"] = ""
        raw = msgpack.packb(event)
        pad = target - len(raw) - 3  # msgpack str header grows by up to 3 bytes
        if pad > 0:
            # repeated random words: realistic, compressible text
            words = "".join(rng.choice(alphabet) for _ in range(64))
            event["note"] = (words * (pad // 64 + 1))[:pad]
            raw = msgpack.packb(event)
        keys = [event["orderId"]] + ([event["customerId"]] if seq % 3 == 0 else [])
        yield OutgoingMessage(
            topic=ORDER_TOPICS[seq % len(ORDER_TOPICS)], body=raw, tags=event["status"], keys=keys,
            properties={"region": event["region"], "schema": "order-v1"})


def decode_order(body: bytes) -> dict:
    """Decode an order-event body. Raises ValueError (msgpack's errors) when it is not one."""
    event = msgpack.unpackb(body, raw=False)
    if not isinstance(event, dict) or "orderId" not in event:
        raise ValueError("body is msgpack but not an order event (no orderId)")
    return event


@dataclass
class ProduceStats:
    """Outcome of :func:`produce_load`: counts, bytes (uncompressed bodies), time (s), rates, statuses."""

    count: int
    ok: int
    failed: int
    body_bytes_total: int
    elapsed_s: float
    statuses: dict[str, int] = field(default_factory=dict)
    per_topic: dict[str, int] = field(default_factory=dict)
    #: each distinct failure message and how many sends failed with it
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def msgs_per_s(self) -> float:
        """Acknowledged messages per second (0 before any time passed)."""
        return self.ok / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        """Body megabytes (10^6 bytes, uncompressed) acknowledged per second."""
        return self.body_bytes_total / 1e6 / self.elapsed_s if self.elapsed_s > 0 else 0.0


def load_body(seq: int, topic: str, body_bytes: int, filler: bytes) -> bytes:
    """A generated body of exactly ``body_bytes`` bytes: ``"<topic>:<seq>:"`` then filler bytes."""
    head = f"{topic}:{seq}:".encode()
    if len(head) >= body_bytes:
        return head[:body_bytes]
    need = body_bytes - len(head)
    reps = need // len(filler) + 1
    return head + (filler * reps)[:need]


def produce_load(broker_addr: str, topic: str, count: int, body_bytes: int, *, topics: Sequence[str] | None = None,
                 progress: Callable[[int, int], None] | None = None, producer_group: str = "hareplica_load",
                 max_in_flight: int = 512, seed: int = 0) -> ProduceStats:
    """Send ``count`` generated messages of ``body_bytes`` bytes (``hareplica produce``), pipelined.

    Messages go round-robin over ``topics`` (default ``[topic]``), tagged ``load``, keyed ``load-<seq>``.
    Bodies are unique (a ``topic:seq:`` prefix) followed by pseudo-random text (compressible, like real
    payloads). ``progress(acked, count)`` is called about every 1% and at the end. Failures are counted
    (per distinct message in ``errors``), not raised; MQClientException is raised only when the broker
    cannot be reached at all.
    """
    names = list(topics) if topics else [topic]
    rng = random.Random(seed)
    words = ["order", "paid", "shipped", "audit", "eu", "us", "sku", "qty", "price", "note"]
    filler = " ".join(rng.choice(words) + str(rng.randrange(1000)) for _ in range(512)).encode()
    stats = ProduceStats(count=count, ok=0, failed=0, body_bytes_total=0, elapsed_s=0.0)
    statuses: Counter = Counter()
    per_topic: Counter = Counter()
    done = 0
    lock = threading.Lock()
    step = max(count // 100, 1)
    all_done = threading.Event()

    def on_done(fut: Future, name: str, size: int) -> None:
        nonlocal done
        with lock:
            exc = fut.exception()
            if exc is None:
                res: SendResult = fut.result()
                statuses[res.send_status] += 1
                stats.ok += 1
                per_topic[name] += 1
                stats.body_bytes_total += size
            else:
                stats.failed += 1
                statuses[type(exc).__name__] += 1
                stats.errors[str(exc)] = stats.errors.get(str(exc), 0) + 1
            done += 1
            current = done
        if progress is not None and (current % step == 0 or current == count):
            progress(current, count)
        if current == count:
            all_done.set()

    start = time.perf_counter()
    with Producer(broker_addr, producer_group, max_in_flight=max_in_flight, timeout_ms=30_000) as producer:
        for seq in range(count):
            name = names[seq % len(names)]
            body = load_body(seq, name, body_bytes, filler)
            try:
                fut = producer.send_async(name, body, tags="load", keys=f"load-{seq}")
            except MQClientException as exc:
                fut = Future()
                fut.set_exception(exc)
            fut.add_done_callback(lambda f, n=name, s=len(body): on_done(f, n, s))
        if count and not all_done.wait(timeout=60 + count / 1000):
            log.error("produce_load: not every send completed acked=%d count=%d", done, count)
    stats.elapsed_s = time.perf_counter() - start
    stats.statuses = dict(statuses)
    stats.per_topic = dict(per_topic)
    log.info("produce_load done count=%d ok=%d failed=%d elapsedS=%.2f msgsPerS=%.0f", count, stats.ok,
             stats.failed, stats.elapsed_s, stats.msgs_per_s)
    return stats


@contextlib.contextmanager
def progress_bar(label: str, count: int) -> Iterator[Callable[[int], None]]:
    """A progress bar of ``count`` sends on stderr while the block runs, drawn only when stderr is a terminal;
    yields ``update(acked)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda acked: None
        return
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task(label, total=count)
        yield lambda acked: progress.update(task, completed=acked)


def _refuse(line: str) -> int:
    sys.stderr.write(f"error: {line}\n")
    return 2


def _summary(what: str, count: int, ok: int, elapsed_s: float, statuses: dict[str, int], body_bytes: int | None
             ) -> str:
    rate = ok / elapsed_s if elapsed_s > 0 else 0.0
    size = "" if body_bytes is None else (f" ({body_bytes} body bytes, "
                                          f"{body_bytes / 1e6 / elapsed_s if elapsed_s > 0 else 0.0:.1f} MB/s)")
    counted = ", ".join(f"{k}={v}" for k, v in sorted(statuses.items()))
    return f"sent {ok}/{count} {what} in {elapsed_s:.2f} s: {rate:.0f} msgs/s{size}; statuses {counted or 'none'}"


def produce_command(broker_addr: str, topics: list[str], count: int, body_bytes: int) -> int:
    """`hareplica produce`: send ``count`` generated messages (a progress bar on a terminal), then print the
    summary (messages, msgs/s, MB/s, statuses) on stdout and each distinct failure once on stderr with its count.

    Returns 0 when every send was acknowledged with a sendOK-class status, 1 when some were not, 2 for bad input
    found before sending (a topic the client refuses, a broker that cannot be reached), in one line.
    """
    for topic in topics:
        try:
            check_topic(topic)
        except MQClientException as exc:
            return _refuse(f"--topic {topic!r}: {exc}")
    try:
        with progress_bar("producing", count) as update:
            stats = produce_load(broker_addr, topics[0], count, body_bytes, topics=topics,
                                 progress=lambda acked, _total: update(acked))
    except MQClientException as exc:
        return _refuse(f"--broker-addr {broker_addr}: {exc}")
    print(_summary("messages", stats.count, stats.ok, stats.elapsed_s, stats.statuses, stats.body_bytes_total))
    for message, n in stats.errors.items():
        sys.stderr.write(f"error: {n} send{'' if n == 1 else 's'} failed: {message}\n")
    return 0 if stats.failed == 0 else 1


def produce_orders_command(broker_addr: str, count: int, *, seed: int = 20240611) -> int:
    """`hareplica produce --workload orders`: send ``count`` order events (:func:`order_events`), pipelined, then
    print the summary on stdout. Returns 0 when every send was stored (SEND_OK), 1 otherwise, 2 when the broker
    cannot be reached (one line)."""
    statuses: dict[str, int] = {}
    lock = threading.Lock()

    def done(fut) -> None:
        exc = fut.exception()
        key = type(exc).__name__ if exc is not None else fut.result().send_status
        with lock:
            statuses[key] = statuses.get(key, 0) + 1

    started = time.perf_counter()
    try:
        with progress_bar("producing orders", count) as update, Producer(broker_addr, "hareplica-orders") as producer:
            futures = []
            for i, msg in enumerate(order_events(count, seed=seed)):
                fut = producer.send_async(msg.topic, msg.body, tags=msg.tags, keys=msg.keys,
                                          properties=msg.properties)
                fut.add_done_callback(done)
                futures.append(fut)
                if i % 1000 == 0:
                    update(sum(statuses.values()))
            for fut in futures:
                fut.exception(timeout=60)
            update(count)
    except MQClientException as exc:
        return _refuse(f"--broker-addr {broker_addr}: {exc}")
    print(_summary(f"order events to {', '.join(ORDER_TOPICS)}", count, statuses.get("SEND_OK", 0),
                   time.perf_counter() - started, statuses, None))
    return 0 if statuses.get("SEND_OK", 0) == count else 1
