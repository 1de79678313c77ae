"""The driver side of ``format("hareplica")``: planning micro-batches in Spark's Python planner process.

Sampling the brokers, batch ends, fingerprints and rewritten-history checks, controller-mode switches, the
checkpointed offset's JSON and the InputPartitions (docs/source.md "Offsets, batches, partitions").
"""
