"""Which sessions size Delta's snapshot partitions and Spark's parallel file listing to their cores."""

from __future__ import annotations

import os

from streaming_apps.spark_session import LOCAL_PARALLELISM_CONFS, local_parallelism_conf


def test_a_local_master_gets_its_cores_for_each_conf():
    assert local_parallelism_conf("local[2]") == dict.fromkeys(LOCAL_PARALLELISM_CONFS, "2")
    assert local_parallelism_conf("local") == dict.fromkeys(LOCAL_PARALLELISM_CONFS, "1")
    assert local_parallelism_conf("local[*]") == dict.fromkeys(LOCAL_PARALLELISM_CONFS, str(os.cpu_count()))


def test_a_cluster_master_keeps_the_defaults():
    assert local_parallelism_conf("spark://host:7077") == {}
    assert local_parallelism_conf("yarn") == {}
