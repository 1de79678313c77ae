"""``HAReplicaDataSource``: the ``DataSource`` Spark knows as ``format("hareplica")``.

Spark pickles this object into every Python worker that serves the source, the tasks' too: the read function
it sends them holds the data source beside the reader (pyspark ``sql/worker/plan_data_source_read.py``, Spark
4.0-4.3, where a task only asks its ``name()``). So this module imports, at its top, nothing of the driver side:
the options parser and the readers of :mod:`connector.source.reader` and :mod:`connector.source.batch_reader`
load when Spark creates the source or asks for a reader, which happens on the driver (docs/architecture.md
"Layers").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

from connector.decode.schema import spark_schema

if TYPE_CHECKING:
    from connector.options.parse import SourceOptions
    from connector.source.batch_reader import HAReplicaBatchReader
    from connector.source.reader import HAReplicaStreamReader


class OptionMapDataSource(DataSource):
    """A ``DataSource`` that parses its options when Spark creates it (a bad option fails ``load()``) and pickles
    as its option map only, parsing it again where the parsed form is first asked for (:meth:`parsed`), so a
    task's worker that unpickles it parses nothing. Subclasses give :meth:`_parse`."""

    def __init__(self, options):
        super().__init__(options)
        self._parsed = self._parse()

    def _parse(self):
        """The parsed form of :attr:`options`; raises HAReplicaOptionError for a bad option."""
        raise NotImplementedError

    def parsed(self):
        """What :meth:`_parse` gives for :attr:`options`, parsed once per process."""
        if self._parsed is None:
            self._parsed = self._parse()
        return self._parsed

    def __getstate__(self) -> dict:
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.options = state["options"]
        self._parsed = None


class HAReplicaDataSource(OptionMapDataSource):
    """``format("hareplica")``: replicate RocketMQ 4.9 CommitLogs over the classic HA protocol.

    Options: see :mod:`connector.options.parse` (``brokers`` is required). They are validated when the
    source is created, so a bad option fails ``load()`` with an HAReplicaOptionError naming it.
    Schema: :func:`connector.decode.schema.spark_schema`; a schema given with ``.schema(...)`` may name a
    subset of its columns (same names and types, any order): only those are decoded and sent to Spark, which
    then converts no column the query does not read (docs/source.md "Rows", "Speed and memory").
    Pickles as its option map only; the parsed options are parsed again where a reader is asked for.
    """

    def _parse(self) -> SourceOptions:
        from connector.options.parse import SourceOptions
        return SourceOptions.from_options(self.options)

    @property
    def source_options(self) -> SourceOptions:
        """The parsed and validated options (:class:`connector.options.parse.SourceOptions`)."""
        return self.parsed()

    @classmethod
    def name(cls) -> str:
        return "hareplica"

    def schema(self):
        return spark_schema()

    def streamReader(self, schema) -> HAReplicaStreamReader:
        """The stream's reader (:class:`connector.source.reader.HAReplicaStreamReader`) for the query's
        ``schema``; refuses the batch-only options (HAReplicaOptionError)."""
        from connector.source.batch_reader import query_columns
        from connector.source.driver.ranges import refuse_batch_only_options
        from connector.source.reader import HAReplicaStreamReader, warn_without_admission_control
        refuse_batch_only_options(self.options)
        warn_without_admission_control(self.source_options)
        return HAReplicaStreamReader(self.source_options, columns=query_columns(self.source_options, schema))

    def reader(self, schema) -> HAReplicaBatchReader:
        """``spark.read``: the records of ``[starting_offsets, ending_offsets)`` (docs/source.md "Batch reads")."""
        from connector.source.batch_reader import HAReplicaBatchReader, query_columns
        return HAReplicaBatchReader(self.source_options, columns=query_columns(self.source_options, schema))
