"""Delta Lake writers without Spark's Delta jars: ``format("deltalake")``, ``write_batch``, the landing's writer.

docs/delta.md. One module per concern, imported by what uses it (this package exports nothing):

- :mod:`~connector.delta.sink`: ``format("deltalake")``, the Spark data source and its stream writer;
- :mod:`~connector.delta.foreach_batch`: ``write_batch``, the same write for a foreachBatch DataFrame;
- :mod:`~connector.delta.commit`: the one driver-side committer (txn, replays, aborts) of the sink,
  ``write_batch``, ``merge_batch`` and the direct landing (:mod:`connector.landing`, beside the source:
  it uses this package; nothing here imports the source);
- :mod:`~connector.delta.parquet`: a task's Parquet files; :mod:`~connector.delta.stats`: their Delta
  statistics; :mod:`~connector.delta.partitions`: partition values and folders;
  :mod:`~connector.delta.messages`: what a task hands to the driver;
- :mod:`~connector.delta.file_names`: the data-file and log-file naming scheme;
  :mod:`~connector.delta.files`: listing and safe deletion; :mod:`~connector.delta.deltalog`: the
  files the log names; :mod:`~connector.delta.location`: opening tables and where tables may be
  created; :mod:`~connector.delta.features`: table features the writers honour;
- :mod:`~connector.delta.options`, :mod:`~connector.delta.schema`, :mod:`~connector.errors`,
  :mod:`~connector.delta.faults` (fault injection for the crash tests);
- :mod:`~connector.delta.maintenance`: compaction, checkpoints, vacuum, orphan files, the apps' schedule.
"""
