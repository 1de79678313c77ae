"""What a Spark task receives of the source and of the landing (issue 54, connector/source/task/partition_reader.py
and connector/source/datasource.py; connector/landing/partition_reader.py and connector/landing/datasource.py).

Spark pickles the reader with cloudpickle into its tasks' read function, together with the data source, and calls
only the reader's ``read`` there (and the source's ``name()``; pyspark ``sql/worker/plan_data_source_read.py``).
Unpickled in a fresh interpreter, as in a new Python worker, neither may import the options parser, a module of
``connector/source/driver/`` or the readers' modules; the reader it becomes still reads (the placeholder
InputPartition of an empty batch read gives no batch). The same holds for ``format("hareplica-landing")``, whose
reader carries its Delta writers and split into the task, and whose tasks import neither the landing's options
nor its start and commit."""

from __future__ import annotations

import inspect
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql.worker import plan_data_source_read

from connector.landing.datasource import HAReplicaLandingDataSource
from connector.landing.reader import HAReplicaLandingStreamReader
from connector.options.parse import SourceOptions
from connector.source.batch_reader import HAReplicaBatchReader
from connector.source.datasource import HAReplicaDataSource
from connector.source.reader import HAReplicaStreamReader

ROOT = Path(__file__).resolve().parents[3]

#: run in the fresh interpreter: unpickle stdin's bytes, read the placeholder partition, report the modules
UNPICKLE = """
import json, pickle, sys
import pyarrow as pa
from pyspark.sql.datasource import InputPartition
reader = pickle.loads(sys.stdin.buffer.read())
pool = pa.default_memory_pool().backend_name
batches = list(reader.read(InputPartition(None)))
print(json.dumps({"type": type(reader).__module__ + "." + type(reader).__qualname__, "batches": len(batches),
                  "modules": sorted(m for m in sys.modules if m.startswith("connector")),
                  "pool_before": pool, "pool": pa.default_memory_pool().backend_name}))
"""

#: run in the fresh interpreter: load the read function Spark sends its tasks (framed as pyspark writes it)
LOAD_READ_FUNCTION = """
import io, json, sys
from pyspark.worker_util import pickleSer
read_function, schema = pickleSer._read_with_length(io.BytesIO(sys.stdin.buffer.read()))
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("connector"))}))
"""

DRIVER_SIDE = ("connector.options.parse", "connector.source.reader", "connector.source.batch_reader")
#: what a landing task must not import beside :data:`DRIVER_SIDE`: the landing's reader and its driver side
LANDING_DRIVER_SIDE = ("connector.landing.reader", "connector.landing.options", "connector.landing.start",
                       "connector.landing.commit")
BROKERS = "broker-a=127.0.0.1:10912"


def _run_elsewhere(code: str, data: bytes, env: dict[str, str] | None = None) -> dict:
    """The JSON ``code`` prints, run by a new interpreter with ``data`` on its stdin (``env``: more environment)."""
    environment = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    result = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, cwd=ROOT, timeout=120,
                            check=False, env={**environment, **(env or {})})
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def _unpickled_elsewhere(obj, env: dict[str, str] | None = None) -> dict:
    """``obj`` pickled with pyspark's cloudpickle, loaded by a new interpreter: its type, the batches of the
    placeholder partition, the project modules that interpreter then holds and its Arrow memory pool before and
    after the read."""
    return _run_elsewhere(UNPICKLE, cloudpickle.dumps(obj), env)


def _driver_side(modules: list[str], more: tuple[str, ...] = ()) -> list[str]:
    return [m for m in modules if m in DRIVER_SIDE or m in more or m.startswith("connector.source.driver")]


def _read_function_elsewhere(source, reader) -> dict:
    """The read function pyspark's own planning step writes for ``reader`` and ``source``, loaded by a new
    interpreter: the project modules that interpreter then holds."""
    schema = source.schema()
    arguments = {"reader": reader, "data_source": source, "schema": schema,
                 "max_arrow_batch_size": 10_000, "binary_as_bytes": True}  # the keywords of Spark 4.2 / 4.3
    accepted = inspect.signature(plan_data_source_read.write_read_func_and_partitions).parameters
    out = io.BytesIO()
    plan_data_source_read.write_read_func_and_partitions(out, **{k: v for k, v in arguments.items() if k in accepted})
    return _run_elsewhere(LOAD_READ_FUNCTION, out.getvalue())


@pytest.mark.parametrize("reader_class", [HAReplicaStreamReader, HAReplicaBatchReader])
def test_a_reader_unpickled_in_a_worker_imports_neither_the_parser_nor_the_driver(reader_class):
    options = SourceOptions.from_options({"brokers": "broker-a=127.0.0.1:10912", "maxBytesPerTrigger": "1048576"})
    got = _unpickled_elsewhere(reader_class(options, columns=("topic", "body")))
    assert got["type"] == "connector.source.task.partition_reader.PartitionReader"
    assert got["batches"] == 0
    assert _driver_side(got["modules"]) == []
    assert "connector.source.task.read" in got["modules"]  # what read() runs is there
    assert (got["pool_before"], got["pool"]) == ("mimalloc", "jemalloc")  # the worker hands freed pages back


