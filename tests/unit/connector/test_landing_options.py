"""format("hareplica-landing") options: split from the source's, checked on the driver before any task runs."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from connector.errors import DeltaSinkConfigError, HAReplicaOptionError
from connector.landing import landing_writer, split_landing_options, with_store_date
from connector.options.parse import SourceOptions


def test_landing_options_are_split_from_the_source_options_case_insensitively():
    source, sink = split_landing_options({"brokers": "broker-a=127.0.0.1:10912", "LandingPath": "/t",
                                          "landingappid": "app", "landingPartitionBy": "",
                                          "landingTargetFileSize": "1000", "landingCompression": "zstd",
                                          "maxBytesPerTrigger": "5"})
    assert source == {"brokers": "broker-a=127.0.0.1:10912", "maxBytesPerTrigger": "5"}
    assert sink == {"path": "/t", "appId": "app", "partitionBy": "", "targetFileSize": "1000",
                    "compression": "zstd"}
    SourceOptions.from_options(source)  # what is left is a valid hareplica option map
    with pytest.raises(HAReplicaOptionError, match="unknown option"):
        SourceOptions.from_options({**source, "landingPathh": "/t"})  # a misspelt landing option is not swallowed


def test_a_new_table_is_partitioned_by_store_date_unless_asked_otherwise(tmp_path):
    assert landing_writer({"path": str(tmp_path / "a"), "appId": "x"}).partition_by == ("storeDate",)
    assert landing_writer({"path": str(tmp_path / "b"), "appId": "x", "partitionBy": ""}).partition_by == ()
    assert landing_writer({"path": str(tmp_path / "c"), "appId": "x", "partitionBy": "topic"}).partition_by == (
        "topic",)


@pytest.mark.parametrize("options, message", [
    ({"appId": "x"}, "needs the table location"),
    ({"path": "/tmp/t"}, 'needs option "appId"'),
    ({"path": "/tmp/t", "appId": "x", "partitionBy": "nope"}, "nope"),
])
def test_bad_landing_options_fail_on_the_driver(options, message):
    with pytest.raises(DeltaSinkConfigError, match=message):
        landing_writer(options)


def test_store_date_is_the_utc_date_of_store_timestamp_also_before_1970():
    ts = [dt.datetime(2026, 11, 22, 23, 59, 59, 999000, tzinfo=dt.UTC), dt.datetime(1969, 12, 31, 23, 0, tzinfo=dt.UTC)]
    batch = pa.record_batch([pa.array(ts, type=pa.timestamp("us", tz="UTC"))], names=["storeTimestamp"])
    out = with_store_date(batch)
    assert out.schema.names == ["storeTimestamp", "storeDate"]
    assert out.column("storeDate").to_pylist() == [dt.date(2026, 11, 22), dt.date(1969, 12, 31)]


def test_a_bronze_table_from_before_decode_error_gets_the_column_and_keeps_its_rows(tmp_path):
    from deltalake import DeltaTable, write_deltalake

    from connector.errors import DeltaSchemaMismatchError
    from connector.landing import add_new_source_columns
    from connector.protocol.commitlog import encode_record
    from tests.support.decoding import decode_commitlog_range

    record = encode_record(commit_log_offset=0, topic="t", body=b"old row", store_timestamp=1_790_000_000_000)
    batch = with_store_date(next(decode_commitlog_range([(0, record)], 0, len(record), 1 << 20, broker="b")))
    old = pa.Table.from_batches([batch]).drop_columns(["decodeError"])  # what an earlier version landed
    path = str(tmp_path / "bronze")
    write_deltalake(path, old, partition_by=["storeDate"])
    with pytest.raises(DeltaSchemaMismatchError, match="stream columns not in the table: decodeError"):
        landing_writer({"path": path, "appId": "x"})
    assert add_new_source_columns(path) == ["decodeError", "storedBody", "storedProperties", "recordFormat",
                                            "mappedFileSizeCommitLog"]
    assert add_new_source_columns(path) == [] and add_new_source_columns(str(tmp_path / "none")) == []
    landing_writer({"path": path, "appId": "x"})  # the table now takes the stream's rows
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert [(r["body"], r["decodeError"]) for r in rows] == [(b"old row", None)]


def _targets(tmp_path) -> str:
    import json

    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType()), StructField("name", StringType())])
    return json.dumps([{"path": str(tmp_path / "a"), "appId": "x", "schema": schema.jsonValue(), "partitionBy": []},
                       {"path": str(tmp_path / "b"), "appId": "x", "schema": schema.jsonValue(),
                        "partitionBy": ["name"]}])


def test_several_tables_take_a_target_list_and_an_importable_split(tmp_path):
    from connector.landing import landing_writers

    spec = "streaming_apps.tables.split:make_split"
    writers, split = landing_writers({"targets": _targets(tmp_path), "split": spec})
    assert [(w.options.table_uri.rsplit("/", 1)[-1], w.partition_by) for w in writers] == [("a", ()), ("b", ("name",))]
    assert split == (spec, None)


@pytest.mark.parametrize("options, message", [
    ({"targets": "[]", "split": "json:loads"}, r"option landingTargets='\[\]': expected a non-empty JSON list"),
    ({"targets": '[{"path": "/tmp/t"}]', "split": "json:loads"}, "entry 0 has no appId, schema"),
    ({"targets": "TARGETS"}, "needs landingSplit"),
    ({"targets": "TARGETS", "split": "json:loads", "path": "/tmp/t"},
     "give the tables' options inside it, not as path"),
    ({"targets": "TARGETS", "split": "no_such_module_x:f"}, "option landingSplit='no_such_module_x:f': No module"),
    ({"targets": "TARGETS", "split": "json"}, "expected package.module:function"),
    ({"targets": "TARGETS", "split": "json:no_such_function"}, "option landingSplit='json:no_such_function'"),
    ({"path": "/tmp/t", "appId": "x", "split": "json:loads"}, "needs landingTargets"),
])
def test_bad_target_lists_and_splits_fail_on_the_driver_naming_the_option(tmp_path, options, message):
    from connector.landing import landing_writers

    options = {k: _targets(tmp_path) if v == "TARGETS" else v for k, v in options.items()}
    with pytest.raises(HAReplicaOptionError, match=message):
        landing_writers(options)
