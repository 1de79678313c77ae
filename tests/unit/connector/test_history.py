"""connector.source.driver.offsets on the golden 4.9.8 CommitLog: fingerprints, the last record before an offset, the
next record boundary after an arbitrary offset, and check_start on unchanged and rewritten histories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connector.source.driver.batches import MAX_OFFSET_KEY
from connector.source.driver.offsets import (
    FINGERPRINT_KEY,
    RecordFingerprint,
    check_start,
    end_fingerprint,
    fingerprints_of,
    first_boundary_at_or_after,
    last_record_before,
    starts_record,
)

SIZE = 1048576


@pytest.fixture(scope="module")
def commitlog(fixture_dir: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted((fixture_dir / "commitlog").iterdir()))


@pytest.fixture(scope="module")
def messages(fixture_dir: Path) -> list[dict]:
    with open(fixture_dir / "messages.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def fp(m: dict) -> RecordFingerprint:
    return RecordFingerprint(m["commitLogOffset"], m["storeSize"], m["storeTimestamp"], m["bodyCRC"])


def test_offsets_carry_fingerprints_and_the_old_form_has_none():
    assert fingerprints_of({"broker-a": 123}) == {}
    value = {"broker-a": 10, FINGERPRINT_KEY: {"broker-a": [3, 7, 1795329712271, -5], "b": "junk"}}
    assert fingerprints_of(json.loads(json.dumps(value))) == {"broker-a": RecordFingerprint(3, 7, 1795329712271, -5)}
    assert RecordFingerprint(3, 7, 1, 2).to_json() == [3, 7, 1, 2] and RecordFingerprint(3, 7, 1, 2).end == 10


def test_last_record_before_every_boundary_including_file_ends(commitlog, messages):
    for i in range(1, len(messages), 37):
        end = messages[i]["commitLogOffset"]
        lo = max(0, end - 65536)
        assert RecordFingerprint.of(last_record_before(commitlog[lo:end], lo, SIZE)) == fp(messages[i - 1])
    # a mapped-file end: the record before the END_FILE blank of file 0 (blank at 997099)
    last_in_file0 = max((m for m in messages if m["commitLogOffset"] < SIZE), key=lambda m: m["commitLogOffset"])
    lo = SIZE - 200000
    assert RecordFingerprint.of(last_record_before(commitlog[lo:SIZE], lo, SIZE)) == fp(last_in_file0)
    assert last_record_before(commitlog[SIZE - 1000:SIZE], SIZE - 1000, SIZE) is None  # the record starts earlier


def test_next_boundary_from_inside_a_record(commitlog, messages):
    starts = [m["commitLogOffset"] for m in messages]
    for i in range(0, len(messages) - 1, 29):
        inside = starts[i] + 17
        expected = starts[i + 1] if starts[i + 1] < (starts[i] // SIZE + 1) * SIZE else (starts[i] // SIZE + 1) * SIZE
        window = commitlog[inside:inside + 300000]
        assert first_boundary_at_or_after(window, inside, inside, SIZE) == expected
    assert first_boundary_at_or_after(commitlog[997100:SIZE], 997100, 997100, SIZE) is None  # inside the blank
    assert starts_record(commitlog[997099:997099 + 64], 997099, SIZE)  # the blank reaches the file end
    assert starts_record(commitlog[3691:3691 + 64], 3691, SIZE) and not starts_record(commitlog[3692:3756], 3692, SIZE)


class Held:
    """CommitLog bytes held in memory, read as the driver's HA reads would return them; ``reads`` records each."""

    def __init__(self, data: bytes):
        self.data = data
        self.reads: list[tuple[int, int]] = []

    def read(self, lo: int, hi: int) -> bytes:
        self.reads.append((lo, hi))
        return self.data[lo:hi]


def reader(data: bytes) -> Held:
    return Held(data)


def test_check_start_accepts_an_unchanged_history(commitlog, messages):
    m, nxt = messages[40], messages[41]["commitLogOffset"]
    assert check_start(reader(commitlog), nxt, fp(m), 0, len(commitlog), SIZE) is None
    assert check_start(reader(commitlog), nxt, None, 0, len(commitlog), SIZE) is None  # old offsets: start checked


