"""Spark's Delta on a local master: snapshot state and file listings sized to the session's cores.

The shared test session is ``local[2]``. With Delta's and Spark's cluster-sized defaults, VACUUM of a
small table runs the parallel listing's 10,000 tasks per job (docs/delta.md, "Spark's Delta on a local master").
"""

from __future__ import annotations

import pytest

from streaming_apps.spark_session import LOCAL_PARALLELISM_CONFS

pytestmark = pytest.mark.spark

JOB_GROUP = "hareplica-vacuum-test"


def _tasks_of_group(spark, group: str) -> int:
    tracker = spark.sparkContext.statusTracker()
    stages = [stage for job in tracker.getJobIdsForGroup(group) for stage in tracker.getJobInfo(job).stageIds]
    return sum(tracker.getStageInfo(stage).numTasks for stage in stages)


def test_the_local_session_sizes_deltas_snapshot_and_file_listing_to_its_cores(spark):
    assert {name: spark.conf.get(name) for name in LOCAL_PARALLELISM_CONFS} == dict.fromkeys(LOCAL_PARALLELISM_CONFS,
                                                                                              "2")


def test_vacuum_of_a_small_table_runs_a_few_hundred_tasks_not_a_cluster_listing(spark, tmp_path):
    path = str(tmp_path / "table")
    for i in range(3):
        spark.range(i * 10, i * 10 + 10).repartition(2).write.format("delta").mode("append").save(path)
    spark.sql(f"OPTIMIZE delta.`{path}`").collect()  # leaves the six small files for VACUUM to delete
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    sc = spark.sparkContext
    sc.setJobGroup(JOB_GROUP, "VACUUM of a small table")
    try:
        deleted = spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS").collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # what Spark's clearJobGroup does
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert deleted and spark.read.format("delta").load(path).count() == 30
    tasks = _tasks_of_group(spark, JOB_GROUP)
    assert 0 < tasks < 1_000, f"VACUUM ran {tasks} tasks"
