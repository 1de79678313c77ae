"""Delta Lake writers without Spark's Delta jars: ``format("deltalake")`` (:mod:`~connector.delta.sink`),
``write_batch`` (:mod:`~connector.delta.foreach_batch`), the direct landing's writer, the one committer they share
(:mod:`~connector.delta.commit`) and table upkeep (:mod:`~connector.delta.maintenance`).

One module per concern, imported by what uses it (this package exports nothing; nothing here imports the
source). Every module: docs/architecture.md "Every module"; the writers: docs/delta.md.
"""
