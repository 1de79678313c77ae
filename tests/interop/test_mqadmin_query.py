"""The real 4.9.8 ``mqadmin queryMsgByKey``, ``queryMsgByUniqueKey`` and ``queryMsgById`` against the broker
stub and its name server, and against a real 4.9 broker and name server with the same messages (issue 14 §4;
docs/broker_stub.md "Message index").

Each side gets 6 messages in ``IndexedQuery`` sent by the project producer (queue ``i % 2``), message ``i``
with KEYS ``key-i`` and ``both`` (two keys, split at the space). What mqadmin sends: queryMsgByKey and
queryMsgByUniqueKey a QUERY_MESSAGE to the topic's brokers (the latter with ``_UNIQUE_KEY_QUERY=true``),
queryMsgById a VIEW_MESSAGE_BY_ID to the broker address inside the offset message id. Both sides must
print the same rows (queue id, queue offset) and the same message details but for ids, hosts and times.
The index files the two brokers wrote are compared entry by entry.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_stub.store.index import index_key_hash
from connector.client.producer import Producer, SendResult
from connector.protocol.commitlog import decode_offset_msg_id
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.interop.java_fixtures import wait_for_route
from tests.support.brokers import BrokerProcess, NameServerProcess, remoting_request
from tests.support.jvm_peers import RealBroker, killed_at_exit
from tests.support.mqadmin import MqadminRun, parse_colon_pairs, parse_table, run_mqadmin

TOPIC = "IndexedQuery"
SENT = 6
# detail lines that name the side (ids, hosts, times, offsets in its own CommitLog, the body's temp file)
SIDE_DETAILS = {"Born Timestamp", "Store Timestamp", "Born Host", "Store Host", "CommitLog Offset", "Properties",
                "Message Body Path", "OffsetID", "Message ID"}


@dataclass
class Side:
    """One name server + master pair, the sends it got and where its mqadmin runs keep their folders."""

    name: str
    namesrv: str
    broker: str
    workdir: Path
    store: Path
    sent: list[SendResult]
    runs: int = 0

    def mqadmin(self, *args: str, check: bool = True) -> MqadminRun:
        self.runs += 1
        return run_mqadmin(list(args), namesrv=self.namesrv, workdir=self.workdir / f"mqadmin-{self.runs}",
                           check=check)


def _send(broker: str) -> list[SendResult]:
    with Producer(broker, "pg_index_query") as producer:
        return [producer.send(TOPIC, f"indexed-{i}".encode(), tags="TagI", keys=[f"key-{i}", "both"],
                              queue_id=i % 2) for i in range(SENT)]


@pytest.fixture(scope="module")
def sides(tmp_path_factory, real_namesrv) -> Iterator[tuple[Side, Side]]:
    """(stub side, real side), each with the module's messages (module doc)."""
    root = tmp_path_factory.mktemp("mqadmin-query")
    with NameServerProcess.start(root / "stub-namesrv") as ns, \
            BrokerProcess.start(root / "stub-broker", namesrvAddr=ns.addr) as stub, \
            killed_at_exit(RealBroker.start(root / "real-broker", namesrvAddr=real_namesrv.addr)) as real:
        pair = []
        for name, namesrv, broker, store in (("stub", ns.addr, stub.remoting_addr, stub.store_dir),
                                             ("real", real_namesrv.addr, real.remoting_addr, real.store_dir)):
            wait_for_route(namesrv, "TBW102", timeout_s=40)
            pair.append(Side(name, namesrv, broker, root / f"{name}-mqadmin", store, _send(broker)))
            wait_for_route(namesrv, TOPIC, timeout_s=40)
        yield pair[0], pair[1]


def both(sides: tuple[Side, Side], make_args, *, check: bool = True) -> tuple[MqadminRun, MqadminRun]:
    """``make_args(side)`` run by each side's mqadmin at once: (stub run, real run)."""
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(s.mqadmin, *make_args(s), check=check) for s in sides]
        return futures[0].result(), futures[1].result()


def _details(run: MqadminRun) -> dict[str, str]:
    """The ``Name:  value`` lines of a message's details (queryMsgById / queryMsgByUniqueKey)."""
    return {k.rstrip(":"): v for k, v in parse_colon_pairs(run.stdout).items()}


