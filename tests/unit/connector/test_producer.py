"""Producer pieces that need no broker: UNIQ_KEY layout, property building and validation."""

from __future__ import annotations

import os
import time

import pytest

from connector.client.producer import MessageClientIDSetter, Producer, build_message_properties
from connector.errors import MQClientException
from streaming_apps.workload import load_body


def test_uniq_key_layout_matches_message_client_id_setter():
    setter = MessageClientIDSetter(bytes([10, 1, 2, 3]))
    a, b = setter.create_uniq_id(), setter.create_uniq_id()
    assert len(a) == 32 and a == a.upper()
    raw = bytes.fromhex(a)
    assert raw[:4] == bytes([10, 1, 2, 3])
    assert int.from_bytes(raw[4:6], "big") == os.getpid() & 0xFFFF
    t = time.localtime()
    month_start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    since_month_ms = int.from_bytes(raw[10:14], "big")
    assert abs(month_start * 1000 + since_month_ms - time.time() * 1000) < 60_000
    assert (int.from_bytes(bytes.fromhex(b)[14:16], "big") - int.from_bytes(raw[14:16], "big")) % 65536 == 1
    assert a[:20] == b[:20]  # same fixed prefix (ip, pid, per-process int)
    v6 = MessageClientIDSetter(bytes(15) + b"\x01").create_uniq_id()
    assert len(v6) == 56


def test_properties_follow_the_java_client_and_hashmap_order():
    props = build_message_properties(tags="TagA", keys=["k1", "k2"], properties={"region": "eu"},
                                     wait_store_msg_ok=False, delay_level=3, uniq_key="U")
    d = props.to_dict()
    assert d == {"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "false", "region": "eu", "DELAY": "3", "UNIQ_KEY": "U"}
    assert list(d) == props.keys() and set(props.keys()) == set(d)


@pytest.mark.parametrize("bad", [{"UNIQ_KEY": "x"}, {"TAGS": "x"}, {"": "x"}, {"a": ""}, {"a\x01": "b"},
                                 {"a": "b\x02c"}])
def test_invalid_user_properties_are_refused(bad):
    with pytest.raises(MQClientException):
        build_message_properties(tags=None, keys=None, properties=bad, wait_store_msg_ok=True, delay_level=None,
                                 uniq_key="U")


def test_load_body_is_exact_size_and_unique():
    filler = b"abc "
    assert len(load_body(7, "T", 100, filler)) == 100
    assert load_body(1, "T", 100, filler) != load_body(2, "T", 100, filler)
    assert len(load_body(123456, "LongTopicName", 5, filler)) == 5


def test_unreachable_broker_is_a_client_exception():
    with pytest.raises(MQClientException, match="connect"):
        Producer("127.0.0.1:1", connect_timeout_s=1)
    with pytest.raises(MQClientException, match="HOST:PORT"):
        Producer("no-port")
