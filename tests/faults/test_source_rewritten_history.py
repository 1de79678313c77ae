"""``format("hareplica")`` after the broker rewrote history under a checkpoint (docs/source.md "Rewritten
history"): rows landed, the query stopped, the stub master was SIGKILLed and lost the tail of its CommitLog
(the bytes zeroed from a record boundary before the checkpoint, as a crash before flushing leaves them),
then new messages were written over those offsets — ending exactly at the old checkpoint (aligned) or
not (unaligned). ``failOnDataLoss=true`` fails naming the broker and range; ``false`` goes on at the next
real record boundary with exactly the CommitLog's records from there, and no format error."""

from __future__ import annotations

import random

import pytest
from pyspark.errors import StreamingQueryException

from connector.client.producer import Producer
from connector.protocol.commitlog import MessageRecord
from tests.integration.connector.conftest import brokers_option, run_stream
from tests.support.brokers import max_offset, read_commitlog

pytestmark = pytest.mark.spark

FILE = 64 * 1024
LOST = 5  # records the broker loses


@pytest.fixture(scope="module")
def source_spark(spark):
    """The shared Spark session with format("hareplica") registered."""
    from streaming_apps.spark_session import register_data_sources

    register_data_sources(spark)
    return spark


def produce(broker, indexes, *, salt: int = 0, extra: int = 0) -> None:
    """Messages whose stored size depends only on the index (bodies < 4 KiB: never compressed); ``salt``
    changes their bytes, ``extra`` their length."""
    with Producer(broker.remoting_addr, timeout_ms=15000) as producer:
        for i in indexes:
            body = f"m{i}:".encode() + random.Random(i * 7919 + salt).randbytes(200 + (i * 131) % 1800 + extra)
            producer.send("orders", body, keys=f"k{i}", properties={"seq": f"{i:06d}"})


def messages(broker) -> list[MessageRecord]:
    return [r for r in read_commitlog(broker.commitlog_dir) if isinstance(r, MessageRecord)]


def lose_tail(broker, cut: int) -> None:
    """SIGKILL the broker, zero its CommitLog from ``cut`` (a record boundary) to the end, restart it."""
    broker.kill9()
    for path in sorted(broker.commitlog_dir.iterdir()):
        start = int(path.name)
        data = bytearray(path.read_bytes())
        if start + len(data) <= cut:
            continue
        at = max(cut - start, 0)
        data[at:] = bytes(len(data) - at)
        path.write_bytes(bytes(data))
    broker.restart()
    assert max_offset(broker.remoting_addr) == cut


@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "unaligned"])
def test_rewritten_history_fails_naming_the_range_or_resynchronises(source_spark, broker_factory, tmp_path, aligned):
    master = broker_factory("master", mappedFileSizeCommitLog=FILE)
    produce(master, range(30))
    options = {"brokers": brokers_option(master)}
    landed = run_stream(source_spark, tmp_path / "cp", options)
    assert len(landed.rows) == 30
    checkpoint = landed.end_offsets[-1]["broker-a"]
    old = messages(master)
    assert checkpoint == old[-1].commit_log_offset + old[-1].store_size
    cut = old[-LOST].commit_log_offset
    lose_tail(master, cut)
    # new messages over the lost offsets: the same sizes (the last one ends exactly at the checkpoint) or
    # 7 bytes longer each (the checkpoint falls inside a new record); then more, past the checkpoint
    produce(master, range(30 - LOST, 30), salt=1, extra=0 if aligned else 7)
    produce(master, range(30, 40), salt=1)
    new = messages(master)
    starts = [r.commit_log_offset for r in new]
    assert (checkpoint in starts) == aligned

    with pytest.raises(StreamingQueryException,
                       match=rf"broker broker-a: the CommitLog was rewritten below the query's offset {checkpoint}: "
                             rf"the record \[{old[-1].commit_log_offset}, {checkpoint}\) it was taken after") as info:
        run_stream(source_spark, tmp_path / "cp", options)
    # the whole rewritten range, from the first lost record, and how to find its landed rows (issue 22 item 5)
    assert (f"Rows already landed for [{cut}, {checkpoint}) describe messages the broker no longer holds "
            f"(broker = 'broker-a' AND commitLogOffset >= {cut} AND commitLogOffset < {checkpoint})") in str(info.value)

    rest = run_stream(source_spark, tmp_path / "cp", {**options, "failOnDataLoss": "false"})
    resume = min(s for s in starts if s >= checkpoint)
    expected = [r for r in new if r.commit_log_offset >= resume]
    got = sorted(rest.rows, key=lambda r: r["commitLogOffset"])
    assert [(r["commitLogOffset"], r["bodyCRC"]) for r in got] == [(r.commit_log_offset, r.body_crc) for r in expected]
    assert rest.end_offsets[-1]["broker-a"] == max_offset(master.remoting_addr)


