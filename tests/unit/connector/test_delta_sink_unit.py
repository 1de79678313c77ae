"""Pure parts of the Delta sink: options, partition values and folders, schema checks, Parquet→Delta stats."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connector.delta.file_names import (
    SINK_FILE_NAME,
    SINK_FILE_PREFIX,
    batch_file_prefix,
    data_file_name,
    task_file_prefix,
)
from connector.delta.options import DEFAULT_TARGET_FILE_SIZE_BYTES, DeltaSinkOptions, app_id_from_checkpoint
from connector.delta.partitions import (
    HIVE_DEFAULT_PARTITION,
    escape_partition_path,
    partition_folder,
    partition_value_string,
)
from connector.delta.schema import check_partition_columns, check_schema_matches
from connector.delta.sink import DeltaLakeDataSource
from connector.delta.stats import file_stats_json
from connector.errors import DeltaSchemaMismatchError, DeltaSinkConfigError, HAReplicaError

SCHEMA = StructType([StructField("id", LongType()), StructField("topic", StringType()),
                     StructField("body", BinaryType())])


# --- options ---------------------------------------------------------------------------------------
def test_options_defaults_and_case_insensitive_keys(tmp_path):
    opts = DeltaSinkOptions.from_options({"PATH": str(tmp_path / "t"), "APPID": " bronze "})
    assert opts.table_uri == str(tmp_path / "t")
    assert opts.app_id == "bronze"
    assert opts.partition_by is None
    assert opts.target_file_size == DEFAULT_TARGET_FILE_SIZE_BYTES
    assert (opts.compression, opts.codec_infix) == ("snappy", ".snappy")


def test_options_parse_partition_by_size_and_codec(tmp_path):
    opts = DeltaSinkOptions.from_options({"path": str(tmp_path), "appId": "a", "partitionBy": " topic , day ",
                                          "targetFileSize": "1048576", "compression": "ZSTD"})
    assert opts.partition_by == ("topic", "day")
    assert opts.target_file_size == 1048576
    assert (opts.compression, opts.codec_infix) == ("zstd", ".zstd")
    assert DeltaSinkOptions.from_options({"path": "x", "appId": "a", "compression": "none"}).codec_infix == ""


def test_relative_path_becomes_absolute_and_uris_are_kept():
    assert DeltaSinkOptions.from_options({"path": "rel/t", "appId": "a"}).table_uri == os.path.abspath("rel/t")
    assert DeltaSinkOptions.from_options({"path": "s3://b/t/", "appId": "a"}).table_uri == "s3://b/t"


@pytest.mark.parametrize("options, words", [
    ({"appId": "a"}, ["path", ".start("]),
    ({"path": "  ", "appId": "a"}, ["path"]),
    ({"path": "/t"}, ["appId", "/t", "checkpointLocation"]),
    ({"path": "/t", "appId": " "}, ["appId"]),
    ({"path": "/t", "appId": "a", "targetFileSize": "big"}, ["targetFileSize", "'big'"]),
    ({"path": "/t", "appId": "a", "targetFileSize": "0"}, ["targetFileSize"]),
    ({"path": "/t", "appId": "a", "compression": "lzo"}, ["compression", "'lzo'"]),
    ({"path": "/t", "appId": "a", "partitionBy": "a,,b"}, ["partitionBy"]),
    ({"path": "/t", "appId": "a", "partitionBy": "a,a"}, ["partitionBy"]),
])
def test_bad_options_raise_clear_errors(options, words):
    with pytest.raises(DeltaSinkConfigError) as e:
        DeltaSinkOptions.from_options(options)
    for w in words:
        assert w in str(e.value)
    assert isinstance(e.value, HAReplicaError)


def test_data_source_name_and_option_errors_before_touching_the_table(tmp_path):
    assert DeltaLakeDataSource.name() == "deltalake"
    with pytest.raises(DeltaSinkConfigError, match="appId"):
        DeltaLakeDataSource({"path": str(tmp_path / "t")}).streamWriter(SCHEMA, False)
    with pytest.raises(DeltaSinkConfigError, match="append"):
        DeltaLakeDataSource({"path": str(tmp_path / "t"), "appId": "a"}).streamWriter(SCHEMA, True)
    assert not (tmp_path / "t").exists()


def test_app_id_from_checkpoint_is_stable_and_distinct(tmp_path):
    a = app_id_from_checkpoint(str(tmp_path / "cp"), "bronze")
    assert a == app_id_from_checkpoint(str(tmp_path / "cp") + "/", "bronze")
    assert a != app_id_from_checkpoint(str(tmp_path / "cp2"), "bronze")
    assert a.startswith("bronze-") and len(a) == len("bronze-") + 16


def test_batch_file_prefix_separates_apps_and_batches():
    assert batch_file_prefix("a", 7).startswith("part-") and batch_file_prefix("a", 7).endswith("-b000007-")
    assert batch_file_prefix("a", 7) != batch_file_prefix("b", 7)
    assert not batch_file_prefix("a", 1234567).startswith(batch_file_prefix("a", 123456))


@pytest.mark.parametrize("batch_id", [7, None])
@pytest.mark.parametrize("codec_infix", [".snappy", ""])
def test_written_names_match_the_patterns_maintenance_and_table_locations_read(batch_id, codec_infix):
    prefix = task_file_prefix("app", batch_id, 3, 1)
    name = data_file_name(prefix, codec_infix)
    assert SINK_FILE_NAME.match(name) and SINK_FILE_PREFIX.match(name)
    assert name.startswith(prefix + "-") and name.endswith(f"{codec_infix}.parquet")
    assert (batch_id is not None) == name.startswith(batch_file_prefix("app", 7))
    assert data_file_name(prefix, codec_infix) != name
    assert not SINK_FILE_NAME.match(name.replace("part-", "part-x", 1))
    assert not SINK_FILE_NAME.match(name[:-len(".parquet")])


# --- partition values and folders ------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [
    (None, None),
    ("", None),
    ("TopicTest", "TopicTest"),
    (True, "true"),
    (False, "false"),
    (-42, "-42"),
    (1.5, "1.5"),
    (decimal.Decimal("12.50"), "12.50"),
    (dt.date(2024, 2, 29), "2024-02-29"),
    (dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=8))), "2024-01-01T19:04:05.000006Z"),
    (dt.datetime(2024, 1, 2, 3, 4, 5, 6), "2024-01-02 03:04:05.000006"),
])
def test_partition_value_serialization(value, expected):
    assert partition_value_string(value) == expected


def test_partition_folders_escape_like_hive():
    assert escape_partition_path("a/b=c%d:e") == "a%2Fb%3Dc%25d%3Ae"
    assert escape_partition_path("with space-ok_ü") == "with space-ok_ü"
    assert escape_partition_path("\x01#?") == "%01%23%3F"
    assert partition_folder(["topic", "day"], ["T/1", None]) == f"topic=T%2F1/day={HIVE_DEFAULT_PARTITION}"
    assert partition_folder([], []) == ""


# --- schema checks ---------------------------------------------------------------------------------
def _delta_schema_json(schema: StructType) -> str:
    return schema.json()


def test_schema_match_ignores_order_and_nullability():
    table = StructType([StructField("topic", StringType(), False), StructField("id", LongType()),
                        StructField("body", BinaryType())])
    check_schema_matches("/t", _delta_schema_json(table), [], SCHEMA, None)
    check_schema_matches("/t", _delta_schema_json(table), ["topic"], SCHEMA, None)


def test_schema_mismatch_names_every_column():
    table = StructType([StructField("id", IntegerType()), StructField("topic", StringType()),
                        StructField("queueId", IntegerType()),
                        StructField("props", MapType(StringType(), StringType()))])
    stream = StructType([StructField("id", LongType()), StructField("topic", StringType()),
                         StructField("body", BinaryType()),
                         StructField("props", MapType(StringType(), LongType()))])
    with pytest.raises(DeltaSchemaMismatchError) as e:
        check_schema_matches("/tables/bronze", _delta_schema_json(table), [], stream, None)
    msg = str(e.value)
    assert "/tables/bronze" in msg
    assert "table columns missing in the stream: queueId" in msg
    assert "stream columns not in the table: body" in msg
    assert "column id is integer in the table but long in the stream" in msg
    assert "column props is map<string,string> in the table but map<string,long> in the stream" in msg
    assert e.value.missing_in_stream == ["queueId"]
    assert e.value.missing_in_table == ["body"]
    assert set(e.value.type_mismatches) == {"id", "props"}


def test_partition_columns_must_match_the_table():
    with pytest.raises(DeltaSchemaMismatchError, match=r"partitionBy \['topic'\] differs .* \['id'\]"):
        check_schema_matches("/t", SCHEMA.json(), ["id"], SCHEMA, ["topic"])


def test_partition_column_validation():
    check_partition_columns("/t", SCHEMA, ["topic"])
    with pytest.raises(DeltaSinkConfigError, match="partition column nope .* not a column"):
        check_partition_columns("/t", SCHEMA, ["nope"])
    with pytest.raises(DeltaSinkConfigError, match="partition column body .* has type binary"):
        check_partition_columns("/t", SCHEMA, ["body"])
    nested = StructType([StructField("tags", ArrayType(StringType())), StructField("x", LongType())])
    with pytest.raises(DeltaSinkConfigError, match="array<string>"):
        check_partition_columns("/t", nested, ["tags"])
    with pytest.raises(DeltaSinkConfigError, match="every column"):
        check_partition_columns("/t", StructType([StructField("id", LongType())]), ["id"])
    check_partition_columns("/t", StructType([StructField("d", DecimalType(10, 2)), StructField("ts", TimestampType()),
                                              StructField("x", LongType())]), ["d", "ts"])


# --- statistics ------------------------------------------------------------------------------------
def _footer(table: pa.Table, row_group_size: int) -> pq.FileMetaData:
    collector: list[pq.FileMetaData] = []
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema, metadata_collector=collector) as w:
        w.write_table(table, row_group_size=row_group_size)
    return collector[0]


def test_stats_merge_row_groups_and_follow_delta_rules():
    utc = dt.UTC
    long_a, long_z = "a" * 40, "z" * 40
    table = pa.table({
        "id": pa.array([5, None, -3, 9], pa.int64()),
        "small": pa.array([1, 2, 3, 4], pa.int8()),
        "f": pa.array([float("nan"), 1.5, -0.5, None], pa.float64()),
        "s": pa.array(["m", long_a, long_z, "b"]),
        "ts": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=utc), None,
                        dt.datetime(2024, 1, 1, 0, 0, 1, 999001, tzinfo=utc),
                        dt.datetime(2024, 1, 1, 0, 0, 0, 2000, tzinfo=utc)], pa.timestamp("us", "UTC")),
        "ntz": pa.array([dt.datetime(2024, 5, 1, 1, 2, 3)] * 4, pa.timestamp("us")),
        "d": pa.array([dt.date(2024, 1, 3), dt.date(2024, 1, 1), None, dt.date(2024, 1, 2)]),
        "dec": pa.array([decimal.Decimal("0.10"), decimal.Decimal("0.30"), None, None], pa.decimal128(10, 2)),
        "flag": pa.array([True, False, None, True]),
        "body": pa.array([b"\x00", b"\xff", None, b""]),
        "st": pa.array([{"x": 1, "y": "q"}, None, {"x": 7, "y": None}, {"x": -2, "y": "a"}],
                       pa.struct([("x", pa.int32()), ("y", pa.string())])),
        "props": pa.array([[("k", "v")], None, [], [("a", "b")]], pa.map_(pa.string(), pa.string())),
        "tags": pa.array([["t"], None, [], ["u"]], pa.list_(pa.string())),
        "after": pa.array([10, 20, 30, 40], pa.int32()),
    })
    stats = json.loads(file_stats_json(_footer(table, row_group_size=2), table.schema))
    assert stats["numRecords"] == 4
    mins, maxs, nulls = stats["minValues"], stats["maxValues"], stats["nullCount"]
    assert (mins["id"], maxs["id"], nulls["id"]) == (-3, 9, 1)
    assert (mins["small"], maxs["small"]) == (1, 4)
    assert (mins["f"], maxs["f"], nulls["f"]) == (-0.5, 1.5, 1)
    assert mins["s"] == long_a[:32] and "s" not in maxs
    assert mins["ts"] == "2024-01-01T00:00:00.001Z"  # floored to ms
    assert maxs["ts"] == "2024-01-01T00:00:02.000Z"  # ceiled to ms: still an upper bound
    assert mins["ntz"] == maxs["ntz"] == "2024-05-01T01:02:03.000"
    assert (mins["d"], maxs["d"], nulls["d"]) == ("2024-01-01", "2024-01-03", 1)
    assert mins["dec"] <= 0.10 and maxs["dec"] >= 0.30 and nulls["dec"] == 2
    assert "flag" not in mins and nulls["flag"] == 1
    assert "body" not in mins and "body" not in maxs and nulls["body"] == 1
    assert mins["st"] == {"x": -2, "y": "a"} and maxs["st"] == {"x": 7, "y": "q"}
    assert nulls["st"] == {"x": 1, "y": 2}
    assert "props" not in mins and "props" not in nulls and "tags" not in nulls
    assert (mins["after"], maxs["after"], nulls["after"]) == (10, 40, 0)  # leaf order survives maps and lists


def test_decimal_bounds_are_widened_outward():
    values = [decimal.Decimal("0.10"), decimal.Decimal("0.30")]
    table = pa.table({"dec": pa.array(values, pa.decimal128(10, 2))})
    stats = json.loads(file_stats_json(_footer(table, 10), table.schema))
    assert decimal.Decimal(stats["minValues"]["dec"]) <= values[0]
    assert decimal.Decimal(stats["maxValues"]["dec"]) >= values[1]


def test_stats_of_all_null_and_empty_columns():
    table = pa.table({"id": pa.array([None, None], pa.int64()), "s": pa.array([None, None], pa.string())})
    stats = json.loads(file_stats_json(_footer(table, 1), table.schema))
    assert stats == {"numRecords": 2, "minValues": {}, "maxValues": {}, "nullCount": {"id": 2, "s": 2}}


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_timestamp_stats_of_every_unit_read_raw_are_widened_outward(unit):
    # 2024-01-01T00:00:00.0015 and 00:00:01.9990005 in ns, truncated to the column's unit
    raw = {"ms": [1704067200001, 1704067201999], "us": [1704067200001500, 1704067201999000],
           "ns": [1704067200001500000, 1704067201999000500]}[unit]
    table = pa.table({"ts": pa.array(raw, pa.timestamp(unit, "UTC"))})
    stats = json.loads(file_stats_json(_footer(table, 10), table.schema))
    assert stats["minValues"]["ts"] == "2024-01-01T00:00:00.001Z"
    assert stats["maxValues"]["ts"] == ("2024-01-01T00:00:02.000Z" if unit == "ns" else "2024-01-01T00:00:01.999Z")


@pytest.mark.parametrize("raw", [
    [253402300799999999, 0],  # 9999-12-31T23:59:59.999999: no millisecond ceiling in Python's datetime
    [253402300800000000, 0],  # 10000-01-01: valid in Arrow and Parquet, beyond Python's datetime
    [-62135596800000001, 0],  # before 0001-01-01
])
def test_timestamp_stats_beyond_pythons_datetime_are_left_out_not_an_error(raw):
    table = pa.table({"ts": pa.array(raw, pa.timestamp("us", "UTC")), "n": pa.array([1, 2])})
    stats = json.loads(file_stats_json(_footer(table, 10), table.schema))
    assert stats["numRecords"] == 2 and stats["maxValues"]["n"] == 2
    assert "ts" not in stats["maxValues"] or "ts" not in stats["minValues"]


def test_a_batch_splits_by_partition_values_in_order_of_first_appearance(tmp_path):
    from connector.delta.parquet import TaskFileWriter

    writer = TaskFileWriter(str(tmp_path), ["day", "topic"], "snappy", ".snappy", 1 << 30, "part-test")
    batch = pa.record_batch({"day": pa.array([dt.date(2024, 1, 2), dt.date(2024, 1, 1), None, dt.date(2024, 1, 2)]),
                             "topic": pa.array(["b", "a", "a", "b"]), "n": pa.array([0, 1, 2, 3])})
    parts = writer._split(batch)
    assert [(key, part.column("n").to_pylist()) for key, part in parts] == [
        ((dt.date(2024, 1, 2), "b"), [0, 3]), ((dt.date(2024, 1, 1), "a"), [1]), ((None, "a"), [2])]
    one = batch.slice(0, 1)
    assert writer._split(one) == [((dt.date(2024, 1, 2), "b"), one)]
    assert writer._split(batch.slice(0, 0)) == []
