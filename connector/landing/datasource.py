"""``HAReplicaLandingDataSource``: the ``DataSource`` Spark knows as ``format("hareplica-landing")``.

Spark pickles this object into every Python worker that serves the source, the tasks' too: the read function
it sends them holds the data source beside the reader (pyspark ``sql/worker/plan_data_source_read.py``, Spark
4.0-4.3, where a task only asks its ``name()``). So this module imports, at its top, nothing of the driver side:
the options parser, the landing's options and writers (:mod:`connector.landing.options`) and the reader of
:mod:`connector.landing.reader` load when Spark creates the source or asks for its reader, which happens on the
driver (docs/architecture.md "Layers").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector.delta.messages import MESSAGE_COLUMN
from connector.source.datasource import OptionMapDataSource

if TYPE_CHECKING:
    from connector.landing.reader import HAReplicaLandingStreamReader
    from connector.options.parse import SourceOptions


class HAReplicaLandingDataSource(OptionMapDataSource):
    """``format("hareplica-landing")``: the ``hareplica`` stream landed into Delta tables by the executors.

    Use :func:`connector.landing.start.start_direct_landing` or ``start_direct_landing_tables`` (they add the
    driver's commit). Schema: ``message binary``: one row per record read, null except, per task that read
    records, one pickled tuple of :class:`connector.delta.messages.DeltaLakeCommitMessage` (one per table).
    Options: :mod:`connector.landing.options`; they are validated when the source is created, so a bad option
    (or a batch transform, which the landing refuses) fails ``load()`` with an HAReplicaOptionError naming it.
    Pickles as its option map only; the options are split and parsed again where a reader is asked for.
    """

    def _parse(self) -> tuple[SourceOptions, dict[str, str]]:
        """(the parsed source options, the Delta sink options) of :attr:`options`; raises HAReplicaOptionError."""
        from connector.errors import HAReplicaOptionError
        from connector.landing.options import split_landing_options
        from connector.options.declaration import LANDING_OPTIONS, OPTIONS
        from connector.options.parse import SourceOptions

        source, sink = split_landing_options(self.options)
        parsed = SourceOptions.from_options(source)
        if parsed.batch_transform is not None:
            raise HAReplicaOptionError(OPTIONS.batch_transform.name, parsed.batch_transform,
                                       "format(\"hareplica-landing\") writes the decoded rows; to change them "
                                       f"per table use {LANDING_OPTIONS.targets.name} with "
                                       f"{LANDING_OPTIONS.split.name}")
        return parsed, sink

    @property
    def source_options(self) -> SourceOptions:
        """The ``hareplica`` options, parsed and validated (:class:`connector.options.parse.SourceOptions`)."""
        return self.parsed()[0]

    @property
    def sink_options(self) -> dict[str, str]:
        """The options that become Delta sink options (:func:`connector.landing.options.split_landing_options`)."""
        return self.parsed()[1]

    @classmethod
    def name(cls) -> str:
        return "hareplica-landing"

    def schema(self):
        from pyspark.sql.types import BinaryType, StructField, StructType

        return StructType([StructField(MESSAGE_COLUMN, BinaryType(), True)])

    def streamReader(self, schema) -> HAReplicaLandingStreamReader:
        """The stream's reader (:class:`connector.landing.reader.HAReplicaLandingStreamReader`), its writers checked
        against the existing tables (:func:`connector.landing.options.landing_writers`). Raises
        HAReplicaOptionError for a ``schema`` other than :meth:`schema`, and what ``landing_writers`` raises."""
        from connector.errors import HAReplicaOptionError
        from connector.landing.options import landing_writers
        from connector.landing.reader import HAReplicaLandingStreamReader
        from connector.source import warn_without_admission_control

        if schema is not None and schema != self.schema():
            raise HAReplicaOptionError("schema", schema.simpleString(), "format(\"hareplica-landing\") has a fixed "
                                       "schema; do not call .schema() on the reader")
        warn_without_admission_control(self.source_options)
        return HAReplicaLandingStreamReader(self.source_options, *landing_writers(self.sink_options))
