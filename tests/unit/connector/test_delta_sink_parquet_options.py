"""The sink's Parquet writer options: dictionary encoding only where values repeat, statistics unchanged.

The task writer runs here without Spark (no TaskContext): files land in ``tmp_path`` and are read back.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import (
    BinaryType,
    DateType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connector.delta.options import DeltaSinkOptions
from connector.delta.parquet import DICTIONARY_SAMPLE_ROWS, TaskFileWriter, dictionary_columns, parquet_writer_options
from connector.delta.sink import DeltaLakeStreamWriter
from connector.delta.stats import file_stats_json

ROWS = 6000
UTC = dt.UTC


def _bronze_like(n: int = ROWS, start: int = 0) -> pa.Table:
    """Columns shaped like bronze's: unique offsets/ids/bodies, repeating topic/queueId/hosts, a map, nulls."""
    base = dt.datetime(2026, 1, 1, 23, 59, 59, 500_000, tzinfo=UTC)
    ids = range(start, start + n)
    return pa.table({
        "topic": pa.array([f"Topic{i % 3}" for i in ids]),
        "queueId": pa.array([i % 4 for i in ids], pa.int32()),
        "commitLogOffset": pa.array([i * 1187 for i in ids], pa.int64()),
        "bodyCRC": pa.array([(i * 2654435761) % 2**31 for i in ids], pa.int32()),
        "storeTimestamp": pa.array([base + dt.timedelta(milliseconds=i // 10) for i in ids],
                                   pa.timestamp("us", tz="UTC")),
        "msgId": pa.array([f"{i:032X}" for i in ids]),
        "tags": pa.array([None if i % 5 == 0 else f"tag{i % 2}" for i in ids]),
        "properties": pa.array([[("KEYS", f"k{i}"), ("CLUSTER", "DefaultCluster")] for i in ids],
                               pa.map_(pa.string(), pa.string())),
        "body": pa.array([None if i % 997 == 0 else f"{i}:".encode().ljust(200, b".") for i in ids], pa.binary()),
    })


def test_dictionary_only_for_repeating_primitive_columns_never_for_binary():
    table = _bronze_like()
    chosen = dictionary_columns(table.schema, table)
    assert {"topic", "queueId", "storeTimestamp", "tags"} <= set(chosen)
    assert not {"commitLogOffset", "bodyCRC", "msgId", "body"} & set(chosen)
    # a map's leaves are judged on the entries under the sampled rows, named as pyarrow names them: the keys
    # repeat, half the values are unique (as bronze's UNIQ_KEY makes a third of them)
    assert "properties.key_value.key" in chosen and "properties.key_value.value" not in chosen
    # without a sample every non-binary leaf is a candidate (pyarrow's default minus payloads)
    assert set(dictionary_columns(table.schema, None)) == set(chosen) | {"commitLogOffset", "bodyCRC", "msgId",
                                                                        "properties.key_value.value"}


def test_nested_leaves_are_judged_on_the_values_under_the_sampled_rows():
    n = DICTIONARY_SAMPLE_ROWS + 4000
    table = pa.table({
        "s": pa.array([{"few": i % 3, "many": i} for i in range(n)]),
        "l": pa.array([[i % 2, i] for i in range(n)]),
        "m": pa.array([[("k", str(i))] for i in range(n)], pa.map_(pa.string(), pa.string())),
        "d": pa.array(["x", "y"] * (n // 2)).dictionary_encode(),
    })
    assert dictionary_columns(table.schema, table) == ["s.few", "m.key_value.key", "d"]
    # only the sampled rows count, even in a slice whose map entries start past the first rows
    repeating_later = pa.table({"m": pa.array([[("k", str(i))] for i in range(n)] + [[("k", "v")]] * n,
                                              pa.map_(pa.string(), pa.string()))}).slice(n)
    assert dictionary_columns(repeating_later.schema, repeating_later) == ["m.key_value.key", "m.key_value.value"]
    # and so in a slice of a struct's field and of a list's elements
    sliced = pa.table({"s": pa.array([{"f": i} for i in range(n)] + [{"f": 1}] * n),
                       "l": pa.array([[i] for i in range(n)] + [[1]] * n)}).slice(n)
    assert dictionary_columns(sliced.schema, sliced) == ["s.f", "l.list.element"]


def test_only_the_first_sample_rows_decide():
    unique_after_sample = pa.table({"v": pa.array([7] * DICTIONARY_SAMPLE_ROWS + list(range(5000)), pa.int64())})
    assert dictionary_columns(unique_after_sample.schema, unique_after_sample) == ["v"]
    unique_from_start = pa.table({"v": pa.array(range(DICTIONARY_SAMPLE_ROWS + 10), pa.int64())})
    assert dictionary_columns(unique_from_start.schema, unique_from_start) == []


def _write(table: pa.Table, options: dict, row_group_size: int) -> tuple[pq.FileMetaData, pa.Table, set]:
    collector: list[pq.FileMetaData] = []
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema, metadata_collector=collector, **options) as w:
        w.write_table(table, row_group_size=row_group_size)
    data = sink.getvalue()
    footer = pq.ParquetFile(pa.BufferReader(data)).metadata
    dictionary = {footer.row_group(0).column(i).path_in_schema for i in range(footer.num_columns)
                  if "RLE_DICTIONARY" in footer.row_group(0).column(i).encodings}
    return collector[0], pq.read_table(pa.BufferReader(data)), dictionary


def test_delta_statistics_and_values_equal_pyarrow_defaults():
    table = _bronze_like()
    default_meta, default_read, default_dict = _write(table, {"compression": "snappy"}, 2500)
    tuned_meta, tuned_read, tuned_dict = _write(table, parquet_writer_options(table.schema, "snappy", table), 2500)
    assert tuned_read.equals(default_read) and tuned_read.equals(table)
    assert file_stats_json(tuned_meta, table.schema) == file_stats_json(default_meta, table.schema)
    stats = json.loads(file_stats_json(tuned_meta, table.schema))
    assert stats["nullCount"]["body"] == sum(1 for i in range(ROWS) if i % 997 == 0)
    assert stats["minValues"]["msgId"] == f"{0:032X}" and stats["maxValues"]["msgId"] == f"{ROWS - 1:032X}"
    assert "msgId" in default_dict and "msgId" not in tuned_dict and "topic" in tuned_dict


def _spark_schema() -> StructType:
    return StructType([
        StructField("topic", StringType()), StructField("queueId", IntegerType()),
        StructField("commitLogOffset", LongType()), StructField("bodyCRC", IntegerType()),
        StructField("storeTimestamp", TimestampType()), StructField("msgId", StringType()),
        StructField("tags", StringType()), StructField("properties", MapType(StringType(), StringType())),
        StructField("body", BinaryType()), StructField("storeDate", DateType()),
    ])


def _dated(table: pa.Table) -> pa.Table:
    dates = [ts.date() for ts in table.column("storeTimestamp").to_pylist()]
    return table.append_column("storeDate", pa.array(dates, pa.date32()))


def test_task_writer_files_read_back_with_the_sink_statistics(tmp_path):
    table = _dated(_bronze_like())
    opts = DeltaSinkOptions.from_options({"path": str(tmp_path / "t"), "appId": "app", "partitionBy": "storeDate"})
    writer = DeltaLakeStreamWriter(opts, _spark_schema(), ("storeDate",), batch_id=3)
    message = writer.write(iter(table.to_batches(max_chunksize=1000)))
    by_date = {f.partition_values["storeDate"]: f for f in message.files}
    assert set(by_date) == {"2026-01-01", "2026-01-02"}  # the rows cross midnight
    read_back = []
    for info in message.files:
        path = tmp_path / "t" / info.path
        footer = pq.ParquetFile(path).metadata
        assert info.num_records == footer.num_rows and info.size == path.stat().st_size
        assert info.stats == file_stats_json(footer, table.schema.remove(table.schema.get_field_index("storeDate")))
        encodings = {footer.row_group(0).column(i).path_in_schema: footer.row_group(0).column(i).encodings
                     for i in range(footer.num_columns)}
        assert "RLE_DICTIONARY" not in encodings["msgId"] and "RLE_DICTIONARY" not in encodings["body"]
        assert "RLE_DICTIONARY" in encodings["topic"]
        read_back.append(pq.read_table(path).append_column(
            "storeDate", pa.array([dt.date.fromisoformat(info.partition_values["storeDate"])] * info.num_records,
                                  pa.date32())))
    merged = pa.concat_tables(read_back).sort_by("commitLogOffset")
    assert merged.equals(table.sort_by("commitLogOffset"))


def test_discarding_a_file_before_its_first_row_group_deletes_it(tmp_path):
    table = _dated(_bronze_like(100))
    (tmp_path / "t").mkdir()
    writer = TaskFileWriter(str(tmp_path / "t"), ["storeDate"], "snappy", ".snappy", 1 << 30, "part-x")
    writer.write(table.to_batches()[0])
    assert writer.open_files and all(f.writer is None for f in writer.open_files.values())  # buffered only
    assert list((tmp_path / "t").rglob("*.parquet"))
    writer.discard()
    assert not list((tmp_path / "t").rglob("*.parquet"))
