"""bench/delta.py's throughput round on a small backlog: every run reads every message, the Arrow-file
ceiling source replays exactly the rows hareplica yields, and the summary holds every figure.

Speed is not judged here (bench/ measures it); only that the measured pipelines are the real ones.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from broker_stub.launcher import BrokerProcess

pytestmark = pytest.mark.spark

MAPPED_FILE_SIZE = 64 * 1024
MESSAGES = 150


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from connector.client.producer import Producer

    with BrokerProcess.start(tmp_path_factory.mktemp("bench-delta-broker"),
                             mappedFileSizeCommitLog=MAPPED_FILE_SIZE) as b:
        with Producer(b.remoting_addr, "bench-delta-test") as producer:
            futures = [producer.send_async("BenchLoad", f"{i}:".encode().ljust(1024, b"x")) for i in range(MESSAGES)]
            assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
        yield b


def _sorted_rows(table: pa.Table) -> pa.Table:
    return table.select(sorted(table.column_names)).sort_by("commitLogOffset")


def test_throughput_round_measures_the_same_rows_everywhere(hareplica_spark, broker, tmp_path):
    from bench import delta as bench

    end = bench._max_offset(broker.remoting_addr)
    paths, rows, decode_s = bench.decode_to_arrow_files(broker.commitlog_dir, end, MAPPED_FILE_SIZE, tmp_path / "arrow")
    assert rows == MESSAGES and decode_s > 0
    assert len(paths) == -(-end // MAPPED_FILE_SIZE) >= 3  # one IPC file per mapped file, several batches of 2

    cpu_before = bench.process_tree_cpu_seconds()
    result = bench.throughput_round(hareplica_spark, broker, paths, tmp_path / "round")
    assert bench.process_tree_cpu_seconds() > cpu_before
    assert {name: stats.rows for name, stats in result.items()} == dict.fromkeys(bench.THROUGHPUT_RUNS, MESSAGES)
    for stats in result.values():
        assert 0 < stats.batch_seconds <= stats.seconds and stats.cpu_seconds > 0

    # the ceiling's Delta table holds exactly the bronze app's rows (same decoder, same sink, same storeDate)
    bronze = DeltaTable(str(tmp_path / "round" / "bronze" / "tables" / "bronze")).to_pyarrow_table()
    # the bronze app's default (--landing direct) lands exactly the rows --landing spark does
    through_spark = DeltaTable(str(tmp_path / "round" / "bronze-spark" / "tables" / "bronze")).to_pyarrow_table()
    assert _sorted_rows(through_spark).equals(_sorted_rows(bronze))
    ceiling = DeltaTable(str(tmp_path / "round" / "arrow-bronze" / "table"))
    assert ceiling.metadata().partition_columns == ["storeDate"]
    assert len(ceiling.history()) == -(-len(paths) // 2)  # filesPerBatch 2: one commit per micro-batch
    assert _sorted_rows(ceiling.to_pyarrow_table()).equals(_sorted_rows(bronze))

    ceilings = bench.parquet_ceilings(paths, tmp_path / "ceilings", repeats=1)
    assert ceilings["rows"] == MESSAGES and ceilings["parquet_write_s"] > 0 and ceilings["sink_task_write_s"] > 0

    summary = bench.summarize_throughput([result], end, decode_s, ceilings)
    for name in bench.THROUGHPUT_RUNS:  # MB/s of a 0.2 MB backlog round to 0.0: only their presence is checked
        assert summary[f"{name}_rows_s"] > 0 and summary[f"{name}_cpu_s_per_gb"] > 0
        assert all(summary[f"{name}_{figure}"] >= 0 for figure in ("catchup_mb_s", "batches_mb_s", "cpu_bound_mb_s"))
    assert summary["bronze_vs_noop"] == round(result["bronze"].rows / result["bronze"].seconds
                                              / (result["noop"].rows / result["noop"].seconds), 3)
    assert all(summary[k] > 0 for k in ("decode_only_mb_s", "parquet_write_mb_s", "sink_task_write_mb_s"))