@pytest.mark.parametrize("pool", ["system", "mimalloc"])
def test_a_worker_keeps_the_arrow_pool_the_operator_chose(pool):
    """``ARROW_DEFAULT_MEMORY_POOL`` in the executors' environment wins over the readers' jemalloc."""
    options = SourceOptions.from_options({"brokers": BROKERS})
    got = _unpickled_elsewhere(HAReplicaStreamReader(options, columns=("topic",)), {"ARROW_DEFAULT_MEMORY_POOL": pool})
    assert (got["pool_before"], got["pool"]) == (pool, pool)


def test_the_read_function_spark_sends_its_tasks_imports_neither_the_parser_nor_the_driver():
    """pyspark's own planning step writes the function (it holds the stream reader and the data source)."""
    source = HAReplicaDataSource({"brokers": "broker-a=127.0.0.1:10912", "maxBytesPerTrigger": "1048576"})
    got = _read_function_elsewhere(source, source.streamReader(source.schema()))
    assert _driver_side(got["modules"]) == []
    assert "connector.source.task.partition_reader" in got["modules"]


def test_the_data_source_unpickled_parses_its_options_again_when_asked_for_a_reader():
    source = HAReplicaDataSource({"brokers": "broker-a=127.0.0.1:10912", "maxBytesPerTrigger": "1048576"})
    clone = cloudpickle.loads(cloudpickle.dumps(source))
    assert clone.source_options == source.source_options
    assert clone.streamReader(clone.schema()).options == source.source_options


# --- format("hareplica-landing") ------------------------------------------------------------------------------
def _landing_options(tmp_path, tables: str) -> dict[str, str]:
    """A landing's option map: one raw-replica table, or two tables through a split, one upserted and one whose
    columns come from the data (their writers are the landing's own classes)."""
    if tables == "one":
        return {"brokers": BROKERS, "landingPath": str(tmp_path / "raw"), "landingAppId": "app"}
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType()), StructField("name", StringType())]).jsonValue()
    targets = [{"path": str(tmp_path / "upserted"), "appId": "app", "schema": schema, "upsert": {"keys": ["id"]}},
               {"path": str(tmp_path / "evolving"), "appId": "app", "schema": schema, "evolve": True}]
    return {"brokers": BROKERS, "landingTargets": json.dumps(targets), "landingSplit": "json:loads"}


@pytest.mark.parametrize("tables", ["one", "several"])
def test_the_landing_reader_unpickled_in_a_worker_imports_neither_the_parser_nor_the_driver(tmp_path, tables):
    source = HAReplicaLandingDataSource(_landing_options(tmp_path, tables))
    reader = source.streamReader(source.schema())
    assert isinstance(reader, HAReplicaLandingStreamReader)
    got = _unpickled_elsewhere(reader)
    assert got["type"] == "connector.landing.partition_reader.LandingPartitionReader"
    assert got["batches"] == 0
    assert (got["pool_before"], got["pool"]) == ("mimalloc", "jemalloc")  # the worker hands freed pages back
    assert _driver_side(got["modules"], LANDING_DRIVER_SIDE) == []
    assert "connector.source.task.read" in got["modules"]  # what read() runs is there
    if tables == "several":  # the writers arrived as the landing's upsert and evolving writers
        assert {"connector.landing.upsert", "connector.landing.evolving"} <= set(got["modules"])


def test_the_landing_read_function_spark_sends_its_tasks_imports_neither_the_parser_nor_the_driver(tmp_path):
    """pyspark's own planning step writes the function (it holds the landing's reader and its data source)."""
    source = HAReplicaLandingDataSource(_landing_options(tmp_path, "several"))
    got = _read_function_elsewhere(source, source.streamReader(source.schema()))
    assert _driver_side(got["modules"], LANDING_DRIVER_SIDE) == []
    assert {"connector.landing.partition_reader", "connector.landing.datasource"} <= set(got["modules"])


def test_the_landing_data_source_unpickled_parses_its_options_again_when_asked_for_a_reader(tmp_path):
    source = HAReplicaLandingDataSource(_landing_options(tmp_path, "several"))
    clone = cloudpickle.loads(cloudpickle.dumps(source))
    assert vars(clone) == {"options": source.options, "_parsed": None}
    assert (clone.source_options, clone.sink_options) == (source.source_options, source.sink_options)
    reader = clone.streamReader(clone.schema())
    assert reader.source.options == source.source_options and reader.split == ("json:loads", None)
