"""Reading the tables ends the process with exit code 0, every time (README "Reading the tables").

``DeltaTable(path).to_pyarrow_table()`` without a filesystem aborts at interpreter exit in a share of runs
(``terminate called without an active exception``, exit 134; connector/delta/reading.py says why). The bronze
app lands a table once; then the README's three-line reader, :func:`connector.delta.reading.read_table`,
``hareplica query`` and ``hareplica status`` each run 20 times as separate processes, and all 80 must exit 0 with
the right answer.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker_stub.launcher import BrokerProcess
from streaming_apps.apps import AppConfig, run_app
from streaming_apps.spark_session import register_data_sources

pytestmark = pytest.mark.spark

RUNS = 20
MESSAGES = 3000
READER = '''import sys
from deltalake import DeltaTable
from pyarrow.fs import LocalFileSystem, SubTreeFileSystem
path = sys.argv[1]
print(DeltaTable(path).to_pyarrow_table(filesystem=SubTreeFileSystem(path, LocalFileSystem())).num_rows)
'''


@pytest.fixture(scope="module")
def workdir(spark, tmp_path_factory) -> Path:
    """A bronze table (and its progress file) of MESSAGES messages with bodies of 10 B to 20 KiB."""
    from connector.client.producer import Producer

    work = tmp_path_factory.mktemp("clean-exit")
    with BrokerProcess.start(work / "broker", mappedFileSizeCommitLog=256 * 1024) as broker:
        with Producer(broker.remoting_addr, "clean-exit") as producer:
            futures = [producer.send_async(f"Topic{i % 3}", bytes([65 + i % 26]) * (10 + (i * 7919) % 20000),
                                           keys=f"k{i}") for i in range(MESSAGES)]
            assert {f.result(timeout=60).send_status for f in futures} == {"SEND_OK"}
        register_data_sources(spark)
        cfg = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=work, trigger="available-now")
        assert run_app(spark, cfg, max_runtime_s=240).rows == MESSAGES
    return work


def _run_many(commands: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda cmd: subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300),
                             commands))


def _assert_clean(runs: list[subprocess.CompletedProcess], expect_in_stdout: str) -> None:
    codes = [r.returncode for r in runs]
    assert codes == [0] * len(runs), (codes, [r.stderr[-500:] for r in runs if r.returncode])
    assert all(expect_in_stdout in r.stdout for r in runs), runs[0].stdout


def test_the_readme_reader_and_read_table_exit_cleanly_every_time(workdir):
    table = str(workdir / "tables" / "bronze")
    script = workdir / "reader.py"
    script.write_text(READER)
    helper = f"from connector.delta.reading import read_table; print(read_table({table!r}).num_rows)"
    runs = _run_many([[sys.executable, str(script), table]] * RUNS + [[sys.executable, "-c", helper]] * RUNS, workdir)
    _assert_clean(runs, str(MESSAGES))


def test_hareplica_query_and_status_exit_cleanly_every_time(workdir):
    hareplica = [sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING"]
    query = [*hareplica, "query", "--workdir", str(workdir), "--format", "jsonl",
             "SELECT count(*) AS n, sum(length(body)) AS bytes FROM bronze"]
    status = [*hareplica, "status", "--workdir", str(workdir), "--json"]
    query_runs = _run_many([query] * RUNS, workdir)
    _assert_clean(query_runs, f'"n": {MESSAGES}')
    _assert_clean(_run_many([status] * RUNS, workdir), "hareplica-bronze")
