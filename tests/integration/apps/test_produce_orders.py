"""`hareplica produce --workload orders`: the order events the silver and gold apps decode, to a real broker stub."""

from __future__ import annotations

import pytest

from streaming_apps.apps.orders import decode_order_body
from streaming_apps.cli import main
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.workload import ORDER_TOPICS


def test_produce_orders_stores_decodable_order_events(broker_factory, capsys):
    broker = broker_factory("orders")
    assert main(["produce", "--broker", broker.remoting_addr, "--workload", "orders", "--count", "60"]) == 0
    assert "sent 60 order events" in capsys.readouterr().err
    records = [rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)]
    assert len(records) == 60
    assert {r.topic for r in records} == set(ORDER_TOPICS)
    orders = [decode_order_body(r.decompressed_body()) for r in records]
    assert sorted(o["orderId"] for o in orders) == [f"ORD-{i:09d}" for i in range(60)]
    assert all(r.tags == o["status"] for r, o in zip(records, orders, strict=True))


def test_produce_load_still_needs_a_topic(capsys):
    with pytest.raises(SystemExit) as e:
        main(["produce", "--broker", "127.0.0.1:1", "--count", "1"])
    assert e.value.code == 2
    assert "needs --topic" in capsys.readouterr().err
