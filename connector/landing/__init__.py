"""``format("hareplica-landing")``: the ``hareplica`` stream landed into Delta tables by the tasks themselves.

The Spark classes are in :mod:`connector.landing.datasource` and :mod:`connector.landing.reader`, what a task runs
in :mod:`connector.landing.partition_reader`, the options in :mod:`connector.landing.options`, the driver's commit
in :mod:`connector.landing.commit`, starting a query in :mod:`connector.landing.start` (docs/delta.md
"``--landing direct``").

The names below are loaded when first asked for (``module.__getattr__``, PEP 562): a task's Python worker imports
this package as the parent of :mod:`connector.landing.partition_reader`, and so imports neither the options parser
nor the source's driver modules through it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: each public name -> the module of this package that defines it
_MODULE_OF = {
    "ADDED_SOURCE_COLUMNS": "migration",
    "DEFAULT_PARTITION_BY": "rows",
    "STORE_DATE": "rows",
    "HAReplicaLandingDataSource": "datasource",
    "HAReplicaLandingStreamReader": "reader",
    "LandingTarget": "start",
    "add_new_source_columns": "migration",
    "commit_landed_batch": "commit",
    "landed_schema": "rows",
    "landed_source_schema": "rows",
    "landing_writer": "options",
    "landing_writers": "options",
    "split_landing_options": "options",
    "start_direct_landing": "start",
    "start_direct_landing_tables": "start",
    "with_store_date": "rows",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    """One of :data:`__all__`, imported from its module; AttributeError for any other name."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
