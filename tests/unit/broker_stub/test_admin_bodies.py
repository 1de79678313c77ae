"""broker_stub/remoting/admin_bodies.py writes the admin answers as a real 4.9.8 broker does.

The expected bytes were answered by a real 4.9.8 broker (GET_TOPIC_STATS_INFO, GET_CONSUME_STATS,
GET_CONSUMER_CONNECTION_LIST, QUERY_TOPIC_CONSUME_BY_WHO for the load of tests/interop/test_mqadmin.py). Its
map entries come in Java HashMap order, which the stub reproduces (docs/protocol.md §4.7): the bytes are equal.
"""

from __future__ import annotations

import re

from broker_stub.remoting.admin_bodies import (
    MessageQueue,
    encode_consume_stats,
    encode_consumer_connection,
    encode_group_list,
    encode_topic_stats_table,
)

REAL_TOPIC_STATS = (
    b'{"offsetTable":{{"brokerName":"broker-a","queueId":2,"topic":"MqTopic"}:{"lastUpdateTimestamp":1795632739699,'
    b'"maxOffset":2,"minOffset":0},{"brokerName":"broker-a","queueId":3,"topic":"MqTopic"}:{"lastUpdateTimestamp":'
    b'1795632739700,"maxOffset":2,"minOffset":0},{"brokerName":"broker-a","queueId":0,"topic":"MqTopic"}:'
    b'{"lastUpdateTimestamp":1795632739702,"maxOffset":3,"minOffset":0},{"brokerName":"broker-a","queueId":1,'
    b'"topic":"MqTopic"}:{"lastUpdateTimestamp":1795632739702,"maxOffset":3,"minOffset":0}}}')
REAL_CONSUME_STATS = (
    b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":2,"topic":"MqTopic"}:{"brokerOffset":2,'
    b'"consumerOffset":1,"lastTimestamp":1795632739690},{"brokerName":"broker-a","queueId":3,"topic":"MqTopic"}:'
    b'{"brokerOffset":2,"consumerOffset":1,"lastTimestamp":1795632739692},{"brokerName":"broker-a","queueId":0,'
    b'"topic":"MqTopic"}:{"brokerOffset":3,"consumerOffset":1,"lastTimestamp":1795632739662},{"brokerName":'
    b'"broker-a","queueId":1,"topic":"MqTopic"}:{"brokerOffset":3,"consumerOffset":1,"lastTimestamp":1795632739688}}}')
REAL_CONNECTION = (
    b'{"connectionSet":[{"clientAddr":"127.0.0.1:39928","clientId":"127.0.0.1@explore","language":"JAVA",'
    b'"version":409}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
    b'"messageModel":"CLUSTERING","subscriptionTable":{"MqTopic":{"classFilterMode":false,"codeSet":[],'
    b'"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"MqTopic"}}}')
_ENTRY = re.compile(rb'\{"brokerName":"[^"]*","queueId":\d+,"topic":"[^"]*"\}:\{[^{}]*\}')


def _entries(body: bytes) -> tuple[bytes, set[bytes]]:
    """(the body without its map entries, the entries)."""
    return _ENTRY.sub(b"E", body), set(_ENTRY.findall(body))


def mq(queue_id: int) -> MessageQueue:
    return MessageQueue("MqTopic", "broker-a", queue_id)


def test_topic_stats_table_is_the_real_brokers():
    ours = encode_topic_stats_table({mq(0): (0, 3, 1795632739702), mq(1): (0, 3, 1795632739702),
                                     mq(2): (0, 2, 1795632739699), mq(3): (0, 2, 1795632739700)})
    assert _entries(ours) == _entries(REAL_TOPIC_STATS)
    assert ours == REAL_TOPIC_STATS  # HashMap<MessageQueue, TopicOffset> order: queues 2, 3, 0, 1


def test_consume_stats_is_the_real_brokers():
    ours = encode_consume_stats({mq(0): (3, 1, 1795632739662), mq(1): (3, 1, 1795632739688),
                                 mq(2): (2, 1, 1795632739690), mq(3): (2, 1, 1795632739692)}, 0.0)
    assert _entries(ours) == _entries(REAL_CONSUME_STATS)
    assert ours == REAL_CONSUME_STATS
    assert encode_consume_stats({}, 0) == b'{"consumeTps":0.0,"offsetTable":{}}'


def test_consumer_connection_and_group_list_are_the_real_brokers():
    sub = {"topic": "MqTopic", "subString": "*", "subVersion": 1, "classFilterMode": False, "tagsSet": [],
           "codeSet": [], "expressionType": "TAG", "filterClassSource": None}
    ours = encode_consumer_connection([("127.0.0.1@explore", "127.0.0.1:39928", "JAVA", 409)], "CONSUME_PASSIVELY",
                                      "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", {"MqTopic": sub})
    assert ours == REAL_CONNECTION
    assert encode_group_list({"mq_cg"}) == b'{"groupList":["mq_cg"]}'
    assert encode_group_list([]) == b'{"groupList":[]}'