def test_check_start_finds_a_rewrite_aligned_and_unaligned(commitlog, messages):
    m, nxt = messages[40], messages[41]["commitLogOffset"]
    changed = bytearray(commitlog)
    changed[m["commitLogOffset"] + 8] ^= 0xFF  # same size, another BODYCRC: an aligned rewrite
    found = check_start(reader(bytes(changed)), nxt, fp(m), 0, len(changed), SIZE)
    assert found is not None and found.resume == nxt and found.lost_from == m["commitLogOffset"]
    assert f"the record [{m['commitLogOffset']}, {nxt}) it was taken after" in found.describe("broker-a")
    # history shifted by 40 bytes: the old boundary is now inside a record
    shifted = commitlog[:m["commitLogOffset"]] + commitlog[m["commitLogOffset"] + 40:]
    found = check_start(reader(shifted), nxt, fp(m), 0, len(shifted), SIZE)
    assert found is not None and f"offset {nxt} is no longer the start of a record" in found.problems
    # the moved records keep their old PHYSICALOFFSET, so none is self-consistent: resume at the next file
    assert nxt < SIZE and found.resume == SIZE


def test_end_fingerprint_reads_no_lower_than_allowed(commitlog, messages):
    held = Held(commitlog)
    begin, end = messages[10]["commitLogOffset"], messages[300]["commitLogOffset"]
    assert end_fingerprint(held, begin, end, SIZE, lowest_report=end) == fp(messages[299])
    assert held.reads[-1][0] >= begin and held.reads[-1][1] == end
    assert end_fingerprint(held, begin, begin, SIZE, lowest_report=end) is None


class Bytes:
    """What the broker holds, changeable by a test."""

    def __init__(self, data: bytes):
        self.data = data


@pytest.fixture
def fixture_reader(monkeypatch):
    """A stream reader whose broker is ``Bytes``: its samples come from ``view``, its HA reads (the fetch layer's
    ``fetch_range`` behind ``DriverReads``) from the bytes, read from the server ``DriverReads`` picks."""
    from connector.options.parse import SourceOptions
    from connector.source import HAReplicaStreamReader
    from connector.source.driver.brokers import BrokerSetView, ServerOffsets

    def make(broker_bytes: Bytes, **opts):
        def fetch_range(fetch, ha_addr, lo, hi, *, broker, server_is_slave, protocol="classic"):
            assert (ha_addr, broker, server_is_slave, protocol) == ("127.0.0.1:10912", "broker-a", False, "classic")
            return broker_bytes.data[lo:hi]

        monkeypatch.setattr("connector.source.driver.brokers.fetch_range", fetch_range)
        r = HAReplicaStreamReader(SourceOptions.from_options({"brokers": "broker-a=127.0.0.1:10912", **opts}))
        view = BrokerSetView("broker-a", SIZE)
        view.master = ServerOffsets(r.options.brokers[0], "master", 0, len(broker_bytes.data))
        r.planner.brokers.views["broker-a"] = view
        r.planner.brokers.refresh = lambda broker, slaves=None: view
        return r

    return make


