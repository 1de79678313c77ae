"""``batchTransform``: named by module:function, checked on the driver, its output checked in the task."""

from __future__ import annotations

import pyarrow as pa
import pytest

from connector.errors import HAReplicaOptionError
from connector.options.parse import SourceOptions
from connector.source.task.transform import transform_batches, transform_source_columns

BROKERS = "broker-a=127.0.0.1:10912"


def upper_topics(batch: pa.RecordBatch, columns: tuple[str, ...]) -> pa.RecordBatch:
    """A transform: the topic in capitals, under the name the query's schema gives."""
    return pa.record_batch([pa.compute.utf8_upper(batch.column("topic"))], names=list(columns))


def topics_only(batch: pa.RecordBatch, columns: tuple[str, ...]) -> pa.RecordBatch:
    """A transform that says it reads only the topic column."""
    assert batch.schema.names == ["topic"]
    return upper_topics(batch, columns)


topics_only.source_columns = lambda columns: ("topic",)


def declares_junk(batch: pa.RecordBatch, columns: tuple[str, ...]) -> pa.RecordBatch:
    return batch


declares_junk.source_columns = lambda columns: ("topic", *columns)


def declares_a_value(batch: pa.RecordBatch, columns: tuple[str, ...]) -> pa.RecordBatch:
    return batch


declares_a_value.source_columns = ("topic",)


def wrong_columns(batch: pa.RecordBatch, columns: tuple[str, ...]) -> pa.RecordBatch:
    return batch.select(["topic"])


def test_a_transform_is_checked_when_the_options_are_parsed():
    spec = f"{__name__}:upper_topics"
    assert SourceOptions.from_options({"brokers": BROKERS, "batchTransform": spec}).batch_transform == spec
    assert SourceOptions.from_options({"brokers": BROKERS}).batch_transform is None
    for bad, problem in (("nocolon", "expected package.module:function"),
                         ("no_such_module_y:f", "No module named 'no_such_module_y'"),
                         (f"{__name__}:nothing_here", "nothing_here"),
                         (f"{__name__}:BROKERS", "BROKERS is not a function")):
        with pytest.raises(HAReplicaOptionError, match=f"option batchTransform='{bad}': .*{problem}"):
            SourceOptions.from_options({"brokers": BROKERS, "batchTransform": bad})


def test_the_task_applies_it_to_each_nonempty_batch_and_checks_the_columns():
    batches = [pa.record_batch([pa.array(["a", "b"])], names=["topic"]),
               pa.record_batch([pa.array([], pa.string())], names=["topic"]),
               pa.record_batch([pa.array(["c"])], names=["topic"])]
    out = list(transform_batches(iter(batches), f"{__name__}:upper_topics", ("TOPIC",)))
    assert [b.to_pydict() for b in out] == [{"TOPIC": ["A", "B"]}, {"TOPIC": ["C"]}]
    with pytest.raises(HAReplicaOptionError, match=r"returned \['topic'\], the query's schema has \['t', 'n'\]"):
        list(transform_batches(iter(batches), f"{__name__}:wrong_columns", ("t", "n")))


def test_the_direct_landing_refuses_a_transform(tmp_path):
    from connector.landing import HAReplicaLandingDataSource

    with pytest.raises(HAReplicaOptionError, match="option batchTransform=.*use landingTargets with landingSplit"):
        HAReplicaLandingDataSource({"brokers": BROKERS, "batchTransform": f"{__name__}:upper_topics",
                                    "landingPath": str(tmp_path / "t"), "landingAppId": "x"})


def test_a_transform_may_say_which_source_columns_it_reads():
    assert transform_source_columns(f"{__name__}:topics_only", ("TOPIC",)) == ("topic",)
    assert transform_source_columns(f"{__name__}:upper_topics", ("TOPIC",)) is None  # says nothing: every column
    with pytest.raises(HAReplicaOptionError, match="source_columns: not a column of the source: orderId"):
        transform_source_columns(f"{__name__}:declares_junk", ("orderId",))
    with pytest.raises(HAReplicaOptionError, match="its source_columns attribute is not callable"):
        transform_source_columns(f"{__name__}:declares_a_value", ("TOPIC",))


def test_a_bad_source_columns_fails_on_the_driver():
    from pyspark.sql.types import StringType, StructField, StructType

    from connector.source import HAReplicaDataSource

    source = HAReplicaDataSource({"brokers": BROKERS, "batchTransform": f"{__name__}:declares_junk"})
    with pytest.raises(HAReplicaOptionError, match="option batchTransform=.*not a column of the source: orderId"):
        source.streamReader(StructType([StructField("orderId", StringType())]))
    good = HAReplicaDataSource({"brokers": BROKERS, "batchTransform": f"{__name__}:topics_only"})
    assert good.streamReader(StructType([StructField("TOPIC", StringType())])).columns == ("TOPIC",)


def test_the_order_decoder_reads_the_body_its_errors_and_the_pass_through_columns_asked_for():
    from streaming_apps.apps.gold import DECODED_COLUMNS
    from streaming_apps.apps.orders import DECODED_SCHEMA

    spec = "streaming_apps.apps.orders:decode_order_batch"
    assert transform_source_columns(spec, DECODED_COLUMNS) == ("body", "decodeError")
    assert set(transform_source_columns(spec, tuple(DECODED_SCHEMA.names))) == {
        "body", "decodeError", "broker", "topic", "queueId", "queueOffset", "commitLogOffset", "msgId", "tags",
        "keys", "storeTimestamp"}
