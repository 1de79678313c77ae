"""The stub's message index (broker_stub/store/index.py, 4.9.8 IndexFile/IndexService layout).

Small files (a few slots and entries) so collisions, full files and roll-over are easy to produce; the byte
positions are computed here from the layout in docs/protocol.md §5.4, independently of the module.
"""

from __future__ import annotations

import struct

import pytest

from broker_stub.javautil import java_string_hash
from broker_stub.store.checkpoint import StoreCheckpoint
from broker_stub.store.index import IndexFile, IndexService, index_file_size, index_key_hash
from connector.protocol.commitlog import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    DispatchInfo,
)

SLOTS, ENTRIES = 8, 6
T0 = 1_700_000_000_000


def _hash(key: str) -> int:
    h = java_string_hash(key)
    return 0 if h == -2 ** 31 else abs(h)


def _keys_in_slot(topic: str, slot: int, count: int) -> list[str]:
    """``count`` keys of ``topic`` whose ``topic#key`` falls into ``slot`` (of SLOTS)."""
    found = []
    i = 0
    while len(found) < count:
        if _hash(f"{topic}#k{i}") % SLOTS == slot:
            found.append(f"k{i}")
        i += 1
    return found


def _info(offset: int, ts: int, props: str = "", topic: str = "T", tran: int = TRANSACTION_NOT_TYPE) -> DispatchInfo:
    return DispatchInfo(commit_log_offset=offset, store_size=100, topic=topic, queue_id=0, queue_offset=0,
                        sys_flag=tran, store_timestamp=ts, properties_raw=props.encode())


def _props(uniq: str | None = None, keys: str | None = None) -> dict[str, str]:
    out = {}
    if uniq is not None:
        out["UNIQ_KEY"] = uniq
    if keys is not None:
        out["KEYS"] = keys
    return out


def _service(tmp_path, slots=SLOTS, entries=ENTRIES, checkpoint=None) -> IndexService:
    return IndexService(tmp_path / "index", hash_slot_num=slots, index_num=entries, max_msgs_num_batch=64,
                        checkpoint=checkpoint)


def test_default_file_size_and_key_hash():
    assert index_file_size(5_000_000, 20_000_000) == 420_000_040
    assert index_key_hash("polygenelubricants") == 0  # String.hashCode() == Integer.MIN_VALUE
    assert index_key_hash("T#abc") == abs(java_string_hash("T#abc"))


def test_layout_header_slots_and_entries_are_4_9_8s(tmp_path):
    f = IndexFile(tmp_path / "f", SLOTS, ENTRIES)
    assert (tmp_path / "f").stat().st_size == 40 + SLOTS * 4 + ENTRIES * 20
    assert bytes(f.mapping[:40]) == bytes(40)  # indexCount 1 is in memory only until the first entry
    follower = IndexFile(tmp_path / "g", SLOTS, ENTRIES, 777, T0)  # starts where a full file ended
    assert struct.unpack_from(">qqqqii", follower.mapping, 0) == (T0, T0, 777, 777, 0, 0)
    assert follower.index_count == 1
    follower.close()
    assert f.put_key("T#a", 1000, T0)
    assert f.put_key("T#b", 2000, T0 + 2500)
    f.flush()
    raw = (tmp_path / "f").read_bytes()
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = struct.unpack_from(">qqqqii", raw, 0)
    assert (begin_ts, end_ts, begin_phy, end_phy, index_count) == (T0, T0 + 2500, 1000, 2000, 3)
    assert slot_count == len({_hash("T#a") % SLOTS, _hash("T#b") % SLOTS})
    entries = 40 + SLOTS * 4
    # entry 1: time 0 (no beginTimestamp yet), no previous; entry 2: 2 whole seconds after T0
    assert struct.unpack_from(">iqii", raw, entries + 20) == (_hash("T#a"), 1000, 0, 0)
    assert struct.unpack_from(">iqii", raw, entries + 40)[:3] == (_hash("T#b"), 2000, 2)
    assert struct.unpack_from(">i", raw, 40 + (_hash("T#b") % SLOTS) * 4)[0] == 2
    assert raw[entries:entries + 20] == bytes(20)  # entry 0 never used
    f.close()


