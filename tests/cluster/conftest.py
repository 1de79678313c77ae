"""Fixtures of the Spark-cluster tests: the packed environment (once per test run) and a standalone cluster (once
for tests/cluster: stopped, its executors' unpacked environments removed, when the package's last test is done).

``env_archive`` builds the executors' environment as users do (:mod:`streaming_apps.package`: the wheel
with the native decode kernel, a fresh venv, venv-pack; gzip level 1 to save time) and keeps the
unpacked venv beside it. ``spark_cluster`` starts a Master and two Workers (1 core, 1 GiB each) from
pyspark's jars (tests/cluster/standalone.py); their logs and executors' stderr stay under the session's
temporary folder and are appended to the report of a failed test.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming_apps.package import EnvArchive, build_env_archive
from tests.cluster.standalone import StandaloneCluster

WORKERS = (1, 2)
_clusters: list[StandaloneCluster] = []


@pytest.fixture(scope="session")
def env_archive(tmp_path_factory) -> EnvArchive:
    """The packed environment (``.path``) and its unpacked venv (``.env_dir``), built once per run."""
    root = tmp_path_factory.mktemp("env-archive")
    return build_env_archive(root / "hareplica-env.tar.gz", work_dir=root / "build", compress_level=1)


@pytest.fixture(scope="package")
def spark_cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    """A running Master and Workers 1 and 2; a test that kills a Worker starts it again before it ends. Package
    scope: the worker that runs tests/cluster goes on with other modules without the idle daemons and the
    ~0.5 GB per executor of unpacked environments."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    _clusters.append(cluster)
    try:
        cluster.start_master()
        for index in WORKERS:
            cluster.start_worker(index)
        yield cluster
    finally:
        cluster.stop()
        _clusters.remove(cluster)
        for unpacked in cluster.root.glob("worker-*/app-*/*/environment"):  # ~0.5 GB per executor
            shutil.rmtree(unpacked, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Append the cluster's daemon logs and executor stderr tails to a failed cluster test's report."""
    report = yield
    if report.failed and _clusters and Path(str(item.fspath)).parent == Path(__file__).parent:
        report.sections.append(("spark cluster logs", _clusters[-1].logs()))
    return report
