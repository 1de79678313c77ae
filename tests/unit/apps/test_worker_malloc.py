"""streaming_apps.worker_malloc: the Python task workers keep freed memory (glibc's thresholds as
spark.executorEnv), unless the user chose glibc's malloc thresholds."""

from __future__ import annotations

import pytest

from streaming_apps.worker_malloc import MALLOC_THRESHOLD_VARIABLES, worker_malloc_conf


def test_the_workers_get_both_thresholds_when_nothing_is_chosen():
    assert worker_malloc_conf({"PATH": "/bin", "MALLOC_ARENA_MAX": "4"}) == {
        "spark.executorEnv.MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024),
        "spark.executorEnv.MALLOC_TRIM_THRESHOLD_": str(256 * 1024 * 1024)}


@pytest.mark.parametrize("name", MALLOC_THRESHOLD_VARIABLES)
def test_a_threshold_variable_of_the_users_own_stands(name):
    assert worker_malloc_conf({name: "131072"}) == {}


def test_a_glibc_malloc_tunable_of_the_users_own_stands():
    assert worker_malloc_conf({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"}) == {}
    assert worker_malloc_conf({"GLIBC_TUNABLES": "glibc.rtld.nns=2"}) != {}