def test_the_reader_puts_fingerprints_in_offsets_and_checks_them_at_restart(commitlog, messages, fixture_reader):
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from connector.errors import DataLossError

    commitlog = commitlog[:3402931]  # commitLogMaxOffset of the fixture (the rest of file 3 is unwritten)
    broker = Bytes(commitlog)
    m = messages[40]
    start = {"broker-a": m["commitLogOffset"]}  # an old-form checkpoint: only the offset
    end = fixture_reader(broker).latestOffset(start, ReadAllAvailable())
    assert end == {"broker-a": len(commitlog), FINGERPRINT_KEY: {"broker-a": fp(messages[-1]).to_json()},
                   MAX_OFFSET_KEY: {"broker-a": len(commitlog)}}
    # restart (a new reader) from a checkpoint whose record was rewritten with the same size: aligned
    checkpoint = {"broker-a": m["commitLogOffset"] + m["storeSize"], FINGERPRINT_KEY: {"broker-a": fp(m).to_json()}}
    changed = bytearray(commitlog)
    changed[m["commitLogOffset"] + 8] ^= 0xFF
    broker.data = bytes(changed)
    with pytest.raises(DataLossError, match=rf"broker broker-a: the CommitLog was rewritten below the query's offset "
                                            rf"{checkpoint['broker-a']}: the record \[{m['commitLogOffset']}, "):
        fixture_reader(broker).latestOffset(checkpoint, ReadAllAvailable())
    lenient = fixture_reader(broker, failOnDataLoss="false")
    assert lenient.latestOffset(checkpoint, ReadAllAvailable())["broker-a"] == len(commitlog)
    parts = lenient.partitions(checkpoint, {"broker-a": len(commitlog)})
    assert parts[0].start == checkpoint["broker-a"]  # aligned: reading goes on right there
    # unaligned: the checkpoint now falls inside a record; reading resumes at the next real boundary
    broker.data = commitlog[:m["commitLogOffset"]] + commitlog[m["commitLogOffset"] + 40:]
    parts = fixture_reader(broker, failOnDataLoss="false").partitions(checkpoint, {"broker-a": len(broker.data)})
    assert parts[0].start == SIZE


