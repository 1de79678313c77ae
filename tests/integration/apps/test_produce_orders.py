"""`hareplica produce --workload orders`: the order events the silver and gold apps decode, to a real broker stub."""

from __future__ import annotations

import pytest

from streaming_apps.apps.orders import decode_order_body
from streaming_apps.cli import main
from streaming_apps.inspect_commitlog import iter_commitlog_dir
from streaming_apps.workload import ORDER_TOPICS


def test_produce_orders_stores_decodable_order_events(broker_factory, capsys):
    broker = broker_factory("orders")
    assert main(["produce", "--broker-addr", broker.remoting_addr, "--workload", "orders", "--count", "60"]) == 0
    assert capsys.readouterr().out.startswith("sent 60/60 order events to ")
    records = [rec for _, rec in iter_commitlog_dir(broker.commitlog_dir)]
    assert len(records) == 60
    assert {r.topic for r in records} == set(ORDER_TOPICS)
    orders = [decode_order_body(r.decompressed_body()) for r in records]
    assert sorted(o["orderId"] for o in orders) == [f"ORD-{i:09d}" for i in range(60)]
    assert all(r.tags == o["status"] for r, o in zip(records, orders, strict=True))


def test_produce_load_still_needs_a_topic(capsys):
    with pytest.raises(SystemExit) as e:
        main(["produce", "--broker-addr", "127.0.0.1:1", "--count", "1"])
    assert e.value.code == 2
    assert "needs --topic" in capsys.readouterr().err


def test_produce_bad_input_is_one_line_and_exit_2_and_failures_are_counted_once_each(broker_factory, capsys):
    """Before: a bad topic or a closed port exited 1 after an empty progress bar, the same error up to 10 times
    wrapped over two lines, then a Python dict of statuses."""
    from tests.support.brokers import free_port

    port = free_port()
    assert main(["produce", "--broker-addr", f"127.0.0.1:{port}", "--topic", "T", "--count", "3"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"error: --broker-addr 127.0.0.1:{port}: ")
    broker = broker_factory("produce")
    assert main(["produce", "--broker-addr", broker.remoting_addr, "--topic", "bad topic!", "--count", "3"]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["error: --topic 'bad topic!': The specified topic contains illegal "
                                         "characters, allowing only ^[%|a-zA-Z0-9_-]+$ (topic 'bad topic!')"]
    assert main(["produce", "--broker-addr", broker.remoting_addr, "--topic", "T", "--count", "4",
                 "--body-bytes", str(5 * 1024 * 1024)]) == 1  # over the client's 4 MiB body limit
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["error: 4 sends failed: the message body size over max value, MAX: 4194304"]
    assert captured.out.startswith("sent 0/4 messages in ") and "statuses MQClientException=4" in captured.out
    assert main(["produce", "--broker-addr", broker.remoting_addr, "--topic", "T", "--count", "20"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("sent 20/20 messages in ") and " msgs/s (" in captured.out
    assert captured.out.rstrip().endswith("statuses SEND_OK=20")
