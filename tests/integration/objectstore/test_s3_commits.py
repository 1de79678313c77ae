"""Issue 51, commits that cannot clobber each other: several processes committing to one Delta table on a real S3
server through the project's own commit path (connector.delta.commit) — two writers appending and a third compacting
and vacuuming with ``hareplica maintain`` — never commit one version twice and lose no commit. delta-rs creates each
log entry with ``If-None-Match: *``, which the server refuses (412) for the loser, who reads the table again
(docs/object_storage.md "Commits that cannot clobber each other")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

from connector.storage import store
from connector.storage.config import StorageConfig
from tests.support.s3_server import TEST_BUCKET

BATCHES = 10
ROWS = 5

#: One writer process: BATCHES micro-batches of ROWS rows each, each written by a "task" and committed by the
#: project's DeltaBatchCommitter under its own appId, as the sink's driver does.
WRITER = """
import sys
import pyarrow as pa
from pyspark.sql.types import LongType, StringType, StructField, StructType
from connector.delta.options import DeltaSinkOptions
from connector.delta.sink import DeltaLakeStreamWriter

table, app_id, batches, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
schema = StructType([StructField("writer", StringType()), StructField("n", LongType())])
options = DeltaSinkOptions.from_options({"path": table, "appId": app_id})
for batch_id in range(batches):
    writer = DeltaLakeStreamWriter(options, schema, (), batch_id=batch_id)
    task = writer.open_task()
    task.write(pa.record_batch({"writer": [app_id] * rows, "n": list(range(batch_id * rows, (batch_id + 1) * rows))}))
    writer.commit([task.close()], batch_id)
"""


def test_two_writers_and_maintenance_on_one_s3_table_lose_nothing(s3_server, tmp_path):
    table = f"s3://{TEST_BUCKET}/commits/{uuid.uuid4().hex[:12]}/t"
    env = {**os.environ, **s3_server.env()}
    seed = subprocess.run([sys.executable, "-c", WRITER, table, "seed", "1", str(ROWS)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert seed.returncode == 0, seed.stderr[-2000:]
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, table, f"writer-{i}", str(BATCHES), str(ROWS)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i in range(2)]
    maintain = [sys.executable, "-m", "streaming_apps.cli", "maintain", table, "--no-vacuum", "--json"]
    maintenance = [subprocess.run(maintain, env=env, capture_output=True, text=True, timeout=120) for _ in range(3)]
    for w in writers:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err[-3000:]
    for m in maintenance:
        assert m.returncode == 0, m.stderr[-2000:]

    store.use(StorageConfig.from_options(s3_server.storage_options(), environ={}))
    dt = store.delta_table(table)
    rows = dt.to_pyarrow_table().to_pylist()
    got = sorted((r["writer"], r["n"]) for r in rows)
    want = sorted([("seed", n) for n in range(ROWS)]
                  + [(f"writer-{i}", n) for i in range(2) for n in range(BATCHES * ROWS)])
    assert got == want  # every row once: no commit lost, none applied twice
    assert {dt.transaction_version(f"writer-{i}") for i in range(2)} == {BATCHES - 1}
    history = dt.history()
    versions = sorted(h["version"] for h in history)
    assert versions == list(range(len(versions)))  # one commit per version, no gap
    appends = [h for h in history if h.get("operation") in ("WRITE", "CREATE TABLE", "STREAMING UPDATE")
               or "hareplica.appId" in json.dumps(h)]
    assert len(appends) >= 2 * BATCHES + 1
