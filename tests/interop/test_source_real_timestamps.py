"""``startingTimestamp`` against a real RocketMQ 4.9.8 master (issue 44, time): the same answers as from the stub
(tests/integration/connector/test_starting_timestamp.py) — the first record in CommitLog order whose storeTimestamp
is >= the time, before the first record, between two, equal to one, past the last (both strategies) — with the
real broker's ConsumeQueues narrowing a mapped file and the requests within the stated bounds."""

from __future__ import annotations

import pytest

from tests.interop.peers import FILE_SIZE, MiB, produce_bytes
from tests.support.brokers import max_offset
from tests.support.jvm_peers import RealBroker, killed_at_exit
from tests.support.timestamps import check_initial_offsets, check_searches, stored


@pytest.fixture(scope="module")
def real_master(tmp_path_factory, real_namesrv):
    """A real ASYNC_MASTER with about 2.5 MiB of messages in 1 MiB mapped files, and its records."""
    with killed_at_exit(RealBroker.start(tmp_path_factory.mktemp("real-times"), brokerRole="ASYNC_MASTER",
                                         namesrvAddr=real_namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE)) as master:
        produce_bytes(master.remoting_addr, int(2.5 * MiB), seed=44)
        option = f"broker-a={master.ha_addr}/{master.remoting_addr}"
        yield master, option, stored(option, master.ha_addr, FILE_SIZE)


def test_the_offset_of_a_time_on_a_real_broker(real_master):
    master, option, records = real_master
    assert records[-1][0] > 2 * FILE_SIZE  # three mapped files
    wide = check_searches(option, records, window_bytes=FILE_SIZE)
    assert all(c["queue_requests"] == 0 for c in wide)
    narrow = check_searches(option, records, window_bytes=16 * 1024)
    inside = [c for c in narrow if c["time"] in ("between two", "equal to one")]
    assert all(c["queue_requests"] > 0 and c["window_bytes"] <= 32 * 1024 for c in inside), inside
    check_initial_offsets(option, records, max_offset(master.remoting_addr))
