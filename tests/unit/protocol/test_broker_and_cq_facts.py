"""The facts issue 23 moved into connector/protocol/: broker ports and ids, the ConsumeQueue entry, the record peek."""

from __future__ import annotations

from connector.protocol.address import remoting_address_of_ha, vip_channel_address
from connector.protocol.broker import (
    MASTER_ID,
    PERM_READ_WRITE,
    broker_ports,
    ha_listen_port,
    listen_port_of_ha,
    vip_listen_port,
)
from connector.protocol.commitlog import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    HostAddress,
    encode_blank,
    encode_record,
    read_record_head,
)
from connector.protocol.consume_queue import (
    CQ_ENTRY,
    CQ_STORE_UNIT_SIZE,
    PLACEHOLDER_ENTRY,
    is_placeholder,
    iter_cq_entries,
)


def test_broker_ports_follow_broker_startup():
    """docs/protocol.md §2.1: remoting 10911, HA 10912, VIP 10909."""
    assert ha_listen_port(10911) == 10912
    assert listen_port_of_ha(10912) == 10911
    assert vip_listen_port(10911) == 10909
    assert broker_ports(10911) == (10911, 10912, 10909)
    assert broker_ports(10911, vip=False) == (10911, 10912)
    assert remoting_address_of_ha("[::1]:10912") == "[::1]:10911"
    assert vip_channel_address("10.0.0.1:10911") == "10.0.0.1:10909"
    assert MASTER_ID == 0 and PERM_READ_WRITE == 6


def test_consume_queue_entry_is_20_big_endian_bytes():
    """docs/protocol.md §5.1: [offset int64][size int32][tagsCode int64]; placeholders (0, Integer.MAX_VALUE, 0)."""
    assert CQ_STORE_UNIT_SIZE == 20
    raw = CQ_ENTRY.pack(0x0102030405060708, 91, -1) + PLACEHOLDER_ENTRY + b"\x00" * 7
    assert raw[:12] == bytes.fromhex("0102030405060708 0000005b")
    assert PLACEHOLDER_ENTRY == bytes(8) + b"\x7f\xff\xff\xff" + bytes(8)
    entries = list(iter_cq_entries(raw, 10))
    assert entries == [(0x0102030405060708, 91, -1), (0, 2**31 - 1, 0)]  # the partial third entry is left out
    assert [is_placeholder(size) for _, size, _ in entries] == [False, True]
    assert list(iter_cq_entries(raw, 1)) == entries[:1]


def test_read_record_head_peeks_the_fixed_fields():
    rec = encode_record(commit_log_offset=4096, topic="T", body=b"x", store_timestamp=1_700_000_000_123)
    head = read_record_head(b"pad" + rec, 3)
    assert (head.total_size, head.physical_offset, head.store_timestamp) == (len(rec), 4096, 1_700_000_000_123)
    assert head.is_message
    v6 = encode_record(commit_log_offset=0, topic="T", body=b"", sys_flag=BORNHOST_V6_FLAG, store_timestamp=7,
                       born_host=HostAddress(bytes(15) + b"\x01", 1))
    assert read_record_head(v6).store_timestamp == 7  # STORETIMESTAMP moves 12 bytes with an IPv6 born host


def test_read_record_head_never_reads_past_the_end():
    rec = encode_record(commit_log_offset=4096, topic="T", body=b"x", store_timestamp=5)
    assert read_record_head(rec[:7]) is None
    assert read_record_head(rec, end=7) is None
    short = read_record_head(rec, end=40)
    assert (short.physical_offset, short.store_timestamp) == (4096, None)
    blank = read_record_head(encode_blank(64))
    assert (blank.magic, blank.total_size, blank.is_message, blank.physical_offset) == (BLANK_MAGIC_CODE, 64, False,
                                                                                        None)
    assert read_record_head(bytes(8)) == (0, 0, None, None)  # the end of written data