def test_collisions_chain_newest_first_and_lookups_keep_keys_apart(tmp_path):
    a, b = _keys_in_slot("T", 3, 2)
    f = IndexFile(tmp_path / "f", SLOTS, ENTRIES)
    f.put_key(f"T#{a}", 100, T0)
    f.put_key(f"T#{b}", 200, T0 + 1000)
    f.put_key(f"T#{a}", 300, T0 + 2000)
    raw = bytes(f.mapping)
    entries = 40 + SLOTS * 4
    assert struct.unpack_from(">i", raw, 40 + 3 * 4)[0] == 3  # the slot holds the newest entry
    assert [struct.unpack_from(">i", raw, entries + n * 20 + 16)[0] for n in (1, 2, 3)] == [0, 1, 2]
    assert f.hash_slot_count == 1  # one slot used by three entries
    found: list[int] = []
    f.select_phy_offsets(found, f"T#{a}", 10, 0, 2 ** 62)
    assert found == [300, 100]
    found = []
    f.select_phy_offsets(found, f"T#{b}", 10, 0, 2 ** 62)
    assert found == [200]
    found = []
    f.select_phy_offsets(found, f"T#{a}", 1, 0, 2 ** 62)
    assert found == [300]  # maxNum
    found = []
    f.select_phy_offsets(found, f"T#{a}", 10, T0 + 1500, 2 ** 62)
    assert found == [300]  # older than begin: the walk stops
    found = []
    f.select_phy_offsets(found, "T#missing", 10, 0, 2 ** 62)
    assert found == []
    f.close()


def test_full_file_rolls_over_and_queries_span_files(tmp_path):
    svc = _service(tmp_path, entries=3)  # entries 1 and 2 usable per file
    for n in range(5):
        svc.build_index(_info(1000 * (n + 1), T0 + 1000 * n), _props(keys="same"))
    assert len(svc.files) == 3
    first, second, third = svc.files
    assert first.is_write_full() and not first.put_key("T#x", 1, T0)
    assert first.file_name < second.file_name < third.file_name
    assert (second.begin_phy_offset, second.end_phy_offset, third.begin_phy_offset) == (3000, 4000, 5000)
    svc.build_index(_info(6000, T0 + 5000), _props(keys="same"))
    fresh = svc.get_and_create_last_index_file()  # a new file starts where the full one ended
    assert (fresh.begin_phy_offset, fresh.begin_timestamp, fresh.index_count) == (6000, T0 + 5000, 1)
    svc.files.pop().destroy()
    result = svc.query_offset("T", "same", 32, 0, 2 ** 62)
    assert result.phy_offsets == [6000, 5000, 4000, 3000, 2000, 1000]
    assert (result.index_last_update_phyoffset, result.index_last_update_timestamp) == (6000, T0 + 5000)
    assert svc.query_offset("T", "same", 2, 0, 2 ** 62).phy_offsets == [6000, 5000]
    assert svc.query_offset("T", "same", 32, T0, T0 + 1500).phy_offsets == [2000, 1000]
    # 4.9.8 quirk kept: a rolled-over file's first entry is timed from the previous file's end, then the
    # file's beginTimestamp moves to that entry's store time, so it reads 1 s late (T0+3000 for 3000)
    assert svc.query_offset("T", "same", 32, T0 + 2500, T0 + 3400).phy_offsets == [4000, 3000]
    assert svc.query_offset("Other", "same", 32, 0, 2 ** 62).phy_offsets == []
    assert svc.delete_expired_files(3500) == 1 and len(svc.files) == 2
    svc.close()