def test_a_checkpoint_of_the_old_form_is_still_read(source_spark, broker_factory, tmp_path):
    """Offsets written before fingerprints existed (``{"broker-a": N}``): the query goes on exactly where
    they say, and its next offsets carry fingerprints."""
    import json

    master = broker_factory("master", mappedFileSizeCommitLog=FILE)
    produce(master, range(20))
    options = {"brokers": brokers_option(master)}
    first = run_stream(source_spark, tmp_path / "cp", options)
    assert len(first.rows) == 20
    for path in (tmp_path / "cp" / "offsets").iterdir():  # rewrite every offset as the previous version did
        if path.name.isdigit():
            lines = path.read_text().splitlines()
            offset = json.loads(lines[-1])
            assert "@lastRecord" in offset
            lines[-1] = json.dumps({"broker-a": offset["broker-a"]})
            path.write_text("\n".join(lines))
            # that version's checkpoint writer (Spark's FileContext default) kept no Hadoop .crc beside it
            path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    produce(master, range(20, 35))
    second = run_stream(source_spark, tmp_path / "cp", options)
    assert sorted(int(r["properties"]["seq"]) for r in second.rows) == list(range(20, 35))
    last = json.loads(second.progress[-1]["sources"][0]["endOffset"])
    assert last["@lastRecord"]["broker-a"][0] + last["@lastRecord"]["broker-a"][1] == last["broker-a"]


def test_a_checkpoint_offset_inside_an_intact_record_names_the_checkpoint(source_spark, broker_factory, tmp_path):
    """A checkpoint's latest ``offsets/N`` file edited to an offset inside a record the broker still holds intact
    (a corrupted or foreign file, issue 42): the broker's history shows no rewrite, so the error names the
    checkpoint's offset file as the suspect, not a rewritten CommitLog."""
    import json

    master = broker_factory("master", mappedFileSizeCommitLog=FILE)
    produce(master, range(20))
    options = {"brokers": brokers_option(master)}
    assert len(run_stream(source_spark, tmp_path / "cp", options).rows) == 20
    record = messages(master)[12]
    inside = record.commit_log_offset + 10
    latest = max((p for p in (tmp_path / "cp" / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    lines = latest.read_text().splitlines()
    offset = json.loads(lines[-1])
    offset["broker-a"] = inside  # its "@lastRecord" still ends at the real offset: the file is inconsistent
    lines[-1] = json.dumps(offset)
    latest.write_text("\n".join(lines))
    latest.with_name(f".{latest.name}.crc").unlink(missing_ok=True)
    with pytest.raises(StreamingQueryException) as info:
        run_stream(source_spark, tmp_path / "cp", options)
    text = str(info.value)
    assert (f"broker broker-a: the query's offset {inside} is not a record boundary: it falls inside the record "
            f"[{record.commit_log_offset}, {record.commit_log_offset + record.store_size}) (storeTimestamp "
            f"{record.store_timestamp}), which the broker holds intact") in text
    assert "suspect the checkpoint's latest offsets/<batchId> file" in text
    assert "rewritten below" not in text
