"""Starting a direct-landing query: one table (:func:`start_direct_landing`) or several through a split
(:func:`start_direct_landing_tables`), each with the driver's commit (docs/delta.md "``--landing direct``").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connector.landing.commit import commit_landed_batch
from connector.landing.options import landing_writers, split_landing_options
from connector.options.declaration import LANDING_OPTIONS

log = logging.getLogger(__name__)

def start_direct_landing(spark, source_options: Mapping[str, str], *, path: str, app_id: str, checkpoint: str,
                         query_name: str, trigger: Mapping[str, object], partition_by: Sequence[str] | None = None,
                         target_file_size: int | None = None, compression: str | None = None):
    """Start a query landing the ``hareplica`` stream of ``source_options`` into the Delta table ``path``.

    Args:
        source_options: ``format("hareplica")`` options (``brokers`` required).
        path, app_id: the table and the Delta txn appId (stable per checkpoint).
        checkpoint: Spark checkpoint location; query_name: the StreamingQuery's name.
        trigger: ``DataStreamWriter.trigger`` keyword arguments.
        partition_by: partition columns of a new table (default ``storeDate``).
        target_file_size: bytes per Parquet file; compression: Parquet codec.
    Returns the StreamingQuery. Raises HAReplicaOptionError, DeltaSinkConfigError, DeltaSchemaMismatchError
    at start for bad options or a table that does not match.
    """
    landing = LANDING_OPTIONS
    sink = {landing.path.name: path, landing.app_id.name: app_id}
    if partition_by is not None:
        sink[landing.partition_by.name] = ",".join(partition_by)
    if target_file_size:
        sink[landing.target_file_size.name] = str(target_file_size)
    if compression:
        sink[landing.compression.name] = compression
    return _start(spark, {**source_options, **sink}, checkpoint=checkpoint, query_name=query_name, trigger=trigger)


@dataclass(frozen=True)
class LandingTarget:
    """One table of :func:`start_direct_landing_tables`: location, Delta txn appId, Spark schema (a pyspark
    StructType, the table's columns), partition columns, bytes per Parquet file, codec, ``upsert_keys``: None
    to append, else the key columns of a merged table (the split gives it the staged columns too:
    :mod:`connector.landing.upsert`), and ``evolve``: the table's columns come from the data, ``schema`` holding
    those every row has (:mod:`connector.landing.evolving`)."""

    path: str
    app_id: str
    schema: Any
    partition_by: Sequence[str] = ()
    target_file_size: int | None = None
    compression: str | None = None
    upsert_keys: Sequence[str] | None = None
    evolve: bool = False

    def to_json(self) -> dict:
        """This target as a ``landingTargets`` entry."""
        out = {"path": self.path, "appId": self.app_id, "schema": self.schema.jsonValue(),
               "partitionBy": list(self.partition_by)}
        if self.target_file_size:
            out["targetFileSize"] = self.target_file_size
        if self.compression:
            out["compression"] = self.compression
        if self.upsert_keys is not None:
            out["upsert"] = {"keys": list(self.upsert_keys)}
        if self.evolve:
            out["evolve"] = True
        return out


def start_direct_landing_tables(spark, source_options: Mapping[str, str], *, targets: Sequence[LandingTarget],
                                split: str, checkpoint: str, query_name: str, trigger: Mapping[str, object],
                                split_config: str | None = None):
    """Start a query whose tasks apply ``split`` (a ``landingSplit`` spec) to the decoded ``hareplica`` stream
    and write every part into its table of ``targets`` (docs/delta.md, silver's several tables). With
    ``split_config``, ``split`` names a factory of the split function (``landingSplitConfig``).

    Returns the StreamingQuery. Raises HAReplicaOptionError (a bad ``split``), DeltaSinkConfigError and
    DeltaSchemaMismatchError at start, on the driver.
    """
    landing = LANDING_OPTIONS
    sink = {landing.targets.name: json.dumps([t.to_json() for t in targets]), landing.split.name: split}
    if split_config is not None:
        sink[landing.split_config.name] = split_config
    return _start(spark, {**source_options, **sink}, checkpoint=checkpoint, query_name=query_name, trigger=trigger)


def _start(spark, options: Mapping[str, str], *, checkpoint: str, query_name: str, trigger: Mapping[str, object]):
    writers, _ = landing_writers(split_landing_options(options)[1])  # fail at start, on the driver
    tables = ", ".join(w.options.table_uri for w in writers)
    reader = spark.readStream.format("hareplica-landing")
    for key, value in options.items():
        reader = reader.option(key, value)

    def on_batch(batch_df, batch_id: int) -> None:
        rows = commit_landed_batch(writers, batch_df, batch_id)
        log.debug("%s: batch %d landed %s rows in %s", query_name, batch_id, rows, tables)

    log.info("starting %s: direct landing into %s (checkpoint %s)", query_name, tables, checkpoint)
    return (reader.load().writeStream.queryName(query_name).option("checkpointLocation", checkpoint)
            .trigger(**trigger).foreachBatch(on_batch).start())
