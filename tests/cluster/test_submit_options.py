"""``hareplica run``'s cluster flags and the driver folder of a relative ``spark.pyspark.python`` (no Spark started)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from streaming_apps.cli import build_parser
from streaming_apps.package import runtime_requirements
from streaming_apps.run_command import spark_conf_of
from streaming_apps.spark_session import driver_launch_dir

RUN = ["run", "bronze", "--brokers", "broker-a=127.0.0.1:10912"]


def test_archives_become_absolute_spark_archives_and_conf_passes_through(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args([*RUN, "--archives", "env.tar.gz#environment", "--archives",
                                      "hdfs:///envs/b.zip#b,other.tgz", "--conf",
                                      "spark.pyspark.python=./environment/bin/python",
                                      "--conf", "spark.executor.memory=2g"])
    conf = spark_conf_of(args)
    assert conf["spark.archives"] == (f"{tmp_path}/env.tar.gz#environment,hdfs:///envs/b.zip#b,{tmp_path}/other.tgz")
    assert conf["spark.pyspark.python"] == "./environment/bin/python" and conf["spark.executor.memory"] == "2g"
    assert spark_conf_of(build_parser().parse_args(RUN)) == {}


def test_a_relative_executor_python_resolves_from_the_driver_folder_to_this_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    with driver_launch_dir("./environment/bin/python") as folder:
        assert Path(os.getcwd()) == folder != tmp_path
        assert os.path.samefile("environment/bin/python", Path(sys.prefix) / "bin" / "python")
    assert Path(os.getcwd()) == tmp_path, "the driver's Python goes back to its folder"
    with driver_launch_dir("/opt/env/bin/python") as folder:
        assert folder is None and Path(os.getcwd()) == tmp_path
    with pytest.raises(ValueError, match="has no bin/no-such-python"):
        with driver_launch_dir("./environment/bin/no-such-python"):
            pass


def test_the_archive_leaves_out_what_spark_provides(tmp_path):
    import zipfile

    wheel = tmp_path / "hareplica-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("hareplica-0.1.0.dist-info/METADATA", "Name: hareplica\nRequires-Dist: pyspark==4.2.0\n"
                    "Requires-Dist: delta-spark==4.4.0\nRequires-Dist: py4j==0.10.9.9\nRequires-Dist: pyarrow==26.0.1\n"
                    'Requires-Dist: pandas<3,>=2.2\nRequires-Dist: pytest==9.2.0; extra == "dev"\n'
                    'Requires-Dist: rich<16,>=13; extra == "apps"\nRequires-Dist: PyYAML<7,>=6.0; extra == "broker"\n')
    assert runtime_requirements(wheel) == ["pyarrow==26.0.1", "pandas<3,>=2.2", "rich<16,>=13"]
