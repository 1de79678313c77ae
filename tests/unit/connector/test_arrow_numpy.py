"""connector.arrow_numpy: the arrays equal pyarrow's own conversions, and the executors' read path never imports
pandas (pyarrow's pandas shim would, on any ``pa.array``, ``pa.scalar`` or timestamp statistic)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from connector.arrow_numpy import (
    binary_array,
    bool_array,
    bool_to_numpy,
    from_numpy,
    indices_or_null,
    numpy_dtype,
    repeat_string,
    to_numpy,
)
from tests.support.no_pandas import refuse_pandas_prelude


@pytest.mark.parametrize("arrow_type", [pa.int8(), pa.int32(), pa.int64(), pa.uint64(), pa.float64(),
                                        pa.timestamp("us"), pa.timestamp("us", tz="UTC"), pa.date32()])
def test_from_numpy_equals_pa_array(arrow_type):
    values = np.array([0, 1, 2, 100, 7], dtype=numpy_dtype(arrow_type))
    assert from_numpy(values, arrow_type).equals(pa.array(values, type=arrow_type))


def test_from_numpy_converts_the_dtype_and_shares_memory_when_it_matches():
    same = np.arange(4, dtype=np.int64)
    array = from_numpy(same, pa.int64())
    same[0] = 42  # the Arrow array is a view of the NumPy data
    assert array.to_pylist() == [42, 1, 2, 3]
    assert from_numpy(np.arange(3, dtype=np.int64), pa.int32()).to_pylist() == [0, 1, 2]


def test_from_numpy_with_a_validity_mask():
    array = from_numpy(np.array([5, 6, 7, 8, 9, 10, 11, 12, 13]), pa.int64(),
                       valid=np.array([1, 0, 1, 1, 0, 1, 1, 1, 0], dtype=bool))
    assert array.to_pylist() == [5, None, 7, 8, None, 10, 11, 12, None]
    assert array.null_count == 3
    array.validate(full=True)


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.binary()])
def test_binary_array_takes_none_as_null(arrow_type):
    values = ["a", None, "", "é", None] if arrow_type == pa.string() else [b"a", None, b"", b"\xff", None]
    array = binary_array(values, arrow_type)
    assert array.equals(pa.array(values, arrow_type)) and array.null_count == 2
    array.validate(full=True)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 70])
def test_bool_array_and_bool_to_numpy_equal_pyarrows_conversions(n):
    values = np.random.default_rng(n).random(n) < 0.5
    assert bool_array(values).equals(pa.array(values, pa.bool_()))
    assert bool_to_numpy(pa.array(values)).tolist() == values.tolist()
    sliced = pa.array(values).slice(min(3, n))  # an offset that is not a whole byte
    assert bool_to_numpy(sliced).tolist() == values[min(3, n):].tolist()
    with pytest.raises(ValueError, match="1-D"):
        bool_array(np.zeros((2, 2), dtype=bool))


def test_indices_or_null_takes_null_at_negative_indices():
    values = pa.array(["a", "b", "c"])
    assert values.take(indices_or_null(np.array([2, -1, 0, -1]))).to_pylist() == ["c", None, "a", None]


def test_to_numpy_of_a_slice_and_of_a_timestamp():
    array = pa.array(np.arange(10, dtype=np.int64)).slice(3, 4)
    assert to_numpy(array).tolist() == [3, 4, 5, 6]
    stamps = pa.array(np.array([1, 2_000_000], dtype=np.int64), type=pa.timestamp("us"))
    assert to_numpy(stamps).tolist() == [1, 2_000_000]
    assert to_numpy(pa.array([], type=pa.int32())).tolist() == []


def test_binary_and_string_arrays():
    assert binary_array([b"x", b"", b"yz"]).equals(pa.array([b"x", b"", b"yz"], type=pa.binary()))
    strings = binary_array(["é", "ab", ""], pa.string())
    assert strings.equals(pa.array(["é", "ab", ""], type=pa.string()))
    strings.validate(full=True)
    assert binary_array([]).equals(pa.array([], type=pa.binary()))
    assert repeat_string("broker-a", 3).to_pylist() == ["broker-a"] * 3


@pytest.mark.parametrize("values", [
    ("ORD-1", "", "C-000042"),  # ASCII only: one join, byte lengths from the characters
    ("ORD-1", "caf\u00e9", "\u65e5\u672c"),  # not ASCII: per-value encode
    ["a", b"raw", "b"],  # a bytes value among strings: per-value
    (), ("",), ("", ""),
])
def test_string_arrays_of_ascii_and_other_values_equal_pyarrows(values):
    as_str = [v.decode() if isinstance(v, bytes) else v for v in values]
    built = binary_array(values, pa.string())
    built.validate(full=True)
    assert built.equals(pa.array(as_str, type=pa.string()))
    assert binary_array(values).equals(pa.array([v.encode() for v in as_str], type=pa.binary()))


def test_a_lone_surrogate_is_refused_as_by_str_encode():
    with pytest.raises(UnicodeEncodeError):
        binary_array(["ok", "\ud800"], pa.string())


@pytest.mark.parametrize("call, error", [
    (lambda: from_numpy(np.arange(3), pa.string()), TypeError),
    (lambda: from_numpy(np.zeros((2, 2)), pa.float64()), ValueError),
    (lambda: from_numpy(np.arange(3), pa.int64(), valid=np.ones(2, dtype=bool)), ValueError),
    (lambda: binary_array(["a"], pa.int32()), TypeError),
    (lambda: to_numpy(pa.array([True])), TypeError),
])
def test_bad_input_is_refused(call, error):
    with pytest.raises(error):
        call()


#: Decodes the fixture CommitLog as an executor does, adds storeDate, writes the landing's Parquet files with
#: their Delta statistics, with an import hook that refuses pandas and records every attempt.
NO_PANDAS_SCRIPT = refuse_pandas_prelude("connector") + """
import tempfile
from pathlib import Path
from connector.decode.stream import CommitLogArrowDecoder
from connector.delta.parquet import TaskFileWriter
from connector.landing import DEFAULT_PARTITION_BY, with_store_date

