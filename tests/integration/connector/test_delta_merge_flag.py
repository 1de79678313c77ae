"""``FinalizeRows``: the flag of a batch's own rows computed in Arrow on the driver (the ``deltalake`` sink's gold)
equals the one Spark computes (the ``delta`` sink's), value for value and in its Spark type (docs/delta.md "4. The
apps")."""

from __future__ import annotations

import datetime as dt

import pytest

from connector.delta.merge import FinalizeRows

pytestmark = pytest.mark.spark

BASE = dt.datetime(2026, 9, 21, 14, 14, tzinfo=dt.UTC)


def _us(t: dt.datetime) -> int:
    return int(t.timestamp() * 1_000_000)


@pytest.mark.parametrize("session_zone", ["UTC", "Asia/Kolkata"])
def test_the_arrow_flag_is_sparks(spark, session_zone):
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", session_zone)
    try:
        ends = [BASE + dt.timedelta(minutes=m) for m in range(4)]
        df = spark.createDataFrame([(i, e) for i, e in enumerate(ends)] + [(9, None)], "id long, windowEnd timestamp")
        not_null = df.where("windowEnd IS NOT NULL").selectExpr("id", "coalesce(windowEnd, now()) AS windowEnd")
        assert df.schema["windowEnd"].nullable and not not_null.schema["windowEnd"].nullable
        for frame in (df, not_null):
            for cut_off in (ends[1], ends[1] + dt.timedelta(microseconds=1), ends[1] - dt.timedelta(microseconds=1)):
                finalize = FinalizeRows("final", "windowEnd", _us(cut_off))
                from_spark = finalize.flagged_spark(frame)
                rows, schema = finalize.flagged_arrow(frame.toArrow(), frame.schema)
                assert schema == from_spark.schema
                want = {r["id"]: r["final"] for r in from_spark.collect()}
                got = dict(zip(rows["id"].to_pylist(), rows["final"].to_pylist(), strict=True))
                assert got == want
                assert sum(1 for v in got.values() if v) == (2 if cut_off >= ends[1] else 1)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
