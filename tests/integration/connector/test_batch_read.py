"""``spark.read.format("hareplica")``: a batch read of ``[startingOffsets, endingOffsets)`` against the stub master
serving the golden CommitLog (issue 44, batch reads). Before: ``HAReplicaDataSource`` had no ``reader`` and
``spark.read`` failed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from connector.errors import HAReplicaOptionError
from connector.options.parse import SourceOptions
from connector.source import HAReplicaDataSource
from connector.source.batch_reader import HAReplicaBatchReader
from tests.integration.connector.conftest import FIXTURE_MAX_OFFSET, MAPPED_FILE_SIZE, brokers_option, run_stream
from tests.support.decoding import decode_commitlog_range

COLUMNS = ("commitLogOffset", "topic", "msgId", "bodyCRC", "storeSize", "body")


def batch_rows(spark, options: dict[str, str]) -> list[tuple]:
    reader = spark.read.format("hareplica")
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = reader.load().select(*COLUMNS).collect()
    return sorted((r.commitLogOffset, r.topic, r.msgId, r.bodyCRC, r.storeSize, bytes(r.body)) for r in rows)


def decoded_rows(commitlog: bytes, start: int, end: int) -> list[tuple]:
    chunks = [(at, commitlog[at:min(at + MAPPED_FILE_SIZE, end)]) for at in range(start - start % MAPPED_FILE_SIZE,
                                                                                     end, MAPPED_FILE_SIZE)]
    chunks[0] = (start, chunks[0][1][start % MAPPED_FILE_SIZE:])
    table = pa.Table.from_batches(list(decode_commitlog_range(chunks, start, end, MAPPED_FILE_SIZE,
                                                              broker="broker-a")))
    return sorted(zip(*(table.column(c).to_pylist() for c in COLUMNS), strict=True))


@pytest.mark.spark
def test_a_batch_read_of_earliest_to_latest_is_the_commitlog_as_the_decoder_reads_it(hareplica_spark, fixture_master,
                                                                                     fixture_commitlog):
    rows = batch_rows(hareplica_spark, {"brokers": brokers_option(fixture_master), "includeSystemTopics": "true",
                                        "minPartitions": "3"})
    assert rows == decoded_rows(fixture_commitlog, 0, FIXTURE_MAX_OFFSET)
    assert len(rows) == 557


@pytest.mark.spark
def test_a_range_ending_inside_a_mapped_file_equals_a_stream_of_it(hareplica_spark, fixture_master, messages,
                                                                   fixture_commitlog, tmp_path):
    """[a record of file 1, a record of file 2): every record in it once, none past the end; the stream read from the
    same start returns the same rows up to that end."""
    start = next(m["commitLogOffset"] for m in messages if m["commitLogOffset"] > MAPPED_FILE_SIZE + 1000)
    end = next(m["commitLogOffset"] for m in messages if m["commitLogOffset"] > 2 * MAPPED_FILE_SIZE + 300_000)
    options = {"brokers": brokers_option(fixture_master), "includeSystemTopics": "true",
               "startingOffsets": f'{{"broker-a": {start}}}'}
    rows = batch_rows(hareplica_spark, {**options, "endingOffsets": f'{{"broker-a": {end}}}'})
    expected = [m["commitLogOffset"] for m in messages if start <= m["commitLogOffset"] < end]
    assert [r[0] for r in rows] == expected
    assert rows == decoded_rows(fixture_commitlog, start, end)
    streamed = run_stream(hareplica_spark, tmp_path / "cp", options).rows
    assert sorted((r["commitLogOffset"], r["topic"], r["msgId"], r["bodyCRC"], r["storeSize"], bytes(r["body"]))
                  for r in streamed if r["commitLogOffset"] < end) == rows


def planned(broker, **options) -> list:
    return HAReplicaBatchReader(SourceOptions.from_options({"brokers": brokers_option(broker), **options})).partitions()


def test_an_empty_range_plans_no_partition_and_ends_default_to_the_max_offset(fixture_master):
    assert planned(fixture_master, startingOffsets="latest") == []
    parts = planned(fixture_master, endingOffsets='{"broker-a": -1}')
    assert (parts[0].start, parts[-1].end, len(parts)) == (0, FIXTURE_MAX_OFFSET, 4)  # one per mapped file


@pytest.mark.parametrize(("start", "end", "fragment"), [
    (893_405, 601_329, "end offset 601329 of broker broker-a is below its start offset 893405"),  # record starts
    (0, FIXTURE_MAX_OFFSET + 1, f"end offset {FIXTURE_MAX_OFFSET + 1} of broker broker-a is past its "
                                f"commitLogMaxOffset {FIXTURE_MAX_OFFSET}"),
    (0, 1, "end offset 1 of broker broker-a is not the first byte of a record"),
])
def test_a_bad_end_is_named_with_the_start_or_the_max(fixture_master, start, end, fragment):
    with pytest.raises(HAReplicaOptionError) as err:
        planned(fixture_master, startingOffsets=f'{{"broker-a": {start}}}', endingOffsets=f'{{"broker-a": {end}}}')
    assert str(err.value).startswith("option endingOffsets=")
    assert fragment in str(err.value)


@pytest.mark.parametrize(("option", "value"), [
    ("endingOffsets", '{"broker-a": 5}'), ("endingTimestamp", "5"), ("endingOffsetsByTimestamp", '{"broker-a": 5}'),
    ("endingOffsets", "latest"), ("endingoffsets", "LATEST"),  # issue 49: its default value was taken silently
])
def test_a_stream_refuses_the_options_of_batch_reads(option, value):
    """Any value, as Spark's Kafka source refuses endingOffsets on a stream; the line names the option and the value
    given (option names are case-insensitive, the line spells the declared name)."""
    source = HAReplicaDataSource({"brokers": "broker-a=127.0.0.1:10912", option: value})
    name = {"endingoffsets": "endingOffsets"}.get(option, option)
    with pytest.raises(HAReplicaOptionError, match=f"^option {name}='{value}': is for batch reads") as err:
        source.streamReader(source.schema())
    assert "\n" not in str(err.value)


def test_a_batch_read_refuses_a_start_inside_a_record_naming_the_option(fixture_master, messages):
    """Issue 49: it failed with a DataLossError suspecting "the checkpoint's latest offsets/<batchId> file", which a
    batch read does not have."""
    inside = messages[1]["commitLogOffset"] + 7
    with pytest.raises(HAReplicaOptionError) as err:
        planned(fixture_master, startingOffsets=f'{{"broker-a": {inside}}}')
    assert str(err.value).startswith(f"option startingOffsets={{'broker-a': {inside}}}: offset {inside} of broker "
                                     "broker-a is not the start of a record (the bytes there begin "), err.value
    assert "suspect the checkpoint" not in str(err.value)
    at_record = messages[1]["commitLogOffset"]
    assert planned(fixture_master, startingOffsets=f'{{"broker-a": {at_record}}}')[0].start == at_record


def test_a_stream_without_a_checkpoint_refuses_a_start_inside_a_record_at_its_initial_offset(fixture_master, messages):
    """The same check when a stream starts (its initial offset, asked only without a checkpoint); before, the first
    micro-batch failed with the DataLossError that suspects the checkpoint."""
    from connector.source import HAReplicaStreamReader

    inside = messages[1]["commitLogOffset"] + 7
    reader = HAReplicaStreamReader(SourceOptions.from_options({"brokers": brokers_option(fixture_master),
                                                              "startingOffsets": f'{{"broker-a": {inside}}}'}))
    try:
        with pytest.raises(HAReplicaOptionError, match=f"offset {inside} of broker broker-a is not the start of a "
                                                       "record"):
            reader.initialOffset()
    finally:
        reader.stop()


@pytest.mark.parametrize(("value", "fragment"), [
    ("soon", "must be a JSON object"),
    ('{"broker-a": -2}', r"-1 \(latest\)"),
    ('{"broker-b": 5}', "names broker 'broker-b'"),
])
def test_bad_ending_offsets_are_named(value, fragment):
    with pytest.raises(HAReplicaOptionError, match=fragment):
        SourceOptions.from_options({"brokers": "broker-a=127.0.0.1:10912", "endingOffsets": value})


@pytest.mark.spark
def test_hareplica_read_lands_a_range_into_bronze_once(fixture_master, messages, tmp_path):
    """``hareplica read`` of [a record of file 1, a record of file 2) lands exactly those messages; the same range
    again lands nothing twice (the apps' exactly-once commit, its appId from the range)."""
    import subprocess
    import sys

    from connector.delta.reading import read_table

    start = next(m["commitLogOffset"] for m in messages if m["commitLogOffset"] > MAPPED_FILE_SIZE + 1000)
    end = next(m["commitLogOffset"] for m in messages if m["commitLogOffset"] > 2 * MAPPED_FILE_SIZE + 300_000)
    cmd = [sys.executable, "-m", "streaming_apps.cli", "read", "--workdir", str(tmp_path / "w"), "--brokers",
           brokers_option(fixture_master), "--starting-offsets", f'{{"broker-a": {start}}}', "--ending-offsets",
           f'{{"broker-a": {end}}}', "--option", "includeSystemTopics=true"]
    first = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    expected = sorted(m["commitLogOffset"] for m in messages if start <= m["commitLogOffset"] < end)
    assert f"{len(expected)} rows landed" in first.stdout, first.stdout
    # Spark's WARN lines go to the log file the command names, as hareplica run's do (issue 49: on the console)
    log_file = tmp_path / "w" / "logs" / "read.log"
    assert [x for x in first.stderr.splitlines() if x.strip()] == [f"Spark's and py4j's log: {log_file}"], first.stderr
    assert " WARN " in log_file.read_text(errors="replace")
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "already landed, nothing written" in again.stdout, again.stdout
    table = read_table(str(tmp_path / "w" / "tables" / "bronze"), columns=["commitLogOffset"])
    assert sorted(table.column("commitLogOffset").to_pylist()) == expected
    # a range overlapping what bronze holds is refused before Spark, naming the records; before, it landed them again
    later = next(m["commitLogOffset"] for m in messages if m["commitLogOffset"] > end)
    overlapping = [*cmd[:cmd.index("--starting-offsets")], "--starting-offsets", f'{{"broker-a": {expected[-1]}}}',
                   "--ending-offsets", f'{{"broker-a": {later}}}', *cmd[cmd.index("--option"):]]
    refused = subprocess.run(overlapping, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stdout + refused.stderr[-3000:]
    (line,) = refused.stderr.strip().splitlines()
    assert f"already holds 1 record of broker-a at commitLogOffset {expected[-1]}..{expected[-1]}" in line, line
    table = read_table(str(tmp_path / "w" / "tables" / "bronze"), columns=["commitLogOffset"])
    assert sorted(table.column("commitLogOffset").to_pylist()) == expected


def test_hareplica_read_refuses_a_bad_range_in_one_line_before_spark(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "streaming_apps.cli", "read", "--workdir", str(tmp_path / "w"),
                             "--brokers", "broker-a=127.0.0.1:10912", "--ending-offsets", "soon"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: option endingOffsets='soon': must be a JSON object like {\"broker-a\": 12345}"], result.stderr
    assert not (tmp_path / "w").exists()
