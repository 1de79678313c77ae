"""Java-compatibility helpers: String.hashCode, HashMap iteration order, java.util.Properties parsing."""

from __future__ import annotations

import base64
import json

import pytest

from broker_stub.javautil import JavaHashMap, java_string_hash, parse_boolean, parse_java_properties
from connector.protocol.commitlog import PROPERTY_SEPARATOR


def _fixture_records(fixture_dir):
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            raw = base64.b64decode(rec["propertiesRawBase64"]).decode("utf-8")
            yield rec, raw, [kv.split("\x01", 1) for kv in raw.split(PROPERTY_SEPARATOR)]


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -2147483648),  # the well-known String whose hashCode is Integer.MIN_VALUE
])
def test_java_string_hash_known_values(text, expected):
    assert java_string_hash(text) == expected


def test_string_hash_counts_utf16_surrogates():
    # U+1F600 is two UTF-16 code units in Java: 0xD83D 0xDE00
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00


def test_hashmap_capacity_grows_past_load_factor():
    m = JavaHashMap()
    assert m.capacity == 0
    for i in range(12):
        m.put(f"k{i}", "v")
    assert m.capacity == 16
    m.put("k12", "v")  # 13 > 0.75 * 16
    assert m.capacity == 32
    for i in range(13):
        m.remove(f"k{i}")
    assert m.capacity == 32 and len(m) == 0


def test_hashmap_reput_keeps_place_and_remove_put_moves_to_bucket_end():
    # "Aa" and "BB" share String.hashCode 2112, so they share a bucket: order inside it is insertion order.
    m = JavaHashMap()
    m.put("Aa", "1")
    m.put("BB", "2")
    assert m.keys() == ["Aa", "BB"]
    m.put("Aa", "3")
    assert m.keys() == ["Aa", "BB"] and m.get("Aa") == "3"
    m.remove("Aa")
    m.put("Aa", "4")
    assert m.keys() == ["BB", "Aa"]


def test_hashmap_skips_null_values_when_serialised():
    m = JavaHashMap({"A": "1", "B": None})
    assert "B" in m
    assert m.to_properties_string() == "A\x011"


def test_broker_property_order_matches_every_plain_fixture_send(fixture_dir):
    """SendMessageProcessor order: parse client string, add CLUSTER, drop WAIT → the stored bytes (4.9.8)."""
    checked = 0
    for rec, raw, pairs in _fixture_records(fixture_dir):
        keys = [k for k, _ in pairs]
        if rec["topic"].startswith(("RMQ_SYS", "%", "SCHEDULE")) or "DELAY" in keys or "WAIT" in keys:
            continue
        if "REAL_TOPIC" in keys:  # committed transactional messages are rebuilt by END_TRANSACTION
            continue
        client = JavaHashMap()
        for k, v in pairs:
            if k != "CLUSTER":
                client.put(k, v)
        client.put("WAIT", "true")
        broker = JavaHashMap.from_properties_string(client.to_properties_string())
        broker.put("CLUSTER", "LocalCluster")
        broker.remove("WAIT")
        assert broker.to_properties_string() == raw, rec["commitLogOffset"]
        checked += 1
    assert checked > 400


def test_delayed_and_half_message_property_order_matches_fixture(fixture_dir):
    """WAIT is re-put (moves to its bucket end), then REAL_TOPIC/REAL_QID are added and all re-serialised."""
    checked = 0
    for rec, raw, pairs in _fixture_records(fixture_dir):
        d = dict(pairs)
        delayed = rec["topic"] == "SCHEDULE_TOPIC_XXXX" and "ORIGIN_MESSAGE_ID" not in d
        half = rec["topic"] == "RMQ_SYS_TRANS_HALF_TOPIC" and "TRANSACTION_CHECK_TIMES" not in d
        if not (delayed or half):
            continue
        client = JavaHashMap()
        for k, v in pairs:
            if k not in ("CLUSTER", "REAL_TOPIC", "REAL_QID"):
                client.put(k, v)
        broker = JavaHashMap.from_properties_string(client.to_properties_string())
        broker.put("CLUSTER", "LocalCluster")
        wait = broker.remove("WAIT")
        broker.put("WAIT", wait)
        broker.put("REAL_TOPIC", d["REAL_TOPIC"])
        broker.put("REAL_QID", d["REAL_QID"])
        assert broker.to_properties_string() == raw, rec["commitLogOffset"]
        checked += 1
    assert checked == 12 + 6


def test_parse_java_properties_syntax():
    text = (
        "# comment\n"
        "! another comment\n"
        "   brokerName = broker-a  \n"
        "brokerClusterName:LocalCluster\n"
        "listenPort 10911\n"
        "messageDelayLevel=1s 5s \\\n"
        "    10s\n"
        "path=C\\:\\\\data\\tx\n"
        "uni=\\u00fc\\u503c\n"
        "empty=\n"
        "key\\ with\\ space=v\n"
        "dup=1\n"
        "dup=2\n"
    )
    props = parse_java_properties(text)
    assert props["brokerName"] == "broker-a  "  # Java keeps trailing blanks of values
    assert props["brokerClusterName"] == "LocalCluster"
    assert props["listenPort"] == "10911"
    assert props["messageDelayLevel"] == "1s 5s 10s"
    assert props["path"] == "C:\\data\tx"
    assert props["uni"] == "ü值"
    assert props["empty"] == ""
    assert props["key with space"] == "v"
    assert props["dup"] == "2"
    assert "comment" not in " ".join(props)


def test_parse_java_properties_bad_unicode_escape_names_line():
    with pytest.raises(ValueError, match="line 2"):
        parse_java_properties("a=1\nb=\\u12G4\n")


def test_parse_boolean_is_java_lenient():
    assert parse_boolean("TRUE") and parse_boolean("true")
    assert not parse_boolean("yes") and not parse_boolean("false")