files = sorted(Path(sys.argv[1]).iterdir())
data = files[0].read_bytes()
decoder = CommitLogArrowDecoder(0, len(data), len(data), broker="broker-a")
batches = [with_store_date(b) for b in [*decoder.feed(0, data), *decoder.finish()]]
folder = tempfile.mkdtemp()
writer = TaskFileWriter(folder, DEFAULT_PARTITION_BY, "snappy", ".snappy", 1 << 30, "part-test")
for batch in batches:
    writer.write(batch)
written = writer.close()
print(json.dumps({"rows": sum(b.num_rows for b in batches), "files": len(written),
                  "stats": [json.loads(f.stats) for f in written], "attempts": attempts}))
"""


#: Decodes records with every column bronze lands (the restore columns too) under a tag filter: one record whose
#: PROPERTIES do not re-encode (an empty pair: storedProperties holds its bytes), one with a bad body (decodeError).
NO_PANDAS_RESTORE_COLUMNS = refuse_pandas_prelude("connector") + """

from connector.decode.schema import ALL_ARROW_SCHEMA
from connector.decode.stream import CommitLogArrowDecoder
from connector.decode.topic_filter import TopicFilter
from connector.protocol.commitlog.records import encode_record
from connector.protocol.commitlog import COMPRESSED_FLAG

records, offset = [], 0
for i, (props, body, flag) in enumerate([(b"TAGS\x01a\x02KEYS\x01k1\x02", b"one", 0),
                                          (b"TAGS\x01a\x02\x02KEYS\x01k2\x02", b"two", 0),
                                          (b"TAGS\x01b\x02", b"three", 0),
                                          (b"TAGS\x01a\x02", b"not zlib", COMPRESSED_FLAG)]):
    record = encode_record(commit_log_offset=offset, topic="T", body=body, queue_offset=i, properties=props,
                           sys_flag=flag)
    records.append(record)
    offset += len(record)
data = b"".join(records)
decoder = CommitLogArrowDecoder(0, len(data), 1 << 20, broker="broker-a", columns=ALL_ARROW_SCHEMA.names,
                                topic_filter=TopicFilter(topics=frozenset({"T"}), tags=(("T", frozenset({"a"})),)))
batches = [*decoder.feed(0, data), *decoder.finish()]
seen = list(attempts)  # the decode's; to_pylist below may convert timestamps through pandas
rows = [row for b in batches for row in b.select(["body", "storedProperties", "decodeError"]).to_pylist()]
print(json.dumps({"attempts": seen, "bodies": [r["body"].decode(errors="replace") for r in rows],
                  "stored": [r["storedProperties"] is not None for r in rows],
                  "errors": [r["decodeError"] is not None for r in rows]}))
"""


def test_the_restore_columns_a_tag_filter_and_bad_rows_never_import_pandas():
    """What a bronze task decodes beyond the default columns (pandas in a worker costs it tens of MiB)."""
    run = subprocess.run([sys.executable, "-c", NO_PANDAS_RESTORE_COLUMNS], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parents[3])
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["attempts"] == [], f"pandas was imported by: {out['attempts']}"
    assert out["bodies"][:2] == ["one", "two"] and len(out["bodies"]) == 3  # tag b filtered out
    assert out["stored"] == [False, True, False]  # only the record with the empty pair keeps its bytes
    assert out["errors"] == [False, False, True]  # the body flagged compressed that does not inflate


def test_the_read_path_and_the_landing_write_never_import_pandas(fixture_dir: Path):
    run = subprocess.run([sys.executable, "-c", NO_PANDAS_SCRIPT, str(fixture_dir / "commitlog")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["attempts"] == [], f"pandas was imported by: {out['attempts']}"
    assert out["rows"] > 0 and out["files"] >= 1
    stats = out["stats"][0]
    assert stats["minValues"]["storeTimestamp"] <= stats["maxValues"]["storeTimestamp"]
