"""``format("hareplica-landing")``: the ``hareplica`` stream landed into Delta tables by the tasks themselves.

The Spark classes are in :mod:`connector.landing.reader`, the options in :mod:`connector.landing.options`,
the driver's commit in :mod:`connector.landing.commit`, starting a query in :mod:`connector.landing.start`
(docs/delta.md "``--landing direct``").
"""

from connector.landing.commit import commit_landed_batch
from connector.landing.migration import ADDED_SOURCE_COLUMNS, add_new_source_columns
from connector.landing.options import landing_writer, landing_writers, split_landing_options
from connector.landing.reader import HAReplicaLandingDataSource, HAReplicaLandingStreamReader
from connector.landing.rows import (
    DEFAULT_PARTITION_BY,
    STORE_DATE,
    landed_schema,
    landed_source_schema,
    with_store_date,
)
from connector.landing.start import LandingTarget, start_direct_landing, start_direct_landing_tables

__all__ = [
    "ADDED_SOURCE_COLUMNS",
    "DEFAULT_PARTITION_BY",
    "STORE_DATE",
    "HAReplicaLandingDataSource",
    "HAReplicaLandingStreamReader",
    "LandingTarget",
    "add_new_source_columns",
    "commit_landed_batch",
    "landed_schema",
    "landed_source_schema",
    "landing_writer",
    "landing_writers",
    "split_landing_options",
    "start_direct_landing",
    "start_direct_landing_tables",
    "with_store_date",
]