def test_query_msg_by_key(sides):
    for key, expected in (("key-3", [3]), ("both", list(range(SENT)))):
        runs = both(sides, lambda s, key=key: ["queryMsgByKey", "-t", TOPIC, "-k", key])
        tables = []
        for side, run in zip(sides, runs, strict=True):
            cols, rows = parse_table(run.stdout)
            assert cols == ["Message ID", "QID", "Offset"], run.describe()
            assert sorted(r[0] for r in rows) == sorted(side.sent[i].msg_id for i in expected), run.describe()
            tables.append(sorted((int(r[1]), int(r[2])) for r in rows))
        assert tables[0] == tables[1] == sorted((i % 2, i // 2) for i in expected)


def test_query_msg_by_key_not_found_fails_alike(sides):
    runs = both(sides, lambda s: ["queryMsgByKey", "-t", TOPIC, "-k", "no-such-key"], check=False)
    for run in runs:
        assert run.failed and "query message by key finished, but no message." in run.cause, run.describe()


def test_query_msg_by_unique_key(sides):
    runs = both(sides, lambda s: ["queryMsgByUniqueKey", "-t", TOPIC, "-i", s.sent[4].msg_id])
    details = [_details(r) for r in runs]
    for side, d, run in zip(sides, details, runs, strict=True):
        assert d.get("Topic") == TOPIC and d.get("Keys") == "[key-4 both]", run.describe()
        assert f"UNIQ_KEY={side.sent[4].msg_id}" in d["Properties"]
    assert ({k: v for k, v in details[0].items() if k not in SIDE_DETAILS}
            == {k: v for k, v in details[1].items() if k not in SIDE_DETAILS})
    assert (details[0]["Queue ID"], details[0]["Queue Offset"]) == ("0", "2")


def test_query_msg_by_id(sides):
    runs = both(sides, lambda s: ["queryMsgById", "-i", s.sent[5].offset_msg_id])
    details = [_details(r) for r in runs]
    for d, run in zip(details, runs, strict=True):
        assert d.get("Topic") == TOPIC and d.get("Tags") == "[TagI]", run.describe()
    assert ({k: v for k, v in details[0].items() if k not in SIDE_DETAILS}
            == {k: v for k, v in details[1].items() if k not in SIDE_DETAILS})
    assert (details[0]["Queue ID"], details[0]["Queue Offset"]) == ("1", "2")


def _index_file(side: Side) -> tuple[str, bytes, list[tuple[int, int, int, int]], dict[int, int]]:
    """(file name, 40-byte header, entries 1..n as (keyHash, offset, timeDiff, prev), {slot: head entry})
    of the side's one index file (default 5,000,000 slots), read without loading the sparse rest."""
    [path] = list((side.store / "index").iterdir())
    slots_end = 40 + 5_000_000 * 4
    with path.open("rb") as f:
        header = f.read(40)
        count = struct.unpack_from(">i", header, 36)[0]
        f.seek(slots_end + 20)
        raw = f.read(20 * (count - 1))
        entries = [struct.unpack_from(">iqii", raw, 20 * i) for i in range(count - 1)]
        heads = {}
        for key_hash, *_ in entries:
            f.seek(40 + (key_hash % 5_000_000) * 4)
            heads[key_hash % 5_000_000] = struct.unpack(">i", f.read(4))[0]
    return path.name, header, entries, heads


def test_index_files_have_the_same_structure(sides):
    """The stub writes the index file as the real broker does: the same header counts, one UNIQ_KEY entry and
    two KEYS entries per message in that order, the same chains (prev links) and slot heads; only the
    UNIQ_KEY hashes (different ids), offsets of the side's CommitLog and times differ."""
    deadline = time.monotonic() + 20
    files = [_index_file(s) for s in sides]
    while [struct.unpack_from(">i", f[1], 36)[0] for f in files] != [1 + 3 * SENT] * 2:
        assert time.monotonic() < deadline, [f[1].hex() for f in files]
        time.sleep(0.2)
        files = [_index_file(s) for s in sides]
    for side, (name, header, entries, _) in zip(sides, files, strict=True):
        assert len(name) == 17 and name.isdigit()
        _, _, begin_phy, end_phy, slot_count, count = struct.unpack(">qqqqii", header)
        offsets = [decode_offset_msg_id(r.offset_msg_id)[1] for r in side.sent]
        # slots: one per UNIQ_KEY, one per key-i, one for "both"
        assert (begin_phy, end_phy, slot_count, count) == (offsets[0], offsets[-1], 2 * SENT + 1, 1 + 3 * SENT)
        expected = []
        for i, sent in enumerate(side.sent):
            for key in (sent.msg_id, f"key-{i}", "both"):
                expected.append((index_key_hash(f"{TOPIC}#{key}"), offsets[i]))
        assert [(e[0], e[1]) for e in entries] == expected, side.name
    (_, _, stub_entries, stub_heads), (_, _, real_entries, real_heads) = files
    keyed = [n for n in range(3 * SENT) if n % 3]  # the KEYS entries (positions 2, 3 of each message)
    assert [stub_entries[n][0] for n in keyed] == [real_entries[n][0] for n in keyed]
    assert [stub_entries[n][3] for n in keyed] == [real_entries[n][3] for n in keyed]
    both_slot = index_key_hash(f"{TOPIC}#both") % 5_000_000
    assert stub_heads[both_slot] == real_heads[both_slot] == 3 * SENT


def test_search_offset_by_timestamp_alike(sides):
    """SEARCH_OFFSET_BY_TIMESTAMP (29, what a consumer's ``searchOffset`` sends): before all messages, after
    all (the last entry, not the max offset), and at each message's own store time where it is unique."""
    answers = []
    for side in sides:
        def search(queue_id: int, ts: int, side=side) -> int:
            header = {"topic": TOPIC, "queueId": queue_id, "timestamp": ts}
            resp = remoting_request(side.broker, RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                                                           header))
            assert resp.code == ResponseCode.SUCCESS, (side.name, resp.remark)
            return int(resp.ext_fields["offset"])
        times = []
        for sent in side.sent:
            resp = remoting_request(side.broker, RemotingCommand.request(
                RequestCode.VIEW_MESSAGE_BY_ID, {"offset": decode_offset_msg_id(sent.offset_msg_id)[1]}))
            times.append(int.from_bytes(resp.body[56:64], "big"))  # STORETIMESTAMP of an IPv4 record
        unique = [i for i in range(SENT) if times.count(times[i]) == 1]
        assert [search(i % 2, times[i]) for i in unique] == [i // 2 for i in unique], side.name
        answers.append([search(q, ts) for q in (0, 1, 3) for ts in (0, times[-1] + 3_600_000)])
    assert answers[0] == answers[1] == [0, SENT // 2 - 1, 0, SENT // 2 - 1, 0, 0]
