"""A user's own Spark application, as README "Install into your Spark" shows it: run by ``spark-submit`` from an
environment where the hareplica wheel is installed, never from the checkout (tests/compat/test_spark_versions.py
copies it to a folder outside it first).

Reads every message of a broker with ``format("hareplica")`` and lands it with ``format("deltalake")``, then
prints one JSON line: the pyspark version, where ``connector`` was imported from, per micro-batch its rows,
end offset and broker lag (as the apps' progress listener computes it), and the ``commitLogOffset`` of every row
of a batch read (``spark.read``) of ``[earliest, latest)``.

Usage: spark-submit user_app.py BROKERS TABLE CHECKPOINT CHECKOUT [--max-bytes N] [--processing-time-until OFFSET]
"""

import argparse
import json
import sys
import time

import pyspark
from pyspark.sql import SparkSession

import connector
from streaming_apps.progress_listener import progress_record


def progress(query) -> list[dict]:
    """The query's recent progress as plain JSON (the same form on every pyspark 4.x)."""
    return [json.loads(p.json) for p in query.recentProgress]


def end_offsets(prog: dict) -> dict:
    """broker -> end offset of a progress entry (the record fingerprints left out)."""
    end = prog["sources"][0]["endOffset"] or {}
    return {k: v for k, v in end.items() if not k.startswith("@")}


parser = argparse.ArgumentParser()
parser.add_argument("brokers")
parser.add_argument("table")
parser.add_argument("checkpoint")
parser.add_argument("checkout", help="the project's checkout: nothing of it may be importable here")
parser.add_argument("--max-bytes", type=int, default=None)
parser.add_argument("--processing-time-until", type=int, default=None,
                    help="run a 200 ms processing-time trigger until broker-a's end offset reaches this")
args = parser.parse_args()

leaks = [p for p in sys.path if p and p.startswith(args.checkout)]
if leaks or connector.__file__.startswith(args.checkout):
    sys.exit(f"the checkout is importable: sys.path {leaks}, connector from {connector.__file__}")

spark = SparkSession.builder.master("local[2]").appName("hareplica-user-app").getOrCreate()
connector.register_data_sources(spark)
reader = spark.readStream.format("hareplica").option("brokers", args.brokers).option("startingOffsets", "earliest")
if args.max_bytes:
    reader = reader.option("maxBytesPerTrigger", str(args.max_bytes))
writer = (reader.load().writeStream.format("deltalake").option("appId", "user-app")
          .option("checkpointLocation", args.checkpoint))
if args.processing_time_until is None:
    query = writer.trigger(availableNow=True).start(args.table)
    query.awaitTermination()
else:
    query = writer.trigger(processingTime="200 milliseconds").start(args.table)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if not query.isActive:
            query.awaitTermination()  # raises the query's error
        if any(end_offsets(p).get("broker-a", 0) >= args.processing_time_until for p in progress(query)):
            break
        time.sleep(0.2)
    query.stop()
batches = [{"batchId": p["batchId"], "rows": p["numInputRows"], "end": end_offsets(p),
            "lag": progress_record(p)["sources"][0]["lagBytes"]} for p in progress(query) if p["numInputRows"]]
# a batch read (spark.read) of [earliest, latest): the commitLogOffset of every row
batch_read = sorted(r.commitLogOffset for r in spark.read.format("hareplica").option("brokers", args.brokers).load()
                    .select("commitLogOffset").collect())
print("RESULT " + json.dumps({"pyspark": pyspark.__version__, "connector": connector.__file__, "batches": batches,
                              "batchRead": batch_read}))
spark.stop()
