"""Tag lists in ``subscribe`` (``Topic:TagA || TagB``): parsing by RocketMQ 4.9.8's FilterAPI rule, SQL92
refused, and the decoder keeping exactly the records whose stored TAGS is in the list (docs/source.md "Tags")."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from connector.decode import kernels as decode_kernels
from connector.decode.stream import CommitLogArrowDecoder
from connector.decode.topic_filter import TopicFilter
from connector.errors import HAReplicaOptionError
from connector.options.parse import parse_decode_settings
from connector.options.settings import DecodeSettings
from connector.protocol.commitlog import encode_record

OPTION = "subscribe"


def _settings(value: str) -> DecodeSettings:
    return parse_decode_settings({OPTION.lower(): value})


def test_tag_expressions_split_at_double_bars_and_trim_like_filter_api():
    s = _settings(" Orders : TagA ||TagB|| ,Payments, Audit:*, Refunds:")
    assert s.topics == frozenset({"Orders", "Payments", "Audit", "Refunds"})
    assert s.topic_tags == (("Orders", frozenset({"TagA", "TagB"})),)  # '*' and empty keep every record
    # a topic named twice: the union of its lists; with an entry that has none, every record
    assert _settings("A:x,A:y || z").topic_tags == (("A", frozenset({"x", "y", "z"})),)
    assert _settings("A:x,A").topic_tags == ()
    # a single bar is part of a tag, as in RocketMQ (the split is on "||" only)
    assert _settings("A:x|y").topic_tags == (("A", frozenset({"x|y"})),)


@pytest.mark.parametrize(("value", "problem"), [
    ("Orders:SQL92:a > 5", "topic 'Orders': SQL92 expressions are not supported"),
    ("Orders:sql92: TRUE", "SQL92 expressions are not supported"),
    ("Orders:a = 'x'", "marks a SQL92 expression"),
    ("Orders:color IN ('red')", "marks a SQL92 expression"),
    ("Orders: || ", "names no tag"),
    # issue 49: taken as one tag 'a IS NOT NULL', silently matching nothing
    ("Orders:a IS NOT NULL", "topic 'Orders': 'a IS NOT NULL' is not a tag list"),
    ("Orders:TagA || a BETWEEN 1 AND 3", "'TagA || a BETWEEN 1 AND 3' is not a tag list"),
    ("Orders:TagA TagB", "'TagA TagB' is not a tag list"),
    ("Bad Topic:TagA", "'Bad Topic' is not a RocketMQ topic name"),
])
def test_sql92_and_malformed_expressions_are_refused_naming_the_option(value, problem):
    with pytest.raises(HAReplicaOptionError, match="^option subscribe=") as err:
        _settings(value)
    assert problem in str(err.value) and "\n" not in str(err.value)
    if "is not a tag list" in problem:
        assert "SQL92 filters are not supported" in str(err.value)


def test_tag_mask_keeps_listed_tags_and_drops_records_without_tags():
    f = TopicFilter(topics=frozenset({"a", "b"}), tags=(("a", frozenset({"T1", "T2"})),))
    topics = pa.array(["a", "a", "a", "a", "b", "b"])
    tags = pa.array(["T1", "T3", None, "T2", None, "T9"])
    assert f.filters_tags(topics) and not f.filters_tags(pa.array(["b"]))
    assert f.tag_mask(topics, tags).tolist() == [True, False, False, True, True, True]
    assert TopicFilter(topics=frozenset({"a"})).tag_mask(topics, tags) is None
    clone = pickle.loads(pickle.dumps(f))
    assert clone == f and clone.tag_mask(topics, tags).tolist() == [True, False, False, True, True, True]
    with pytest.raises(ValueError, match="tag lists name topics of its topic list"):
        TopicFilter(topics=frozenset({"b"}), tags=(("a", frozenset({"T1"})),))


def _record(offset: int, topic: str, tags: str | None, body: bytes) -> bytes:
    properties = {} if tags is None else {"TAGS": tags}
    properties["KEYS"] = body.decode()
    return encode_record(commit_log_offset=offset, topic=topic, body=body, properties=properties)


@pytest.mark.parametrize("kernels", ["numpy", "native"])
def test_decoder_keeps_exactly_the_listed_tags(kernels, monkeypatch):
    """Mixed topics and tags through the decoder: the columns built (tags, keys, body) are the kept rows'."""
    specs = [("Orders", "TagA"), ("Orders", None), ("Orders", "TagC"), ("Payments", None), ("Orders", "TagB"),
             ("Audit", "TagA"), ("Orders", "taga")]
    data = b""
    for i, (topic, tags) in enumerate(specs):
        data += _record(len(data), topic, tags, f"m{i}".encode())
    settings = _settings("Orders:TagA || TagB,Payments")
    chosen = {"native": decode_kernels.NATIVE, "numpy": decode_kernels.NUMPY}[kernels]
    assert chosen is not None, "connector.decode._decode_kernel is not built"
    monkeypatch.setattr(decode_kernels, "_active", chosen)
    decoder = CommitLogArrowDecoder(0, len(data), 1 << 20, broker="b", settings=settings,
                                    topic_filter=TopicFilter.of(settings))
    batches = [*decoder.feed(0, data), *decoder.finish()]
    table = pa.Table.from_batches(batches)
    assert table.column("body").to_pylist() == [b"m0", b"m3", b"m4"]
    assert table.column("tags").to_pylist() == ["TagA", None, "TagB"]
    assert table.column("keys").to_pylist() == ["m0", "m3", "m4"]
    assert table.column("topic").to_pylist() == ["Orders", "Payments", "Orders"]
