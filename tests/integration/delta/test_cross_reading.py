"""Cross-reading: tables this project writes (delta-rs) read by Spark's own Delta Lake, and the reverse.

- The bronze table written by the ``deltalake`` sink (``--landing spark``) and by the direct landing, with
  scheduled delta-rs maintenance (compaction, checkpoint), read with ``spark.read.format("delta")``,
  ``DESCRIBE HISTORY`` and time travel (``versionAsOf``), against the CommitLog and delta-rs's own reads.
- A table Spark's ``format("delta")`` wrote (with a Spark checkpoint) compacted, checkpointed and
  vacuumed by ``hareplica maintain``, then read by both engines and appended to by Spark again.
- Table features Spark can switch on: deletion vectors work with this project's appends and maintenance;
  column mapping and row tracking are refused with one line naming the path and the feature.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from deltalake import DeltaTable

from connector.delta.foreach_batch import write_batch
from connector.errors import UnsupportedTableFeatureError
from streaming_apps.apps import AppConfig, run_app
from streaming_apps.cli import main as cli_main
from streaming_apps.spark_session import register_data_sources
from tests.integration.delta.conftest import MAPPED_FILE_SIZE

pytestmark = pytest.mark.spark

APP_TIMEOUT_S = 300


def _rs_count(path, version: int | None = None) -> int:
    """Rows of the table (at ``version``) counted by delta-rs's query engine (which applies deletion vectors)."""
    from deltalake import QueryBuilder

    qb = QueryBuilder().register("t", DeltaTable(str(path), version=version))
    import pyarrow as pa

    return pa.RecordBatchReader.from_stream(qb.execute("SELECT count(*) AS n FROM t")).read_all().to_pylist()[0]["n"]


@pytest.mark.parametrize("landing", ["spark", "direct"])
def test_this_projects_bronze_table_is_read_by_sparks_delta_reader(spark, broker, commitlog, tmp_path, landing):
    register_data_sources(spark)
    cfg = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=tmp_path, trigger="available-now",
                    max_bytes_per_trigger=MAPPED_FILE_SIZE, maintenance_every=2, landing=landing)
    result = run_app(spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    assert result.batches >= 3 and result.maintenance and all("error" not in m for m in result.maintenance)
    path = str(cfg.table_path("bronze"))
    log = cfg.table_path("bronze") / "_delta_log"
    assert any(p.name.endswith(".checkpoint.parquet") for p in log.iterdir()), "delta-rs wrote a checkpoint"

    df = spark.read.format("delta").load(path)
    rows = df.select("commitLogOffset", "msgId", "body").collect()
    counts = Counter(r["commitLogOffset"] for r in rows)
    assert set(counts) == set(commitlog) and max(counts.values()) == 1
    assert all(r["msgId"] == commitlog[r["commitLogOffset"]].msg_id
               and bytes(r["body"]) == commitlog[r["commitLogOffset"]].decompressed_body() for r in rows)
    assert df.schema.fieldNames() == DeltaTable(path).schema().to_arrow().names
    assert spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["partitionColumns"] == ["storeDate"]

    # DESCRIBE HISTORY lists delta-rs's commits: one per micro-batch plus maintenance's
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    rs_history = DeltaTable(path).history()
    assert sorted(h["version"] for h in history) == list(range(DeltaTable(path).version() + 1))
    assert len(history) == len(rs_history)
    assert Counter(h["operation"] for h in history)["OPTIMIZE"] >= 1

    # time travel: every version reads the same row count in both engines
    for version in range(DeltaTable(path).version() + 1):
        by_spark = spark.read.format("delta").option("versionAsOf", version).load(path).count()
        assert by_spark == _rs_count(path, version), version
    first = spark.read.format("delta").option("versionAsOf", 0).load(path).count()
    assert 0 < first < len(commitlog)


def _spark_table_from(spark, source: str, path: str, parts: int) -> None:
    """Write ``source``'s rows into a new Spark Delta table in ``parts`` appends (Spark checkpoints at 10)."""
    df = spark.read.format("delta").load(source).repartition(2)
    for i in range(parts):
        (df.where(f"pmod(commitLogOffset, {parts}) = {i}").write.format("delta").mode("append")
         .partitionBy("storeDate").save(path))


@pytest.fixture(scope="module")
def bronze_by_rs(spark, broker, tmp_path_factory) -> str:
    """A bronze table written by this project's sink (the rows the CommitLog holds)."""
    register_data_sources(spark)
    cfg = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=tmp_path_factory.mktemp("rs"),
                    trigger="available-now", maintenance_every=0)
    run_app(spark, cfg, max_runtime_s=APP_TIMEOUT_S)
    return str(cfg.table_path("bronze"))


