"""streaming_apps.spark_session.stop_session: the CLI's session stops without waiting for pyspark's accumulator
server (docs/deployment.md §7, "Shutdown").

A process of its own builds a classic session, runs one Python job (so that the JVM connects to the accumulator
server and the server's one thread sits in that connection's poll loop), and holds the server's shutdown on an
event. ``stop_session`` must return while the shutdown is held, and the server must then stop by itself once it
is let go: its serving thread ends and its listening socket closes. The driver JVM must end while the process
still runs, and a new session must then start (a new JVM). With PySpark's own ``spark.stop()`` the same script
blocks until the shutdown is let go, and the JVM keeps running until the process ends; the test shows both.
"""

from __future__ import annotations

import pytest

from tests.support.processes import run_json_script

pytestmark = pytest.mark.spark

SCRIPT = """
import json, sys, threading
from streaming_apps.spark_session import build_spark_session, stop_session

spark = build_spark_session("session-stop-test", master="local[1]")
assert spark.sparkContext.parallelize([1, 2], 1).map(lambda x: x + 1).collect() == [2, 3]
server = spark.sparkContext._accumulatorServer
from pyspark import SparkContext
jvm = SparkContext._gateway.proc  # the driver JVM this process launched
serving = [t for t in threading.enumerate() if "serve_forever" in t.name]
release, entered, callers = threading.Event(), threading.Event(), []
original = server.shutdown

def held_shutdown():
    callers.append(threading.current_thread())
    entered.set()
    release.wait()
    original()

server.shutdown = held_shutdown
stop = stop_session if sys.argv[1] == "stop_session" else lambda s: s.stop()
stopper = threading.Thread(target=stop, args=(spark,), daemon=True)
stopper.start()
assert entered.wait(120), "nobody shut the accumulator server down"
if callers[0] is stopper:  # the stop itself waits in the held shutdown
    returned_while_held = False
else:
    stopper.join(120)
    returned_while_held = not stopper.is_alive()
release.set()
stopper.join(120)
for t in serving + [t for t in threading.enumerate() if t.name == "hareplica-accumulator-server-stop"]:
    t.join(30)  # the serving loop, then stop_session's thread that closes the listening socket after it
if sys.argv[1] == "stop_session":
    jvm_exit = jvm.wait(120)  # it ends while this process still runs
    again = build_spark_session("session-stop-test-2", master="local[1]")  # a new JVM
    new_session_works = again.range(3).count() == 3 and SparkContext._gateway.proc.pid != jvm.pid
    stop_session(again)
else:
    jvm_exit, new_session_works = jvm.poll(), None  # None: still running, its stdin open
print(json.dumps({"returned_while_held": returned_while_held, "stopped": not stopper.is_alive(),
                  "jvm_exit": jvm_exit, "new_session_works": new_session_works,
                  "serving_threads": len(serving), "server_thread_ended": not any(t.is_alive() for t in serving),
                  "listening_socket_closed": server.socket.fileno() == -1}))
"""


def _run(how: str) -> dict:
    return run_json_script(SCRIPT, how)[0]


def test_stop_session_returns_without_waiting_for_the_accumulator_server_which_then_stops():
    out = _run("stop_session")
    assert out["serving_threads"] == 1
    assert out["returned_while_held"] and out["stopped"]
    assert out["server_thread_ended"] and out["listening_socket_closed"]
    assert out["jvm_exit"] == 0  # the driver JVM ended before this process did
    assert out["new_session_works"]


def test_pysparks_own_stop_waits_for_the_accumulator_server():
    """The wait stop_session removes: spark.stop() does not return while the server's shutdown is held."""
    out = _run("spark.stop")
    assert not out["returned_while_held"]
    assert out["stopped"] and out["server_thread_ended"] and out["listening_socket_closed"]
    assert out["jvm_exit"] is None  # the driver JVM waits for this process's end (its stdin)


WARMUP_SCRIPT = """
import json, logging, os, sys, threading, time
from pathlib import Path
logging.basicConfig(level=logging.INFO, stream=sys.stderr)  # what the CLI shows: INFO, the root logger's too
from pyspark import SparkContext
from streaming_apps.worker_warmup import start_warmup
from streaming_apps.spark_session import build_spark_session, stop_session

spark = build_spark_session("warmup-stop-test", master="local[2]")
assert spark.sparkContext.parallelize([1, 2], 1).map(lambda x: x + 1).collect() == [2, 3]  # accumulator connection
logging.getLogger("py4j").setLevel(logging.CRITICAL)  # as the CLI: py4j's own logger is quiet
jvm = SparkContext._gateway.proc
serving = [t for t in threading.enumerate() if "serve_forever" in t.name]
warmup = start_warmup(spark, 2, ("tests.support.blocking_import",))
marker = Path(os.environ["HAREPLICA_TEST_BLOCK_MARKER"])
deadline = time.monotonic() + 120
while not marker.exists():  # a worker is inside the blocking import: the warm-up job runs
    assert time.monotonic() < deadline, "the warm-up's worker never started"
    time.sleep(0.02)
ended = warmup.end(120)
error, cancelled = type(warmup.error).__name__, "cancelled" in str(warmup.error)  # while the JVM answers
stop_session(spark)
jvm_exit = jvm.wait(120)
for t in serving + [t for t in threading.enumerate() if t.name.startswith("hareplica-")]:
    t.join(120)  # the accumulator server's handler has seen the JVM's end; the warm-up's threads have ended
print(json.dumps({"ended": ended, "jvm_exit": jvm_exit, "error": error, "cancelled": cancelled}))
"""


def test_an_ending_warmup_and_the_jvms_end_print_no_stack(tmp_path):
    """A run that fails while its worker warm-up job still runs (RunningApp.close ends the warm-up, then the CLI
    stops the session). Before Warmup.end, the job's thread was inside a py4j call when the gateway closed, and
    py4j logged that failure's two stacks on the root logger: the CLI's one-line error came with them. The
    accumulator server's handler, reading its connection's end once the JVM exited, printed a third."""
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[3])  # the workers import tests.support.blocking_import
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))),
               HAREPLICA_TEST_BLOCK_MARKER=str(tmp_path / "inside"), HAREPLICA_TEST_BLOCK_RELEASE=str(tmp_path / "go"))
    try:
        out, done = run_json_script(WARMUP_SCRIPT, env=env)
    finally:
        (tmp_path / "go").touch()  # a worker still blocked ends its import
    assert out["ended"] is True and out["jvm_exit"] == 0
    assert out["error"] == "Py4JJavaError" and out["cancelled"], out  # the job was cancelled
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
