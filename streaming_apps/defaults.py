"""The choices and defaults of the ``hareplica`` commands that the apps, ``query`` and the broker metadata sync
share with the command line: plain values in a module that imports nothing, so the parser and every command's
``--help`` are built without importing pyspark, pandas, pyarrow or deltalake (docs/cli.md). Each value is
declared here once; the modules that act on it import it from here.
"""

from __future__ import annotations

# --- hareplica run (streaming_apps.apps.common) ---------------------------------------------------------
SINK_DELTALAKE = "deltalake"
SINK_DELTA = "delta"
SINKS = (SINK_DELTALAKE, SINK_DELTA)
LANDING_SPARK = "spark"
LANDING_DIRECT = "direct"
LANDINGS = (LANDING_SPARK, LANDING_DIRECT)
DEFAULT_TRIGGER = "1s"
DEFAULT_WORKDIR = "hareplica-data"
DEFAULT_WATERMARK = "1 minute"
#: 4.9.8's ``SlaveSynchronize`` period (``BrokerController``: every 10 s); streaming_apps.metadata_sync
DEFAULT_METADATA_SYNC_INTERVAL_MS = 10_000

# --- hareplica query (streaming_apps.query) -------------------------------------------------------------
#: Rows ``hareplica query`` prints in table format unless --max-rows says otherwise.
DEFAULT_MAX_ROWS = 100
FORMATS = ("table", "jsonl", "csv")
ENGINE_DELTALAKE = "deltalake"
ENGINE_SPARK = "spark"
ENGINES = (ENGINE_DELTALAKE, ENGINE_SPARK)