def test_build_index_uniq_key_then_keys_split_on_spaces_and_skips(tmp_path):
    svc = _service(tmp_path, entries=32)
    svc.build_index(_info(100, T0), _props(uniq="U1", keys="a  b"))
    svc.build_index(_info(200, T0, tran=TRANSACTION_ROLLBACK_TYPE), _props(uniq="U2"))
    svc.build_index(_info(300, T0, tran=TRANSACTION_PREPARED_TYPE), _props(uniq="U3"))
    svc.build_index(_info(400, T0, tran=TRANSACTION_COMMIT_TYPE), _props(keys="a"))
    svc.build_index(_info(50, T0), _props(uniq="old"))  # below endPhyOffset: indexed already
    f = svc.files[0]
    assert f.index_count == 1 + 5
    entries = 40 + SLOTS * 4
    assert [struct.unpack_from(">i", f.mapping, entries + n * 20)[0] for n in (1, 2, 3)] == [
        _hash("T#U1"), _hash("T#a"), _hash("T#b")]
    q = svc.query_offset
    assert q("T", "U1", 32, 0, 2 ** 62).phy_offsets == [100]
    assert q("T", "a", 32, 0, 2 ** 62).phy_offsets == [400, 100]
    assert q("T", "U2", 32, 0, 2 ** 62).phy_offsets == []
    assert q("T", "U3", 32, 0, 2 ** 62).phy_offsets == [300]
    assert q("T", "old", 32, 0, 2 ** 62).phy_offsets == []
    svc.close()


@pytest.mark.parametrize("last_exit_ok", [True, False])
def test_restart_keeps_files_and_abnormal_exit_drops_those_after_index_msg_timestamp(tmp_path, last_exit_ok):
    checkpoint = StoreCheckpoint(tmp_path / "checkpoint")
    svc = _service(tmp_path, entries=3, checkpoint=checkpoint)
    for n in range(3):
        svc.build_index(_info(1000 * (n + 1), T0 + 1000 * n), _props(uniq=f"u{n}"))
    assert checkpoint.index_msg_timestamp == T0 + 1000  # the first file filled up (and was flushed)
    svc.flush_all()
    names = [f.file_name for f in svc.files]
    assert all(len(n) == 17 and n.isdigit() for n in names)
    svc.close()
    again = _service(tmp_path, entries=3, checkpoint=StoreCheckpoint(tmp_path / "checkpoint"))
    again.load(last_exit_ok)
    kept = [f.file_name for f in again.files]
    assert kept == (names if last_exit_ok else names[:1])
    assert again.query_offset("T", "u0", 32, 0, 2 ** 62).phy_offsets == [1000]
    assert again.query_offset("T", "u2", 32, 0, 2 ** 62).phy_offsets == ([3000] if last_exit_ok else [])
    # dispatching again after a restart adds only records from the last file's endPhyOffset on
    again.build_index(_info(2500, T0 + 2000), _props(uniq="below"))
    assert again.query_offset("T", "below", 32, 0, 2 ** 62).phy_offsets == ([] if last_exit_ok else [2500])
    if not last_exit_ok:  # recovery dispatches the dropped file's records again
        again.build_index(_info(3000, T0 + 2000), _props(uniq="u2"))
        assert again.query_offset("T", "u2", 32, 0, 2 ** 62).phy_offsets == [3000]
    again.close()


def test_checkpoint_recovery_time_honours_the_index_only_when_safe(tmp_path):
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    cp.physic_msg_timestamp, cp.index_msg_timestamp = T0, T0 - 60_000
    assert cp.min_timestamp_for_recovery() == T0 - 3000
    cp.message_index_safe = True
    assert cp.min_timestamp_for_recovery() == T0 - 60_000


def test_query_is_capped_by_max_msgs_num_batch(tmp_path):
    svc = IndexService(tmp_path / "index", hash_slot_num=SLOTS, index_num=32, max_msgs_num_batch=2)
    for n in range(5):
        svc.build_index(_info(100 * (n + 1), T0 + n), _props(keys="k"))
    assert svc.query_offset("T", "k", 32, 0, 2 ** 62).phy_offsets == [500, 400]
    assert svc.query_offset("T", "k", 1, 0, 2 ** 62).phy_offsets == [500]
    svc.close()
