"""``mappedFileSizeCommitLog`` that is not a multiple of the 4 KiB page (issue 22 item 3): RocketMQ 4.9.8 takes
it as it is (no rounding for CommitLog files, unlike ConsumeQueue files), and so does the stub — files named
by multiples of the size, records never crossing a file end, the HA port serving the same bytes, recovery
after a restart (docs/broker_stub.md "Configuration keys")."""

from __future__ import annotations

import os

from connector.client.ha import HARangeFetcher
from connector.protocol.commitlog import BlankRecord, MessageRecord
from tests.integration.connector.test_source_cluster import produce
from tests.support.brokers import max_offset, read_commitlog

SIZE = 1_000_001


def test_a_file_size_off_the_page_size_stores_serves_and_recovers(broker_factory):
    broker = broker_factory("master", mappedFileSizeCommitLog=SIZE)
    sent = produce(broker, 1500)  # about 2 MB: three files
    names = sorted(os.listdir(broker.commitlog_dir))
    assert names == [f"{i * SIZE:020d}" for i in range(len(names))] and len(names) >= 3
    records = read_commitlog(broker.commitlog_dir)
    messages = [r for r in records if isinstance(r, MessageRecord)]
    assert [(m.topic, m.properties["seq"]) for m in messages] == [(t, str(i)) for i, (t, _) in enumerate(sent)]
    assert all(r.commit_log_offset // SIZE == (r.commit_log_offset + r.store_size - 1) // SIZE for r in messages)
    assert sum(isinstance(r, BlankRecord) for r in records) == len(names) - 1  # each full file ends in a blank
    end = max_offset(broker.remoting_addr)
    with HARangeFetcher(broker.ha_addr, 0, end) as fetcher:
        served = b"".join(chunk for _, chunk in fetcher)
    on_disk = b"".join((broker.commitlog_dir / n).read_bytes() for n in names)[:end]
    assert served == on_disk
    broker.stop()
    broker.restart()
    assert max_offset(broker.remoting_addr) == end
