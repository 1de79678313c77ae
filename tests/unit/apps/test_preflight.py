"""streaming_apps.preflight: option and folder checks before Spark, and the one line an error wrapped by
Spark becomes (pure: no Spark, no brokers)."""

from __future__ import annotations

import pytest

from streaming_apps.preflight import (
    PreflightError,
    check_run_config,
    check_writable_dir,
    error_line,
    spark_failure,
)

# what a StreamingQueryException's text looks like when a Python data source failed in a task (shortened)
SPARK_TEXT = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due to stage failure: \
Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 (TID 3) (192.0.2.2 executor driver): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/main/connector/source.py", line 473, in read_partition
    admin.close()
connector.data_loss.DataLossError: broker broker-a (127.0.0.1:10911) no longer holds CommitLog bytes [5, 9) \
that the query needs: gone. Set failOnDataLoss=false to skip lost bytes.
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:600)
\tat org.apache.spark.sql.execution.python.PythonArrowOutput$$anon$1.read(PythonArrowOutput.scala:118)
Caused by: java.lang.RuntimeException: boom
"""


def test_our_error_is_found_inside_spark_text():
    assert error_line(RuntimeError(SPARK_TEXT)) == (
        "DataLossError: broker broker-a (127.0.0.1:10911) no longer holds CommitLog bytes [5, 9) that the query "
        "needs: gone. Set failOnDataLoss=false to skip lost bytes.")


def test_other_errors_give_their_first_line():
    assert error_line(ValueError("first line\nsecond")) == "first line"
    assert error_line(KeyError()) == "KeyError"


class _StoppedSparkError(Exception):
    """What PySpark's captured exceptions do once the SparkContext stopped: str() asserts the JVM is there."""

    def __init__(self, desc):
        super().__init__()
        self._desc = desc

    def __str__(self):
        raise AssertionError


def test_an_exception_whose_session_stopped_still_gives_its_line():
    """Issue 49: error_line raised AssertionError (a 70-line traceback, the cause lost)."""
    assert error_line(_StoppedSparkError(SPARK_TEXT)).startswith("DataLossError: broker broker-a (127.0.0.1:10911)")
    assert error_line(_StoppedSparkError(None)) == "_StoppedSparkError (message unavailable)"


PLANNING_TEXT = ("[PYTHON_DATA_SOURCE_ERROR] Failed to plan Python data source `hareplica` read: Traceback (most "
                 "recent call last):\n"
                 '  File "/work/main/connector/source/batch_reader.py", line 50, in partitions\n'
                 "connector.errors.HAReplicaOptionError: option startingOffsets={'broker-a': 5}: offset 5 of broker "
                 "broker-a is not the start of a record\n")


def test_bad_input_found_while_spark_plans_exits_2_and_failures_exit_1():
    from pyspark.errors import AnalysisException

    from connector.errors import BrokerUnreachableError, HAReplicaOptionError

    planning = spark_failure(AnalysisException(message=PLANNING_TEXT))
    assert planning.exit_code == 2
    assert planning.line == ("HAReplicaOptionError: option startingOffsets={'broker-a': 5}: offset 5 of broker "
                             "broker-a is not the start of a record")
    broker = PLANNING_TEXT.replace("HAReplicaOptionError: option startingOffsets={'broker-a': 5}",
                                   "BrokerUnreachableError: broker broker-a remoting 127.0.0.1:1")
    assert spark_failure(AnalysisException(message=broker)).exit_code == 2  # a subclass of BrokerAdminError
    assert spark_failure(AnalysisException(message=SPARK_TEXT)).exit_code == 1  # DataLossError: not bad input
    assert spark_failure(RuntimeError(PLANNING_TEXT)).exit_code == 1  # not raised while Spark planned
    raised_here = spark_failure(HAReplicaOptionError("brokers", "x", "bad"))
    assert (raised_here.line, raised_here.exit_code) == ("option brokers='x': bad", 2)
    assert spark_failure(BrokerUnreachableError("gone")).exit_code == 2


def test_options_are_checked_with_the_sources_own_message(tmp_path):
    with pytest.raises(PreflightError, match=r"^option brokers='x': entry 'x' is not name=host:haPort$"):
        check_run_config({"brokers": "x"}, {})
    options = check_run_config({"brokers": "broker-a=127.0.0.1:10912"}, {"--workdir": tmp_path / "new" / "deep"})
    assert options.broker_names == ["broker-a"]


def test_folders_must_be_folders_or_creatable(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(PreflightError, match=r"--workdir .*/file: exists and is not a folder"):
        check_writable_dir("--workdir", tmp_path / "file")
    with pytest.raises(PreflightError, match=r"--status-dir .*/file/sub: cannot be created, .*/file is not a folder"):
        check_writable_dir("--status-dir", tmp_path / "file" / "sub")
    check_writable_dir("--workdir", tmp_path / "a" / "b")  # creatable
