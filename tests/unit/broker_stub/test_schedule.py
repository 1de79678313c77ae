"""ScheduleMessageService's re-put records and delayOffset.json (broker_stub.store.schedule) against the
golden 4.9.8 data: the fixture's real broker delivered delayed messages (levels 1-3), so the stub must
build the same stored fields from the same SCHEDULE_TOPIC_XXXX records."""

from __future__ import annotations

import base64

import pytest

from broker_stub.store.schedule import decode_delay_offsets, time_up_message
from connector.protocol.config_files import encode_delay_offsets


def test_time_up_message_equals_the_real_brokers_re_put(golden):
    rows, record = golden
    scheduled = {r["uniqKey"]: r for r in rows if r["topic"] == "SCHEDULE_TOPIC_XXXX"}
    delivered = [r for r in rows if r["topic"] != "SCHEDULE_TOPIC_XXXX" and r["uniqKey"] in scheduled
                 and r["properties"].get("REAL_TOPIC") == r["topic"]]
    assert len(delivered) >= 6
    for row in delivered:
        msg = time_up_message(record(scheduled[row["uniqKey"]]["commitLogOffset"]))
        assert msg.properties_string.encode("utf-8") == base64.b64decode(row["propertiesRawBase64"])
        assert (msg.topic, msg.queue_id, msg.sys_flag, msg.flag) == (row["topic"], row["queueId"], row["sysFlag"],
                                                                     row["flag"])
        assert (msg.born_timestamp, str(msg.born_host), str(msg.store_host), msg.reconsume_times) == (
            row["bornTimestamp"], row["bornHost"], row["storeHost"], row["reconsumeTimes"])
        assert msg.body == base64.b64decode(row["bodyBase64"])
        assert msg.delay_time_level == 0  # the re-put is not delayed again
        assert "DELAY" in row["properties"]  # ... though the stored string keeps DELAY, as 4.9.8 writes it


def test_delay_offsets_round_trip_in_fastjsons_layout():
    text = encode_delay_offsets({2: 3, 1: 4})
    assert text == '{\n\t"offsetTable":{1:4,2:3\n\t}\n}'
    assert decode_delay_offsets(text) == {1: 4, 2: 3}
    assert decode_delay_offsets('{"offsetTable":{"1":7}}') == {1: 7}
    assert decode_delay_offsets(encode_delay_offsets({})) == {}
    with pytest.raises(ValueError, match="offsetTable"):
        decode_delay_offsets("{}")


def test_time_up_message_names_a_missing_real_topic(golden):
    rows, record = golden
    rec = record(next(r for r in rows if r["topic"] == "SCHEDULE_TOPIC_XXXX")["commitLogOffset"])
    rec.properties_raw = rec.properties_raw.replace(b"REAL_TOPIC", b"XREAL_TOPI")
    with pytest.raises(KeyError, match="REAL_TOPIC"):
        time_up_message(rec)
