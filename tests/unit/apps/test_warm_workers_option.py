"""``hareplica run --warm-workers``: how many Python workers an app warms while its query starts
(streaming_apps.run_command.warm_workers_of; streaming_apps.worker_warmup)."""

from __future__ import annotations

import pytest

from streaming_apps.apps import AppError
from streaming_apps.apps.common import LANDING_DIRECT
from streaming_apps.cli import build_parser
from streaming_apps.run_command import warm_workers_of


def _warm(*extra: str) -> int:
    return warm_workers_of(build_parser().parse_args(["run", "bronze", "--brokers", "broker-a=h:10912", *extra]))


def test_the_cores_of_a_local_master_by_default():
    assert _warm() == 2  # the default master is local[2]
    assert _warm("--master", "local[3]") == 3 and _warm("--master", "local") == 1


def test_an_explicit_count_and_zero_for_none():
    assert _warm("--warm-workers", "1") == 1 and _warm("--warm-workers", "0") == 0


@pytest.mark.parametrize("extra", [("--master", "spark://h:7077"), ("--master", "yarn"),
                                   ("--remote", "sc://h:15002"), ("--master", "yarn", "--warm-workers", "0")])
def test_none_where_tasks_may_land_on_any_executor(extra):
    assert _warm(*extra) == 0


@pytest.mark.parametrize("extra,named", [(("--master", "yarn"), "--master yarn"),
                                         (("--remote", "sc://h:15002"), "--remote")])
def test_a_count_where_tasks_may_land_on_any_executor_is_refused(extra, named):
    with pytest.raises(AppError, match=f"--warm-workers 4: only for a local\\[N\\] master, not with {named}"):
        _warm(*extra, "--warm-workers", "4")


def test_a_negative_count_is_refused(capsys):
    with pytest.raises(SystemExit):
        _warm("--warm-workers", "-1")
    assert "--warm-workers" in capsys.readouterr().err


def test_the_demo_runs_bronze_as_run_does_on_its_master(tmp_path):
    """The demo (and so the training run of the driver JVM's class-data-sharing archive, streaming_apps.jvm_cds)
    warms the workers, splits the mapped files and picks the JIT as ``hareplica run bronze`` on the same master."""
    from streaming_apps.demo import demo_config
    from streaming_apps.spark_session import DEFAULT_MASTER, local_cores

    config = demo_config("127.0.0.1:10912", tmp_path)
    assert config.warm_workers == _warm() == _warm("--master", DEFAULT_MASTER) == 2  # run's default master
    assert config.min_partitions == local_cores(DEFAULT_MASTER) == 2
    assert config.landing == LANDING_DIRECT and config.c1_only_jit and not config.parallel_gc
