"""Spark's own Delta Lake against this project's writers and readers: one stub master per test run of this folder.

The broker holds order events (msgpack), bodies that are not order events on the order topics, and
messages of another topic, in 96 KiB mapped files, so a read limit of one file splits the backlog into
several micro-batches. ``commitlog`` is what the broker's CommitLog files hold (offset → record), the
ground truth every table is compared with.
"""

from __future__ import annotations

import msgpack
import pytest

from broker_stub.launcher import BrokerProcess
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.workload import ORDER_TOPICS, order_events

MAPPED_FILE_SIZE = 96 * 1024
ORDERS = 300
BAD_BODIES = [b"\x01 not msgpack", msgpack.packb([1, 2]), msgpack.packb({"orderId": "ORD-X"})]


TICK_DELAY_MS = 10 * 60_000


def _tick() -> bytes:
    """An order event ten minutes after the others: it moves gold's watermark past all their windows."""
    event = msgpack.unpackb(next(order_events(1, seed=22)).body)
    event.update(orderId="ORD-TICK", eventTimeMs=event["eventTimeMs"] + TICK_DELAY_MS)
    return msgpack.packb(event)


@pytest.fixture(scope="package")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("delta-broker"), mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "delta-interop") as producer:
            futures = [producer.send_async(m.topic, m.body, tags=m.tags, keys=m.keys, properties=m.properties)
                       for m in order_events(ORDERS, seed=21)]
            futures += [producer.send_async(ORDER_TOPICS[i], body, tags="BAD") for i, body in enumerate(BAD_BODIES)]
            futures += [producer.send_async("Inventory", f"stock {i}".encode() * 20) for i in range(20)]
            futures.append(producer.send_async("OrderCreated", _tick(), tags="TICK"))
            assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
        yield b


@pytest.fixture(scope="package")
def commitlog(broker) -> dict[int, object]:
    """commitLogOffset → MessageRecord of every message the broker stored."""
    return {rec.commit_log_offset: rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)}
