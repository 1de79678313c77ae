"""``hareplica query --engine spark``: Spark SQL over the Delta tables with Spark's own Delta reader.

The command starts its own Spark, so it runs in a subprocess; the shared session checks the views
:func:`streaming_apps.query.register_spark_tables` registers. A table Spark wrote with deletion vectors
is the case where Spark's Delta reader and the Parquet-view fallback differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from connector.delta.metadata_tables import METADATA_TABLES
from streaming_apps.apps import AppConfig, run_app
from streaming_apps.query import QueryError, register_spark_tables, spark_view_frame
from streaming_apps.spark_session import PROJECT_ROOT, register_data_sources

pytestmark = pytest.mark.spark

CLI_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def tables(spark, broker, tmp_path_factory):
    """tables/bronze (this project's sink) and tables/events (Spark, deletion vectors, 10 of 40 rows deleted)."""
    register_data_sources(spark)
    work = tmp_path_factory.mktemp("query")
    cfg = AppConfig(app="bronze", brokers=f"broker-a={broker.ha_addr}", workdir=work, trigger="available-now",
                    maintenance_every=0)
    run_app(spark, cfg, max_runtime_s=CLI_TIMEOUT_S)
    events = str(cfg.tables_root / "events")
    (spark.range(0, 40).selectExpr("id", "cast(id % 4 AS string) AS kind").write.format("delta")
     .option("delta.enableDeletionVectors", "true").save(events))
    spark.sql(f"DELETE FROM delta.`{events}` WHERE id < 10")
    return cfg.tables_root


def _query(tables_root, sql: str, *extra: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "streaming_apps.cli", "--log-level", "WARNING", "query",
                           "--tables-root", str(tables_root), "--format", "jsonl", sql, *extra],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S, stdin=subprocess.DEVNULL,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_query_engine_spark_reads_the_tables_with_sparks_delta(tables, commitlog):
    sql = ("SELECT (SELECT count(*) FROM bronze) AS rows, (SELECT sum(commitLogOffset) FROM bronze) AS offsets, "
           "(SELECT count(*) FROM events) AS events")
    expected = {"rows": len(commitlog), "offsets": sum(commitlog), "events": 30}
    assert _query(tables, sql, "--engine", "spark") == [expected]
    # the default engine (delta-rs) agrees
    assert _query(tables, sql) == [expected]


def test_register_spark_tables_uses_format_delta_where_the_parquet_views_cannot(spark, tables):
    frames = register_spark_tables(spark, tables)
    assert set(frames) == {"bronze", "events", *(t.name for t in METADATA_TABLES)}
    assert spark.sql("SELECT count(*) AS n FROM events").first()["n"] == 30
    # the fallback for Sparks without the jars refuses what plain Parquet would read wrong
    with pytest.raises(QueryError, match="deletionVectors"):
        spark_view_frame(spark, str(tables / "events"))


def test_query_engine_spark_without_delta_jars_falls_back_to_parquet_views(tables, commitlog):
    other = sorted((PROJECT_ROOT / ".jvm" / "rocketmq-4.9" / "lib").glob("commons-cli-*.jar"))
    assert other, "make jvm-peers stages the RocketMQ jars too"
    # the root is the bronze table itself (the deletion-vector table would be refused by the fallback)
    got = _query(tables / "bronze", "SELECT count(*) AS n FROM bronze", "--engine", "spark", "--jars", str(other[0]))
    assert got == [{"n": len(commitlog)}]