def test_a_table_spark_wrote_is_maintained_by_hareplica_and_read_by_both(spark, bronze_by_rs, commitlog, tmp_path,
                                                                          capsys):
    path = str(tmp_path / "by_spark")
    _spark_table_from(spark, bronze_by_rs, path, parts=12)
    assert (tmp_path / "by_spark" / "_delta_log" / "00000000000000000010.checkpoint.parquet").exists()
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration'='interval 0 hours')")
    before = DeltaTable(path)
    assert before.protocol().min_writer_version <= 7 and _rs_count(path) == len(commitlog)

    assert cli_main(["maintain", path, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["filesRemoved"] > summary["filesAdded"] > 0, summary
    assert summary["vacuumed"] >= summary["filesRemoved"], "compacted-away files vacuumed (retention 0 h)"

    # both readers: the same rows, nothing lost to compaction or vacuum
    got = spark.read.format("delta").load(path)
    assert got.count() == len(commitlog) and got.selectExpr("sum(commitLogOffset)").first()[0] == sum(commitlog)
    assert _rs_count(path) == len(commitlog)
    ops = [h["operation"] for h in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()]
    assert "OPTIMIZE" in ops and "VACUUM END" in ops and ops.count("WRITE") == 12
    # Spark goes on writing after delta-rs's commits and checkpoint
    spark.read.format("delta").load(bronze_by_rs).limit(5).write.format("delta").mode("append").save(path)
    assert _rs_count(path) == len(commitlog) + 5 == spark.read.format("delta").load(path).count()


def _small(spark):
    return spark.range(0, 40).selectExpr("id", "cast(id % 3 AS string) AS d")


def test_deletion_vectors_of_spark_work_with_this_projects_append_and_maintenance(spark, tmp_path):
    path = str(tmp_path / "dv")
    _small(spark).write.format("delta").option("delta.enableDeletionVectors", "true").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 10")
    assert "deletionVectors" in (DeltaTable(path).protocol().reader_features or [])
    more = spark.range(100, 110).selectExpr("id", "cast(id % 3 AS string) AS d")
    assert write_batch(more, path, "dv-test", 0).rows == 10
    assert cli_main(["maintain", path, "--no-vacuum"]) == 0
    ids = sorted(r["id"] for r in spark.read.format("delta").load(path).collect())
    assert ids == list(range(10, 40)) + list(range(100, 110))
    assert _rs_count(path) == len(ids)


@pytest.mark.parametrize("feature, prop", [("columnMapping", "'delta.columnMapping.mode'='name'"),
                                           ("rowTracking", "'delta.enableRowTracking'='true'")])
def test_table_features_this_project_cannot_honour_are_refused_in_one_line(spark, tmp_path, capsys, feature, prop):
    path = str(tmp_path / feature)
    _small(spark).write.format("delta").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({prop})")
    version = DeltaTable(path).version()
    with pytest.raises(UnsupportedTableFeatureError) as e:
        write_batch(_small(spark), path, "features-test", 0)
    assert path in str(e.value) and feature in str(e.value) and "\n" not in str(e.value)
    assert cli_main(["maintain", path]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and path in err and feature in err
    assert DeltaTable(path).version() == version, "nothing was committed"
    # the reader side still works in both engines
    assert spark.read.format("delta").load(path).count() == _rs_count(path) == 40
