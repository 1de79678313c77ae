"""``subscribe`` with a tag list on a real Spark stream: exactly the listed tags of that topic, records without
TAGS dropped, other entries whole (docs/source.md "Tags")."""

from __future__ import annotations

import pytest

from tests.integration.connector.conftest import brokers_option, run_stream

pytestmark = pytest.mark.spark


def test_tag_list_keeps_exactly_those_tags_of_its_topic(hareplica_spark, fixture_master, messages, tmp_path):
    wanted = {"TagfU", "TagQWj2", "Tag7Y"}
    expected = [m["commitLogOffset"] for m in messages
                if (m["topic"] == "FixOrders611" and m.get("tags") in wanted) or m["topic"] == "tOqx"]
    # the fixture's FixOrders611 holds records without TAGS too: those must be dropped
    assert any(m["topic"] == "FixOrders611" and m.get("tags") is None for m in messages)
    run = run_stream(hareplica_spark, tmp_path / "cp", {"brokers": brokers_option(fixture_master),
                                                        "subscribe": "FixOrders611: TagfU || TagQWj2||Tag7Y ,tOqx"})
    rows = sorted(run.rows, key=lambda r: r["commitLogOffset"])
    assert [r["commitLogOffset"] for r in rows] == expected
    assert {r["tags"] for r in rows if r["topic"] == "FixOrders611"} == wanted
    assert any(r["tags"] is None for r in rows if r["topic"] == "tOqx")  # an entry without a list keeps them


def test_sql92_subscription_fails_load_in_one_line(hareplica_spark, fixture_master):
    reader = (hareplica_spark.readStream.format("hareplica").option("brokers", brokers_option(fixture_master))
              .option("subscribe", "FixOrders611:SQL92:a > 5"))
    with pytest.raises(Exception, match="option subscribe=.*topic 'FixOrders611': SQL92 expressions are not "
                                        "supported"):
        reader.load()