def test_an_offset_inside_an_intact_record_names_the_checkpoint_not_a_rewrite(commitlog, messages, fixture_reader):
    """Issue 42: a checkpoint offset that falls inside a record the broker holds intact (a corrupted or foreign
    offsets file) is not reported as a rewritten CommitLog; with a fingerprint of another record, too."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from connector.errors import DataLossError

    commitlog = commitlog[:3402931]
    m, before = messages[40], messages[39]
    inside = m["commitLogOffset"] + 10
    expected = (rf"broker broker-a: the query's offset {inside} is not a record boundary: it falls inside the record "
                rf"\[{m['commitLogOffset']}, {m['commitLogOffset'] + m['storeSize']}\) \(storeTimestamp "
                rf"{m['storeTimestamp']}\), which the broker holds intact, so its CommitLog shows no rewrite there; "
                rf"suspect the checkpoint's latest offsets/<batchId> file")
    for checkpoint in ({"broker-a": inside},
                       {"broker-a": inside, FINGERPRINT_KEY: {"broker-a": fp(before).to_json()}}):
        with pytest.raises(DataLossError, match=expected):
            fixture_reader(Bytes(commitlog)).latestOffset(checkpoint, ReadAllAvailable())
    lenient = fixture_reader(Bytes(commitlog), failOnDataLoss="false")  # goes on at the record's end
    parts = lenient.partitions({"broker-a": inside}, {"broker-a": len(commitlog)})
    assert parts[0].start == m["commitLogOffset"] + m["storeSize"]


def test_a_broker_that_lost_the_tail_is_checked_once_it_passes_the_checkpoint_again(commitlog, messages, caplog,
                                                                                     fixture_reader):
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from connector.source.driver.brokers import ServerOffsets

    commitlog = commitlog[:3402931]
    m = messages[40]
    checkpoint = {"broker-a": m["commitLogOffset"] + m["storeSize"], FINGERPRINT_KEY: {"broker-a": fp(m).to_json()}}
    broker = Bytes(commitlog[:m["commitLogOffset"]])  # lost the tail, the fingerprinted record included
    reader = fixture_reader(broker, failOnDataLoss="false")
    view = reader.planner.brokers.views["broker-a"]
    view.master = ServerOffsets(reader.options.brokers[0], "master", 0, len(broker.data))
    assert reader.latestOffset(checkpoint, ReadAllAvailable()) == checkpoint  # waits, fingerprint kept
    changed = bytearray(commitlog)
    changed[m["commitLogOffset"] + 8] ^= 0xFF  # then new messages of the same sizes: an aligned rewrite
    broker.data = bytes(changed)
    view.master = ServerOffsets(reader.options.brokers[0], "master", 0, len(broker.data))
    caplog.set_level("WARNING", logger="connector.source")
    assert reader.latestOffset(checkpoint, ReadAllAvailable())["broker-a"] == len(commitlog)
    assert any("the CommitLog was rewritten below the query's offset" in r.getMessage() for r in caplog.records)


def test_boundaries_and_checks_know_the_5x_v2_record(fixture_dir: Path):
    """The golden 5.5.0 CommitLog holds a MessageVersion V2 record (docs/protocol.md §8): it starts a record,
    it is the next boundary found from inside the record before it, and a checkpoint right after it checks."""
    from connector.protocol.commitlog import MESSAGE_MAGIC_CODE_V2

    folder = fixture_dir.parent / "rocketmq-5.5.0"
    data = (folder / "commitlog" / "00000000000000000000").read_bytes()
    size = json.loads((folder / "broker.json").read_text())["mappedFileSizeCommitLog"]
    with open(folder / "messages.jsonl", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh]
    at = next(i for i, m in enumerate(records) if m["magic"] == MESSAGE_MAGIC_CODE_V2)
    v2, before = records[at], records[at - 1]
    assert starts_record(data[v2["commitLogOffset"]:v2["commitLogOffset"] + 64], v2["commitLogOffset"], size)
    inside = before["commitLogOffset"] + 5
    assert first_boundary_at_or_after(data[inside:], inside, inside, size) == v2["commitLogOffset"]
    after = v2["commitLogOffset"] + v2["storeSize"]
    assert check_start(reader(data), after, fp(v2), 0, len(data), size) is None
    assert check_start(reader(data), v2["commitLogOffset"], fp(before), 0, len(data), size) is None


def _restamp(data: bytearray, message: dict, store_timestamp: int) -> None:
    """Give one record another storeTimestamp (as a record the broker wrote later at that offset)."""
    from connector.protocol.commitlog import field_positions

    at = message["commitLogOffset"] + field_positions(message["magic"])["STORETIMESTAMP"]
    data[at:at + 8] = store_timestamp.to_bytes(8, "big", signed=True)


@pytest.mark.parametrize("first_rewritten", [30, 39, 1])
def test_a_rewrite_is_named_from_its_first_rewritten_record_not_only_the_fingerprinted_one(commitlog, messages,
                                                                                           first_rewritten):
    """Issue 22 item 5: the broker lost records [first_rewritten, 41) and wrote newer ones of the same sizes;
    the range named (and so the landed rows to look at) starts at the first of them, exactly."""
    m, nxt = messages[40], messages[41]["commitLogOffset"]
    later = max(x["storeTimestamp"] for x in messages[:41]) + 60_000
    changed = bytearray(commitlog)
    for i in range(first_rewritten, 41):
        _restamp(changed, messages[i], later + i)
    found = check_start(reader(bytes(changed)), nxt, fp(m), 0, len(changed), SIZE)
    lost_from = messages[first_rewritten]["commitLogOffset"]
    assert found is not None and found.exact and found.lost_from == lost_from and found.resume == nxt
    text = found.describe("broker-a")
    assert f"Rows already landed for [{lost_from}, {nxt}) describe messages the broker no longer holds" in text
    assert f"commitLogOffset >= {lost_from} AND commitLogOffset < {nxt}" in text and "(at least)" not in text


def test_a_rewrite_across_a_mapped_file_start_is_found_in_the_earlier_file(commitlog, messages):
    first_of_file1 = next(i for i, x in enumerate(messages) if x["commitLogOffset"] >= SIZE)
    m, nxt = messages[first_of_file1 + 3], messages[first_of_file1 + 4]["commitLogOffset"]
    later = max(x["storeTimestamp"] for x in messages) + 60_000
    changed = bytearray(commitlog)
    for i in range(first_of_file1 - 2, first_of_file1 + 4):
        _restamp(changed, messages[i], later + i)
    found = check_start(reader(bytes(changed)), nxt, fp(m), 0, len(changed), SIZE)
    assert found is not None and found.exact and found.lost_from == messages[first_of_file1 - 2]["commitLogOffset"]
