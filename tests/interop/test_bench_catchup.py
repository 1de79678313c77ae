"""bench/catchup.py's round on a small log of a real 4.9.8 master: every reader takes every byte and every figure
of the summary is there.

Speed is not judged here (bench/ measures it); only that the measured readers are the real ones and read it all.
"""

from __future__ import annotations

from bench import catchup as bench
from tests.support.jvm_peers import RealBroker


def test_one_round_reads_the_whole_log_with_every_reader(real_namesrv, tmp_path):
    with RealBroker.start(tmp_path / "master", brokerRole="ASYNC_MASTER", namesrvAddr=real_namesrv.addr,
                          mappedFileSizeCommitLog=bench.MAPPED_FILE_SIZE) as master:
        messages = bench.produce_backlog_bytes(master, 1024 * 1024)
        end = bench._max_offset(master.remoting_addr)
        measured = bench.one_round(tmp_path / "round", 0, master, real_namesrv, end, messages)
    with bench.orders_broker(tmp_path / "orders", 600, 512 * 1024) as orders:  # three or four mapped files
        apps = bench.apps_round(tmp_path / "apps", 0, orders)

    assert measured["bronze"]["rows"] == messages  # bronze landed every message (the Java consumer is checked inside)
    summary = bench.summarize([measured], end)
    for key in ("real_slave_mb_s", "real_slave_data_mb_s", "bronze_cold_cpu_s_per_gb", "stub_slave_mb_s",
                "bronze_cold_mb_s", "bronze_data_mb_s", "java_consumer_mb_s",
                "raw_sendfile_mb_s", "bronze_cpu_s_per_gb", "bronze_cold_vs_real_slave", "bronze_data_vs_real_slave"):
        assert summary[key] > 0, key
    assert 0 <= summary["first_byte_s"] < measured["bronze"]["wall_s"]
    assert summary["real_slave_data_mb_s"] > summary["real_slave_mb_s"]  # the JVM start is outside the data phase
    assert 0 < measured["bronze"]["data_cpu_s"] < measured["bronze"]["cpu_s"]
    apps_summary = bench.summarize_apps([apps])
    for key in ("silver_rows_s", "gold_rows_s", "silver_first_batch_rows_s", "gold_first_batch_rows_s"):
        assert apps_summary[key] > 0, key
