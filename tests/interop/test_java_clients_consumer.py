"""Real RocketMQ 4.9.8 Java consumers ← stub master, and ← stub slave with the master down (issue 10 §2 d).

One stub name server, a stub ASYNC_MASTER and a stub SLAVE (brokerId 1) registered with it, for the module.
The module's messages (mixed sizes; bodies ≥ 4 KiB zlib-compressed as the 4.9.8 client does) are sent by the
stub's producer. ``JavaConsumer`` (tests/java) consumes them with a ``DefaultMQPushConsumer`` and a
``DefaultLitePullConsumer``, each in a new consumer group starting at the first offset: every message exactly
once, with its body. Then the master stops (it unregisters from the name server, which keeps the topic's route
through the slave): 4.9 clients find only brokerId 1 in the route and pull from the slave; the same must hold.
"""

from __future__ import annotations

import hashlib
import random

import pytest

from broker_stub.javautil import fastjson_loads
from connector.client.producer import Producer
from connector.protocol.remoting import RemotingCommand, RequestCode
from tests.interop.java_fixtures import assert_exactly_once, wait_for_route
from tests.support.brokers import (
    BrokerProcess,
    NameServerProcess,
    max_offset,
    remoting_request,
    wait_for,
    wait_for_offset,
)
from tests.support.java_tools import JavaRun, run_java

TOPIC = "JavaConsumed"
MESSAGES = 40
MODES = ("push", "litepull")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(name server, master, slave); the slave replicates the master and syncs its topics."""
    root = tmp_path_factory.mktemp("java-consumer")
    with NameServerProcess.start(root / "namesrv") as ns, \
            BrokerProcess.start(root / "master", namesrvAddr=ns.addr) as master, \
            BrokerProcess.start(root / "slave", namesrvAddr=ns.addr, brokerRole="SLAVE", brokerId=1,
                                haMasterAddress=master.ha_addr) as slave:
        wait_for_route(ns.addr, broker_ids={0, 1})
        yield ns, master, slave


@pytest.fixture(scope="module")
def produced(cluster) -> dict[str, str]:
    """{UNIQ_KEY: body sha256} of the module's messages, once the slave holds them and the topic."""
    ns, master, slave = cluster
    rng = random.Random(20261124)
    sent = {}
    with Producer(master.remoting_addr, "pg_consumed") as producer:
        for i in range(MESSAGES):
            size = rng.choice([1, 100, 3000, 4096, 20000])
            body = (f"message {i} 数据 ".encode() * (size // 10 + 1))[:size] if size >= 4096 else rng.randbytes(size)
            result = producer.send(TOPIC, body, tags=f"T{i % 3}", keys=[f"k{i}"], properties={"n": f"值{i}"})
            assert result.send_status == "SEND_OK"
            sent[result.msg_id] = hashlib.sha256(body).hexdigest()
    wait_for_offset(slave.remoting_addr, max_offset(master.remoting_addr))

    def slave_has_topic():
        resp = remoting_request(slave.remoting_addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
        return resp.code == 0 and TOPIC in fastjson_loads(resp.body)["topicConfigTable"]
    wait_for(slave_has_topic, f"the slave to sync topic {TOPIC} from the master", timeout_s=30, interval_s=0.5)
    wait_for_route(ns.addr, TOPIC)
    return sent


def consume(ns_addr: str, mode: str, group: str, log_dir, serialize: str = "JSON") -> JavaRun:
    """Run JavaConsumer until it has MESSAGES deliveries (60 s at most). A 4.9.8 lite-pull consumer only gets its
    queues at the client's next rebalance round (every ``rocketmq.client.rebalance.waitInterval``, 20 s by
    default; a push consumer asks for one at start), so the rounds are made 1 s apart here."""
    return run_java("JavaConsumer", [f"mode={mode}", f"namesrv={ns_addr}", f"topic={TOPIC}", f"group={group}",
                                     f"count={MESSAGES}", "timeoutMs=60000"],
                    props={"rocketmq.client.rebalance.waitInterval": "1000", "rocketmq.serialize.type": serialize},
                    log_dir=log_dir, timeout_s=90,
                    check=False)


@pytest.mark.parametrize(("mode", "serialize"), [("push", "JSON"), ("litepull", "JSON"), ("push", "ROCKETMQ")])
def test_consumer_reads_master(cluster, produced, tmp_path, mode, serialize):
    """Also with ROCKETMQ request headers (``-Drocketmq.serialize.type``), which the broker answers in kind."""
    ns, _, _ = cluster
    run = consume(ns.addr, mode, f"cg_master_{mode}_{serialize}", tmp_path, serialize)
    assert_exactly_once(run, produced, TOPIC)


@pytest.fixture(scope="module")
def master_down(cluster, produced):
    """Stop the master (SIGTERM: it unregisters); the name server's route then lists only the slave."""
    ns, master, _ = cluster
    master.stop()
    wait_for_route(ns.addr, TOPIC, broker_ids={1})
    return cluster


@pytest.mark.parametrize("mode", MODES)
def test_consumer_reads_slave_with_master_down(master_down, produced, tmp_path, mode):
    ns, _, _ = master_down
    assert_exactly_once(consume(ns.addr, mode, f"cg_slave_{mode}", tmp_path), produced, TOPIC)
