"""The four SlaveSynchronize answers decoded (connector.protocol.broker_metadata): fastjson text as 4.9.8 writes it
(bare integer keys), here written by the broker stub's own encoders, and one-line refusals of what is not a table."""

from __future__ import annotations

import re

import pytest

from broker_stub.metadata import ConsumerOffsetManager, SubscriptionGroupManager
from connector.protocol.broker_metadata import (
    decode_consumer_offsets,
    decode_delay_offsets,
    decode_subscription_groups,
    decode_topic_configs,
)


def test_consumer_offsets_topic_at_group_keys_and_bare_integer_queue_ids(tmp_path):
    manager = ConsumerOffsetManager(tmp_path / "consumerOffset.json")
    manager.commit_offset("g1", "TopicA", 0, 5)
    manager.commit_offset("g1", "TopicA", 3, 7)
    manager.commit_offset("g2", "%RETRY%g2", 0, 1)
    body = manager.encode().encode()
    assert b"{0:5" in body or b",0:5" in body  # fastjson's bare integer keys, which json.loads refuses
    assert decode_consumer_offsets(body) == {("g1", "TopicA"): {0: 5, 3: 7}, ("g2", "%RETRY%g2"): {0: 1}}


def test_subscription_groups_and_topic_configs_keep_rocketmq_field_names(tmp_path):
    groups = SubscriptionGroupManager(tmp_path / "subscriptionGroup.json", auto_create=True)
    groups.find("orders_cg")
    decoded = decode_subscription_groups(groups.encode())
    assert decoded["orders_cg"]["groupName"] == "orders_cg"
    assert decoded["orders_cg"]["retryMaxTimes"] == 16 and decoded["orders_cg"]["consumeEnable"] is True
    body = ('{"dataVersion":{"counter":2,"timestamp":1},"topicConfigTable":{"T":{"order":false,"perm":6,'
            '"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}')
    assert decode_topic_configs(body)["T"]["readQueueNums"] == 4


def test_delay_offsets_level_to_offset_and_an_empty_body_is_an_empty_table():
    assert decode_delay_offsets(b'{"offsetTable":{1:3,2:0,18:9}}') == {1: 3, 2: 0, 18: 9}
    assert decode_delay_offsets(b"") == {}
    assert decode_delay_offsets(b'{"offsetTable":{}}') == {}


@pytest.mark.parametrize(("decode", "body", "message"), [
    (decode_consumer_offsets, b'{"offsetTable":{"no-separator":{0:1}}}', "key 'no-separator' is not topic@group"),
    (decode_consumer_offsets, b'{"offsetTable":{"T@g":{0:"x"}}}', "offsetTable['T@g'] is not a queueId"),
    (decode_topic_configs, b'{"dataVersion":{}}', "GET_ALL_TOPIC_CONFIG answer has no topicConfigTable object"),
    (decode_subscription_groups, b"not json", "GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer is not JSON"),
    (decode_delay_offsets, b'{"offsetTable":{"a":1}}', "GET_ALL_DELAY_OFFSET answer: offsetTable is not"),
])
def test_a_body_that_is_not_the_table_is_refused_in_one_line(decode, body, message):
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        decode(body)
    assert "\n" not in str(err.value)
